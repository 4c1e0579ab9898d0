"""harness.package: `solbench pack` (checks, the official solution.json, atomic writes) and `solbench submit`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness import package
from harness.cli import main
from harness.correctness import ErrorStats
from harness.errors import EnvironmentProblem, SchemaError
from harness.schema import Environment, Solution, load_solution_json
from harness.solution import discover
from harness.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
TASK = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
DEFINITION = load_task(TASK).definition
PARAMS = [*DEFINITION.inputs, *DEFINITION.outputs]


def _kernel(params: list[str] = PARAMS, body: str = "    pass\n", prelude: str = "") -> str:
    return f'"""A test kernel."""\n{prelude}\n\ndef run({", ".join(params)}):\n{body}'


def _spec(**overrides) -> dict:
    spec = {
        "name": "tiny",
        "definition": TASK,
        "author": "tests",
        "description": "a packing test",
        "languages": ["triton"],
        "target_hardware": ["B200", "LOCAL"],
        "entry_point": "kernel.py::run",
        "destination_passing_style": True,
        "dependencies": [],
        "compile_options": None,
        "precision": "fp32",
        "sources": ["kernel.py"],
    }
    spec.update(overrides)
    return spec


def _folder(tmp_path: Path, spec: dict | None = None, files: dict[str, str] | None = None) -> Path:
    spec = _spec() if spec is None else spec
    folder = tmp_path / "solutions" / spec.get("name", "tiny")
    folder.mkdir(parents=True)
    files = {"kernel.py": _kernel()} if files is None else files
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "solution.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def _tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


# ------------------------------------------------------------------------------------------------ pack


def test_pack_writes_the_official_solution(tmp_path):
    folder = _folder(tmp_path, files={"kernel.py": _kernel(), "helpers.py": "X = 1\n"})
    (folder / "solution.yaml").write_text(
        yaml.safe_dump(_spec(sources=["kernel.py", "helpers.py"]), sort_keys=False)
    )
    packed = package.pack(folder, tmp_path / "dist")
    assert packed.path == tmp_path / "dist" / TASK / "tiny" / "solution.json"
    data = packed.path.read_bytes()
    assert (packed.path.parent / "solution.json.sha256").read_text() == (
        f"{hashlib.sha256(data).hexdigest()}  solution.json\n"
    )
    raw = json.loads(data)
    assert list(raw) == ["name", "definition", "author", "description", "spec", "sources"]
    assert list(raw["spec"]) == [
        "languages",
        "target_hardware",
        "entry_point",
        "dependencies",
        "destination_passing_style",
        "binding",
        "compile_options",
    ]
    assert raw["spec"]["compile_options"] is None and raw["spec"]["target_hardware"] == ["B200", "LOCAL"]
    assert "precision" not in raw and "precision" not in raw["spec"]  # ours, not official
    assert raw["sources"] == [
        {"path": "kernel.py", "content": (folder / "kernel.py").read_text()},
        {"path": "helpers.py", "content": "X = 1\n"},
    ]
    # Round trip through the official model: validated, equal, and equal to what pack returned.
    solution = load_solution_json(packed.path)
    assert solution == packed.solution == Solution.model_validate(raw)
    assert json.loads(json.dumps(solution.model_dump(mode="json"))) == raw
    assert _tree(tmp_path / "dist") == [
        TASK,
        f"{TASK}/tiny",
        f"{TASK}/tiny/solution.json",
        f"{TASK}/tiny/solution.json.sha256",
    ]


def test_pack_target_replaces_the_list_and_keeps_compile_options(tmp_path):
    folder = _folder(tmp_path)
    packed = package.pack(folder, tmp_path / "dist", target="B200")
    assert packed.solution.spec.target_hardware == ["B200"]
    assert json.loads(packed.path.read_text())["spec"]["compile_options"] is None
    again = package.pack(folder, tmp_path / "dist", target="LOCAL")  # overwrites in place
    assert again.solution.spec.target_hardware == ["LOCAL"]


@pytest.mark.parametrize("task", sorted(p.stem for p in (ROOT / "definitions").glob("*.yaml")))
def test_pack_shipped_torch_reference(tmp_path, task):
    folders = [f for f in discover(task) if f.name == "torch_reference"]
    if not folders:
        pytest.skip(f"no torch_reference solution for {task}")
    packed = package.pack(folders[0], tmp_path)
    assert load_solution_json(packed.path) == packed.solution
    assert any("imports `harness`" in n for n in packed.notes)  # runs here, not on the leaderboard


_CPP_OK = '#include <torch/extension.h>\nvoid run() {}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\n'


def test_pack_cpp_notes_null_compile_options(tmp_path):
    spec = _spec(languages=["cuda_cpp"], entry_point="kernel.cu::run", sources=["kernel.cu"], binding="torch")
    packed = package.pack(_folder(tmp_path, spec, {"kernel.cu": _CPP_OK}), tmp_path / "dist", target="B200")
    assert packed.solution.spec.compile_options is None
    assert any("compile_options is null" in n and "B200" in n for n in packed.notes)


BAD_CASES = {
    "missing solution.yaml": (None, None, "solution.yaml: file not found"),
    "unknown key": (_spec(speed="fast"), None, "speed: unknown key"),
    "bad entry_point": (
        _spec(entry_point="kernel.py:run"),
        None,
        "entry_point: expected '<file>::<function>'",
    ),
    "entry function missing": (_spec(entry_point="kernel.py::forward"), None, "function 'forward' not found"),
    "wrong parameters": (None, {"kernel.py": _kernel(PARAMS[:-1])}, "expected parameters"),
    "source in subfolder": (
        _spec(sources=["kernel.py", "lib/helpers.py"]),
        {"kernel.py": _kernel(), "lib/helpers.py": "X = 1\n"},
        "expected files at the top level",
    ),
    "cpp_extension.load_inline": (
        None,
        {
            "kernel.py": _kernel(
                prelude="import torch\nmod = torch.utils.cpp_extension.load_inline('m', '')\n"
            )
        },
        "got cpp_extension.load_inline",
    ),
    "cpp_extension import": (
        None,
        {"kernel.py": _kernel(prelude="from torch.utils.cpp_extension import load\n")},
        "import load",
    ),
    "cpp_extension alias": (
        None,
        {
            "kernel.py": _kernel(
                body="    ce.load(name='x', sources=[])\n", prelude="import torch.utils.cpp_extension as ce\n"
            )
        },
        "got ce.load",
    ),
    "mixed languages": (
        _spec(languages=["triton", "cuda_cpp"]),
        None,
        "languages: expected Python languages or C++",
    ),
    "unknown definition": (_spec(definition="074"), None, "definition: expected a task's full name"),
    "sibling module not packed": (
        None,
        {"kernel.py": _kernel(prelude="import helpers\n"), "helpers.py": "X = 1\n"},
        "expected helpers.py (imported by kernel.py",
    ),
    "name is not the folder": (_spec(name="other"), None, "name: expected 'tiny'"),
    "cpp without pybind module": (
        _spec(languages=["cuda_cpp"], entry_point="kernel.cu::run", sources=["kernel.cu"]),
        {"kernel.cu": "void run() {}\n"},
        "PYBIND11_MODULE",
    ),
    "cpp header not packed": (
        _spec(languages=["cuda_cpp"], entry_point="kernel.cu::run", sources=["kernel.cu"]),
        {"kernel.cu": '#include "util.cuh"\n' + _CPP_OK, "util.cuh": "// helpers\n"},
        "expected util.cuh (included by kernel.cu)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_pack_rejects_bad_folders(tmp_path, case):
    spec, files, fragment = BAD_CASES[case]
    if case == "missing solution.yaml":
        folder = tmp_path / "solutions" / "tiny"
        folder.mkdir(parents=True)
        (folder / "kernel.py").write_text(_kernel())
    else:
        folder = _folder(tmp_path, spec, files)
        if case == "name is not the folder":
            folder = folder.rename(folder.parent / "tiny")
    dist = tmp_path / "dist"
    with pytest.raises(SchemaError) as err:
        package.pack(folder, dist)
    message = str(err.value)
    assert fragment in message, message
    assert "\n" not in message
    assert not dist.exists()  # nothing written, not even a folder


def test_cli_pack_bad_folder_is_one_line_exit_2(tmp_path):
    folder = _folder(tmp_path, _spec(entry_point="kernel.py::forward"))
    result = CliRunner().invoke(main, ["pack", str(folder), "-o", str(tmp_path / "dist")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("solbench: ") and "solution.yaml: entry_point" in lines[0]
    assert not (tmp_path / "dist").exists()


def test_cli_unwritable_output_is_one_line(tmp_path, monkeypatch):
    """An output path under a file is bad input (exit 2), a full disk the environment (exit 3): one line each
    that names the path, no traceback."""
    blocker, folder = tmp_path / "a_file", _folder(tmp_path)
    blocker.write_text("")
    result = CliRunner().invoke(main, ["pack", str(folder), "-o", str(blocker / "dist")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"solbench: {blocker / 'dist' / TASK / 'tiny'}: Not a directory"
    ]
    result = CliRunner().invoke(main, ["export", "074", "-o", str(blocker / "out")])
    assert result.exit_code == 2 and result.stderr.startswith(f"solbench: {blocker / 'out'}")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "dist"))

    monkeypatch.setattr(package.os, "replace", full)
    result = CliRunner().invoke(main, ["pack", str(folder), "-o", str(tmp_path / "dist")])
    assert result.exit_code == 3 and "No space left on device" in result.stderr


def test_cli_pack_ok(tmp_path):
    result = CliRunner().invoke(
        main, ["pack", str(_folder(tmp_path)), "-o", str(tmp_path / "dist"), "--target", "B200"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "dist" / TASK / "tiny" / "solution.json").is_file()
    assert result.stdout == ""  # human output goes to stderr


def test_pack_write_failure_leaves_nothing(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    dist = tmp_path / "dist"
    calls = []
    real_replace = os.replace

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the first file has landed, the second fails
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(package.os, "replace", flaky_replace)
    with pytest.raises(OSError):
        package.pack(folder, dist)
    leftovers = [p for p in _tree(dist) if p.endswith(".tmp")]
    assert leftovers == []
    monkeypatch.setattr(package.os, "replace", real_replace)
    package.pack(folder, dist)
    assert sorted(p.name for p in (dist / TASK / "tiny").iterdir()) == [
        "solution.json",
        "solution.json.sha256",
    ]


def test_pack_write_failure_in_new_dir_removes_it(tmp_path, monkeypatch):
    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(package.os, "replace", failing_replace)
    with pytest.raises(OSError):
        package.pack(_folder(tmp_path), tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


# ------------------------------------------------------------------------------------------------ submit

STATS = ErrorStats(passed=True, max_absolute_error=1e-4, max_relative_error=1e-5)
GPU_ENV = Environment(hardware="NVIDIA H200", libs={"torch": "2.x", "cuda": "13.0"})


def test_submit_without_cuda_is_an_environment_error(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EnvironmentProblem) as err:
        package.submit(_folder(tmp_path), tmp_path / "dist")
    assert err.value.exit_code == 3 and "\n" not in str(err.value) and "CUDA" in str(err.value)
    assert (tmp_path / "dist" / TASK / "tiny" / "solution.json").is_file()  # packed, not evaluated
    assert not (tmp_path / "dist" / TASK / "tiny" / "summary.json").exists()


def test_cli_submit_without_cuda_exits_3(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(main, ["submit", str(_folder(tmp_path)), "-o", str(tmp_path / "dist")])
    assert result.exit_code == 3 and len(result.stderr.strip().splitlines()) == 1


def test_submit_evaluates_the_packed_json(tmp_path, monkeypatch):
    """The evaluator gets the packed solution.json (not the folder); its traces become summary.json."""
    import torch

    from harness import runner
    from harness.runner import make_trace
    from harness.schema import EvaluationStatus, Performance

    folder = _folder(tmp_path, files={"kernel.py": _kernel(), "notes.txt": "not packed\n"})
    seen = {}

    def fake_evaluate(task_, solution, workloads, options, on_trace=None):
        seen["solution"] = solution
        seen["workloads"] = [w.uuid for w in workloads]
        traces = []
        for i, w in enumerate(workloads[:2]):
            status = EvaluationStatus.PASSED if i == 0 else EvaluationStatus.RUNTIME_ERROR
            perf = Performance(latency_ms=0.5, reference_latency_ms=1.0, speedup_factor=2.0)
            log = "" if i == 0 else "boom"
            traces.append(
                make_trace(
                    task_.definition, w, "tiny", status, performance=perf, log=log, stats=STATS, env=GPU_ENV
                )
            )
        return traces

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runner, "evaluate_isolated", fake_evaluate)
    result = package.submit(folder, tmp_path / "dist", target="B200")
    assert seen["solution"] == result.packed.path  # the JSON itself is evaluated
    assert seen["workloads"] == [w.uuid for w in load_task(TASK).workloads]  # the full suite
    summary = json.loads(result.summary_path.read_text())
    assert result.summary_path == tmp_path / "dist" / TASK / "tiny" / "summary.json"
    assert summary["sha256"] == result.packed.sha256 and summary["target_hardware"] == ["B200"]
    assert [r["status"] for r in summary["results"]] == ["PASSED", "RUNTIME_ERROR"]
    assert summary["results"][0]["latency_ms"] == 0.5 and summary["results"][1]["log"] == "boom"
    assert summary["all_passed"] is False and result.exit_code == 1
    assert summary["geomean"]["latency_ms"] is None  # no geomean over a failed suite
    assert {"torch", "python", "sam-hq-solbench"} <= set(summary["versions"])
    assert "web form" in summary["upload"] and summary["definition"] == TASK
    assert summary["gpu"] == "NVIDIA H200" and summary["versions"]["trace_cuda"] == "13.0"


def test_submit_all_passed_geomeans(tmp_path, monkeypatch):
    from harness.runner import make_trace
    from harness.schema import EvaluationStatus, Performance

    def fake_run(task_, staged, on_result):
        return [
            make_trace(
                task_.definition,
                w,
                "tiny",
                EvaluationStatus.PASSED,
                performance=Performance(latency_ms=lat, reference_latency_ms=4 * lat, speedup_factor=4.0),
                stats=STATS,
            )
            for w, lat in zip(task_.workloads[:2], (1.0, 4.0), strict=True)
        ]

    monkeypatch.setattr(
        package, "_run_packed", lambda task_, path, on_result, defs: fake_run(task_, path, on_result)
    )
    result = package.submit(_folder(tmp_path), tmp_path / "dist")
    assert result.exit_code == 0
    assert result.summary["geomean"]["latency_ms"] == pytest.approx(2.0)
    assert result.summary["geomean"]["speedup_factor"] == pytest.approx(4.0)
