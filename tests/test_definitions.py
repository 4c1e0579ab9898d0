"""definitions/*.yaml: well-formed on their own, and equal to the official SOL-ExecBench files.

The official checks read the dataset's definition.json / workload.jsonl and the leaderboard JSON from
$SOLBENCH_OFFICIAL/<task>/ (conftest's `official` fixture) and skip cleanly without it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from harness.expressions import safe_eval
from harness.schema import Definition, Workload
from harness.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = sorted((ROOT / "definitions").glob("*.yaml"))
TASKS = [p.stem for p in DEFINITIONS]
EXPECTED_TASKS = [
    "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward",
    "075_sam_hq_mask_decoder_two_way_transformer",
    "077_sam_hq_vision_encoder_window_partition_attention",
]
TOP_KEYS = {
    "name",
    "description",
    "hf_id",
    "reference",
    "axes",
    "inputs",
    "outputs",
    "roofline",
    "leaderboard",
    "workloads",
}
ROOFLINE_KEYS = ["flops", "bytes_fp32", "solar_macs", "solar_bytes"]
EFFECTIVE_RATIO = 0.99  # what the official evaluator applies (its default; the dataset's key is misspelt)
DATASET_RATIO = 0.98


def _load(task: str) -> dict:
    return yaml.safe_load((ROOT / "definitions" / f"{task}.yaml").read_text())


DEFS = {task: _load(task) for task in TASKS}
WORKLOAD_CASES = [
    pytest.param(task, i, id=f"{task[:3]}-{w['uuid'][:8]}")
    for task in TASKS
    for i, w in enumerate(DEFS[task]["workloads"])
]


# ---------------------------------------------------------------------------------------------- helpers


def _official(official: Path, task: str) -> dict:
    """One task's official files: definition, workloads, leaderboard API and task page."""
    folder = official / task
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    lines = (folder / "workload.jsonl").read_text().splitlines()
    return {
        "definition": json.loads((folder / "definition.json").read_text()),
        "workloads": [json.loads(line) for line in lines if line.strip()],
        "api": json.loads((folder / "leaderboard_api.json").read_text()),
        "page": json.loads((folder / "leaderboard_readme_tables.json").read_text()),
    }


def _resolved_axes(definition: dict, workload: dict) -> dict[str, int]:
    axes = {k: a["value"] for k, a in definition["axes"].items() if a["type"] == "const"}
    axes.update(workload["axes"])
    return axes


# ------------------------------------------------------------------------------ our files on their own


def test_the_three_tasks_are_defined():
    assert TASKS == EXPECTED_TASKS


@pytest.mark.parametrize("task", TASKS)
def test_structure(task):
    d = DEFS[task]
    assert set(d) == TOP_KEYS
    assert d["name"] == task
    assert d["hf_id"] == "syscv-community/sam-hq-vit-base"
    assert d["reference"] == f"references/{task}.py"
    assert (ROOT / d["reference"]).is_file()
    assert isinstance(d["description"], str) and "\n" not in d["description"]
    assert list(d["roofline"]) == ROOFLINE_KEYS
    assert set(d["leaderboard"]) == {"sol_bound_ms", "scoring_baseline_ms", "reference_ms", "reference_score"}
    assert not set(d["inputs"]) & set(d["axes"]), "an input may not share an axis name"
    assert not set(d["inputs"]) & set(d["outputs"])


@pytest.mark.parametrize("task", TASKS)
def test_axes_and_shapes(task):
    d = DEFS[task]
    for name, axis in d["axes"].items():
        assert axis["type"] in {"const", "var"}, name  # these tasks have no expr axes
        assert set(axis) <= {"type", "value", "description"}
        assert ("value" in axis) == (axis["type"] == "const"), name
    for section in ("inputs", "outputs"):
        for name, spec in d[section].items():
            assert set(spec) <= {"shape", "dtype", "description"}, name
            assert spec["dtype"] in {"float32", "bool"}, name
            if spec["shape"] is None:
                assert section == "inputs", name
                continue
            for dim in spec["shape"]:
                assert dim in d["axes"] or dim.isdigit(), (name, dim)


@pytest.mark.parametrize("task", TASKS)
def test_workloads(task):
    d = DEFS[task]
    workloads = d["workloads"]
    assert len(workloads) == 16
    assert len({w["uuid"] for w in workloads}) == 16
    var_axes = {k for k, a in d["axes"].items() if a["type"] == "var"}
    scalar_inputs = {k for k, s in d["inputs"].items() if s["shape"] is None}
    for w in workloads:
        assert set(w) == {"uuid", "axes", "inputs", "tolerance", "leaderboard"}
        assert set(w["axes"]) == var_axes, w["uuid"]
        assert all(isinstance(v, int) and v > 0 for v in w["axes"].values()), w["uuid"]
        assert set(w["inputs"]) <= set(d["inputs"]), w["uuid"]
        assert set(w["inputs"]) == scalar_inputs, w["uuid"]  # every scalar is given, nothing else
        for name, desc in w["inputs"].items():
            assert desc["type"] == "scalar" and set(desc) == {"type", "value"}, (w["uuid"], name)
            expected = bool if d["inputs"][name]["dtype"] == "bool" else float
            assert type(desc["value"]) is expected, (w["uuid"], name)
        tol = w["tolerance"]
        assert list(tol) == ["max_atol", "max_rtol", "required_matched_ratio", "dataset_required_match_ratio"]
        assert tol["required_matched_ratio"] == EFFECTIVE_RATIO
        assert tol["dataset_required_match_ratio"] == DATASET_RATIO
        assert 0 < tol["max_atol"] < 0.05 and tol["max_rtol"] == 1e-5
        assert set(w["leaderboard"]) == {"sol_ms", "baseline_latency_ms", "page_baseline_ms"}
        assert all(v > 0 for v in w["leaderboard"].values())


def test_uuids_unique_across_tasks():
    uuids = [w["uuid"] for task in TASKS for w in DEFS[task]["workloads"]]
    assert len(uuids) == len(set(uuids)) == 48


@pytest.mark.parametrize("task", TASKS)
def test_roofline_expressions(task):
    d = DEFS[task]
    for w in d["workloads"]:
        axes = _resolved_axes(d, w)
        r = {k: safe_eval(e, axes) for k, e in d["roofline"].items()}
        assert all(v > 0 for v in r.values()), (w["uuid"], r)
        assert r["flops"] >= 2 * r["solar_macs"]  # SOLAR never counts more MACs than the true ones
        if task.startswith("077"):
            assert r["bytes_fp32"] == 2 * r["solar_bytes"]  # same elements, 4 vs 2 bytes
        else:
            assert r["flops"] == 2 * r["solar_macs"]


def test_roofline_077_padding():
    d = DEFS["077_sam_hq_vision_encoder_window_partition_attention"]
    r = {k: safe_eval(e, {"batch_size": 1, "height": 15, "width": 14}) for k, e in d["roofline"].items()}
    n, n_padded = 15 * 14, 28 * 14
    assert r["flops"] == 2 * (2681856 * n_padded + 4718592 * n)
    assert r["solar_macs"] == 2661888 * n_padded + 4718592 * n
    assert r["bytes_fp32"] == 4 * (1536 * n + 7091328)


@pytest.mark.parametrize("task", TASKS)
def test_solar_terms_reproduce_published_sol(task):
    """B200 SOL = 0.4 us + max(MACs at BF16 tensor-core rate, bytes at 7.667 TB/s), 4-decimal ms."""
    d = DEFS[task]
    for w in d["workloads"]:
        axes = _resolved_axes(d, w)
        macs = safe_eval(d["roofline"]["solar_macs"], axes)
        nbytes = safe_eval(d["roofline"]["solar_bytes"], axes)
        sol_ms = 0.4e-3 + 1e3 * max(macs / 9.0563e14, nbytes / 7.667e12)
        assert sol_ms == pytest.approx(w["leaderboard"]["sol_ms"], abs=8e-5), w["uuid"]
    sol = [w["leaderboard"]["sol_ms"] for w in d["workloads"]]
    geomean = math.exp(sum(map(math.log, sol)) / len(sol))
    assert geomean == pytest.approx(d["leaderboard"]["sol_bound_ms"], rel=1e-4)


# ---------------------------------------------------------------------------- against the official files


@pytest.mark.parametrize("task", TASKS)
def test_definition_matches_official(official, task):
    ours, theirs = DEFS[task], _official(official, task)["definition"]
    assert ours["name"] == theirs["name"]
    assert ours["description"] == theirs["description"]
    assert ours["hf_id"] == theirs["hf_id"]
    assert theirs.get("op_type") is None and theirs.get("custom_inputs_entrypoint") is None
    assert list(ours["axes"]) == list(theirs["axes"])
    for name, axis in theirs["axes"].items():
        assert ours["axes"][name] == axis, name  # type, const value, description (or its absence)
    for section in ("inputs", "outputs"):
        assert list(ours[section]) == list(theirs[section]), section
        for name, spec in theirs[section].items():
            assert ours[section][name] == spec, name  # shape, dtype, description (or its absence)


@pytest.mark.parametrize("task", TASKS)
def test_task_leaderboard_matches_official(official, task):
    ours, files = DEFS[task]["leaderboard"], _official(official, task)
    for key in ("sol_bound_ms", "scoring_baseline_ms", "reference_ms", "reference_score"):
        assert ours[key] == files["page"][key], key
    api = files["api"]
    assert api["name"] == task and api["num_workloads"] == 16
    # The API's task-level "baseline_latency_ms" is in fact the page's SOL bound.
    assert api["sol"]["baseline_latency_ms"] == files["page"]["sol_bound_ms"]


@pytest.mark.parametrize("task,index", WORKLOAD_CASES)
def test_workload_matches_official(official, task, index):
    ours = DEFS[task]["workloads"][index]
    files = _official(official, task)
    assert len(files["workloads"]) == len(DEFS[task]["workloads"])
    theirs = files["workloads"][index]
    assert ours["uuid"] == theirs["uuid"]
    assert ours["axes"] == theirs["axes"]

    non_random = {k: v for k, v in theirs["inputs"].items() if v["type"] != "random"}
    assert ours["inputs"] == non_random
    for name, desc in non_random.items():  # bool stays bool, float stays float
        assert type(ours["inputs"][name]["value"]) is type(desc["value"]), name
    random = {k for k, v in theirs["inputs"].items() if v == {"type": "random"}}
    assert random | set(non_random) == set(files["definition"]["inputs"])

    tol = theirs["tolerance"]
    assert set(tol) == {"max_atol", "max_rtol", "required_match_ratio"}
    # Our files drop JSON float noise (0.031000000000000003 -> 0.031).
    assert ours["tolerance"]["max_atol"] == pytest.approx(tol["max_atol"], rel=1e-12)
    assert ours["tolerance"]["max_rtol"] == tol["max_rtol"]
    assert ours["tolerance"]["dataset_required_match_ratio"] == tol["required_match_ratio"]
    # The evaluator's field is `required_matched_ratio`; absent in the dataset, so its default 0.99 applies.
    assert ours["tolerance"]["required_matched_ratio"] == tol.get("required_matched_ratio", 0.99)

    api = files["api"]["sol"]["per_workload"][index]
    page = files["page"]["workloads"][index]
    assert api["index"] == index and page["index"] == index + 1
    assert page["uuid"] == ours["uuid"] and page["axes"] == ours["axes"]
    assert api["axes"] == _resolved_axes(DEFS[task], ours)
    assert ours["leaderboard"]["sol_ms"] == api["sol_ms"] == page["sol_ms"]
    assert ours["leaderboard"]["baseline_latency_ms"] == pytest.approx(api["baseline_latency_ms"], rel=1e-12)
    assert ours["leaderboard"]["page_baseline_ms"] == page["baseline_ms"]


# ------------------------------------------------------------------------------- through the harness


@pytest.mark.parametrize("task", TASKS)
def test_load_task(task):
    loaded = load_task(task)
    assert loaded.name == task
    assert load_task(task[:3]) is loaded
    assert list(loaded.definition.inputs) == list(DEFS[task]["inputs"])
    assert list(loaded.definition.outputs) == list(DEFS[task]["outputs"])
    assert [w.uuid for w in loaded.workloads] == [w["uuid"] for w in DEFS[task]["workloads"]]
    for w in loaded.workloads:
        assert w.tolerance.required_matched_ratio == EFFECTIVE_RATIO
        assert w.tolerance.max_error_cap is None and not w.tolerance.allow_negative_inf
    assert callable(loaded.reference) and loaded.reference.__name__ == "run"


@pytest.mark.parametrize("task", TASKS)
def test_workloads_list_every_input_as_official_lines_and_traces_do(task):
    """A task's workloads (what traces echo) name every definition input in order, the ones the YAML leaves out as
    {"type": "random"}."""
    loaded = load_task(task)
    names = list(loaded.definition.inputs)
    for entry, ours in zip(loaded.file.workloads, loaded.workloads, strict=True):
        assert list(ours.inputs) == names
        for name, desc in ours.inputs.items():
            assert desc.model_dump() == (
                entry.inputs[name].model_dump() if name in entry.inputs else {"type": "random"}
            )
    assert any(d.type == "random" for d in loaded.workloads[0].inputs.values())


@pytest.mark.parametrize("task", TASKS)
def test_load_task_equals_official_models(official, task):
    """Our YAML, converted by the harness, gives the official pydantic models of the dataset's files."""
    files = _official(official, task)
    loaded = load_task(task)
    theirs = Definition.model_validate(files["definition"])
    assert loaded.definition.model_dump(exclude={"reference"}) == theirs.model_dump(exclude={"reference"})
    for ours, line in zip(loaded.workloads, files["workloads"], strict=True):
        theirs = Workload.model_validate(line)
        assert ours.uuid == theirs.uuid and ours.axes == theirs.axes
        assert ours.inputs == theirs.inputs  # every input listed, the random ones as {"type": "random"}
        assert list(ours.inputs) == list(theirs.inputs)
        ours_tol, theirs_tol = ours.tolerance.model_dump(), theirs.tolerance.model_dump()
        assert ours_tol.pop("max_atol") == pytest.approx(theirs_tol.pop("max_atol"), rel=1e-12)
        assert ours_tol == theirs_tol  # rtol, the 0.99 default ratio, no cap
