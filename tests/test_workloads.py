"""harness.workloads: regenerate / verify the stored timed-round tensors, load them back, export them.

Everything runs on a tiny task written into a temporary project (definitions/, references/, workloads/), and
on a copy of task 074 with two small workloads, so the CPU time stays small.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from harness import workloads as wl
from harness.cli import main
from harness.errors import HarnessError
from harness.exchange import definition_yaml, export_task
from harness.inputs import gen_inputs, load_safetensors_inputs, resolve_axes, set_seed
from harness.runner import run_checks
from harness.schema import DefinitionFile, Workload
from harness.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
TINY = "900_tiny_scaled_linear"
TINY_REFERENCE = '''"""A tiny test task: y = (x @ proj_weight.T) * out_norm_weight * gain + eps."""

import torch


def run(x, proj_weight, out_norm_weight, gain, eps):
    return (x @ proj_weight.T) * out_norm_weight * gain + eps
'''
SIZES = [4, 64, 8]  # the middle one exceeds MAX_GB below: skipped, but still drawn (later ones depend on it)
MAX_GB = 1e-6  # 1000 bytes


def _tiny_project(root: Path) -> Path:
    definition = {
        "name": TINY,
        "description": "test task",
        "reference": f"references/{TINY}.py",
        "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 8}},
        "inputs": {
            "x": {"shape": ["n", "d"], "dtype": "float32"},
            "proj_weight": {"shape": ["d", "d"], "dtype": "float32"},
            "out_norm_weight": {"shape": ["d"], "dtype": "float32"},
            "gain": {"shape": None, "dtype": "float32"},
            "eps": {"shape": None, "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["n", "d"], "dtype": "float32"}},
        "workloads": [
            {
                "uuid": f"tiny-{i}",
                "axes": {"n": n},
                "inputs": {"eps": {"type": "scalar", "value": 0.25}},
                "tolerance": {"max_atol": 1e-5, "max_rtol": 1e-5},
            }
            for i, n in enumerate(SIZES)
        ],
    }
    (root / "definitions").mkdir(parents=True)
    (root / "references").mkdir()
    (root / "definitions" / f"{TINY}.yaml").write_text(yaml.safe_dump(definition, sort_keys=False))
    (root / "references" / f"{TINY}.py").write_text(TINY_REFERENCE)
    return root


@pytest.fixture
def tiny(tmp_path):
    project = _tiny_project(tmp_path / "proj")
    return load_task(TINY, project / "definitions")


def _by_hand(task, device="cpu") -> dict[str, list]:
    """The official sequence: seed once, 10 gen_inputs rounds per workload in order, keep the last."""
    set_seed(200)
    last = {}
    for w in task.workloads:
        for _ in range(10):
            inputs = gen_inputs(task.definition, w, device)
        last[w.uuid] = inputs
    return last


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else (x == y and type(x) is type(y))
        for x, y in zip(a, b, strict=True)
    )


# --------------------------------------------------------------------------------------------- regenerate


def test_regenerate_is_reproducible(tiny):
    root = wl.workloads_dir(tiny)
    first = wl.regenerate([tiny], max_gb=MAX_GB)["tasks"][TINY]
    files = {p.name: p.read_bytes() for p in (root / TINY).iterdir()}
    second = wl.regenerate([tiny], max_gb=MAX_GB)["tasks"][TINY]
    assert first == second
    assert {p.name: p.read_bytes() for p in (root / TINY).iterdir()} == files
    assert sorted(files) == ["tiny-0.safetensors", "tiny-2.safetensors"]
    entries = second["workloads"]
    assert list(entries) == ["tiny-0", "tiny-1", "tiny-2"]
    assert "drawn unsaved" in entries["tiny-1"]["skipped"] and "--max-gb" in entries["tiny-1"]["skipped"]
    assert entries["tiny-0"]["tensors"]["x"] == {"shape": [4, 8], "dtype": "float32", "bytes": 128}
    assert entries["tiny-0"]["tensors"]["gain"] == {"shape": [], "dtype": "float32", "bytes": 4}
    assert "eps" not in entries["tiny-0"]["tensors"]  # a scalar descriptor: the workload holds it
    assert second["seed"] == 200 and second["device"] == "cpu" and second["rounds"] == 10
    assert second["generator_version"] == wl.GENERATOR_VERSION
    manifest = json.loads((root / "MANIFEST.json").read_text())
    assert manifest["tasks"][TINY] == second


def test_stored_files_are_the_tenth_round(tiny):
    wl.regenerate([tiny], max_gb=MAX_GB)
    by_hand = _by_hand(tiny)
    for w in (tiny.workloads[0], tiny.workloads[2]):  # tiny-2 comes after the skipped workload
        assert _same(wl.stored_inputs(tiny, w), by_hand[w.uuid]), w.uuid


def test_nothing_after_the_last_written_workload_is_drawn(tiny, monkeypatch):
    calls = []
    real = wl.gen_inputs
    monkeypatch.setattr(wl, "gen_inputs", lambda *a, **k: calls.append(a[1].uuid) or real(*a, **k))
    wl.regenerate([tiny], max_gb=500e-9)  # 500 bytes: only tiny-0 fits
    assert calls == ["tiny-0"] * 10
    entries = json.loads((wl.workloads_dir(tiny) / "MANIFEST.json").read_text())["tasks"][TINY]["workloads"]
    assert "drawn unsaved" not in entries["tiny-2"]["skipped"]


def test_regenerate_removes_stale_files(tiny):
    stale = wl.workloads_dir(tiny) / TINY / "old-uuid.safetensors"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x")
    wl.regenerate([tiny], max_gb=MAX_GB)
    assert not stale.exists()


def test_cuda_device_needs_cuda(tiny):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present")
    with pytest.raises(HarnessError, match="CUDA is not available"):
        wl.regenerate([tiny], device="cuda")


# --------------------------------------------------------------------------------------------- verify


def test_verify(tiny):
    wl.regenerate([tiny], max_gb=MAX_GB)
    logged = []
    assert wl.verify([tiny], log=logged.append) == []
    assert any("tiny-0" in m and "ok" in m for m in logged)
    path = wl.stored_path(tiny, "tiny-2")
    path.unlink()  # git-ignored files may be absent: noted, not a mismatch
    logged.clear()
    assert wl.verify([tiny], log=logged.append) == []
    assert any("not on disk" in m for m in logged)
    wl.regenerate([tiny], max_gb=MAX_GB)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    problems = wl.verify([tiny])
    assert len(problems) == 1 and "differs from the manifest" in problems[0]
    manifest_path = wl.workloads_dir(tiny) / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["tasks"][TINY]["workloads"]["tiny-0"]["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    problems = wl.verify([tiny])
    assert any("tiny-0" in p and "regenerated sha256" in p for p in problems)


# --------------------------------------------------------------------------------------------- stored inputs


def test_stored_inputs_are_fresh_copies_in_definition_order(tiny):
    wl.regenerate([tiny], max_gb=MAX_GB)
    w = tiny.workloads[0]
    first = wl.stored_inputs(tiny, w)
    assert [type(v) for v in first] == [torch.Tensor, torch.Tensor, torch.Tensor, float, float]
    assert first[4] == 0.25  # the workload's scalar
    assert torch.equal(first[2], torch.ones(8))  # the norm-weight heuristic
    first[0].zero_()  # a solution writing into its inputs does not change the next round's
    assert not torch.equal(wl.stored_inputs(tiny, w)[0], first[0])


def test_stored_inputs_errors(tiny):
    with pytest.raises(HarnessError, match="workloads regenerate"):
        wl.stored_inputs(tiny, tiny.workloads[0])  # nothing generated yet
    wl.regenerate([tiny], max_gb=MAX_GB)
    with pytest.raises(HarnessError, match="not stored: inputs need"):
        wl.stored_inputs(tiny, tiny.workloads[1])
    smaller = tiny.workloads[2].model_copy(update={"axes": {"n": 2}})  # e.g. a --smoke workload
    with pytest.raises(HarnessError, match=r"expected shape \[2, 8\]"):
        wl.stored_inputs(tiny, smaller)
    path = wl.stored_path(tiny, "tiny-0")
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(HarnessError, match="sha256 differs"):
        wl.stored_inputs(tiny, tiny.workloads[0])
    path.unlink()
    with pytest.raises(HarnessError, match="file not found"):
        wl.stored_inputs(tiny, tiny.workloads[0])


def _tiny_good(x, proj_weight, out_norm_weight, gain, eps, y):
    y.copy_((x @ proj_weight.T) * out_norm_weight * gain + eps)


def _tiny_zero(x, proj_weight, out_norm_weight, gain, eps, y):
    y.zero_()


def _tiny_off(x, proj_weight, out_norm_weight, gain, eps, y):
    y.copy_((x @ proj_weight.T) * out_norm_weight * gain + eps + 1e-3)


@pytest.mark.parametrize("fn", [_tiny_good, _tiny_zero, _tiny_off], ids=lambda f: f.__name__)
def test_stored_and_generated_give_the_same_verdicts(tiny, fn):
    wl.regenerate([tiny], max_gb=MAX_GB)
    stored_ok = [tiny.workloads[0], tiny.workloads[2]]
    generated = run_checks(tiny, fn, "t", stored_ok)
    stored = run_checks(tiny, fn, "t", stored_ok, input_source=wl.stored_input_source(tiny))
    verdicts = [t.evaluation.status.value for t in generated]
    assert verdicts == [t.evaluation.status.value for t in stored]
    assert len(set(verdicts)) == 1 and verdicts[0] == (
        "PASSED" if fn is _tiny_good else "INCORRECT_NUMERICAL"
    )


def test_torch_reference_on_stored_074_inputs(tmp_path):
    """Task 074 with two small workloads: the torch_reference solution passes on both input sources."""
    from harness.solution import load_solution

    name = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
    real = load_task(name)
    small = [
        w.model_copy(update={"uuid": f"small-{i}", "axes": axes, "leaderboard": None})
        for i, (w, axes) in enumerate(
            zip(
                real.file.workloads[:2],
                [{"batch_size": 1, "point_batch_size": 2}, {"batch_size": 2, "point_batch_size": 1}],
                strict=True,
            )
        )
    ]
    file = DefinitionFile.model_validate(
        {**real.file.model_dump(), "workloads": [w.model_dump() for w in small]}
    )
    (tmp_path / "definitions").mkdir()
    (tmp_path / "references").mkdir()
    (tmp_path / "definitions" / f"{name}.yaml").write_text(
        definition_yaml(file, "test copy, small workloads")
    )
    shutil.copy(real.reference_path, tmp_path / "references" / f"{name}.py")
    task = load_task(name, tmp_path / "definitions")
    wl.regenerate([task])
    loaded = load_solution(ROOT / "solutions" / name / "torch_reference")
    kwargs = {"rounds": 1}  # stored inputs are the same every round; one round keeps the CPU time small
    generated = run_checks(task, loaded.fn, loaded.name, task.workloads, **kwargs)
    stored = run_checks(
        task, loaded.fn, loaded.name, task.workloads, input_source=wl.stored_input_source(task), **kwargs
    )
    assert [t.evaluation.status.value for t in generated] == [t.evaluation.status.value for t in stored]
    assert all(t.evaluation.status.value == "PASSED" for t in stored)


# --------------------------------------------------------------------------------------------- export


def test_export_with_tensors(tiny, tmp_path):
    wl.regenerate([tiny], max_gb=MAX_GB)
    out = tmp_path / "export"
    result = export_task(tiny, out, with_tensors=True)
    folder = out / TINY
    assert sorted(p.name for p in (folder / "blobs").iterdir()) == [
        "tiny-0.safetensors",
        "tiny-2.safetensors",
    ]
    assert any("tiny-1" in n and "stay random" in n for n in result.notes)
    assert any("FLASHINFER_TRACE_DIR" in n for n in result.notes)
    lines = [json.loads(line) for line in (folder / "workload.jsonl").read_text().splitlines()]
    assert lines[1]["inputs"]["x"] == {"type": "random"}
    first = lines[0]["inputs"]
    assert first["x"] == {
        "type": "safetensors",
        "path": f"{TINY}/blobs/tiny-0.safetensors",
        "tensor_key": "x",
    }
    assert first["eps"] == {"type": "scalar", "value": 0.25}
    stored = wl.stored_inputs(tiny, tiny.workloads[0])
    assert first["gain"] == {"type": "scalar", "value": stored[3]}  # a random scalar: its stored value
    w = Workload.model_validate(lines[0])
    axes = resolve_axes(tiny.definition, w)
    for root in (out, folder):  # the official loader strips leading path parts under each blob root
        loaded = load_safetensors_inputs(tiny.definition, w, axes, [root])
        assert torch.equal(loaded["x"], stored[0]) and torch.equal(loaded["proj_weight"], stored[1])
    # Through gen_inputs, the official way: the exported workload gives the stored inputs back.
    assert _same(gen_inputs(tiny.definition, w, "cpu", safetensors_cache=loaded), stored)
    export_task(tiny, out)  # a later export without tensors leaves no unreferenced blobs behind
    assert not (folder / "blobs").exists()
    assert json.loads((folder / "workload.jsonl").read_text().splitlines()[0])["inputs"]["x"] == {
        "type": "random"
    }


# --------------------------------------------------------------------------------------------- CLI


def test_cli_check_stored_refuses_smoke():
    result = CliRunner().invoke(main, ["check", "074", "--inputs", "stored", "--smoke", "--device", "cpu"])
    assert result.exit_code == 2 and "drop --smoke" in result.stderr


def test_cli_workloads_help():
    result = CliRunner().invoke(main, ["workloads", "regenerate", "--help"])
    assert result.exit_code == 0 and "--max-gb" in result.output and "--device" in result.output


def test_run_hands_stored_inputs_to_the_driver():
    """`solbench run --inputs stored` reaches the evaluation subprocess; with --smoke it is refused."""
    from harness.evaluate import parse_args
    from harness.runner import RunOptions

    assert RunOptions(inputs="stored").argv()[-2:] == ["--inputs", "stored"]
    assert "--inputs" not in RunOptions().argv()
    assert parse_args(["--task", "x", "--solution", "s", "--inputs", "stored"]).inputs == "stored"
    assert parse_args(["--task", "x", "--solution", "s"]).inputs == "generated"
    with pytest.raises(SystemExit):
        parse_args(["--task", "x", "--solution", "s", "--inputs", "stored", "--smoke"])
