"""harness/runner.py: the official correctness procedure (check_correctness, run_checks), the return-value
normalisation and the --smoke rule, on a tiny synthetic task (y = x * scale, z = x.sum(-1))."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from harness.runner import (
    SMOKE_CAP,
    OutputError,
    check_correctness,
    make_trace,
    normalize_outputs,
    run_checks,
    smoke_workload,
)
from harness.schema import Definition, EvaluationStatus, Trace, Workload

Status = EvaluationStatus

REFERENCE = "def run(x, scale):\n    return x * scale, x.sum(-1)\n"


def reference(x, scale):
    return x * scale, x.sum(-1)


@pytest.fixture(scope="module")
def definition() -> Definition:
    return Definition.model_validate(
        {
            "name": "tiny_task",
            "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 8}},
            "inputs": {
                "x": {"shape": ["n", "d"], "dtype": "float32"},
                "scale": {"shape": None, "dtype": "float32"},
            },
            "outputs": {
                "y": {"shape": ["n", "d"], "dtype": "float32"},
                "z": {"shape": ["n"], "dtype": "float32"},
            },
            "reference": REFERENCE,
        }
    )


@pytest.fixture(scope="module")
def workload() -> Workload:
    return Workload.model_validate(
        {"uuid": "w-0001", "axes": {"n": 4}, "inputs": {"scale": {"type": "scalar", "value": 2.0}}}
    )


def good_dps(x, scale, y, z):
    y.copy_(x * scale)
    z.copy_(x.sum(-1))


def check(definition, workload, fn, *, ref=reference, **kw):
    return check_correctness(definition, ref, fn, workload, **kw)


# ------------------------------------------------------------------------------------- check_correctness


def test_passed(definition, workload):
    outcome = check(definition, workload, good_dps)
    assert outcome.status == Status.PASSED and outcome.log == ""
    assert outcome.stats.passed and outcome.stats.max_absolute_error == 0.0
    assert set(outcome.per_output) == {"y", "z"}
    assert isinstance(outcome.last_inputs[0], torch.Tensor) and outcome.last_inputs[1] == 2.0


def test_passed_return_style(definition, workload):
    outcome = check(
        definition, workload, lambda x, scale: {"z": x.sum(-1), "y": x * scale, "junk": 1}, dps=False
    )
    assert outcome.status == Status.PASSED


def test_wrong_values_incorrect_numerical(definition, workload):
    def wrong_z(x, scale, y, z):
        y.copy_(x * scale)
        z.copy_(x.sum(-1) + 1.0)

    outcome = check(definition, workload, wrong_z)
    assert outcome.status == Status.INCORRECT_NUMERICAL
    assert outcome.log.startswith("round 0, output z: ")
    assert "failed: ratio" in outcome.log
    assert not outcome.stats.passed and outcome.stats.max_absolute_error == pytest.approx(1.0)
    assert outcome.per_output["y"].passed  # y was checked (and passed) before z failed


def test_first_failing_output_ends_the_workload(definition, workload):
    def both_wrong(x, scale, y, z):
        y.copy_(x * scale + 5.0)
        z.copy_(x.sum(-1) + 1.0)

    outcome = check(definition, workload, both_wrong)
    assert outcome.log.startswith("round 0, output y: ")
    assert "z" not in outcome.per_output


def test_all_zero_dps_output_fails(definition, workload):
    outcome = check(definition, workload, lambda x, scale, y, z: None)
    assert outcome.status == Status.INCORRECT_NUMERICAL and "all-zero" in outcome.log


def test_wrong_shape(definition, workload):
    outcome = check(definition, workload, lambda x, scale: (x * scale, x.sum(-1, keepdim=True)), dps=False)
    assert outcome.status == Status.INCORRECT_SHAPE and outcome.stats is None
    assert "z" in outcome.log


def test_wrong_dtype(definition, workload):
    outcome = check(definition, workload, lambda x, scale: ((x * scale).double(), x.sum(-1)), dps=False)
    assert outcome.status == Status.INCORRECT_DTYPE
    assert "y" in outcome.log


def test_shape_is_checked_before_dtype_per_output_pair(definition, workload):
    outcome = check(definition, workload, lambda x, scale: (x.double()[:, :2], x.sum(-1)), dps=False)
    assert outcome.status == Status.INCORRECT_SHAPE
    # pairs in output order: y's dtype mismatch is found before z's shape mismatch
    outcome = check(definition, workload, lambda x, scale: (x.double(), x.sum(-1, keepdim=True)), dps=False)
    assert outcome.status == Status.INCORRECT_DTYPE


def test_shape_compared_with_the_reference_not_the_definition(definition, workload):
    # a reference that disagrees with its definition makes a correct DPS solution fail the shape check
    outcome = check(definition, workload, good_dps, ref=lambda x, scale: (x * scale, x.sum(-1, keepdim=True)))
    assert outcome.status == Status.INCORRECT_SHAPE
    outcome = check(definition, workload, good_dps, ref=lambda x, scale: (x * scale, x.sum(-1).double()))
    assert outcome.status == Status.INCORRECT_DTYPE


def test_user_exception_runtime_error(definition, workload):
    def broken(x, scale, y, z):
        raise ValueError("kernel exploded")

    outcome = check(definition, workload, broken)
    assert outcome.status == Status.RUNTIME_ERROR
    assert outcome.log.startswith("User function failed: kernel exploded")
    assert "Traceback" in outcome.log


def test_bad_return_value_is_a_runtime_error(definition, workload):
    outcome = check(definition, workload, lambda x, scale: x * scale, dps=False)  # one tensor, two outputs
    assert outcome.status == Status.RUNTIME_ERROR and "User function failed" in outcome.log


def test_reference_exception_invalid_reference(definition, workload):
    def bad_reference(x, scale):
        raise RuntimeError("reference broke")

    called = []
    outcome = check(definition, workload, lambda *a: called.append(1), ref=bad_reference)
    assert outcome.status == Status.INVALID_REFERENCE
    assert outcome.log.startswith("Reference run() failed: reference broke")
    assert called == []  # the reference runs first


class LazyTensor(torch.Tensor):
    pass


def test_tensor_subclass_output_is_reward_hack(definition, workload):
    outcome = check(
        definition, workload, lambda x, scale: ((x * scale).as_subclass(LazyTensor), x.sum(-1)), dps=False
    )
    assert outcome.status == Status.REWARD_HACK
    assert outcome.log == "Lazy evaluation detected: output is LazyTensor, not torch.Tensor"


def test_lazy_check_comes_before_the_shape_check(definition, workload):
    outcome = check(
        definition,
        workload,
        lambda x, scale: (x.as_subclass(LazyTensor), x.sum(-1, keepdim=True)),
        dps=False,
    )
    assert outcome.status == Status.REWARD_HACK


def test_caching_solution_fails_on_a_later_round(definition, workload):
    cache = {}

    def cached(x, scale, y, z):
        if "y" not in cache:
            cache["y"], cache["z"] = x * scale, x.sum(-1)
        y.copy_(cache["y"])
        z.copy_(cache["z"])

    assert check(definition, workload, cached, rounds=1).status == Status.PASSED
    cache.clear()
    outcome = check(definition, workload, cached, rounds=3)
    assert outcome.status == Status.INCORRECT_NUMERICAL
    assert outcome.log.startswith("round 1, output y: ")


def test_rounds_get_fresh_inputs_and_fresh_zero_outputs(definition, workload):
    seen = []

    def spy(x, scale, y, z):
        assert not y.any() and not z.any()  # zero-allocated for every call
        seen.append((x.clone(), y.data_ptr()))
        good_dps(x, scale, y, z)

    outcome = check(definition, workload, spy, rounds=4)
    assert outcome.status == Status.PASSED and len(seen) == 4
    for i in range(1, 4):
        assert not torch.equal(seen[i][0], seen[0][0])
    assert torch.equal(outcome.last_inputs[0], seen[-1][0])


def test_reference_and_user_share_the_input_objects(definition, workload):
    ref_ids, user_ids = [], []

    def ref(x, scale):
        ref_ids.append(id(x))
        return reference(x, scale)

    def user(x, scale, y, z):
        user_ids.append(id(x))
        good_dps(x, scale, y, z)

    check(definition, workload, user, ref=ref, rounds=2)
    assert ref_ids == user_ids and len(set(ref_ids)) == 2


def test_after_first_call_runs_once_after_round_zero(definition, workload):
    events = []

    def user(x, scale, y, z):
        events.append("call")
        good_dps(x, scale, y, z)

    check(definition, workload, user, rounds=3, after_first_call=lambda: events.append("hook"))
    assert events == ["call", "hook", "call", "call"]


def test_aggregated_stats_keep_the_worst_round(definition, workload):
    count = [0]

    def drifting(x, scale, y, z):
        count[0] += 1
        good_dps(x, scale, y, z)
        y.add_(1e-3 * count[0])  # within the default atol, growing per round

    outcome = check(definition, workload, drifting, rounds=3)
    assert outcome.status == Status.PASSED
    assert outcome.stats.max_absolute_error == pytest.approx(3e-3, rel=1e-3)
    assert outcome.per_output["y"].max_absolute_error == pytest.approx(3e-3, rel=1e-3)
    assert outcome.per_output["z"].max_absolute_error == 0.0


# ------------------------------------------------------------------------------------------ run_checks


def _task(definition):
    return SimpleNamespace(definition=definition, reference=reference)


def test_run_checks_traces(definition, workload):
    seen = []
    other = Workload(uuid="w-0002", axes={"n": 40}, inputs={"scale": {"type": "scalar", "value": 0.5}})
    traces = run_checks(
        _task(definition), good_dps, "tiny_solution", [workload, other], rounds=2, on_result=seen.append
    )
    assert [t.workload.uuid for t in traces] == ["w-0001", "w-0002"] and seen == traces
    for t in traces:
        ev = t.evaluation
        assert ev.status == Status.PASSED and ev.correctness is not None
        assert ev.performance.latency_ms == 0.0 and ev.extra["timed"] is False and ev.extra["rounds"] == 2
        assert set(ev.extra["outputs"]) == {"y", "z"}
        data = json.loads(t.to_json_line())
        assert data["solution"] == "tiny_solution" and data["definition"] == "tiny_task"
        assert Trace.model_validate(data).evaluation.status == Status.PASSED


def test_run_checks_seeds_once_so_runs_are_reproducible(definition, workload):
    def record(store):
        def fn(x, scale, y, z):
            store.append(x.clone())
            good_dps(x, scale, y, z)

        return fn

    first, second = [], []
    run_checks(_task(definition), record(first), "s", [workload, workload], rounds=2)
    run_checks(_task(definition), record(second), "s", [workload, workload], rounds=2)
    assert len(first) == 4
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], first[2])  # no per-workload reseed: the second workload gets new data


def test_run_checks_failures_carry_no_performance(definition, workload):
    float64 = Definition.model_validate(
        definition.model_dump() | {"inputs": {"x": {"shape": ["n", "d"], "dtype": "float64"},
                                               "scale": {"shape": None, "dtype": "float32"}}}
    )  # fmt: skip
    traces = run_checks(_task(float64), good_dps, "s", [workload], rounds=1)
    ev = traces[0].evaluation
    assert ev.status == Status.RUNTIME_ERROR and "float64" in ev.log
    assert ev.correctness is None and ev.performance is None
    bad = run_checks(_task(definition), lambda x, scale, y, z: None, "s", [workload], rounds=1)[0].evaluation
    assert (
        bad.status == Status.INCORRECT_NUMERICAL and bad.correctness is not None and bad.performance is None
    )
    json.loads(traces[0].to_json_line())


def test_run_checks_smoke_caps_axes_and_records_them(definition):
    big = Workload(uuid="big", axes={"n": 1000}, inputs={"scale": {"type": "scalar", "value": 1.5}})
    shapes = []

    def fn(x, scale, y, z):
        shapes.append(tuple(x.shape))
        good_dps(x, scale, y, z)

    trace = run_checks(_task(definition), fn, "s", [big], rounds=1, smoke=True)[0]
    assert shapes == [(SMOKE_CAP, 8)]
    assert trace.evaluation.extra["smoke_axes"] == {"n": SMOKE_CAP}
    assert trace.workload.axes == {"n": 1000}  # the trace names the real workload


def test_make_trace_drops_performance_and_correctness_where_forbidden(definition, workload):
    from harness.correctness import compute_error_stats
    from harness.schema import Environment, Performance

    stats = compute_error_stats(torch.ones(2), torch.ones(2), workload.tolerance)
    env = Environment(hardware="cpu")
    t = make_trace(definition, workload, "s", Status.RUNTIME_ERROR, stats=stats,
                   performance=Performance(latency_ms=1.0), env=env)  # fmt: skip
    assert t.evaluation.correctness is None and t.evaluation.performance is None
    t = make_trace(definition, workload, "s", Status.INCORRECT_NUMERICAL, stats=stats,
                   performance=Performance(latency_ms=1.0), env=env)  # fmt: skip
    assert t.evaluation.correctness is not None and t.evaluation.performance is None


# ------------------------------------------------------------------------------------ normalize_outputs


@pytest.fixture(scope="module")
def one_output() -> Definition:
    return Definition.model_validate(
        {
            "name": "one",
            "axes": {},
            "inputs": {"x": {"shape": ["3"], "dtype": "float32"}},
            "outputs": {"count": {"shape": [], "dtype": "int32"}},
            "reference": "def run(x):\n    return x\n",
        }
    )


def test_normalize_single_tensor(one_output, definition):
    t = torch.arange(3)
    assert normalize_outputs(t, one_output, "cpu")[0] is t
    with pytest.raises(OutputError, match="single tensor"):
        normalize_outputs(t, definition, "cpu")


@pytest.mark.parametrize("value", [3, 3.0, True])
def test_normalize_scalar_uses_the_output_dtype(one_output, value):
    (t,) = normalize_outputs(value, one_output, "cpu")
    assert type(t) is torch.Tensor and t.dtype == torch.int32 and t.item() == int(value)


def test_normalize_scalar_for_two_outputs_is_an_error(definition):
    with pytest.raises(OutputError, match="scalar"):
        normalize_outputs(1.0, definition, "cpu")


def test_normalize_tuple_list_and_count(definition):
    y, z = torch.ones(2, 8), torch.zeros(2)
    for result in ((y, z), [y, z]):
        out = normalize_outputs(result, definition, "cpu")
        assert out[0] is y and out[1] is z
    for wrong in ((y,), (y, z, z), []):
        with pytest.raises(OutputError, match="values for 2 outputs"):
            normalize_outputs(wrong, definition, "cpu")


def test_normalize_does_not_cast_tensors(definition):
    y = torch.ones(2, 8, dtype=torch.float64)
    assert normalize_outputs((y, torch.zeros(2)), definition, "cpu")[0].dtype == torch.float64


def test_normalize_python_scalars_inside_a_tuple_become_tensors(definition):
    y, z = normalize_outputs((torch.ones(2, 8), 2), definition, "cpu")
    assert type(z) is torch.Tensor and z.dtype == torch.float32 and z.item() == 2.0


def test_normalize_dict_order_extra_and_missing_keys(definition):
    y, z = torch.ones(2, 8), torch.zeros(2)
    out = normalize_outputs({"z": z, "extra": 1, "y": y}, definition, "cpu")
    assert out[0] is y and out[1] is z
    with pytest.raises(OutputError, match=r"missing outputs \['z'\]"):
        normalize_outputs({"y": y}, definition, "cpu")


@pytest.mark.parametrize("result", [None, "text", {1, 2}])
def test_normalize_unsupported_types(definition, result):
    with pytest.raises(OutputError):
        normalize_outputs(result, definition, "cpu")


def test_normalize_none_inside_a_tuple_is_an_error(definition):
    with pytest.raises(OutputError, match="'z'"):
        normalize_outputs((torch.ones(2, 8), None), definition, "cpu")


# ----------------------------------------------------------------------------------------- smoke rule


def test_smoke_workload_caps_only_var_axes(definition):
    w = Workload.model_validate(
        {
            "uuid": "w",
            "axes": {"n": 4096, "d": 1024, "other": 999},
            "inputs": {"scale": {"type": "scalar", "value": 3}},
            "tolerance": {"max_atol": 0.5},
        }
    )
    s = smoke_workload(definition, w)
    assert s.axes == {"n": SMOKE_CAP, "d": 1024, "other": 999}  # const override and unknown axes untouched
    assert s.uuid == w.uuid and s.inputs == w.inputs and s.tolerance == w.tolerance
    assert w.axes["n"] == 4096  # the original is not modified
    small = Workload(uuid="s", axes={"n": 3})
    assert smoke_workload(definition, small).axes == {"n": 3}
