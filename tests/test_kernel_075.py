"""075 triton_fused against the reference: small shapes in the Triton interpreter (CPU), all workloads on a GPU.

Outputs are poisoned with NaN before every call, so an element the kernel forgets to write fails the check.
The interpreter runs programs one after another, so the persistent mode is checked with one program (its
phase counters then never wait) and the multi-launch mode covers the many-program decompositions.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

from harness.correctness import compute_error_stats
from harness.inputs import gen_inputs
from harness.schema import ToleranceSpec, Workload
from harness.solution import load_solution
from harness.tasks import load_module, load_task

SOLUTION_DIR = (
    Path(__file__).resolve().parent.parent
    / "solutions/075_sam_hq_mask_decoder_two_way_transformer/triton_fused"
)
TOLERANCE = ToleranceSpec(max_atol=0.0016, max_rtol=1e-5)  # the tightest official 075 tolerance
EXACT = dict(prec_q="ieee", prec_s1="ieee", prec_v1="ieee", prec_s2="ieee", prec_v2="ieee")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the interpreter on CPU-only machines (conftest)

kernel = load_module(SOLUTION_DIR / "kernel.py", "_test075_kernel")


@pytest.fixture(scope="module")
def task():
    return load_task("075")


def _inputs(task, B: int, P: int, T: int, S: int, skip: bool, *, random_norms: bool, device: str = DEVICE):
    axes = {"batch_size": B, "point_batch_size": P, "n_query_tokens": T, "n_key_tokens": S}
    workload = Workload(
        uuid="test", axes=axes, inputs={"skip_first_layer_pe": {"type": "scalar", "value": skip}}
    )
    torch.manual_seed(1000 * T + S)
    args = gen_inputs(task.definition, workload, device=device)
    if random_norms:  # the official inputs have weight 1, bias 0: make the LayerNorm parameters count
        for i, name in enumerate(task.definition.inputs):
            if name.startswith("layer_norm"):
                base = 1.0 if name.endswith("_weight") else 0.0
                args[i] = base + 0.5 * torch.randn_like(args[i])
    return args


def _poisoned_outputs(B: int, P: int, T: int, S: int, device: str = DEVICE):
    return [
        torch.full((B, P, T, 256), float("nan"), device=device),
        torch.full((B, P, S, 256), float("nan"), device=device),
    ]


def _check(outs, refs, tolerance: ToleranceSpec, max_abs: float | None = None) -> None:
    for name, out, ref in zip(("output_queries", "output_keys"), outs, refs, strict=True):
        stats = compute_error_stats(out, ref, tolerance)
        assert stats.passed and stats.matched_ratio == 1.0, f"{name}: {stats.report()}"
        if max_abs is not None:
            assert stats.max_absolute_error <= max_abs, f"{name}: {stats.report()}"


def test_entry_point_default_config(task):
    """`run` as the evaluator calls it (persistent kernel, TF32-rounded key-side operands emulated)."""
    solution = load_solution(SOLUTION_DIR)
    B, P, T, S = 1, 2, 5, 37
    args = _inputs(task, B, P, T, S, True, random_norms=True)
    outs = _poisoned_outputs(B, P, T, S)
    solution.fn(*args, *outs)
    _check(outs, task.reference(*args), TOLERANCE)
    counters = sys.modules[solution.fn.__module__]._SYNC.values()  # reset by the last program out
    assert counters and all(int(c.abs().sum()) == 0 for c in counters)


CASES = {
    # id: (B, P, T, S, skip_first_layer_pe, Config overrides)
    "multi-T1-S1": (1, 1, 1, 1, False, dict(mode="multi", hb=512)),
    "multi-chunks-rowblocks": (
        2,
        3,
        3,
        130,
        False,
        dict(mode="multi", grid=27, min_chunk=32, ncb=2, mb=16, hb=1024, ipb=4, nd=4),
    ),  # fmt: skip
    "multi-T16": (2, 1, 16, 100, True, dict(mode="multi", grid=8, hb=512, nd=16)),
    "persistent-ipb2": (1, 3, 4, 70, False, dict(mode="persistent", grid=1, ipb=2, bs2=16, hb=256)),
    "persistent-small-tiles": (
        1,
        1,
        6,
        45,
        True,
        dict(mode="persistent", grid=1, ipb=1, bs1=16, bs2=16, kc=32, hb=256, mb=32),
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", list(CASES))
def test_decompositions_exact(task, case):
    """fp32 everywhere (the interpreter's dots are exact): the algebra must match to rounding noise."""
    B, P, T, S, skip, overrides = CASES[case]
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, **EXACT, **overrides)
    args = _inputs(task, B, P, T, S, skip, random_norms=True)
    outs = _poisoned_outputs(B, P, T, S)
    plan = kernel.launch(args, outs, cfg)
    if case == "multi-chunks-rowblocks":  # the shape is chosen to exercise these paths
        assert plan.n_ch == 3 and plan.NCB == 2 and plan.IPB == 4 and plan.work[5] > 1
    _check(outs, task.reference(*args), TOLERANCE, max_abs=2e-5)


def test_plans_for_official_workloads(task):
    """Chunking on a 132-SM H200: every key token covered once, no more work items than programs."""
    cfg = kernel.DEFAULT_CONFIG
    for w in task.workloads:
        a = w.axes
        NI, T, S = a["batch_size"] * a["point_batch_size"], a["n_query_tokens"], a["n_key_tokens"]
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.CH % max(cfg.bs1, cfg.bs2) == 0
        assert (plan.n_ch - 1) * plan.CH < S <= plan.n_ch * plan.CH
        assert NI * plan.n_ch <= 132 * cfg.waves
        assert 8 * plan.TP >= 16 and plan.TP >= T and plan.RB == 16
        assert plan.DS * plan.ND == 256 and plan.DS <= 64


@pytest.mark.gpu
def test_official_workloads_gpu(task):
    """All 16 official workloads on the GPU with the default (shipped) configuration."""
    solution = load_solution(SOLUTION_DIR)
    torch.manual_seed(200)
    for w in task.workloads:
        args = gen_inputs(task.definition, w, device="cuda")
        a = w.axes
        outs = _poisoned_outputs(
            a["batch_size"], a["point_batch_size"], a["n_query_tokens"], a["n_key_tokens"], "cuda"
        )
        solution.fn(*args, *outs)
        refs = task.reference(*args)
        for name, out, ref in zip(("output_queries", "output_keys"), outs, refs, strict=True):
            stats = compute_error_stats(out, ref, w.tolerance)
            assert stats.passed, f"{w.uuid[:8]} {a} {name}: {stats.report()}"
