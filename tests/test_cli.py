"""The `solbench` command line (validate, check): exit codes 0/1/2/3, one-line errors on stderr, the table on
stderr and official traces (only) on stdout with --json. Smoke sizes, one round, one or two workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

import harness.solution
import harness.tasks
from harness.cli import main
from harness.schema import Trace
from harness.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TASK_074 = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
TASK_075 = "075_sam_hq_mask_decoder_two_way_transformer"
REF_074 = ROOT / "solutions" / TASK_074 / "torch_reference"
REF_075 = ROOT / "solutions" / TASK_075 / "torch_reference"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def solbench_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("solbench: ")]


# -------------------------------------------------------------------------------------------- validate


def test_validate_the_repository():
    result = invoke("validate")
    assert result.exit_code == 0, result.stderr
    assert "0 problem(s)" in result.stderr
    assert result.stdout == ""


@pytest.fixture
def tmp_project(tmp_path, monkeypatch):
    """A project folder with its own definitions/ and solutions/; `validate` is pointed at it."""
    (tmp_path / "definitions").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "tiny_reference.py").write_text((FIXTURES / "schema" / "tiny_reference.py").read_text())
    definitions, solutions = tmp_path / "definitions", tmp_path / "solutions"
    real_names, real_load, real_discover = (
        harness.tasks.task_names,
        harness.tasks.load_task,
        harness.solution.discover,
    )
    monkeypatch.setattr(harness.tasks, "task_names", lambda *a: real_names(definitions))
    monkeypatch.setattr(harness.tasks, "load_task", lambda name, *a: real_load(name, definitions))
    monkeypatch.setattr(harness.solution, "discover", lambda name, *a: real_discover(name, solutions))
    return tmp_path


def _write_tiny(project: Path, name: str, **changes) -> Path:
    data = yaml.safe_load((FIXTURES / "schema" / "tiny.yaml").read_text())
    data["name"] = name
    data.update(changes)
    path = project / "definitions" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _write_solution(folder: Path, definition: str, kernel: str, **changes) -> Path:
    folder.mkdir(parents=True)
    spec = {
        "name": folder.name,
        "definition": definition,
        "author": "tests",
        "description": "test solution",
        "languages": ["pytorch"],
        "target_hardware": ["LOCAL"],
        "entry_point": "kernel.py::run",
        "destination_passing_style": True,
        "dependencies": [],
        "compile_options": None,
        "precision": "fp32",
        "sources": ["kernel.py"],
    }
    spec.update(changes)
    (folder / "solution.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (folder / "kernel.py").write_text(kernel)
    return folder


def test_validate_tmp_project_ok(tmp_project):
    _write_tiny(tmp_project, "tiny_scale")
    _write_solution(
        tmp_project / "solutions" / "tiny_scale" / "copy",
        "tiny_scale",
        "def run(x, scale, y):\n    y.copy_(x * scale)\n",
    )
    result = invoke("validate")
    assert result.exit_code == 0, result.stderr
    assert "2 files valid, 0 problem(s)" in result.stderr


def test_validate_bad_definitions_dir_exits_2_with_one_line_per_problem(tmp_project):
    good = _write_tiny(tmp_project, "a_good")
    bad = _write_tiny(tmp_project, "b_bad", bogus_key=1)
    wrong_params = _write_tiny(tmp_project, "c_params")
    (tmp_project / "c_reference.py").write_text("def run(scale, x):\n    return x\n")
    data = yaml.safe_load(wrong_params.read_text())
    data["reference"] = "c_reference.py"
    wrong_params.write_text(yaml.safe_dump(data, sort_keys=False))
    _write_solution(tmp_project / "solutions" / "a_good" / "misnamed", "a_good", "def run(x, scale, y):\n    pass\n",
                    name="other")  # fmt: skip
    _write_solution(tmp_project / "solutions" / "a_good" / "bad_args", "a_good", "def run(x, y):\n    pass\n")

    result = invoke("validate")
    assert result.exit_code == 2
    lines = solbench_lines(result.stderr)
    assert len(lines) == 4, result.stderr
    # tasks in name order, each followed by its solution folders (sorted)
    solutions = tmp_project / "solutions" / "a_good"
    assert lines[0].startswith(
        f"solbench: {solutions / 'bad_args'}/solution.yaml: entry_point: expected parameters"
    )
    assert lines[1].startswith(f"solbench: {solutions / 'misnamed'}/solution.yaml: name: expected 'misnamed'")
    assert lines[2].startswith(f"solbench: {bad}: bogus_key: unknown key")
    assert lines[3].startswith(f"solbench: {wrong_params}: (top level): ") and "parameters" in lines[3]
    assert "4 problem(s)" in result.stderr
    assert str(good) not in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


# ----------------------------------------------------------------------------------------------- check


def _first_uuids(task: str, n: int) -> list[str]:
    return [w.uuid[:8] for w in load_task(task).workloads[:n]]


def test_check_074_smoke_reference_passes():
    (uuid,) = _first_uuids("074", 1)
    result = invoke("check", "074", "--smoke", "--rounds", "1", "--solution", str(REF_074), "--workload", uuid,
                    "--device", "cpu")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # tables go to stderr
    assert "correctness (smoke)" in result.stderr and "torch_reference" in result.stderr
    assert uuid in result.stderr and "PASSED" in result.stderr
    assert "1/1 workloads passed" in result.stderr


def test_check_json_stdout_carries_only_official_traces():
    uuids = _first_uuids("075", 2)
    cmd = [sys.executable, "-m", "harness.cli", "check", "075", "--smoke", "--rounds", "1", "--device", "cpu",
           "--solution", str(REF_075), "--json"]  # fmt: skip
    for u in uuids:
        cmd += ["--workload", u]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    traces = [Trace.model_validate(json.loads(line)) for line in lines]
    assert [t.workload.uuid[:8] for t in traces] == uuids
    for line, trace in zip(lines, traces, strict=True):
        data = json.loads(line)
        assert list(data) == ["definition", "workload", "solution", "evaluation"]
        assert data["definition"] == TASK_075 and data["solution"] == "torch_reference"
        assert trace.evaluation.status.value == "PASSED"
        assert trace.workload.axes == load_task("075").workload(trace.workload.uuid).axes  # the real workload
    assert "2/2 workloads passed" in proc.stderr


def test_check_unknown_task_exits_2_one_line():
    result = invoke("check", "zzz_no_such_task", "--smoke", "--device", "cpu")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("solbench: ") and "zzz_no_such_task" in lines[0]
    assert result.stdout == ""


def test_check_unknown_workload_and_bad_solution_folder_exit_2(tmp_path):
    result = invoke("check", "075", "--smoke", "--device", "cpu", "--workload", "ffffffffff")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    result = invoke("check", "075", "--smoke", "--device", "cpu", "--solution", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"solbench: {tmp_path}: not a solution folder (no solution.yaml)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_check_device_cuda_without_cuda_exits_3():
    result = invoke("check", "075", "--device", "cuda", "--solution", str(REF_075))
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA" in lines[0] and lines[0].startswith("solbench: ")


def test_check_failing_solution_exits_1(tmp_path):
    definition = load_task("075").definition
    n_inputs = len(definition.inputs)
    kernel = (
        '"""Writes zeros into every output: must fail (all-zero output)."""\n\n\n'
        f"def run(*args):\n    for out in args[{n_inputs}:]:\n        out.zero_()\n"
    )
    folder = _write_solution(tmp_path / "zeros", TASK_075, kernel)
    (uuid,) = _first_uuids("075", 1)
    result = invoke("check", "075", "--smoke", "--rounds", "1", "--device", "cpu", "--solution", str(folder),
                    "--workload", uuid)  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert "INCORRECT_NUMERICAL" in result.stderr and "0/1 workloads passed" in result.stderr
    assert "all-zero" in result.stderr  # the first log line is shown under the table


def test_check_solution_import_error_exits_1_one_line(tmp_path):
    folder = _write_solution(tmp_path / "broken", TASK_075, "import no_such_module_anywhere\n")
    result = invoke("check", "075", "--smoke", "--rounds", "1", "--device", "cpu", "--solution", str(folder))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "import failed" in lines[0] and "no_such_module_anywhere" in lines[0]
