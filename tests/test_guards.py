"""harness.guards: each check on its own, then every evil solution of tests/fixtures/evil through the
subprocess driver on the CPU (each caught with REWARD_HACK, or RUNTIME_ERROR for the blocked compile)."""

from __future__ import annotations

import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from harness import guards
from harness.runner import RunOptions, evaluate_isolated
from harness.tasks import load_task

EVIL = Path(__file__).parent / "fixtures" / "evil"
TINY_DEFINITIONS = EVIL / "_task" / "definitions"

# ------------------------------------------------------------------------------------------ the checks


def test_integrity_snapshot_catches_a_replaced_function_in_a_module_or_a_dict():
    def f():
        pass

    module = types.ModuleType("fake_driver")
    module.time_runnable = f
    main_globals = {"gen_inputs": f, "unrelated": 1}
    spaces = {"driver": module, "main": main_globals}
    snap = guards.snapshot_driver(spaces, ["time_runnable", "gen_inputs", "missing"])
    assert set(snap) == {("driver", "time_runnable"), ("main", "gen_inputs")}
    guards.check_eval_integrity(snap, spaces)  # untouched: fine

    main_globals["gen_inputs"] = lambda: None
    with pytest.raises(guards.RewardHackDetected, match="'gen_inputs' has been monkey-patched"):
        guards.check_eval_integrity(snap, spaces)
    main_globals["gen_inputs"] = f
    del module.time_runnable  # deleting counts too
    with pytest.raises(guards.RewardHackDetected, match="'time_runnable'"):
        guards.check_eval_integrity(snap, spaces)


@pytest.mark.parametrize(
    "name",
    [
        "iteration_spans",
        "window_records",
        "profile_calls",
        "kernel_breakdown",
        "_time_cupti",
        "_flush_buffer",
    ],
)
def test_every_step_of_the_cupti_timer_is_guarded(monkeypatch, name):
    """Whatever the span and the call's anatomy go through (the timer looks each step up in harness.timing)
    is in DRIVER_FUNCTIONS: replacing it after the snapshot is caught."""
    import harness.timing

    spaces = {"timing": harness.timing}
    snap = guards.snapshot_driver(spaces, guards.DRIVER_FUNCTIONS)
    monkeypatch.setattr(harness.timing, name, lambda *a, **k: None)
    with pytest.raises(guards.RewardHackDetected, match=repr(name)):
        guards.check_eval_integrity(snap, spaces)


def test_elapsed_time_patch_is_caught(monkeypatch):
    guards.check_monkey_patch()
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    with pytest.raises(guards.RewardHackDetected, match="elapsed_time has been monkey-patched"):
        guards.check_monkey_patch()


def test_thread_injection_compares_counts():
    guards.check_thread_injection(3, 3)
    guards.check_thread_injection(3, 2)
    with pytest.raises(guards.RewardHackDetected, match="4 threads after call vs 3 before"):
        guards.check_thread_injection(3, 4)
    stop = threading.Event()
    before = guards.thread_count()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()
    try:
        with pytest.raises(guards.RewardHackDetected):
            guards.check_thread_injection(before, guards.thread_count())
    finally:
        stop.set()
        worker.join()


def test_outputs_must_be_exactly_tensors():
    class Sub(torch.Tensor):
        pass

    guards.check_lazy_outputs([torch.zeros(2)])
    for bad, name in ((torch.zeros(2).as_subclass(Sub), "Sub"), (None, "NoneType"), (1.0, "float")):
        with pytest.raises(guards.RewardHackDetected, match=f"output is {name}, not torch.Tensor"):
            guards.check_lazy_outputs([torch.zeros(1), bad])


def test_cpp_extension_block_raises_and_restores():
    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension.load, cpp_extension.load_inline
    restore = guards.block_cpp_extension()
    try:
        for fn in (cpp_extension.load, cpp_extension.load_inline):
            with pytest.raises(RuntimeError, match="not permitted"):
                fn(name="x", sources=[])
    finally:
        restore()
    assert (cpp_extension.load, cpp_extension.load_inline) == original


# ------------------------------------------------------------------------------------------ evil solutions

EXPECTED = {
    "patch_driver_at_import": ("REWARD_HACK", "'compute_error_stats' has been monkey-patched"),
    "patch_driver_in_run": ("REWARD_HACK", "'time_runnable' has been monkey-patched"),
    "patch_elapsed_time": ("REWARD_HACK", "torch.cuda.Event.elapsed_time has been monkey-patched"),
    "thread_injection": ("REWARD_HACK", "Thread injection detected"),
    "lazy_output": ("REWARD_HACK", "Lazy evaluation detected: output is LazyTensor"),
    "cpp_extension_load": ("RUNTIME_ERROR", "not permitted"),
}


def test_every_evil_fixture_is_listed():
    assert {p.name for p in EVIL.iterdir() if not p.name.startswith("_")} == set(EXPECTED)


@pytest.fixture(scope="module")
def evil_traces():
    """Each evil solution through `python -m harness.evaluate`, a few at a time."""
    task = load_task("900_tiny_add", TINY_DEFINITIONS)
    options = RunOptions(definitions_dir=TINY_DEFINITIONS, rounds=2, timeout_s=300)

    def one(name: str):
        return evaluate_isolated(task, EVIL / name, task.workloads, options)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(EXPECTED, pool.map(one, EXPECTED), strict=True))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_evil_solution_is_caught(evil_traces, name):
    status, message = EXPECTED[name]
    traces = evil_traces[name]
    assert len(traces) == 2  # both workloads reported
    for trace in traces:
        ev = trace.evaluation
        assert ev.status.value == status, ev.log
        assert message in ev.log
        assert ev.correctness is None and ev.performance is None
