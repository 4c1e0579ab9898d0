"""harness/roofline.py: the SOL model against the published B200 figures, H200 geomeans, the official
score formula, the task pages' score rows, the peaks override file and `solbench sol`."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from harness.errors import HarnessError, SchemaError
from harness.expressions import safe_eval
from harness.roofline import (
    DEFAULT_PEAKS,
    aggregate_scores,
    breakdown,
    counts,
    detect_gpu,
    geomean,
    gpu_from_device_name,
    load_peaks,
    pct_of_sol,
    sol_ms,
    sol_report,
    sol_score,
)
from harness.schema import RooflineSpec
from harness.tasks import Task, load_task, task_names

TASKS = task_names()
CASES = [(t, w) for t in TASKS for w in load_task(t).file.workloads]
ROUNDING_MS = 0.00005  # published sol_ms are rounded to 4 decimals in ms: +-0.05 us


@pytest.mark.parametrize(("task", "entry"), CASES, ids=[f"{t[:3]}-{w.uuid[:8]}" for t, w in CASES])
def test_b200_leaderboard_reproduces_published_sol(task, entry):
    """All 48 workloads: the leaderboard convention on B200 gives the published sol_ms.

    Tolerance max(2 %, 0.00005 ms): the published values carry 4 decimals in ms, so a value such as
    0.0015 ms is only known to +-0.05 us (3 % of it). The fitted 074/075 byte terms and SOLAR's exact
    B200 rates in fact land every workload inside its rounding interval, which is checked too.
    """
    published = entry.leaderboard.sol_ms
    model = sol_ms(task, entry.axes, gpu="B200", convention="leaderboard")
    assert abs(model - published) <= max(0.02 * published, ROUNDING_MS), (model, published)
    assert abs(model - published) <= ROUNDING_MS + 1e-12, "outside the 4-decimal rounding interval"


@pytest.mark.parametrize("task", TASKS)
def test_b200_geomean_matches_task_page_sol_bound(task):
    """The page's SOL bound is the geomean of the rounded per-workload values; ours is within 1 %."""
    t = load_task(task)
    published = [w.leaderboard.sol_ms for w in t.file.workloads]
    assert round(geomean(published), 6) == t.file.leaderboard.sol_bound_ms
    ours = sol_report(t, "B200", "leaderboard")["geomean_sol_ms"]
    assert ours == pytest.approx(t.file.leaderboard.sol_bound_ms, rel=0.01)


# h200-facts.md, "Speed of light on the H200": geomeans in ms, given to 2-3 significant digits.
H200_GEOMEANS_MS = {
    ("074", "leaderboard"): 0.0035,
    ("075", "leaderboard"): 0.0142,
    ("077", "leaderboard"): 1.79,
    ("074", "fp32-io"): 0.0058,
    ("075", "fp32-io"): 0.0093,
    ("077", "fp32-io"): 3.58,
}


@pytest.mark.parametrize(("task", "convention"), list(H200_GEOMEANS_MS))
def test_h200_geomeans_match_h200_facts(task, convention):
    """H200: BF16 989.4 / TF32 494.7 TFLOP/s, 4.8 TB/s (the 074/075 leaderboard figures moved by <1.5 %
    when their byte terms were refitted to land inside the published rounding)."""
    ours = sol_report(task, "H200", convention)["geomean_sol_ms"]
    assert ours == pytest.approx(H200_GEOMEANS_MS[(task, convention)], rel=0.02)


def test_conventions_by_hand():
    """077 is compute bound: leaderboard = 0.4 us + 2*MACs/BF16; fp32-io = true FLOPs/TF32, no offset."""
    axes = {"batch_size": 1, "height": 1024, "width": 1024}
    c = counts("077", axes)
    h200 = DEFAULT_PEAKS["H200"]
    assert sol_ms("077", axes) == pytest.approx(0.4e-3 + 2 * c["solar_macs"] / (h200.bf16_tflops * 1e9))
    fp32 = breakdown("077", axes, "H200", "fp32-io")
    assert fp32["bound"] == "compute" and fp32["offset_ms"] == 0
    assert fp32["sol_ms"] == pytest.approx(c["flops"] / (h200.tf32_tflops * 1e9))
    # 075 is memory bound under both; H100 differs from H200 only by bandwidth.
    axes = {"batch_size": 1, "point_batch_size": 1, "n_query_tokens": 8, "n_key_tokens": 4096}
    h100, h200_ = (breakdown("075", axes, g, "fp32-io") for g in ("H100", "H200"))
    assert h100["bound"] == h200_["bound"] == "memory"
    assert h100["sol_ms"] / h200_["sol_ms"] == pytest.approx(4.8 / 3.35)
    assert set(c) == {"flops", "bytes_fp32", "solar_macs", "solar_bytes"}


def test_bad_convention_and_gpu():
    axes = {"batch_size": 1, "point_batch_size": 1}
    with pytest.raises(HarnessError, match="--convention"):
        sol_ms("074", axes, convention="fp64")
    with pytest.raises(HarnessError, match="--gpu: expected one of B200, H100, H200"):
        sol_ms("074", axes, gpu="A100")


# ---------------------------------------------------------------------------------------------- score


def test_sol_score_formula():
    assert sol_score(0.01, 0.01, 0.1) == 1.0  # at SOL
    assert sol_score(0.1, 0.01, 0.1) == pytest.approx(0.5)  # at the scoring baseline
    assert sol_score(0.005, 0.01, 0.1) > 1.0  # below SOL: not clamped
    assert 0 < sol_score(1.0, 0.01, 0.1) < 0.5
    # degenerate: baseline at or below SOL
    assert sol_score(0.01, 0.01, 0.01) == 1.0
    assert sol_score(0.009, 0.01, 0.005) == 1.0
    assert sol_score(0.011, 0.01, 0.01) == 0.0
    assert pct_of_sol(0.5, 2.0) == 0.25


def test_geomean_and_aggregate():
    assert geomean([1.0, 4.0, 16.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        geomean([])
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    sols, bases = [0.01, 0.02], [0.1, 0.4]
    at_base = aggregate_scores(bases, sols, bases)
    assert at_base["score"] == pytest.approx(0.5) and at_base["mean_score"] == pytest.approx(0.5)
    at_sol = aggregate_scores(sols, sols, bases)
    assert at_sol["score"] == 1.0 and at_sol["mean_score"] == 1.0 and at_sol["pct_of_sol"] == 1.0
    mixed = aggregate_scores([0.1, 0.02], sols, bases)  # one at baseline, one at SOL
    assert mixed["mean_score"] == pytest.approx(0.75)
    assert mixed["latency_ms"] == pytest.approx(math.sqrt(0.1 * 0.02))
    with pytest.raises(ValueError):
        aggregate_scores([0.1], sols, bases)


# What the task pages (leaderboard_readme_tables.json, B200) show, checked on all three tasks:
# - sol_bound_ms is the geomean of the per-workload sol_ms (see the B200 test above);
# - scoring_baseline_ms is the geomean of the per-workload Baseline column (page_baseline_ms), to the
#   rounding of that column (rel 1e-4), NOT of the API's baseline_latency_ms;
# - reference_score is close to, but not exactly, sol_score(reference_ms, sol_bound_ms,
#   scoring_baseline_ms): 0.1292 vs 0.1331 (074), 0.3716 vs 0.3688 (075), 0.4053 vs 0.4060 (077).
#   The page likely averages per-workload scores of per-workload reference times, which are not
#   published; no aggregation of the published figures reproduces it exactly.
REFERENCE_SCORE_GAP = {"074": 0.03, "075": 0.01, "077": 0.002}  # observed 2.9 %, 0.75 %, 0.16 %


@pytest.mark.parametrize("task", TASKS)
def test_task_page_score_rows(task):
    t = load_task(task)
    lb = t.file.leaderboard
    page_baselines = [w.leaderboard.page_baseline_ms for w in t.file.workloads]
    api_baselines = [w.leaderboard.baseline_latency_ms for w in t.file.workloads]
    assert geomean(page_baselines) == pytest.approx(lb.scoring_baseline_ms, rel=1e-4)
    assert geomean(api_baselines) != pytest.approx(lb.scoring_baseline_ms, rel=1e-3)
    score = sol_score(lb.reference_ms, lb.sol_bound_ms, lb.scoring_baseline_ms)
    assert score == pytest.approx(lb.reference_score, rel=REFERENCE_SCORE_GAP[task[:3]])
    # ... and the same through aggregate_scores: a suite running at the reference's geomean everywhere.
    sols = [w.leaderboard.sol_ms for w in t.file.workloads]
    agg = aggregate_scores([lb.reference_ms] * len(sols), sols, page_baselines)
    assert agg["score"] == pytest.approx(score, rel=1e-3)


# ---------------------------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    "expression", ["__import__('os')", "x.real", "abs(x)", "x[0]", "x if x else 1", "x > 1"]
)
def test_safe_eval_rejects_calls_and_attributes(expression):
    with pytest.raises(TypeError):
        safe_eval(expression, {"x": 3})


def test_bad_roofline_expression_names_file_and_field():
    t = load_task("074")
    bad = t.file.roofline.model_copy(update={"flops": "batch_size.bit_length()"})
    broken = Task(path=t.path, file=t.file.model_copy(update={"roofline": bad}), root=t.root)
    with pytest.raises(SchemaError) as exc:
        counts(broken, {"batch_size": 2, "point_batch_size": 3})
    assert str(exc.value).startswith(f"{t.path}: roofline.flops: ")
    assert isinstance(bad, RooflineSpec)


def test_peaks_override(tmp_path):
    f = tmp_path / "peaks.yaml"
    f.write_text(
        "h200:\n  hbm_tbytes_per_s: 4.3\nA100:\n  fp32_tflops: 19.5\n  tf32_tflops: 156\n"
        "  bf16_tflops: 312\n  hbm_tbytes_per_s: 2.039\n"
    )
    table = load_peaks(f)
    assert table["H200"].hbm_tbytes_per_s == 4.3
    assert table["H200"].bf16_tflops == DEFAULT_PEAKS["H200"].bf16_tflops  # untouched fields kept
    assert DEFAULT_PEAKS["H200"].hbm_tbytes_per_s == 4.8  # the default table is not modified
    assert table["A100"].leaderboard_offset_us == 0.4
    axes = {"batch_size": 1, "point_batch_size": 1, "n_query_tokens": 8, "n_key_tokens": 4096}
    assert sol_ms("075", axes, "H200", "fp32-io", table) == pytest.approx(
        sol_ms("075", axes, "H200", "fp32-io") * 4.8 / 4.3
    )
    assert sol_ms("075", axes, "a100", peaks=table) > 0


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("H200:\n  hbm_bandwidth: 4.3\n", "H200.hbm_bandwidth: unknown key"),
        ("H200:\n  hbm_tbytes_per_s: -1\n", "H200.hbm_tbytes_per_s: Input should be greater than 0"),
        ("H200:\n  bf16_tflops: fast\n", "H200.bf16_tflops: "),
        ("A100:\n  bf16_tflops: 312\n", "A100.fp32_tflops: required field is missing"),
        ("- H200\n", "(top level): expected a mapping"),
        ("H200: [1\n", "invalid YAML"),
    ],
)
def test_peaks_override_errors_are_one_line(tmp_path, text, field):
    f = tmp_path / "peaks.yaml"
    f.write_text(text)
    with pytest.raises(SchemaError) as exc:
        load_peaks(f)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"{f}: ") and field in message, message


def test_gpu_names():
    assert gpu_from_device_name("NVIDIA H200") == "H200"
    assert gpu_from_device_name("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_from_device_name("NVIDIA B200") == "B200"
    assert gpu_from_device_name("NVIDIA GH200 480GB") is None
    assert gpu_from_device_name("NVIDIA A100-SXM4-80GB") is None


def test_detect_gpu_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        assert detect_gpu() in (None, "H200", "H100", "B200")
    else:
        assert detect_gpu() is None


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_sol_json():
    from harness.cli import main

    result = CliRunner().invoke(main, ["sol", "075", "--gpu", "B200", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpu"] == "B200" and doc["convention"] == "leaderboard" and len(doc["workloads"]) == 16
    assert all(w["published_sol_ms"] is not None for w in doc["workloads"])
    assert doc["published_sol_bound_ms"] == load_task("075").file.leaderboard.sol_bound_ms
    assert "geomean T_SOL" in result.stderr

    result = CliRunner().invoke(main, ["sol", "077", "--gpu", "H200", "--convention", "fp32-io", "--json"])
    doc = json.loads(result.stdout)
    assert doc["published_geomean_sol_ms"] is None
    assert doc["geomean_sol_ms"] == pytest.approx(3.58, rel=0.01)


def test_cli_sol_errors(tmp_path):
    from harness.cli import main

    result = CliRunner().invoke(main, ["sol", "074", "--gpu", "A100"])
    assert result.exit_code == 2 and "--gpu: expected one of" in result.stderr
    bad = tmp_path / "peaks.yaml"
    bad.write_text("H200:\n  hbm: 1\n")
    result = CliRunner().invoke(main, ["sol", "074", "--gpu", "H200", "--peaks", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"solbench: {bad}: H200.hbm: unknown key (not allowed here)"
    ]
