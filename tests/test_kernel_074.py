"""solutions/074_.../triton_fused against the reference, on small M (Triton interpreter on CPU-only machines).

Every output is poisoned with NaN before the call (every element must be written), the inputs are the
official kind (independent random tensors: each ReLU mask must come from its pre-activation input, each
weight gradient from the post-ReLU input), and M covers 1, odd sizes and more than one row tile. The
reference runs in float64; the interpreter computes the kernel's dots in fp32, so the bound is tight. The
shipped variant runs once through the entry point; the other cases use large tiles (fewer programs, so the
interpreter is faster), fp32 ("ieee") dots and the 2- and 3-launch variants. The `gpu` test checks official workloads with
the official tolerance.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from harness import PROJECT_ROOT
from harness.correctness import compute_error_stats
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes
from harness.schema import Workload
from harness.solution import load_solution
from harness.tasks import load_task

TASK = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
SOLUTION_DIR = PROJECT_ROOT / "solutions" / TASK / "triton_fused"
ABS_BOUND = 1e-4  # fp32 ("ieee") kernel vs float64 reference, outputs of magnitude up to ~50 at M = 131
FP16_BOUND = 0.015  # the shipped fp16-operand variant: the smallest official atol, on every element


@pytest.fixture(scope="module")
def solution():
    return load_solution(SOLUTION_DIR)


@pytest.fixture(scope="module")
def kernel(solution):
    """The solution's module (Config, launch, the counter buffers)."""
    return sys.modules[solution.fn.__module__]


def _case(batch: int, points: int, seed: int):
    task = load_task(TASK)
    workload = Workload(
        uuid=f"m{batch * points}", axes={"batch_size": batch, "point_batch_size": points}, inputs={}
    )
    torch.manual_seed(seed)
    args = gen_inputs(task.definition, workload, device="cpu")
    outs = allocate_outputs(task.definition, resolve_axes(task.definition, workload), device="cpu")
    for out in outs:
        out.fill_(float("nan"))
    return task, args, outs


def _check(task, args, outs, bound: float = ABS_BOUND) -> None:
    refs = task.reference(*[a.double() for a in args])
    for name, out, ref in zip(task.definition.outputs, outs, refs, strict=True):
        assert out.shape == ref.shape, name
        assert torch.isfinite(out).all(), f"{name}: not every element was written"
        err = (out.double() - ref).abs()
        if float(err.max()) > bound:
            idx = torch.unravel_index(err.argmax(), err.shape)
            raise AssertionError(
                f"{name}: max |err| {float(err.max()):.3e} at {tuple(int(i) for i in idx)}: "
                f"got {float(out[idx]):.6g}, expected {float(ref[idx]):.6g}"
            )


def _big_tiles(kernel, launches: int):
    """Few programs per launch (the interpreter runs them one by one)."""
    return kernel.Config(
        p=(64, 256),
        o=(256, 64),
        q=(64, 128, 64),
        r=(256, 256, 64),
        t=(64, 256, 64),
        s=(256, 256, 64),
        precision="ieee",
        launches=launches,
    )


def test_entry_point_default_config(solution, kernel):
    """The shipped variant (fp16 operands) through `run` (DPS, definition order), M = 3."""
    assert solution.spec.precision == "fp16-operands"
    assert kernel.pick_config(3).precision == "fp16"
    task, args, outs = _case(1, 3, seed=1)
    solution.fn(*args, *outs)
    _check(task, args, outs, FP16_BOUND)
    counters = kernel._COUNTERS[torch.device("cpu")]
    assert int(counters.abs().sum()) == 0, "the counters must be left at zero"


@pytest.mark.parametrize(
    ("batch", "points", "launches"),
    [(1, 1, 1), (3, 1, 2), (4, 16, 3), (1, 131, 1)],
    ids=["m1", "m3-2launch", "m64-3launch", "m131"],
)
def test_any_m(kernel, batch, points, launches):
    task, args, outs = _case(batch, points, seed=batch * 1000 + points)
    kernel.launch(args, outs, _big_tiles(kernel, launches))
    _check(task, args, outs)
    assert int(kernel._COUNTERS[torch.device("cpu")].abs().sum()) == 0


def test_masks_come_from_pre_activations(kernel):
    """All pre-activations <= 0: every gradient behind a ReLU is zero, the output layer's is not."""
    task, args, outs = _case(1, 3, seed=7)
    names = list(task.definition.inputs)
    for i, name in enumerate(names):
        if name == "iou_hidden2" or (name.startswith("hyper_hidden2_") and "relu" not in name):
            args[i] = -args[i].abs()
    kernel.launch(args, outs, _big_tiles(kernel, 1))
    _check(task, args, outs)
    by_name = dict(zip(task.definition.outputs, outs, strict=True))
    assert float(by_name["grad_iou_hidden_weight"].abs().max()) == 0.0
    assert float(by_name["grad_hyper_proj_in_weights"].abs().max()) == 0.0
    assert float(by_name["grad_iou_proj_out_weight"].abs().max()) > 0.0


def test_config_rejects_bad_tiles(kernel):
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, q=(48, 64, 32))
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, precision="bf16")


@pytest.mark.gpu
def test_official_workloads_gpu(solution):
    """Every official workload, one fresh round each, official tolerance (TF32 vs the fp32 reference)."""
    task = load_task(TASK)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(200)
    for workload in task.workloads:
        args = gen_inputs(task.definition, workload, device="cuda")
        outs = allocate_outputs(task.definition, resolve_axes(task.definition, workload), device="cuda")
        for out in outs:
            out.fill_(float("nan"))
        refs = task.reference(*args)
        solution.fn(*args, *outs)
        torch.cuda.synchronize()
        for name, out, ref in zip(task.definition.outputs, outs, refs, strict=True):
            stats = compute_error_stats(out, ref, workload.tolerance)
            assert stats.passed, f"{workload.uuid[:8]} {name}: {stats.report()}"
