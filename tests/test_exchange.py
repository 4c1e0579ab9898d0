"""harness.exchange: `solbench export` (official problem folders) and `solbench import` (back to our YAML)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness.cli import main
from harness.errors import HarnessError, SchemaError
from harness.exchange import (
    DEFINITION_KEYS,
    definition_json,
    definition_yaml,
    export_task,
    import_problem,
    workload_json,
)
from harness.schema import Definition, DefinitionFile, Workload, WorkloadEntry, load_definition_file
from harness.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
TASKS = sorted(p.stem for p in (ROOT / "definitions").glob("*.yaml"))


def _official_part(file: DefinitionFile) -> DefinitionFile:
    """What the official format holds: our roofline and leaderboard figures have no place there."""
    return file.model_copy(
        update={
            "roofline": None,
            "leaderboard": None,
            "workloads": [w.model_copy(update={"leaderboard": None}) for w in file.workloads],
        }
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


# ------------------------------------------------------------------------------------------------ export


@pytest.mark.parametrize("task", TASKS)
def test_export_layout(tmp_path, task):
    loaded = load_task(task)
    result = export_task(loaded, tmp_path)
    folder = tmp_path / task
    assert result.folder == folder
    assert sorted(p.name for p in folder.iterdir()) == ["definition.json", "reference.py", "workload.jsonl"]
    text = (folder / "definition.json").read_text()
    data = json.loads(text)
    assert list(data) == list(DEFINITION_KEYS)
    assert text == json.dumps(data, indent=4) + "\n"
    assert data["reference"] == (folder / "reference.py").read_text() == loaded.reference_source
    Definition.model_validate(data)  # the official validators
    lines = _lines(folder / "workload.jsonl")
    assert len(lines) == len(loaded.workloads)
    for line, ours in zip(lines, loaded.workloads, strict=True):
        raw = json.loads(line)
        assert line == json.dumps(raw)
        assert list(raw) == ["uuid", "axes", "inputs", "tolerance"]
        assert list(raw["inputs"]) == list(data["inputs"])  # every input listed, definition order
        assert raw["tolerance"]["required_matched_ratio"] == 0.99
        assert Workload.model_validate(raw).tolerance == ours.tolerance  # what the evaluator applies


@pytest.mark.parametrize("task", TASKS)
def test_export_equals_official(official, tmp_path, task):
    """Equal to the dataset's files except the reference text and our `required_matched_ratio` key."""
    theirs_dir = official / task
    if not theirs_dir.is_dir():
        pytest.skip(f"{theirs_dir} is missing")
    export_task(load_task(task), tmp_path)
    ours = json.loads((tmp_path / task / "definition.json").read_text())
    theirs_text = (theirs_dir / "definition.json").read_text()
    ours["reference"] = json.loads(theirs_text)["reference"]
    assert json.dumps(ours, indent=4) + "\n" == theirs_text  # byte for byte, key order and floats included
    ours_lines = _lines(tmp_path / task / "workload.jsonl")
    theirs_lines = [line for line in _lines(theirs_dir / "workload.jsonl") if line.strip()]
    assert len(ours_lines) == len(theirs_lines)
    for ours_line, theirs_line in zip(ours_lines, theirs_lines, strict=True):
        raw = json.loads(ours_line)
        assert raw["tolerance"].pop("required_matched_ratio") == 0.99
        assert json.dumps(raw) == theirs_line


def test_workload_json_custom_inputs_are_not_padded():
    base = load_task(TASKS[0]).file
    custom = {name: {"type": "custom"} for name in list(base.inputs)[:2]}
    entry = WorkloadEntry.model_validate({**base.workloads[0].model_dump(), "inputs": custom})
    raw = workload_json(base, entry)
    assert raw["inputs"] == {name: {"type": "custom"} for name in list(base.inputs)[:2]}
    Workload.model_validate(raw)  # no custom/random mix


# ------------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("task", TASKS)
def test_yaml_to_official_to_yaml_is_identity(tmp_path, task):
    loaded = load_task(task)
    export_task(loaded, tmp_path / "out")
    result = import_problem(tmp_path / "out" / task, tmp_path / "proj" / "definitions")
    assert result.notes == []
    assert result.file == _official_part(loaded.file)
    assert load_definition_file(result.yaml_path) == result.file  # the written YAML reads back strictly
    assert result.reference_path == tmp_path / "proj" / "references" / f"{task}.py"
    assert result.reference_path.read_text() == loaded.reference_source
    # ... and the imported task exports to the same official files again.
    again = load_task(task, tmp_path / "proj" / "definitions")
    export_task(again, tmp_path / "again")
    for name in ("definition.json", "workload.jsonl", "reference.py"):
        assert (tmp_path / "again" / task / name).read_text() == (tmp_path / "out" / task / name).read_text()


@pytest.mark.parametrize("task", TASKS)
def test_import_official_folder(official, tmp_path, task):
    theirs_dir = official / task
    if not theirs_dir.is_dir():
        pytest.skip(f"{theirs_dir} is missing")
    result = import_problem(theirs_dir, tmp_path / "definitions")
    ours = _official_part(load_task(task).file)
    assert result.file == ours  # same axes, tensors, workloads, tolerances (exact floats, both ratio keys)
    assert (
        result.reference_path.read_text()
        == json.loads((theirs_dir / "definition.json").read_text())["reference"]
    )


def test_definition_yaml_is_readable_yaml():
    file = load_task(TASKS[0]).file
    text = definition_yaml(file, "a header\nof two lines")
    assert text.startswith("# a header\n# of two lines\nname: ")
    assert DefinitionFile.model_validate(yaml.safe_load(text)) == file  # roofline and leaderboard kept too


# ------------------------------------------------------------------------------------------------ import


def _official_folder(tmp_path: Path, **changes) -> Path:
    """A small official-style problem folder written by the test (not a dataset file)."""
    reference = "import torch\n\n\ndef run(x, w_weight, scale):\n    return x @ w_weight.T * scale\n"
    definition = {
        "name": "900_tiny_linear",
        "hf_id": None,
        "description": "A tiny linear layer.",
        "axes": {
            "n": {"type": "var", "description": "rows"},
            "d": {"type": "const", "value": 8},
            "d2": {"type": "expr", "expression": "d * 2"},
        },
        "custom_inputs_entrypoint": None,
        "inputs": {
            "x": {"shape": ["n", "d"], "dtype": "float32", "description": "input"},
            "w_weight": {"shape": ["d2", "d"], "dtype": "float32"},
            "scale": {"shape": None, "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["n", "d2"], "dtype": "float32"}},
        "reference": reference,
        "constraints": ["n > 0"],
    }
    workloads = [
        {
            "uuid": "w-1",
            "axes": {"n": 4},
            "inputs": {
                "x": {"type": "random"},
                "scale": {"type": "scalar", "value": 0.5},
                "ghost": {"type": "random"},
            },
            "tolerance": {"max_atol": 0.001, "max_rtol": 0.001, "required_match_ratio": 0.98},
        },
        {"uuid": "w-2", "axes": {"n": 16}, "inputs": {"scale": {"type": "scalar", "value": 2.0}}},
    ]
    definition.update(changes.pop("definition", {}))
    folder = tmp_path / "official" / definition["name"]
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(json.dumps(definition, indent=4) + "\n")
    (folder / "reference.py").write_text(changes.pop("reference_py", reference))
    (folder / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return folder


def test_import_reads_the_official_way(tmp_path):
    folder = _official_folder(tmp_path)
    result = import_problem(folder, tmp_path / "proj" / "definitions")
    f = result.file
    assert f.name == "900_tiny_linear" and f.hf_id is None
    assert f.axes["d2"].expression == "d * 2"
    assert f.inputs["scale"].shape is None
    w1, w2 = f.workloads
    assert {n: d.model_dump() for n, d in w1.inputs.items()} == {"scale": {"type": "scalar", "value": 0.5}}
    assert w1.tolerance.required_matched_ratio == 0.99 and w1.tolerance.dataset_required_match_ratio == 0.98
    assert w2.tolerance.max_atol == 1e-2 and w2.tolerance.dataset_required_match_ratio is None  # defaults
    assert any("constraints" in n for n in result.notes)  # ignored, as the evaluator ignores it
    assert any("'ghost'" in n for n in result.notes)
    task = load_task("900", tmp_path / "proj" / "definitions")
    assert task.reference.__name__ == "run" and [w.uuid for w in task.workloads] == ["w-1", "w-2"]


def test_import_refuses_to_overwrite(tmp_path):
    folder = _official_folder(tmp_path)
    defs = tmp_path / "proj" / "definitions"
    import_problem(folder, defs)
    with pytest.raises(HarnessError, match="already exists"):
        import_problem(folder, defs)
    (defs / "900_tiny_linear.yaml").unlink()
    with pytest.raises(HarnessError, match=r"references/900_tiny_linear.py: already exists"):
        import_problem(folder, defs)  # the reference alone also blocks
    import_problem(folder, defs, force=True)


def test_import_notes_a_differing_reference_py(tmp_path):
    folder = _official_folder(tmp_path, reference_py="# stale copy\n")
    result = import_problem(folder, tmp_path / "definitions")
    assert any("differs from definition.json" in n for n in result.notes)
    assert "def run" in result.reference_path.read_text()


def test_import_rejects_bad_folders(tmp_path):
    with pytest.raises(SchemaError, match="expected an official problem folder"):
        import_problem(tmp_path, tmp_path / "definitions")
    folder = _official_folder(tmp_path, definition={"reference": "def run(x):\n    return x\n"})
    with pytest.raises(SchemaError) as err:
        import_problem(folder, tmp_path / "definitions")
    assert "definition.json" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "definitions").exists()


def test_cli_import_and_export(tmp_path):
    folder = _official_folder(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(folder), "-o", str(tmp_path / "proj" / "definitions")])
    assert result.exit_code == 0, result.output
    again = runner.invoke(main, ["import", str(folder), "-o", str(tmp_path / "proj" / "definitions")])
    assert again.exit_code == 2 and "use --force" in again.stderr
    out = runner.invoke(main, ["export", TASKS[0][:3], "-o", str(tmp_path / "exp")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "exp" / TASKS[0] / "workload.jsonl").is_file()


def test_definition_json_of_an_imported_file_keeps_op_type(tmp_path):
    folder = _official_folder(tmp_path)
    file = import_problem(folder, tmp_path / "definitions").file.model_copy(update={"op_type": "sampling"})
    data = definition_json(file, "def run(x, w_weight, scale):\n    return x\n")
    assert data["op_type"] == "sampling" and list(data).index("op_type") == 3
    shutil.rmtree(tmp_path / "definitions")
