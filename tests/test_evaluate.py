"""The isolated evaluation: `python -m harness.evaluate` and its parent (harness.runner.evaluate_isolated)
turning a crash, a syntax error, a build failure or a timeout into traces; `solbench run` (CPU fallback,
exit codes, planning, shards) and `solbench report` (merge, scores); on a GPU, an end-to-end run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from rich.console import Console

import harness.tasks
from harness import report
from harness.cli import main
from harness.errors import HarnessError
from harness.runner import RunOptions, evaluate_isolated, parse_shard, plan_run, shard_workloads
from harness.schema import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    Trace,
    load_traces_jsonl,
)
from harness.tasks import load_task

PROJECT = Path(__file__).resolve().parent.parent
TINY_DEFINITIONS = PROJECT / "tests" / "fixtures" / "evil" / "_task" / "definitions"
TINY = "900_tiny_add"

_YAML = """name: {name}
definition: 900_tiny_add
author: tests
description: test solution
languages: [{language}]
target_hardware: [LOCAL]
entry_point: {entry}::run
destination_passing_style: true
dependencies: []
compile_options: null
precision: fp32
sources: [{entry}]
"""

GOOD = "def run(x, y, out):\n    out.copy_(x + y)\n"
ZEROS = "def run(x, y, out):\n    pass  # leaves the zeros: INCORRECT_NUMERICAL\n"
CRASH_ON_SECOND = """import os
import sys


def run(x, y, out):
    if x.numel() == 16:  # the second workload
        print("{not a trace line, and on stderr anyway")
        sys.stderr.write("about to crash hard\\n")
        sys.stderr.flush()
        os._exit(3)
    out.copy_(x + y)
"""
SLEEPS = "import time\n\n\ndef run(x, y, out):\n    time.sleep(600)\n"
SYNTAX_ERROR = "def run(x, y, out)\n    out.copy_(x + y)\n"


def _solution(
    root: Path, name: str, source: str, language: str = "pytorch", entry: str = "kernel.py"
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "solution.yaml").write_text(_YAML.format(name=name, language=language, entry=entry))
    (folder / entry).write_text(source)
    return folder


def _solution_json(root: Path, name: str, source: str) -> Path:
    path = root / f"{name}.json"
    data = {
        "name": name,
        "definition": TINY,
        "author": "tests",
        "spec": {"languages": ["pytorch"], "target_hardware": ["LOCAL"], "entry_point": "main.py::run"},
        "sources": [{"path": "main.py", "content": source}],
    }
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def tiny():
    return load_task(TINY, TINY_DEFINITIONS)


# ------------------------------------------------------------------------------------------ subprocess driver


@pytest.fixture(scope="module")
def isolated(tiny, tmp_path_factory):
    """The failure cases through the real subprocess, a few at a time."""
    root = tmp_path_factory.mktemp("solutions")
    options = RunOptions(definitions_dir=TINY_DEFINITIONS, rounds=2, timeout_s=300)
    cases = {
        "crash": (_solution_json(root, "crash_on_second", CRASH_ON_SECOND), options),
        "syntax": (_solution(root, "syntax_error", SYNTAX_ERROR), options),
        "no_sources": (
            _solution(root, "header_only", "// nothing to compile\n", "cuda_cpp", "kernel.h"),
            options,
        ),
        "timeout": (
            _solution(root, "sleeps", SLEEPS),
            RunOptions(definitions_dir=TINY_DEFINITIONS, timeout_s=10),
        ),
    }

    def one(case):
        path, opts = case
        seen = []
        traces = evaluate_isolated(tiny, path, tiny.workloads, opts, on_trace=seen.append)
        assert [t.workload.uuid for t in seen] == [t.workload.uuid for t in traces]  # every trace reported
        return traces

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(cases, pool.map(one, cases.values()), strict=True))


def test_traces_before_a_crash_are_kept_and_the_rest_carry_the_log_tail(isolated):
    first, second = isolated["crash"]
    assert first.evaluation.status == EvaluationStatus.PASSED
    assert first.solution == "crash_on_second"  # an official solution.json works as well as a folder
    line = first.to_json_line()  # the official key layout, strict JSON
    assert list(json.loads(line)) == ["definition", "workload", "solution", "evaluation"]
    assert list(json.loads(line)["evaluation"])[:6] == [
        "status",
        "environment",
        "timestamp",
        "log",
        "correctness",
        "performance",
    ]
    assert first.evaluation.extra["outputs"]["out"]["matched_ratio"] == 1.0
    assert second.evaluation.status == EvaluationStatus.RUNTIME_ERROR
    assert "exited with code 3" in second.evaluation.log
    assert "about to crash hard" in second.evaluation.log
    assert "{not a trace line" in second.evaluation.log  # the solution's prints went to stderr


def test_a_syntax_error_is_a_compile_error_for_every_workload(isolated):
    traces = isolated["syntax"]
    assert [t.evaluation.status for t in traces] == [EvaluationStatus.COMPILE_ERROR] * 2
    assert "SyntaxError" in traces[0].evaluation.log


def test_a_cpp_solution_without_sources_is_a_compile_error(isolated):
    traces = isolated["no_sources"]
    assert [t.evaluation.status for t in traces] == [EvaluationStatus.COMPILE_ERROR] * 2
    assert "no C++/CUDA sources" in traces[0].evaluation.log


def test_a_hung_solution_times_out(isolated):
    traces = isolated["timeout"]
    assert [t.evaluation.status for t in traces] == [EvaluationStatus.TIMEOUT] * 2
    assert "timed out after 10 s" in traces[0].evaluation.log


# ------------------------------------------------------------------------------------------ planning


def test_parse_shard():
    assert parse_shard(None) is None
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "x", "1/0", "1/2/3"):
        with pytest.raises(HarnessError, match="--shard"):
            parse_shard(bad)


def test_shards_split_by_index_in_the_task_order():
    task = load_task("074")
    shards = [shard_workloads(task, task.workloads, (k, 3)) for k in (1, 2, 3)]
    assert [w.uuid for w in shards[0]] == [task.workloads[i].uuid for i in range(0, 16, 3)]
    assert sorted(w.uuid for s in shards for w in s) == sorted(w.uuid for w in task.workloads)
    # a --workload selection keeps each workload in its shard
    picked = [task.workloads[4], task.workloads[5]]
    assert shard_workloads(task, picked, (2, 3)) == [task.workloads[4]]


def test_plan_run_places_solutions_and_prefixes():
    plans = plan_run(["074"], [], ["0b4d"])
    assert len(plans) == 1 and [w.uuid[:4] for w in plans[0].workloads] == ["0b4d"]
    assert {p.name for p in plans[0].solutions} >= {"torch_reference", "torch_compile_tf32"}
    compile_074 = next(p for p in plans[0].solutions if p.name == "torch_compile_tf32")
    plans = plan_run([], [str(compile_074)])  # the task comes from the solution
    assert [p.task.name[:3] for p in plans] == ["074"] and plans[0].solutions == [compile_074]
    with pytest.raises(HarnessError, match="a task not being run"):
        plan_run(["075"], [str(compile_074)])
    with pytest.raises(HarnessError, match="--workload"):
        plan_run(["074"], [], ["zzzz"])


def test_plan_run_rejects_two_solutions_of_one_name(tmp_path):
    """Traces name their solution only, so two folders that declare one name for a task would be reported as one
    (an A/B of a copy would print the mixture's geomean); the same folder twice is one solution."""
    (compile_074,) = [p for p in plan_run(["074"], [])[0].solutions if p.name == "torch_compile_tf32"]
    copy = tmp_path / "b" / "torch_compile_tf32"
    shutil.copytree(compile_074, copy)
    with pytest.raises(HarnessError, match="both declare name 'torch_compile_tf32'"):
        plan_run([], [str(compile_074), str(copy)])
    assert plan_run([], [str(compile_074), str(compile_074)])[0].solutions == [compile_074] * 2


# ------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def tiny_tasks(monkeypatch):
    """`solbench run 900` resolves the tiny task (the project's definitions stay as they are)."""
    real = harness.tasks.load_task

    def load(name, definitions_dir=None):
        if str(name).startswith("900"):
            return real(name, TINY_DEFINITIONS)
        return real(name) if definitions_dir is None else real(name, definitions_dir)

    monkeypatch.setattr(harness.tasks, "load_task", load)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback")
def test_run_without_cuda_falls_back_to_the_smoke_check(tmp_path, tiny_tasks):
    good = _solution(tmp_path, "good", GOOD)
    out = tmp_path / "traces.jsonl"
    result = CliRunner().invoke(main, ["run", "900", "--solution", str(good), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert "CUDA is not available" in result.stderr
    assert "2/2 workloads passed" in result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2
    traces = load_traces_jsonl(out)
    assert [t.evaluation.status for t in traces] == [EvaluationStatus.PASSED] * 2
    assert traces[0].evaluation.extra["timed"] is False


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback")
def test_run_repeat_evaluates_every_solution_once_per_run(tmp_path, tiny_tasks):
    good, zeros = _solution(tmp_path, "good", GOOD), _solution(tmp_path, "zeros", ZEROS)
    out = tmp_path / "traces.jsonl"
    args = ["run", "900", "--solution", str(good), "--solution", str(zeros), "--repeat", "3", "-o", str(out)]
    result = CliRunner().invoke(main, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1  # zeros fails, in every round
    assert [line for line in result.stderr.splitlines() if line.startswith("900: run ")] == [
        f"900: run {r} of 3" for r in (1, 2, 3)
    ]
    assert "3 runs · geomean" in result.stderr  # the runs' table
    traces = load_traces_jsonl(out)  # every run's traces, solutions alternating
    assert [(t.solution, t.evaluation.extra["repeat"]) for t in traces] == [
        (name, r) for r in range(3) for name in ("good", "good", "zeros", "zeros")
    ]
    merged = CliRunner().invoke(main, ["report", str(out)])  # the last run per workload
    assert "2/2 workloads passed" in merged.stderr and "0/2 workloads passed" in merged.stderr
    assert "latency over 3 runs" in result.stderr and "latency over" not in merged.stderr
    by_run = CliRunner().invoke(main, ["report", str(out), "--runs"], env={"COLUMNS": "200"})
    assert by_run.exit_code == 1  # zeros still failed
    assert "3 runs · geomean" in by_run.stderr and "latency over 3 runs" in by_run.stderr


def test_repeat_geomeans_per_run_and_solution():
    rounds = [
        [
            _trace("triton_fused", 0, 0.1),
            _trace("triton_fused", 1, 0.4),
            _trace("torch_compile_tf32", 0, 0.5),
        ],
        [
            _trace("triton_fused", 0, 0.2),
            _trace("triton_fused", 1, None),
            _trace("torch_compile_tf32", 0, 0.6),
        ],
    ]
    name = rounds[0][0].definition
    got = report.repeat_geomeans(rounds)
    assert got[(name, "triton_fused")] == [pytest.approx(0.2), None]  # run 2 has a failed workload
    assert got[(name, "torch_compile_tf32")] == [pytest.approx(0.5), pytest.approx(0.6)]


def _tagged(trace: Trace, run: int) -> Trace:
    trace.evaluation.extra["repeat"] = run
    return trace


def test_split_runs_and_run_latencies_keep_runs_solutions_and_workloads_in_order():
    traces = [
        _tagged(_trace("b", 1, 0.4), 0),
        _tagged(_trace("b", 0, 0.1), 0),
        _tagged(_trace("a", 0, 0.3), 0),
        _tagged(_trace("b", 0, 0.2), 1),
        _tagged(_trace("a", 0, None), 1),
        _trace("c", 0, 0.5),  # no tag: run 0
    ]
    runs = report.split_runs(traces)
    assert [[(t.solution, t.evaluation.extra.get("repeat", 0)) for t in r] for r in runs] == [
        [("b", 0), ("b", 0), ("a", 0), ("c", 0)],
        [("b", 1), ("a", 1)],
    ]
    task = load_task("074")
    got = report.run_latencies(runs)[task.name]
    assert list(got) == ["b", "a", "c"]  # first appearance: the --solution order
    uuids = [w.uuid for w in task.workloads]
    assert list(got["b"]) == [uuids[0], uuids[1]]  # the task's order, not the file's
    assert got["b"][uuids[0]] == [0.1, 0.2] and got["b"][uuids[1]] == [0.4]  # not in run 2: no entry
    assert got["a"][uuids[0]] == [0.3, None] and got["c"][uuids[0]] == [0.5]  # a failed in run 2: None


def test_print_compare_gives_medians_spreads_and_changes_against_the_first_solution():
    runs = [
        [_trace("new", 0, 0.010), _trace("new", 1, 0.020), _trace("old", 0, 0.012), _trace("old", 1, 0.025)],
        [_trace("new", 0, 0.011), _trace("new", 1, 0.022), _trace("old", 0, 0.013), _trace("old", 1, None)],
        [_trace("new", 0, 0.012), _trace("new", 1, 0.021), _trace("old", 0, 0.014), _trace("old", 1, 0.024)],
    ]
    console = Console(record=True, width=200)
    report.print_compare(console, runs)
    lines = console.export_text().splitlines()
    title = " ".join(" ".join(lines[:3]).split())  # the title wraps at the table's width
    assert "latency over 3 runs (us)" in title and "change against new" in title
    uuids = [w.uuid[:8] for w in load_task("074").workloads]
    row0 = next(line for line in lines if uuids[0] in line).replace("│", " ").split()
    # new: median 11.0 us, spread 2.0; old: median 13.0, spread 2.0, +18.2 % against new
    assert row0 == [uuids[0], "11.0", "2.0", "13.0", "2.0", "+18.2"]
    row1 = next(line for line in lines if uuids[1] in line).replace("│", " ").split()
    assert row1 == [uuids[1], "21.0", "2.0", "-", "-", "-"]  # old failed in run 2: no median
    geo = next(line for line in lines if "geomean" in line).replace("│", " ").split()
    assert geo == ["geomean", "(1)", "11.0", "-", "13.0", "-", "+18.2"]  # over the workloads both have


def test_compare_puts_trace_files_side_by_side(tmp_path):
    old, new, both = tmp_path / "old.jsonl", tmp_path / "new.jsonl", tmp_path / "both.jsonl"
    old.write_text(
        "".join(_trace("triton_fused", i, v).to_json_line() + "\n" for i, v in ((0, 0.02), (1, 0.04)))
    )
    new.write_text(  # two --repeat runs of triton_fused (medians 18 and 31 us), and the baseline
        "".join(
            _tagged(_trace("triton_fused", i, v), r).to_json_line() + "\n"
            for r, values in enumerate(((0.017, 0.030), (0.019, 0.032)))
            for i, v in enumerate(values)
        )
        + _trace("torch_compile_tf32", 0, 0.5).to_json_line()
        + "\n"
    )
    run = CliRunner().invoke(main, ["compare", str(old), str(new)], env={"COLUMNS": "250"})
    assert run.exit_code == 0, run.stderr
    uuids = [w.uuid[:8] for w in load_task("074").workloads]
    header = next(line for line in run.stderr.splitlines() if "workload" in line).replace("┃", " ").split()
    assert header == ["workload", "old", "±", "new:triton_fused", "±", "vs", "1st", "%", "new:torch_compile_tf32",
                      "±", "vs", "1st", "%"]  # fmt: skip
    row0 = next(line for line in run.stderr.splitlines() if uuids[0] in line).replace("│", " ").split()
    assert row0 == [uuids[0], "20.0", "-", "18.0", "2.0", "-10.0", "500.0", "-", "+2400.0"]
    row1 = next(line for line in run.stderr.splitlines() if uuids[1] in line).replace("│", " ").split()
    assert row1 == [uuids[1], "40.0", "-", "31.0", "2.0", "-22.5", "-", "-", "-"]
    only = CliRunner().invoke(main, ["compare", str(old), str(new), "--solution", "triton_fused"])
    assert only.exit_code == 0 and "torch_compile_tf32" not in only.stderr and "new " in only.stderr
    both.write_text(_trace("triton_fused", 0, None).to_json_line() + "\n")  # a failed trace: exit 1
    assert CliRunner().invoke(main, ["compare", str(old), str(both)]).exit_code == 1
    missing = CliRunner().invoke(main, ["compare", str(old), "--solution", "nope"])
    assert missing.exit_code == 2 and f"{old}: no traces of solution nope" in missing.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback")
def test_run_exit_codes(tmp_path, tiny_tasks):
    zeros = _solution(tmp_path, "zeros", ZEROS)
    result = CliRunner().invoke(main, ["run", "900", "--solution", str(zeros)])
    assert result.exit_code == 1
    assert "INCORRECT_NUMERICAL" in result.stderr and "0/2 workloads passed" in result.stderr
    result = CliRunner().invoke(main, ["run", "900", "--solution", str(zeros), "--shard", "3/2"])
    assert result.exit_code == 2 and "--shard" in result.stderr
    result = CliRunner().invoke(main, ["run", "900", "--solution", str(tmp_path / "missing")])
    assert result.exit_code == 2


def _trace(solution: str, uuid_index: int, latency: float | None, task=None) -> Trace:
    task = task or load_task("074")
    status = EvaluationStatus.PASSED if latency is not None else EvaluationStatus.RUNTIME_ERROR
    return Trace(
        definition=task.name,
        workload=task.workloads[uuid_index],
        solution=solution,
        evaluation=Evaluation(
            status=status,
            environment=Environment(hardware="NVIDIA H200"),
            timestamp="2026-11-29T00:00:00",
            log="" if latency is not None else "User function failed: [boom]",
            correctness=Correctness(max_absolute_error=0.003) if latency is not None else None,
            performance=Performance(latency_ms=latency, reference_latency_ms=1.0, speedup_factor=1 / latency)
            if latency is not None
            else None,
            extra={"timed": True, "timer": "cupti"},
        ),
    )


class _FakeRoofline:
    """T_SOL 0.01 ms for every workload; the official score formula."""

    @staticmethod
    def sol_ms(task, workload, gpu, convention):
        return 0.01

    @staticmethod
    def sol_score(t_k, t_sol, t_b):
        return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))

    @staticmethod
    def gpu_from_device_name(name):
        return "H200" if "H200" in name else None


def test_scores_use_the_baseline_of_the_same_run(monkeypatch):
    monkeypatch.setattr(report, "_roofline", lambda: _FakeRoofline)
    traces = [
        _trace("triton_fused", 0, 0.05),
        _trace("triton_fused", 1, 0.20),
        _trace("torch_compile_tf32", 0, 0.21),
        _trace("torch_compile_tf32", 1, 0.41),
    ]
    report.annotate(traces, None, "leaderboard")  # the GPU comes from the traces' hardware
    extra = traces[0].evaluation.extra
    assert extra["gpu"] == "H200" and extra["sol_ms"] == 0.01 and extra["baseline_ms"] == 0.21
    assert extra["score"] == pytest.approx(1 / (1 + 0.04 / 0.2))
    assert extra["pct_sol"] == pytest.approx(20.0)
    assert traces[2].evaluation.extra["score"] == pytest.approx(0.5)  # the baseline scores 0.5
    s = report.summarize(traces[:2])
    assert s.passed == 2 and s.n_scored == 2
    assert s.geomean_latency_ms == pytest.approx((0.05 * 0.20) ** 0.5)
    assert s.geomean_baseline_ms == pytest.approx((0.21 * 0.41) ** 0.5)
    assert s.score == pytest.approx(
        _FakeRoofline.sol_score(s.geomean_latency_ms, 0.01, s.geomean_baseline_ms)
    )
    assert s.mean_score == pytest.approx((extra["score"] + traces[1].evaluation.extra["score"]) / 2)


def test_without_a_baseline_or_roofline_the_score_is_blank(monkeypatch):
    traces = [_trace("triton_fused", 0, 0.05)]
    monkeypatch.setattr(report, "_roofline", lambda: None)
    report.annotate(traces, "H200", "leaderboard")
    assert traces[0].evaluation.extra["sol_ms"] is None and traces[0].evaluation.extra["score"] is None
    monkeypatch.setattr(report, "_roofline", lambda: _FakeRoofline)
    report.annotate(traces, "H200", "leaderboard")
    assert traces[0].evaluation.extra["sol_ms"] == 0.01 and traces[0].evaluation.extra["score"] is None


def test_report_merges_shards_keeping_the_last_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "_roofline", lambda: _FakeRoofline)
    shard1, shard2 = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    shard1.write_text(
        "\n".join(
            t.to_json_line() for t in (_trace("triton_fused", 0, None), _trace("torch_compile_tf32", 0, 0.2))
        )
        + "\n"
    )
    shard2.write_text(
        "noise line\n"
        + "\n".join(
            t.to_json_line() for t in (_trace("triton_fused", 1, 0.1), _trace("torch_compile_tf32", 1, 0.3))
        )
        + "\n"
    )
    merged = tmp_path / "merged.jsonl"
    result = CliRunner().invoke(main, ["report", str(shard1), str(shard2), "-o", str(merged)])
    assert result.exit_code == 1  # one workload failed
    assert "RUNTIME_ERROR" in result.stderr and "[boom]" in result.stderr
    assert len(load_traces_jsonl(merged)) == 4
    # a rerun of the failed workload, merged last, replaces it
    rerun = tmp_path / "rerun.jsonl"
    rerun.write_text(_trace("triton_fused", 0, 0.1).to_json_line() + "\n")
    result = CliRunner().invoke(main, ["report", str(merged), str(rerun), "-o", str(merged)])
    assert result.exit_code == 0, result.stderr
    traces = load_traces_jsonl(merged)
    assert len(traces) == 4 and all(t.evaluation.status == EvaluationStatus.PASSED for t in traces)
    assert "2/2 workloads passed" in result.stderr and "score" in result.stderr
    # a file without a trace (a log, an empty file) is bad input, not a run where every workload passed
    log = tmp_path / "run.log"
    log.write_text("noise line\n")
    result = CliRunner().invoke(main, ["report", str(merged), str(log), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2 and f"{log}: no traces" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_report_kernels_prints_each_workloads_call_anatomy(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "_roofline", lambda: _FakeRoofline)
    timed = _trace("triton_fused", 0, 0.1)
    long_name = (
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off"
    )
    timed.evaluation.extra["timing"] = {
        "times_ms": [0.1],
        "kernels": [
            {
                "name": "_two_way_kernel",
                "kind": "kernel",
                "start_us": 0.0,
                "duration_us": 75.5,
                "gap_us": None,
            },
            {"name": long_name, "kind": "kernel", "start_us": 69.4, "duration_us": 43.0, "gap_us": -6.1},
        ],
    }
    path = tmp_path / "t.jsonl"
    path.write_text(timed.to_json_line() + "\n" + _trace("torch_compile_tf32", 0, 0.2).to_json_line() + "\n")
    result = CliRunner().invoke(main, ["report", str(path), "--kernels"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    out = result.stderr
    assert "kernels of a call" in out and "_two_way_kernel" in out and "75.5" in out and "-6.1" in out
    assert long_name[: report.KERNEL_NAME_CHARS - 1] + "…" in out and long_name not in out
    assert "torch_compile_tf32: no kernel breakdown" in out  # its trace has none
    plain = CliRunner().invoke(main, ["report", str(path)], env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and "kernels of a call" not in plain.stderr


# ------------------------------------------------------------------------------------------ GPU end to end

E2E_WORKLOADS = {
    "074": ["0b4dbe91", "f00cc78b"],
    "075": ["4cde8741", "4f3d4a42"],
    "077": ["e0c9d304", "7fe6a6e0"],
}


@pytest.mark.gpu
def test_solbench_run_end_to_end(tmp_path):
    solutions = []
    for task in E2E_WORKLOADS:
        (folder,) = PROJECT.glob(f"solutions/{task}_*")
        solutions += [
            "--solution",
            str(folder / "torch_reference"),
            "--solution",
            str(folder / "torch_compile_tf32"),
        ]
    prefixes = [a for uuids in E2E_WORKLOADS.values() for u in uuids for a in ("--workload", u)]
    out = tmp_path / "traces.jsonl"
    cmd = [sys.executable, "-m", "harness.cli", "run", *E2E_WORKLOADS, *solutions, *prefixes]
    cmd += ["--iterations", "5", "-o", str(out)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=PROJECT, env=dict(os.environ), timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    traces = load_traces_jsonl(out)
    assert len(traces) == 12
    for t in traces:
        ev = t.evaluation
        assert ev.status == EvaluationStatus.PASSED, ev.log
        assert ev.performance.latency_ms > 0 and ev.performance.reference_latency_ms > 0
        assert len(ev.extra["timing"]["times_ms"]) == 5
        kernels = ev.extra["timing"]["kernels"]  # the cupti timer's anatomy of a call (not the reference's)
        assert kernels and kernels[0]["start_us"] == 0 and all(k["duration_us"] > 0 for k in kernels)
        assert "kernels" not in ev.extra["reference_timing"]
        if t.solution == "torch_reference":
            assert ev.extra["baseline_ms"] is not None and ev.extra["score"] is not None


CPP_TINY_ADD = PROJECT / "tests" / "fixtures" / "cpp_tiny_add"


@pytest.mark.gpu
def test_a_cuda_cpp_solution_builds_the_official_way_and_passes(tiny, tmp_path, monkeypatch):
    # the real torch.utils.cpp_extension.load build (module benchmark_kernel, -gencode for this GPU), its
    # cache, and the C++ entry through the subprocess driver; a second evaluation reuses the cached build
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "cache"))
    options = RunOptions(definitions_dir=TINY_DEFINITIONS, timeout_s=900)
    for _ in range(2):
        traces = evaluate_isolated(tiny, CPP_TINY_ADD, tiny.workloads, options)
        assert [t.evaluation.status for t in traces] == [EvaluationStatus.PASSED] * len(tiny.workloads), [
            t.evaluation.log for t in traces
        ]
        assert all(t.evaluation.performance.latency_ms > 0 for t in traces)
    builds = list((tmp_path / "cache" / "build").iterdir())
    assert len(builds) == 1 and list(builds[0].rglob("benchmark_kernel*.so"))
