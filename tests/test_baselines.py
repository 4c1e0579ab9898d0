"""The local baselines (torch_reference, torch_compile_tf32) on the CPU."""

from __future__ import annotations

import threading

import pytest
import torch
from torch._inductor import config as inductor_config

from harness.baselines import _compiled_reference, _copy_out, _signature, run_compiled, run_reference
from harness.correctness import compute_error_stats
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
    modes = ("reduce-overhead", "graph")  # on CPU inputs every mode runs the reference eagerly
    for fn in (run_reference, *(lambda name, args, m=m: run_compiled(name, m, args) for m in modes)):
        outputs = allocate_outputs(task.definition, axes, device="cpu")
        fn(task.name, [*inputs, *outputs])
        for got, want in zip(outputs, expected, strict=True):
            assert torch.equal(got, want)
    assert threading.active_count() == threads


def test_outputs_are_copied_in_one_foreach_call(monkeypatch):
    calls = []
    real = torch._foreach_copy_
    monkeypatch.setattr(torch, "_foreach_copy_", lambda dst, src: (calls.append(len(dst)), real(dst, src)))
    outputs = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.float64)]
    _copy_out((torch.arange(3.0), torch.ones(2, 2)), outputs)
    assert calls == [2]  # one call for every output (a loop of copy_ is a launch and its CPU work per output)
    assert torch.equal(outputs[0], torch.arange(3.0)) and torch.equal(
        outputs[1], torch.ones(2, 2, dtype=torch.float64)
    )
    single = [torch.zeros(4)]
    _copy_out(torch.ones(4), single)  # one output: copy_ (one launch either way)
    scalar = [torch.zeros(())]
    _copy_out(2.5, scalar)  # a Python scalar result: copied the plain way
    assert calls == [2] and torch.equal(single[0], torch.ones(4)) and scalar[0].item() == 2.5
    with pytest.raises(ValueError, match="1 results for 2 outputs"):
        _copy_out(torch.ones(3), outputs)


def test_graph_signature_and_modes():
    a, b = torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64)
    assert _signature([a, 1.5, True]) == _signature([torch.ones(2, 3), 1.5, True])  # values of tensors: no
    assert _signature([a, 1.5]) != _signature([b, 1.5])  # dtype
    assert _signature([a, 1.5]) != _signature([torch.zeros(3, 2), 1.5])  # shape
    assert _signature([a, True]) != _signature([a, False])  # a scalar input is baked into the graph
    with pytest.raises(ValueError, match="mode: expected"):
        run_compiled(load_task("074").name, "max-autotune", [])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_graph_mode_matches_the_reference_on_fresh_inputs_and_new_shapes():
    # the captured graph must see each call's fresh inputs (copied into its static buffers), and a new
    # signature must capture a new graph; both checked with the task's own tolerance
    for name, axes_list in (
        ("074", [{"batch_size": 1, "point_batch_size": 3}, {"batch_size": 2, "point_batch_size": 5}]),
        ("075", [{"batch_size": 1, "point_batch_size": 2, "n_query_tokens": 5, "n_key_tokens": 100}]),
    ):
        task = load_task(name)
        for axes in axes_list:
            workload = Workload(uuid="x", axes=axes, inputs={})
            for seed in (0, 1):
                torch.manual_seed(seed)
                inputs = gen_inputs(task.definition, workload, device="cuda")
                expected = task.reference(*inputs)
                outputs = allocate_outputs(
                    task.definition, resolve_axes(task.definition, workload), device="cuda"
                )
                run_compiled(task.name, "graph", [*inputs, *outputs])
                for got, want in zip(outputs, expected, strict=True):
                    stats = compute_error_stats(got, want, task.workloads[0].tolerance)
                    assert stats.passed, stats.report()
