"""The local baselines (torch_reference, torch_compile_tf32) on the CPU."""

from __future__ import annotations

import threading

import torch
from torch._inductor import config as inductor_config

from harness.baselines import _compiled_reference, run_compiled, run_reference
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes
from harness.schema import Workload
from harness.tasks import load_task


def test_the_compiled_baseline_compiles_serially(monkeypatch):
    # Inductor's compile pool starts threads lazily; on the H200 one appeared after a round-0 call and the
    # thread-injection guard failed the baseline. The baseline must not start a pool.
    monkeypatch.setattr(inductor_config, "compile_threads", 8)
    monkeypatch.setattr("harness.baselines._COMPILED", {})
    _compiled_reference(load_task("074").name, "default")
    assert inductor_config.compile_threads == 1


def test_baselines_on_cpu_inputs_match_the_reference():
    task = load_task("074")
    workload = Workload(uuid="x", axes={"batch_size": 2, "point_batch_size": 3}, inputs={})
    torch.manual_seed(0)
    inputs = gen_inputs(task.definition, workload, device="cpu")
    axes = resolve_axes(task.definition, workload)
    expected = task.reference(*inputs)
    threads = threading.active_count()
    for fn in (run_reference, lambda name, args: run_compiled(name, "reduce-overhead", args)):
        outputs = allocate_outputs(task.definition, axes, device="cpu")
        fn(task.name, [*inputs, *outputs])
        for got, want in zip(outputs, expected, strict=True):
            assert torch.equal(got, want)
    assert threading.active_count() == threads
