"""Local baselines built on a task's reference: eager (`torch_reference`) and torch.compile + TF32
(`torch_compile_tf32`, our stand-in for the leaderboard's scoring baseline T_b).

Their solution folders hold only the explicit entry signature and call `run_reference` / `run_compiled` with
`list(locals().values())` (inputs then outputs, in definition order). They import this package, so they are
local baselines, not leaderboard submissions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from harness.tasks import load_task

_COMPILED: dict[tuple[str, str], Callable] = {}


def _split(task_name: str, arguments: Sequence[Any]) -> tuple[Sequence[Any], Sequence[torch.Tensor]]:
    n_inputs = len(load_task(task_name).definition.inputs)
    return arguments[:n_inputs], arguments[n_inputs:]


def _copy_out(results: Any, outputs: Sequence[torch.Tensor]) -> None:
    """The results into the DPS outputs: several tensors in one `_foreach_copy_` (one launch on the GPU), a single
    one by `copy_` (a memcpy). Copy by copy, each `copy_` is a launch with its CPU work between: on the H200
    (session 16, the CUPTI timer) 074's 14 outputs took ~17 us apiece, ~230 us inside the baseline's span of
    552 us at #1."""
    results = results if isinstance(results, tuple | list) else (results,)
    if len(results) != len(outputs):
        raise ValueError(f"{len(results)} results for {len(outputs)} outputs")
    if len(results) > 1 and all(isinstance(src, torch.Tensor) for src in results):
        torch._foreach_copy_(list(outputs), list(results))
        return
    for dst, src in zip(outputs, results, strict=True):
        dst.copy_(src)


def run_reference(task_name: str, arguments: Sequence[Any]) -> None:
    """The reference in destination-passing style."""
    inputs, outputs = _split(task_name, arguments)
    _copy_out(load_task(task_name).reference(*inputs), outputs)


def _compiled_reference(task_name: str, mode: str) -> Callable:
    key = (task_name, mode)
    if key not in _COMPILED:
        config = torch._dynamo.config  # one process evaluates all 16 shapes: leave room for recompiles
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, knob):
                setattr(config, knob, max(getattr(config, knob), 64))
        # Inductor's parallel compile starts pool threads lazily, sometimes after a workload's round-0 call:
        # the official thread-injection check then fails the baseline (seen on the H200). Compile serially.
        from torch._inductor import config as inductor_config

        inductor_config.compile_threads = 1
        _COMPILED[key] = torch.compile(load_task(task_name).reference, mode=mode)
    return _COMPILED[key]


def _signature(inputs: Sequence[Any]) -> tuple:
    """What a captured graph is specific to: each tensor input's shape, dtype and device, each other value."""
    return tuple(
        (tuple(x.shape), x.dtype, x.device) if isinstance(x, torch.Tensor) else ("value", x) for x in inputs
    )


class _GraphedReference:
    """Mode "graph": torch.compile of the reference (Inductor's kernels, mode "default"), captured into one CUDA
    graph per input signature with static input buffers. A call copies its inputs in (one `_foreach_copy_`),
    replays the graph and copies the results out: three GPU steps, with none of cudagraph trees' per-call CPU
    work between the input copy and the replay (65-190 us on the H200 for 074 and 075, session 16, the GPU idle
    meanwhile). Only the last signature's graph is kept (the harness runs the workloads one after another).
    Measured on the H200 (session 17, 16 workloads each): no faster than "reduce-overhead" (074 +4.4 %, 075
    -3.1 %, within the noise); the GPU still idles 2-206 us before the replay (the graph launch's CPU work), so
    the shipped baselines keep "reduce-overhead"."""

    def __init__(self, task_name: str) -> None:
        self.task_name = task_name
        self.key: tuple | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[Any] = []
        self.static_results: Any = None

    def _capture(self, inputs: Sequence[Any]) -> None:
        self.graph = self.static_results = None  # the previous signature's graph and pool go first
        fn = _compiled_reference(self.task_name, "default")
        self.static_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # compile and warm up off the capture
            for _ in range(2):
                fn(*self.static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.static_results = fn(*self.static_inputs)
        self.graph = graph

    def __call__(self, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> None:
        key = _signature(inputs)
        if key != self.key or self.graph is None:
            self._capture(inputs)
            self.key = key
        tensors = [
            (dst, src) for dst, src in zip(self.static_inputs, inputs, strict=True) if torch.is_tensor(src)
        ]
        torch._foreach_copy_([d for d, _ in tensors], [s for _, s in tensors])
        self.graph.replay()
        _copy_out(self.static_results, outputs)


_GRAPHED: dict[str, _GraphedReference] = {}


def run_compiled(task_name: str, mode: str, arguments: Sequence[Any]) -> None:
    """torch.compile of the reference with TF32 matmuls (restored after the call); eager on CPU inputs.

    mode "reduce-overhead" uses CUDA graphs (cudagraph trees copy each call's fresh inputs into the graph's
    static buffers); "default" does not; "graph" captures the compiled reference itself (`_GraphedReference`;
    measured in session 17 no faster than "reduce-overhead", so no shipped baseline uses it).
    """
    if mode not in ("default", "reduce-overhead", "graph"):
        raise ValueError(f"mode: expected 'default', 'reduce-overhead' or 'graph', got {mode!r}")
    inputs, outputs = _split(task_name, arguments)
    if not outputs[0].is_cuda:
        _copy_out(load_task(task_name).reference(*inputs), outputs)
        return
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        if mode == "graph":
            if task_name not in _GRAPHED:  # (not setdefault: that would build an object on every timed call)
                _GRAPHED[task_name] = _GraphedReference(task_name)
            _GRAPHED[task_name](inputs, outputs)
            return
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # the previous call's graph outputs are copied out
        _copy_out(_compiled_reference(task_name, mode)(*inputs), outputs)
    finally:
        torch.set_float32_matmul_precision(previous)
