"""harness/correctness.py: the official compute_error_stats edge cases (their test suite's list, §8) and the
aggregation over rounds and outputs."""

from __future__ import annotations

import json
import math

import pytest
import torch

from harness.correctness import ErrorStats, aggregate, check_outputs, compute_error_stats, failed_elements
from harness.schema import Environment, Evaluation, ToleranceSpec, Trace, Workload

INF, NAN = math.inf, math.nan


def tol(**kw) -> ToleranceSpec:
    base = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 0.99}
    base.update(kw)
    return ToleranceSpec(**base)


def stats(out, ref, **kw) -> ErrorStats:
    as_tensor = lambda v: v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.float32)
    return compute_error_stats(as_tensor(out), as_tensor(ref), tol(**kw))


def trace_line(s: ErrorStats) -> str:
    """The stats as they land in an official trace line (strict JSON: raises on non-finite numbers)."""
    status = "PASSED" if s.passed else "INCORRECT_NUMERICAL"
    evaluation = Evaluation(
        status=status,
        environment=Environment(hardware="cpu"),
        timestamp="t",
        correctness=s.to_correctness(),
        performance={"latency_ms": 0.0} if s.passed else None,
    )
    return Trace(
        definition="d", workload=Workload(uuid="u"), solution="s", evaluation=evaluation
    ).to_json_line()


# --------------------------------------------------------------------------------- tolerance formula


def test_identical_passes_with_zero_errors():
    s = stats([1.0, -2.0, 3.0], [1.0, -2.0, 3.0])
    assert s.passed and s.max_absolute_error == 0.0 and s.max_relative_error == 0.0 and s.matched_ratio == 1.0


def test_zero_reference_zero_output_passes():
    s = stats([0.0, 0.0], [0.0, 0.0])
    assert s.passed and (s.max_absolute_error, s.max_relative_error) == (0.0, 0.0)


def test_zero_reference_small_output_within_atol():
    s = stats([0.005, -0.009], [0.0, 0.0], max_atol=0.01, max_rtol=0.0)
    assert s.passed
    assert s.max_absolute_error == pytest.approx(0.009)
    assert s.max_relative_error == pytest.approx(0.9)  # divided by the atol floor, not by |0|


def test_zero_reference_output_beyond_atol_fails():
    s = stats([0.0, 0.02], [0.0, 0.0], max_atol=0.01, max_rtol=0.5)
    assert not s.passed and s.reason == "ratio" and s.matched_ratio == 0.5


def test_relative_error_floor_is_atol():
    # |ref| = 1e-6 < atol: rel = err / atol; |ref| = 10 > atol: rel = err / |ref|
    s = stats([1e-6 + 0.004, 10.5], [1e-6, 10.0], max_atol=0.01, max_rtol=0.1)
    assert s.max_relative_error == pytest.approx(max(0.004 / 0.01, 0.5 / 10.0), rel=1e-5)
    s = stats([1e-6 + 0.004], [1e-6], max_atol=0.1)
    assert s.max_relative_error == pytest.approx(0.04, rel=1e-4)


def test_exact_boundary_passes_and_next_float_fails():
    # |err| == atol + rtol * |ref| exactly (all values exact in fp32): 0.75 == 0.5 + 0.25 * 1.0
    edge = stats([1.75], [1.0], max_atol=0.5, max_rtol=0.25)
    assert edge.passed and edge.max_absolute_error == 0.75
    next_fp32 = torch.nextafter(torch.tensor([1.75]), torch.tensor([2.0]))  # one fp32 ulp above
    above = stats(next_fp32, [1.0], max_atol=0.5, max_rtol=0.25)
    assert not above.passed and above.matched_ratio == 0.0


def test_negative_reference_uses_its_magnitude():
    assert stats([-2.9], [-2.0], max_atol=0.0, max_rtol=0.5).passed  # 0.9 <= 0.5 * |-2|
    assert not stats([-3.1], [-2.0], max_atol=0.0, max_rtol=0.5).passed


@pytest.mark.parametrize(
    "n_bad, required, passed",
    [(0, 1.0, True), (1, 0.9, True), (1, 0.95, False), (2, 0.9, False), (10, 0.99, False), (10, 0.0, True)],
)
def test_matched_ratio_against_required(n_bad, required, passed):
    ref = torch.arange(1, 11, dtype=torch.float32)
    out = ref.clone()
    out[:n_bad] += 1.0
    s = compute_error_stats(out, ref, tol(required_matched_ratio=required))
    assert s.matched_ratio == pytest.approx(1 - n_bad / 10)
    assert s.passed is passed
    assert s.reason == ("" if passed else "ratio")


def test_subnormals():
    tiny = torch.tensor([1e-40, -3e-39, 1e-45], dtype=torch.float32)
    assert tiny[0] != 0 and tiny[0].abs() < torch.finfo(torch.float32).tiny  # really subnormal
    s = compute_error_stats(tiny * 2, tiny, tol())
    assert s.passed and s.max_absolute_error < 1e-38 and math.isfinite(s.max_relative_error)
    json.loads(trace_line(s))


def test_zero_dim_tensors():
    assert compute_error_stats(torch.tensor(1.0), torch.tensor(1.001), tol()).passed
    s = compute_error_stats(torch.tensor(3.0), torch.tensor(1.0), tol())
    assert not s.passed and s.max_absolute_error == 2.0
    assert s.worst[0]["index"] == []


def test_fp16_is_upcast_before_subtracting():
    # in fp16, 60000 - (-60000) overflows to inf; in fp32 it is a finite (large) error
    s = compute_error_stats(
        torch.tensor([60000.0], dtype=torch.float16), torch.tensor([-60000.0], dtype=torch.float16), tol()
    )
    assert not s.has_inf and not s.has_nan and s.reason == "ratio"
    assert s.max_absolute_error == 120000.0


def test_bf16_and_int_inputs_are_compared_in_fp32():
    s = compute_error_stats(
        torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([1.0078125], dtype=torch.bfloat16), tol()
    )
    assert s.max_absolute_error == 0.0078125 and s.passed
    i = compute_error_stats(
        torch.tensor([3, 4], dtype=torch.int32), torch.tensor([3, 5], dtype=torch.int64), tol()
    )
    assert i.max_absolute_error == 1.0 and not i.passed
    b = compute_error_stats(torch.tensor([True, False]), torch.tensor([True, False]), tol())
    assert b.passed


def test_mixed_output_and_reference_dtypes():
    s = compute_error_stats(
        torch.tensor([1.0], dtype=torch.float16), torch.tensor([1.0], dtype=torch.float64), tol()
    )
    assert s.passed


# ------------------------------------------------------------------------------------------- NaN/Inf


@pytest.mark.parametrize(
    "out, ref, has_nan",
    [
        ([NAN, 1.0], [1.0, 1.0], True),
        ([1.0, 1.0], [NAN, 1.0], True),
        ([NAN, 1.0], [NAN, 1.0], True),  # matching NaN still fails
        ([INF, 1.0], [1.0, 1.0], False),
        ([1.0, 1.0], [INF, 1.0], False),
        ([INF, 1.0], [INF, 1.0], False),  # matching +inf still fails
        ([-INF, 1.0], [-INF, 1.0], False),  # matching -inf fails unless allowed
        ([-INF, 1.0], [1.0, 1.0], False),
        ([INF, NAN], [1.0, 1.0], True),  # NaN wins over Inf in the flags
    ],
)
def test_every_non_finite_case_fails_with_zero_errors(out, ref, has_nan):
    s = stats(out, ref, max_atol=1e9, max_rtol=1e9, required_matched_ratio=0.0)
    assert not s.passed and s.reason == "non-finite"
    assert (s.has_nan, s.has_inf) == (has_nan, not has_nan)
    assert (s.max_absolute_error, s.max_relative_error) == (0.0, 0.0)
    line = json.loads(trace_line(s))
    assert line["evaluation"]["correctness"]["has_nan"] is has_nan


def test_allow_negative_inf_exempts_matching_negative_inf_only():
    ok = stats([-INF, 1.0, 2.0], [-INF, 1.0, 2.001], allow_negative_inf=True)
    assert ok.passed and not ok.has_inf and ok.max_absolute_error == pytest.approx(0.001, abs=1e-6)
    assert math.isfinite(ok.max_relative_error)
    # one-sided -inf, +inf (even matching), NaN: still failures
    for out, ref in [([-INF, 1.0], [0.0, 1.0]), ([1.0, 1.0], [-INF, 1.0]), ([INF, 1.0], [INF, 1.0]),
                     ([-INF, 1.0], [INF, 1.0]), ([-INF, NAN], [-INF, 1.0])]:  # fmt: skip
        s = stats(out, ref, allow_negative_inf=True)
        assert not s.passed and s.reason == "non-finite", (out, ref)


def test_allow_negative_inf_everything_exempt_passes():
    s = stats([-INF, -INF], [-INF, -INF], allow_negative_inf=True)
    assert s.passed and (s.max_absolute_error, s.max_relative_error) == (0.0, 0.0)


def test_allow_negative_inf_excludes_positions_from_the_ratio():
    # 2 finite positions, one bad: 1/2 matched (not 2/3 counting the exempt -inf)
    s = stats([-INF, 1.0, 5.0], [-INF, 1.0, 1.0], allow_negative_inf=True, required_matched_ratio=0.6)
    assert s.matched_ratio == 0.5 and not s.passed


def test_allow_negative_inf_norm_includes_the_infinities():
    # officially the all-zero check runs on the whole tensors: both norms are inf, so zeros elsewhere are
    # judged by the tolerance (here within atol), not failed as an all-zero output
    s = stats([-INF, 0.0, 0.0], [-INF, 1e-3, 1e-3], allow_negative_inf=True)
    assert s.passed and s.max_absolute_error == pytest.approx(1e-3)


# -------------------------------------------------------------------------------------- max_error_cap


def test_max_error_cap_is_strictly_greater():
    ref = torch.zeros(100)
    ref[0] = 1.0
    out = ref.clone()
    out[1] = 0.5  # one element far off: ratio 0.99 still passes
    at_cap = compute_error_stats(out, ref, tol(max_error_cap=0.5))
    assert at_cap.passed and at_cap.max_absolute_error == 0.5
    over = compute_error_stats(out, ref, tol(max_error_cap=0.4999))
    assert not over.passed and over.reason == "cap" and over.matched_ratio == 0.99
    assert compute_error_stats(out, ref, tol(max_error_cap=None)).passed


# ------------------------------------------------------------------------------------------ all-zero


def test_all_zero_output_fails_with_the_reference_norm():
    s = stats([0.0, 0.0], [3.0, 4.0], max_atol=100.0)  # the tolerance alone would accept zeros
    assert not s.passed and s.reason == "all-zero"
    assert s.max_absolute_error == 5.0 and s.max_relative_error == 5.0
    assert not s.has_nan and not s.has_inf
    json.loads(trace_line(s))


def test_near_zero_reference_against_zeros_fails():
    s = stats([0.0, 0.0, 0.0], [1e-6, 0.0, -1e-6])
    assert (
        not s.passed and s.reason == "all-zero" and s.max_absolute_error == pytest.approx(math.sqrt(2) * 1e-6)
    )


def test_negative_zero_output_is_all_zero():
    s = stats([-0.0, 0.0], [1.0, 1.0], max_atol=10.0)
    assert not s.passed and s.reason == "all-zero"


# ------------------------------------------------------------------------------------------ empty


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_empty_tensors_pass(shape):
    s = compute_error_stats(torch.empty(shape), torch.empty(shape), tol())
    assert s.passed and (s.max_absolute_error, s.max_relative_error, s.matched_ratio) == (0.0, 0.0, 1.0)
    json.loads(trace_line(s))


def test_values_are_json_safe_python_floats():
    s = stats([1.0, 2.5], [1.0, 2.0])
    assert type(s.max_absolute_error) is float and type(s.max_relative_error) is float
    line = json.loads(trace_line(s))["evaluation"]["correctness"]
    assert line["max_absolute_error"] == 0.5 and line["max_relative_error"] == 0.25


# ------------------------------------------------------------------------------------- worst elements


def test_worst_elements_name_real_indices():
    ref = torch.zeros(3, 4)
    ref[0, 0] = 1.0
    out = ref.clone()
    out[1, 2] = 0.5
    out[2, 3] = -2.0
    s = compute_error_stats(out, ref, tol())
    assert [w["index"] for w in s.worst] == [[2, 3], [1, 2]]  # sorted by excess over the allowed error
    assert s.worst[0]["value"] == -2.0 and s.worst[0]["reference"] == 0.0
    assert s.worst[0]["abs_error"] == 2.0 and s.worst[0]["allowed"] == pytest.approx(0.01)
    report = s.report()
    assert "at (2, 3)" in report and "at (1, 2)" in report and "failed: ratio" in report


def test_worst_elements_only_failing_and_capped_in_number():
    ref = torch.ones(10)
    out = ref + torch.linspace(0.0, 1.0, 10)
    s = compute_error_stats(out, ref, tol(), worst=3)
    assert len(s.worst) == 3 and s.worst[0]["index"] == [9]
    assert compute_error_stats(ref, ref, tol()).worst == []


def test_worst_elements_real_indices_with_negative_inf_allowed():
    ref = torch.zeros(2, 3)
    ref[0, 0] = -INF
    ref[1, 0] = 1.0
    out = ref.clone()
    out[1, 2] = 7.0
    s = compute_error_stats(out, ref, tol(allow_negative_inf=True))
    assert not s.passed and s.matched_ratio == pytest.approx(4 / 5)
    assert [w["index"] for w in s.worst] == [[1, 2]]
    assert s.worst[0]["value"] == 7.0


# ---------------------------------------------------------------------------------------- aggregation


def _s(max_abs: float, *, nan: bool = False, inf: bool = False) -> ErrorStats:
    return ErrorStats(passed=not (nan or inf), max_absolute_error=max_abs, max_relative_error=max_abs,
                      has_nan=nan, has_inf=inf)  # fmt: skip


def test_aggregate_keeps_the_largest_absolute_error():
    small, big = _s(0.1), _s(0.5)
    assert aggregate(None, small) is small
    assert aggregate(small, big) is big
    assert aggregate(big, small) is big
    equal = _s(0.5)
    assert aggregate(big, equal) is big  # ties keep the first


def test_aggregate_nan_always_replaces():
    nan = _s(0.0, nan=True)
    assert aggregate(_s(9.0), nan) is nan
    assert aggregate(_s(0.0, inf=True), nan) is nan
    other_nan = _s(0.0, nan=True)
    assert aggregate(nan, other_nan) is other_nan


def test_aggregate_inf_replaces_unless_kept_nan():
    inf = _s(0.0, inf=True)
    assert aggregate(_s(9.0), inf) is inf
    nan = _s(0.0, nan=True)
    assert aggregate(nan, inf) is nan


def test_aggregate_over_real_stats():
    a = stats([1.0, 1.2], [1.0, 1.0])
    b = stats([NAN], [1.0])
    c = stats([1.0, 3.0], [1.0, 1.0])
    kept = None
    for s in (a, c):
        kept = aggregate(kept, s)
    assert kept is c
    assert aggregate(kept, b).has_nan


def test_check_outputs_keeps_the_worst_output_and_round():
    t = tol(max_atol=0.1, max_rtol=0.0)
    ref = torch.zeros(10)
    good, half = torch.zeros(10), torch.full((10,), 0.05)
    res = check_outputs([good, half], [ref, ref], ["a", "b"], t)
    assert res == {"passed": True, "min_matched": 1.0, "worst_ratio": pytest.approx(0.5), "worst_output": "b"}
    # a later round: one element of "a" over the tolerance (matched 0.9 < 0.99: fails)
    bad = good.clone()
    bad[3] = 0.3
    res = check_outputs([bad, good], [ref, ref], ["a", "b"], t, res)
    assert res["worst_output"] == "a" and res["worst_ratio"] == pytest.approx(3.0)
    assert res["min_matched"] == pytest.approx(0.9) and res["passed"] is False
    # the kept worst survives a better round; a non-finite output is an infinite ratio
    res = check_outputs([good, torch.full((10,), math.nan)], [ref, ref], ["a", "b"], t, res)
    assert res["worst_output"] == "b" and res["worst_ratio"] == math.inf and res["min_matched"] == 0.0


def test_failed_elements_is_the_rule_compute_error_stats_counts():
    """The element mask of the official rule: its count is what the matched ratio is made of, at the boundary too."""
    torch.manual_seed(3)
    ref = torch.randn(64, 33)
    out = ref.clone()
    spec = tol(max_atol=1e-3)
    out[3, 4] += 2e-3 + 1e-2 * ref[3, 4].abs()  # beyond atol + rtol |ref|
    out[10, :5] -= 1.0
    out[11, 2] += 0.5e-3  # within atol
    mask = failed_elements(out, ref, spec)
    assert mask.shape == out.shape and mask.dtype == torch.bool
    assert mask[3, 4] and mask[10, :5].all() and not mask[11, 2] and int(mask.sum()) == 6
    got = compute_error_stats(out, ref, spec)
    assert got.matched_ratio == pytest.approx(1.0 - 6 / mask.numel())


def test_failed_elements_marks_non_finite_and_exempts_matching_negative_inf():
    ref = torch.tensor([1.0, 2.0, -math.inf, -math.inf, 3.0])
    out = torch.tensor([math.nan, math.inf, -math.inf, 0.0, 3.0])
    assert failed_elements(out, ref, tol()).tolist() == [True, True, True, True, False]
    allowed = failed_elements(out, ref, tol(allow_negative_inf=True))
    assert allowed.tolist() == [True, True, False, True, False]
