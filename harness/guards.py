"""Reward-hack guards of the official driver: integrity of our functions, timing patches, threads, compilation.

Snapshots are taken before the solution is imported (this module is imported by the driver first); each
check raises RewardHackDetected with the official message, which the driver turns into REWARD_HACK.
Lazy (non-Tensor) outputs are caught by harness.runner.check_correctness on round 0.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

import torch

# id of the timing clock before any solution code runs (the official check compares this id)
_ELAPSED_TIME_ID = id(torch.cuda.Event.elapsed_time)

CPP_EXTENSION_MESSAGE = (
    "torch.utils.cpp_extension.load() and load_inline() are not permitted on the GPU server. "
    'Use a C++ language (e.g. "cuda_cpp") in your solution spec to compile on the compile server.'
)

#: The functions that decide what a solution's numbers are; patching any of them is a reward hack.
DRIVER_FUNCTIONS = (
    "time_runnable",
    "compute_error_stats",
    "check_correctness",
    "check_monkey_patch",
    "check_thread_injection",
    "check_eval_integrity",
    "gen_inputs",
    "allocate_outputs",
    "normalize_outputs",
    "make_trace",
    "iteration_spans",
    "window_records",
    "kernel_breakdown",
    "records_from_kineto",
    "windows_from_marks",
    "profile_calls",
    "ShiftingPool",
    "TimingStats",
    "_time_cupti",
    "_time_events",
    "_flush_buffer",
    "_ELAPSED_TIME",
)


class RewardHackDetected(RuntimeError):
    """A solution tampered with the evaluator; the message is the trace's log."""


Snapshot = dict[tuple[str, str], int]


def snapshot_driver(
    namespaces: Mapping[str, Mapping[str, Any] | ModuleType], names: Iterable[str]
) -> Snapshot:
    """id() of each named function present in each namespace (a module or a globals() dict)."""
    snap: Snapshot = {}
    names = tuple(names)
    for label, ns in namespaces.items():
        space = vars(ns) if isinstance(ns, ModuleType) else ns
        for name in names:
            if name in space:
                snap[(label, name)] = id(space[name])
    return snap


def check_eval_integrity(
    snapshot: Snapshot, namespaces: Mapping[str, Mapping[str, Any] | ModuleType]
) -> None:
    """Every snapshotted function is still the same object."""
    for (label, name), expected in snapshot.items():
        ns = namespaces.get(label)
        space = (vars(ns) if isinstance(ns, ModuleType) else ns) if ns is not None else {}
        current = space.get(name)
        if current is None or id(current) != expected:
            raise RewardHackDetected(f"Eval driver integrity violated: '{name}' has been monkey-patched")


def check_monkey_patch() -> None:
    """torch.cuda.Event.elapsed_time is the object it was before the solution was imported."""
    if id(torch.cuda.Event.elapsed_time) != _ELAPSED_TIME_ID:
        raise RewardHackDetected("torch.cuda.Event.elapsed_time has been monkey-patched")


def thread_count() -> int:
    return threading.active_count()


def check_thread_injection(threads_before: int, threads_after: int) -> None:
    """No Python thread started after the round-0 call (JIT threads started by that call are tolerated)."""
    if threads_after > threads_before:
        raise RewardHackDetected(
            f"Thread injection detected: {threads_after} threads after call vs {threads_before} before"
        )


def check_lazy_outputs(outputs: Iterable[Any]) -> None:
    """Every output is exactly torch.Tensor (subclasses, None and other objects are rejected)."""
    for out in outputs:
        if type(out) is not torch.Tensor:
            raise RewardHackDetected(
                f"Lazy evaluation detected: output is {type(out).__name__}, not torch.Tensor"
            )


def _blocked_cpp_extension(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(CPP_EXTENSION_MESSAGE)


def block_cpp_extension() -> Callable[[], None]:
    """Replace cpp_extension.load/load_inline by a raiser (Python solutions); returns the undo function."""
    import torch.utils.cpp_extension as cpp_extension

    saved = (cpp_extension.load, cpp_extension.load_inline)
    cpp_extension.load = _blocked_cpp_extension
    cpp_extension.load_inline = _blocked_cpp_extension

    def restore() -> None:
        cpp_extension.load, cpp_extension.load_inline = saved

    return restore
