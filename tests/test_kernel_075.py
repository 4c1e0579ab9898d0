"""075 triton_fused against the reference: small shapes in the Triton interpreter (CPU), all workloads on a GPU.

Outputs are poisoned with NaN before every call, so an element the kernel forgets to write fails the check.
The interpreter runs programs one after another, so the persistent mode is checked with one program (its
phase counters then never wait; that program also does the six dry runs) and the multi-launch mode covers
the many-program decompositions. With `tf32_rn=False` the interpreter's dots are exact fp32, so those cases
check the algebra to rounding noise; the default (operands rounded to TF32, 3xTF32 splits) is checked against
the official tolerance.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

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
# no operand rounding (the fp16 paths off, TF32 rounding off): the interpreter's dots are then exact fp32
EXACT = dict(tf32_rn=False, p3_fp16=False, p7_tl_fp16=0, p7_tl_fp16_short=())
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


def _check(
    outs, refs, tolerance: ToleranceSpec, max_abs: float | None = None, all_matched: bool = True
) -> None:
    """Both outputs pass `tolerance` (and, with all_matched, every element is within it)."""
    for name, out, ref in zip(("output_queries", "output_keys"), outs, refs, strict=True):
        stats = compute_error_stats(out, ref, tolerance)
        assert stats.passed, f"{name}: {stats.report()}"
        assert stats.matched_ratio == 1.0 or not all_matched, f"{name}: {stats.report()}"
        if max_abs is not None:
            assert stats.max_absolute_error <= max_abs, f"{name}: {stats.report()}"


def _state_is_clean(module) -> bool:
    """Counters and query-side accumulators are zero between calls (each call restores them)."""
    bufs = [*module._SYNC.values(), *module._ACCS.values()]
    return bool(bufs) and all(float(b.abs().sum()) == 0 for b in bufs)


def test_poisoned_workspaces_fill_what_torch_empty_allocates(poisoned_workspaces):
    """The fixture (conftest.py) the kernel tests run under: what torch.empty / empty_like hand out is poisoned,
    what torch.zeros hands out is not."""
    assert torch.empty(5).isnan().all() and torch.empty(2, 3, dtype=torch.float16).isnan().all()
    assert torch.empty_like(torch.zeros(3)).isnan().all()
    assert (torch.empty(4, dtype=torch.int32) == -1).all()
    assert (torch.zeros(3) == 0).all()


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("random_norms", [False, True])
def test_entry_point_default_config(task, random_norms):
    """`run` as the evaluator calls it (persistent kernel, default precision emulated), called twice.

    The default query side is one TF32 product (q_terms 1): on the official kind of inputs (LayerNorm weight 1,
    bias 0) every element is within the tolerance; with random LayerNorm parameters a few elements in a
    thousand exceed it (measured 0.03-0.3 %, worst 1.6 atol), which the official rule (99 % matched) accepts.
    """
    solution = load_solution(SOLUTION_DIR)
    B, P, T, S = 1, 2, 5, 37
    args = _inputs(task, B, P, T, S, True, random_norms=random_norms)
    refs = task.reference(*args)
    for _ in range(2):  # the second call relies on the first one having restored its state
        outs = _poisoned_outputs(B, P, T, S)
        solution.fn(*args, *outs)
        _check(outs, refs, TOLERANCE, max_abs=2 * TOLERANCE.max_atol, all_matched=not random_norms)
        assert _state_is_clean(sys.modules[solution.fn.__module__])


@pytest.mark.parametrize("q3_phases", [(), (1, 2, 4, 5), (1, 2, 4, 5, 6)])
def test_query_side_terms_per_phase(task, q3_phases):
    """q3_phases puts phases back on 3xTF32: phases 1, 2, 4, 5 (all that output_queries depends on) bring
    output_queries within the tolerance with random LayerNorm parameters, phase 6 output_keys as well."""
    B, P, T, S = 2, 1, 4, 40
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, grid=1, hb=512, q3_phases=q3_phases)
    args = _inputs(task, B, P, T, S, False, random_norms=True)
    outs = _poisoned_outputs(B, P, T, S)
    kernel.launch(args, outs, cfg)
    refs = task.reference(*args)
    q, k = (compute_error_stats(o, r, TOLERANCE) for o, r in zip(outs, refs, strict=True))
    assert q.passed and k.passed
    if q3_phases:
        assert q.matched_ratio == 1.0, q.report()
    else:  # one TF32 product everywhere: measurably less exact on these inputs (the reason for the knob)
        assert q.matched_ratio < 1.0 or k.matched_ratio < 1.0
    if 6 in q3_phases:
        assert k.matched_ratio == 1.0, k.report()


CASES = {
    # id: (B, P, T, S, skip_first_layer_pe, Config overrides)
    "multi-T1-S1": (1, 1, 1, 1, False, dict(mode="multi", hb=512)),
    "multi-chunks-P5": (
        1,
        5,
        4,
        130,
        False,
        dict(
            mode="multi",
            grid=40,
            min_chunk=16,
            ncb=2,
            nd=2,
            hb=1024,
            kc=32,
            csplit1=2,
            tpk_min=8,
            tpk4_chunk=16,
        ),
    ),  # fmt: skip
    "multi-T16-halves": (
        2,
        1,
        16,
        100,
        True,
        dict(mode="multi", grid=8, hb=512, nd=16, q_terms=3, csplit=1, csplit1=1),
    ),  # whole-row column pieces in phases 1, 2, 6; the 3xTF32 query side
    "persistent-T4-v3-warm": (
        1,
        3,
        4,
        70,
        False,
        dict(grid=1, hb=256, v_terms=3, kc=128, nc=128, warm=True, tpk_min=8, tpk4_chunk=0),
    ),  # T <= 4 with phase 3 on 64 rows although the chunks are short (tpk_min 8, tpk4_chunk 0)
    "persistent-T6-skip": (
        2,
        1,
        6,
        45,
        True,
        dict(grid=1, hb=256, bs1=32, bs2=64, nc=32, reload_k=1, csplit=2),
    ),
    # tune.py's compact-code variant (column and contraction loops of 64 / 16, fewer, longer chunks)
    # phases 1a and 6a with other contraction splits (the default is 4 and 4), and without them
    "multi-ksplits-2-8": (2, 2, 3, 50, True, dict(mode="multi", grid=40, hb=512, ksplit1=2, ksplit6=8)),
    "persistent-no-ksplit": (1, 2, 5, 40, False, dict(grid=1, hb=512, ksplit1=1, ksplit6=1)),
    # phase 4's chunk partials split over more work items (global max and sum), in both modes, with the online
    # merge (p4_gfirst 0, the default until session 14)
    "multi-p4-split": (
        1,
        1,
        5,
        300,
        False,
        dict(mode="multi", grid=40, hb=512, p4_chunks=3, nd_fit=True, p4_gfirst=0),
    ),  # fmt: skip
    "persistent-p4-split": (
        2,
        1,
        4,
        200,
        True,
        dict(grid=1, waves=40.0, hb=512, p4_chunks=2, nd=2, nd_fit=False, p4_gfirst=0),
    ),  # fmt: skip
    # ... with the global max and sum read first (p4_gfirst): the split items only, every item (the default), and
    # every item of a plan without split items
    "persistent-p4-split-gfirst": (
        2,
        1,
        4,
        200,
        True,
        dict(grid=1, waves=40.0, hb=512, p4_chunks=2, nd=2, nd_fit=False, p4_gfirst=1),
    ),  # fmt: skip
    "multi-p4-split-gfirst-all": (
        1,
        1,
        5,
        300,
        False,
        dict(mode="multi", grid=40, hb=512, p4_chunks=3, nd_fit=True, p4_gfirst=2),
    ),  # fmt: skip
    # ... and the global pass over two [32, 16] blocks (35 chunks)
    "multi-p4-split-two-blocks": (
        1,
        1,
        4,
        1100,
        False,
        dict(mode="multi", grid=40, hb=512, p4_chunks=16, nd_fit=True),
    ),  # fmt: skip
    # phase 3's online softmax over chunks of several tiles, the running sum as written (not transposed) and
    # in a 3-stage pipeline of 16-token tiles
    "multi-tiles-plain": (
        1,
        1,
        6,
        300,
        False,
        dict(mode="multi", grid=40, hb=512, min_chunk=128, acc_t=False, bs1=16, stages1=3),
    ),  # fmt: skip
    "multi-gfirst-all-whole": (
        2,
        1,
        6,
        150,
        False,
        dict(mode="multi", grid=40, hb=512, min_chunk=16, p4_chunks=0, p4_gfirst=2),
    ),  # fmt: skip
    # 4 key-side rows per head (T <= 4): a key pass on 32 rows, both modes, with and without padding rows, on
    # one side or both
    "persistent-tpk4-T4": (1, 2, 4, 70, False, dict(grid=1, hb=512, tpk_min=4, tpk7_min=4, bs2=64)),
    "multi-tpk4-T3": (
        2,
        1,
        3,
        100,
        True,
        dict(mode="multi", grid=40, hb=512, tpk_min=4, tpk7_min=8, min_chunk=16, ncb=2),
    ),
    "persistent-tpk7-T2": (1, 3, 2, 90, False, dict(grid=1, hb=512)),
    "multi-T5-compact": (1, 1, 5, 80, False, dict(mode="multi", grid=40, hb=512, nc=64, kc=16, min_chunk=64)),
    # phase 3's running sum kept transposed (k^T as the register operand; the default since session 7), with
    # TPK 8 and 4, both modes; and the previous untransposed sum on 16-token tiles (tune.py's B6)
    "multi-acc-t": (1, 2, 5, 100, False, dict(mode="multi", grid=40, hb=512, min_chunk=16, acc_t=True)),
    "persistent-acc-t-tpk4": (1, 2, 3, 70, True, dict(grid=1, hb=512, tpk_min=4, bs1=32, acc_t=True)),
    "multi-acc-plain": (
        1,
        2,
        5,
        100,
        False,
        dict(mode="multi", grid=40, hb=512, acc_t=False, bs1=16, stages1=3),
    ),
    # phase 7 as its own launch after the persistent one (split7), its chunks in parts: one chunk of 5 tiles
    # in 3 parts (2 + 2 + 1 tiles, 4 warps), chunks of one tile with TPK7 8 in 2 parts (one empty), and a
    # chunk of 130 tokens in 64-token phase-7 tiles (64 + 64 + 2: a partial tile) in 2 parts, 2 stages
    "persistent-split7-parts3": (
        1,
        2,
        4,
        130,
        False,
        dict(
            grid=1, hb=512, bs2=32, split7=1, split7_tiles4=2, p7_launch_long4=(3, 4, 0, 32, 1), exit6=False
        ),
    ),  # fmt: skip
    "persistent-split7-T6": (
        2,
        1,
        6,
        45,
        True,
        dict(grid=1, waves=2.0, hb=512, bs2=64, split7=1, p7_launch_tpk8=(2, 8, 0, 64, 1), exit6=False),
    ),  # fmt: skip
    # the persistent launch leaving after its phase-6 items (exit6, the default since session 60: no phase-6 count or
    # barrier), T 5..8 and T <= 4; the two cases above keep the phase-6 barrier (exit6 off)
    "persistent-split7-exit6-T6": (
        2,
        1,
        6,
        45,
        True,
        dict(grid=1, waves=2.0, hb=512, bs2=64, split7=1, p7_launch_tpk8=(2, 8, 0, 64, 1), exit6=True),
    ),  # fmt: skip
    "persistent-split7-exit6": (
        1,
        2,
        4,
        130,
        False,
        dict(grid=1, hb=512, bs2=32, split7=1, split7_tiles4=2, p7_launch_long4=(3, 4, 0, 32, 1), exit6=True),
    ),  # fmt: skip
    "persistent-split7-tile64": (
        1,
        1,
        3,
        130,
        False,
        dict(grid=1, hb=512, bs2=32, split7=1, split7_tiles4=2, p7_launch_long4=(2, 4, 0, 64, 2)),
    ),  # fmt: skip
    # cp.async pipelines (num_stages; the interpreter runs the loops plainly), phase 7 re-reading its key tile,
    # phases 1, 2 and 6 split by output columns
    "multi-P2-stages": (
        1,
        2,
        5,
        70,
        False,
        dict(
            mode="multi",
            grid=40,
            hb=512,
            min_chunk=16,
            ncb=2,
            stages1=3,
            qstages=4,
            cstages=2,
            reload_k=2,
            csplit=4,
            csplit1=4,
        ),
    ),  # fmt: skip
    # phase 5 with its weights loaded before the barrier (pre5): persistent (the first item's weights before
    # the barrier, the other items' in the loop) and multi (one item per program)
    "persistent-pre5": (1, 2, 5, 70, False, dict(grid=1, hb=64, hb_fit=False, pre5=64)),
    "multi-pre5": (2, 1, 3, 40, True, dict(mode="multi", grid=40, hb=32, hb_fit=False, pre5=32)),
    # the same with 16-wide MLP blocks (what hb_spread plans for one row tile): 128 items on one program
    "persistent-pre5-hb16": (1, 2, 5, 70, False, dict(grid=1, hb=16, hb_fit=False, pre5=32)),
    # phases 5 and 6 shifted to the programs after the previous phase's (shift56; planned for 132 programs, so
    # that the shifts are not 0 and their code runs on the one interpreted program)
    "persistent-shift56": (1, 2, 5, 70, False, dict(grid=1, plan_programs=132, shift56=True)),
    "persistent-shift256": (1, 1, 4, 70, True, dict(grid=1, plan_programs=132, shift2=True, shift56=True)),
    # phase 2 with its PE rows and weights loaded before the barrier (pre2, the default), 2 and 4 column parts,
    # and without (the kc-piece loop, with 32-wide column pieces too)
    "persistent-pre2": (1, 3, 6, 40, False, dict(grid=1, hb=512, csplit=2, pre2=True)),
    "multi-pre2": (2, 1, 5, 40, True, dict(mode="multi", grid=40, hb=512, pre2=True)),
    "persistent-no-pre2": (1, 3, 6, 40, True, dict(grid=1, hb=512, csplit=2, pre2=False)),
    "multi-no-pre2-nc32": (2, 1, 5, 40, False, dict(mode="multi", grid=40, hb=512, nc=32, pre2=False)),
    # phase 6 with its weights loaded before the barrier (the PE rows after it), no phase 6a (pre6): persistent
    # with two row tiles on one program (the first item's weights before the barrier, the others' in the loop;
    # ksplit6 8 is overridden), 2 column parts; multi (one item per program), 4 column parts, T = 3
    "persistent-pre6": (3, 2, 5, 40, False, dict(grid=1, hb=512, csplit=2, ksplit6=8, pre6=True)),
    "multi-pre6": (2, 1, 3, 40, True, dict(mode="multi", grid=40, hb=512, pre6=True)),
}


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("case", list(CASES))
def test_decompositions_exact(task, case):
    """Exact fp32 dots (the interpreter without operand rounding): the algebra must match to rounding noise."""
    B, P, T, S, skip, overrides = CASES[case]
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, **EXACT, **overrides)
    args = _inputs(task, B, P, T, S, skip, random_norms=True)
    outs = _poisoned_outputs(B, P, T, S)
    plan = kernel.launch(args, outs, cfg)
    if case == "multi-chunks-P5":  # the shape is chosen to exercise these paths
        assert plan.n_ch > plan.NCB > 1 and plan.NG > 1 and plan.NRT > 1 and plan.S % 32
    if case == "multi-T5-compact":
        assert plan.n_ch == 2 and plan.CH == 64
    if "gfirst" in case:  # split parts where the case says so, several combine steps per item otherwise
        assert (plan.NSP4 > 1) == ("split" in case) and plan.n_ch > plan.NCB
    if case == "multi-p4-split-two-blocks":
        assert plan.NSP4 > 1 and plan.n_ch > 32
    if case == "multi-tiles-plain":  # several tiles per chunk: the running max moves between them
        assert plan.CH >= 4 * overrides.get("bs1", kernel.DEFAULT_CONFIG.bs1)
    if case == "multi-T16-halves":
        assert plan.NHALF == 2 and plan.IPB == 1
    tpk = {
        k: overrides.get(k, getattr(kernel.DEFAULT_CONFIG, k)) for k in ("tpk_min", "tpk7_min", "tpk4_chunk")
    }
    short = T <= 4 and plan.CH <= tpk["tpk4_chunk"]  # phase 3 on 32 rows for short chunks
    assert plan.TPK == (4 if short else max(tpk["tpk_min"], 1 << (T - 1).bit_length()))
    if case == "multi-ksplits-2-8":  # the default rule takes TPK 4 here
        assert plan.CH == 32 and plan.TPK == 4
    if case in ("multi-chunks-P5", "persistent-T4-v3-warm"):  # T = 4 on 64 rows: what long chunks run
        assert plan.TPK == 8
    assert plan.TPK7 == max(tpk["tpk7_min"], 1 << (T - 1).bit_length())
    if case == "multi-tpk4-T3":
        assert plan.TPK == 4 and plan.TPK7 == 8 and plan.work[3] == plan.NI * plan.n_ch
    if "split7" in case:  # phase 7 ran as its own launch, P7PARTS work items per chunk
        launch7 = overrides.get(
            "p7_launch_long4", overrides.get("p7_launch_tpk8", overrides.get("p7_launch"))
        )
        assert (plan.P7PARTS, plan.P7WARPS, plan.P7MAXNREG, plan.P7BS, plan.P7STAGES) == launch7
        assert plan.work[7] == plan.NI * plan.n_ch * plan.P7PARTS
        assert len(kernel.last_kernels) == 2  # the persistent launch and phase 7's
        tiles = {"parts3": 5, "T6": 1, "tile64": 3, "exit6": 5, "exit6-T6": 1}[
            case.removeprefix("persistent-split7-")
        ]
        assert -(-min(plan.CH, S) // plan.P7BS) == tiles
    if case.endswith("pre5"):  # the case runs the preloaded phase 5
        assert plan.HB <= overrides["pre5"]
    if case.endswith("shift56"):
        assert plan.SH5 == plan.work[4] and plan.SH6 == plan.work[4] + plan.work[5]
    if case.endswith("shift256"):
        assert plan.SH2 == plan.work[1] and plan.SH5 > 0 and plan.SH6 > 0
    if case.endswith("pre5-hb16"):
        assert plan.HB == 16 and plan.work[5] == 2048 // 16
    if case.endswith("pre6"):  # the preloaded phase 6 replaces phase 6a; several row tiles where persistent
        assert plan.KP6 == 1 and 9 not in plan.work and 9 not in plan.phases
        assert plan.NRT > 1 or case.startswith("multi")
    if case.endswith("p4-split"):
        assert plan.NSP4 > 1 and plan.work[4] == plan.NRT * 8 * plan.ND * plan.NSP4
    _check(outs, task.reference(*args), TOLERANCE, max_abs=2e-5)
    assert _state_is_clean(kernel)


P3_FP16_CASES = {
    # id: (B, P, T, S, Config overrides): one program; several chunks and 16-token tiles per chunk (the running
    # max moves between tiles); the running sum as written (not transposed); T > 8 (two 64-row halves)
    "persistent": (1, 2, 5, 70, dict(grid=1, hb=512)),
    "multi-tiles": (1, 2, 6, 300, dict(mode="multi", grid=4, hb=512, bs1=16, min_chunk=64)),
    "multi-plain": (2, 1, 3, 90, dict(mode="multi", grid=40, hb=512, acc_t=False)),
    "multi-T11": (1, 1, 11, 50, dict(mode="multi", grid=40, hb=512)),
}


def _fp16_and_tf32(task, case: tuple, field: str, on=True, off=False):
    """Run case (B, P, T, S, Config overrides) with the Config field `field` on and off (values `on`, `off`), each
    checked against the reference at the official tolerance with every element matched: (the plan with it on,
    fp16 outputs, TF32 ones)."""
    B, P, T, S, overrides = case
    args = _inputs(task, B, P, T, S, False, random_norms=False)
    refs = task.reference(*args)
    results = {}
    for value in (on, off):
        cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, **{field: value}, **overrides)
        outs = _poisoned_outputs(B, P, T, S)
        plan = kernel.launch(args, outs, cfg)
        _check(outs, refs, TOLERANCE)
        results[value] = (plan, outs)
    return results[on][0], results[on][1], results[off][1]


@pytest.mark.parametrize("case", list(P3_FP16_CASES))
def test_phase3_fp16_operands(task, case):
    """Phase 3's fp16 products (the default, `p3_fp16`) against the reference at the official tolerance with
    every element matched, and against the same call with TF32 operands: close (the same 10-bit rounding) but
    not bit for bit the same, so the fp16 path is what ran."""
    assert kernel.DEFAULT_CONFIG.p3_fp16
    plan, (q16, k16), (q32, k32) = _fp16_and_tf32(task, P3_FP16_CASES[case], "p3_fp16")
    if case == "multi-tiles":
        assert plan.CH >= 4 * 16 and plan.n_ch > 1
    assert not torch.equal(q16, q32)  # output_queries depends on phase 3 (t2i), output_keys through it too
    # within one atol of each other: CI's CPU measured up to 0.61 atol on output_keys (multi-tiles), so half an
    # atol is too tight a bound for BLAS that differs between machines
    assert float((q16 - q32).abs().max()) < TOLERANCE.max_atol
    assert float((k16 - k32).abs().max()) < TOLERANCE.max_atol
    assert _state_is_clean(kernel)


P7_FP16_CASES = {
    # id: (B, P, T, S, Config overrides): phase 7's own launch (split7, what the CPU path takes) with TPK7 4; in
    # three parts; T 5..8 (TPK7 8); T > 8 (two 64-row halves re-read per tile); a 128-token tile
    "T3": (1, 2, 3, 70, dict(grid=1, hb=512)),
    "T4-parts3": (1, 2, 4, 130, dict(grid=1, hb=512, p7_launch_fp16=(3, 4, 0, 64, 1))),
    "T6": (2, 1, 6, 90, dict(grid=1, hb=512)),
    "T11": (1, 1, 11, 50, dict(grid=1, hb=512)),
    "T8-tile128": (1, 1, 8, 150, dict(grid=1, hb=512, p7_launch_fp16=(1, 4, 0, 128, 1))),
}


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("case", list(P7_FP16_CASES))
def test_phase7_tl_fp16_operands(task, case):
    """The tl phase 7 with fp16 operands (`p7_tl_fp16`: chunks of at least that many tokens) against the
    reference at the official tolerance with every element matched, and against the same call with its TF32
    products: output_keys close (within one atol) but not bit for bit the same, output_queries (which phase 7
    does not touch) identical; the launch is `p7_launch_fp16`."""
    *shape, S, overrides = P7_FP16_CASES[case]
    off = {**overrides, "p7_tl_fp16_short": ()}  # with p7_tl_fp16 0: the TF32 launch, not the short one
    results = _fp16_and_tf32(task, (*shape, S, off), "p7_tl_fp16", min(S, 64), 0)
    _check_fp16_phase7(results, overrides.get("p7_launch_fp16", kernel.DEFAULT_CONFIG.p7_launch_fp16))


def _check_fp16_phase7(results, launch) -> None:
    """An fp16 phase-7 launch (`launch`) against the same call with TF32 products: output_queries identical,
    output_keys within one atol but not the same."""
    plan, (q16, k16), (q32, k32) = results
    assert plan.P7F16
    assert (plan.P7PARTS, plan.P7WARPS, plan.P7MAXNREG, plan.P7BS, plan.P7STAGES) == launch
    assert torch.equal(q16, q32)
    assert not torch.equal(k16, k32)
    assert float((k16 - k32).abs().max()) < TOLERANCE.max_atol
    assert _state_is_clean(kernel)


P7_FP16_SHORT_CASES = {
    # id: (B, P, T, S, Config overrides): `p7_tl_fp16_short` for every TPK7 and p7_tl_fp16 0, so every tl phase-7
    # launch takes `p7_launch_short` (fp16 products, 32-token tiles, the scores transposed): TPK7 4 (32 rows); T
    # 5..8 (64 rows, the default's case); T > 8 (two 64-row halves); TPK7 4 with the launch in two parts of 4 warps
    "T3": (1, 2, 3, 70, dict(grid=1, hb=512, p7_tl_fp16=0)),
    "T6": (2, 1, 6, 90, dict(grid=1, hb=512, p7_tl_fp16=0)),
    "T11": (1, 1, 11, 50, dict(grid=1, hb=512, p7_tl_fp16=0)),
    "T4-parts2": (1, 1, 4, 300, dict(grid=1, hb=512, p7_tl_fp16=0, p7_launch_short=(2, 4, 0, 32, 1))),
}


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("case", list(P7_FP16_SHORT_CASES))
def test_phase7_tl_fp16_short_tiles(task, case):
    """`p7_tl_fp16_short`: 32-token tiles with fp16 products (scores transposed) against the reference at the
    official tolerance with every element matched, and against the same call without it (the TF32 launch):
    output_keys close but not the same, output_queries identical; the launch is `p7_launch_short`."""
    overrides = P7_FP16_SHORT_CASES[case][4]
    results = _fp16_and_tf32(task, P7_FP16_SHORT_CASES[case], "p7_tl_fp16_short", (4, 8, 16), ())
    _check_fp16_phase7(results, overrides.get("p7_launch_short", kernel.DEFAULT_CONFIG.p7_launch_short))


def test_phase7_tl_fp16_below_threshold(task):
    """Chunks shorter than `p7_tl_fp16` keep the TF32 launch: the same outputs bit for bit as with it off."""
    B, P, T, S = 1, 2, 5, 70
    plan, (q16, k16), (q32, k32) = _fp16_and_tf32(
        task, (B, P, T, S, dict(grid=1, hb=512, p7_tl_fp16_short=())), "p7_tl_fp16", S + 1, 0
    )
    assert not plan.P7F16
    assert (plan.P7PARTS, plan.P7WARPS, plan.P7MAXNREG, plan.P7BS, plan.P7STAGES) == (
        kernel.DEFAULT_CONFIG.p7_launch_tpk8
    )
    assert torch.equal(q16, q32) and torch.equal(k16, k32)


KPROJ_ODD = dict(mode="multi", grid=132, hb=512, kproj_bs=32, kproj_kc=32, kproj_stages=2)
KPROJ_P4SPLIT = dict(grid=1, plan_programs=132, hb=512, min_chunk=64, kproj_p4_chunks=2)
KPROJ_CASES = {
    # id: (B, P, T, S, Config overrides): phase 0 (kproj) planned for 132 programs; persistent with one program
    # (it is not idle in the plan, so it runs phase 0 itself first); chunks of several 16-token tiles; the multi
    # launches with T <= 4 and T > 8 (two 64-row halves); 32-token phase-0 items over an odd S in a 2-stage pipeline
    # of 32-channel pieces; phase 4 split over parts of two chunk partials (kproj_p4_chunks)
    "persistent": (1, 2, 5, 70, dict(grid=1, plan_programs=132, hb=512)),
    "persistent-chunks": (1, 1, 4, 300, dict(grid=1, plan_programs=132, hb=512, min_chunk=64, bs1=16)),
    "persistent-w16": (2, 1, 5, 70, dict(grid=1, plan_programs=132, hb=512, kproj_w16=1)),
    "persistent-p4split": (1, 1, 4, 300, KPROJ_P4SPLIT),
    "multi": (2, 1, 3, 90, dict(mode="multi", grid=40, hb=512)),
    "multi-T11": (1, 1, 11, 50, dict(mode="multi", grid=40, hb=512)),
    "multi-odd": (1, 1, 4, 201, KPROJ_ODD),
}


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("case", list(KPROJ_CASES))
def test_phase0_key_projection(task, case):
    """`kproj`: the t2i keys and values projected by phase 0 (fp16), phases 3 and 4 on them, against the reference
    at the official tolerance with every element matched, and against the same call without it: output_queries
    within one atol but not the same (the path ran); phase 4 on one channel slice."""
    B, P, T, S, overrides = KPROJ_CASES[case]
    plan, (qa, ka), (qb, kb) = _fp16_and_tf32(task, KPROJ_CASES[case], "kproj", B * P * S, 0)
    assert plan.KPJ and plan.ND == 1 and plan.phases[0] == 10
    assert plan.work[10] == B * P * -(-S // overrides.get("kproj_bs", kernel.DEFAULT_CONFIG.kproj_bs))
    if case == "persistent-chunks":
        assert plan.n_ch > 1 and plan.CH > overrides["bs1"]
    # phase 4's items split over chunk parts by kproj_p4_chunks (the default's 32 leaves these calls whole)
    assert plan.NSP4 == (-(-plan.n_ch // overrides["kproj_p4_chunks"]) if case == "persistent-p4split" else 1)
    assert plan.W16 == (case == "persistent-w16")  # its items read an fp16 copy of Wk and Wv made first
    assert not torch.equal(qa, qb)
    assert float((qa - qb).abs().max()) < TOLERANCE.max_atol
    assert float((ka - kb).abs().max()) < TOLERANCE.max_atol
    assert _state_is_clean(kernel)


def test_kproj_rule(task):
    """Phase 0 runs where the call has at most `kproj` key tokens and the programs that phases 1a, 1 and 2 leave
    idle (from P0LO on) take at most `kproj_items` of its items each; kproj 0 turns it off. Its items read the fp16
    copy of Wk and Wv where a program takes at least `kproj_w16` of them."""
    cfg = kernel.DEFAULT_CONFIG
    kinds, copies = set(), set()
    for w in task.workloads:
        NI, T, S = _items(w)
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        busy = max(plan.work.get(8, 0), plan.work[1], plan.work[2])
        n0 = NI * -(-S // cfg.kproj_bs)
        assert plan.KPJ == (NI * S <= cfg.kproj and n0 <= cfg.kproj_items * (132 - busy))
        assert plan.W16 == (plan.KPJ and 0 < cfg.kproj_w16 <= -(-n0 // (132 - busy)))
        if plan.KPJ:
            copies.add(plan.W16)
            assert plan.P0LO == busy and plan.work[10] == n0 and plan.ND == 1
        else:
            assert 10 not in plan.work and 10 not in plan.phases
        assert not kernel.make_plan(NI, T, S, dataclasses.replace(cfg, kproj=0), 132).KPJ
        kinds.add((plan.KPJ, NI * S <= cfg.kproj))
    # phase 0 on, off for too many items per idle program, off for too many key tokens; with and without the copy
    assert kinds == {(True, True), (False, True), (False, False)}
    assert copies == {True, False}
    tf32 = dataclasses.replace(cfg, p3_fp16=False)  # phase 3's TF32 products: no phase 0
    assert not kernel.make_plan(1, 4, 4096, tf32, 132).KPJ


def test_default_precision_long_prompt(task):
    """T = 11 (16 padded tokens per head, two t2i halves) with the default rounding, persistent."""
    B, P, T, S = 1, 2, 11, 33
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, grid=1, hb=512)
    args = _inputs(task, B, P, T, S, False, random_norms=False)
    outs = _poisoned_outputs(B, P, T, S)
    kernel.launch(args, outs, cfg)
    _check(outs, task.reference(*args), TOLERANCE)


def _items(workload) -> tuple[int, int, int]:
    """An official workload's (items = batch x points, query tokens, key tokens)."""
    a = workload.axes
    return a["batch_size"] * a["point_batch_size"], a["n_query_tokens"], a["n_key_tokens"]


def test_plans_for_official_workloads(task):
    """Chunking on a 132-SM H200: every key token covered once, no more t2i work items than programs."""
    cfg = kernel.DEFAULT_CONFIG
    long4 = []
    for w in task.workloads:
        NI, T, S = _items(w)
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.CH % max(cfg.bs1, cfg.bs2) == 0
        assert (plan.n_ch - 1) * plan.CH < S <= plan.n_ch * plan.CH
        assert NI * plan.n_ch * plan.NHALF <= 132 * cfg.waves
        assert plan.TPK == (4 if T <= 4 else 8)  # tpk_min 4: phase 3 on 32 rows for every T <= 4
        assert plan.NHALF == 1 and plan.R == NI * T
        assert plan.TPK7 == (4 if T <= 4 else 8)
        assert max(plan.work.values()) <= 4 * 132
        if T <= 4 and plan.CH > cfg.tpk4_chunk:
            long4.append((NI, T, S))
    # long chunks on 32 rows too (which tpk_min 8 would put on 64): the T = 4 workloads of four items and more
    assert long4 and all(NI >= 4 for NI, _, _ in long4)


def test_ksplit_fit_rule(task):
    """Phases 1a and 6a take ksplit1 / ksplit6 contraction parts (8 by default) where their work items fit the
    programs (one wave), else half as many (once); ksplit_fit False keeps the configured split. With pre6 (the
    default) there is no phase 6a: phase 6 computes K_h and V_h itself."""
    assert kernel.DEFAULT_CONFIG.pre6
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, pre6=False)
    assert (cfg.ksplit1, cfg.ksplit6, cfg.ksplit_fit) == (8, 8, True)
    halved = []
    for i, w in enumerate(task.workloads, 1):
        NI, T, S = _items(w)
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        shipped = kernel.make_plan(NI, T, S, kernel.DEFAULT_CONFIG, 132)
        assert shipped.KP6 == 1 and 9 not in shipped.work and shipped.KP1 == plan.KP1
        for kp, units, phase in ((plan.KP1, plan.NG, 8), (plan.KP6, plan.NRT, 9)):
            assert kp == (8 if 8 * units * 8 <= 132 else 4), (i, phase)
            assert plan.work[phase] == 8 * units * kp <= 132
        if plan.KP1 == 4:
            halved.append(i)
        fixed = kernel.make_plan(NI, T, S, dataclasses.replace(cfg, ksplit_fit=False), 132)
        assert (fixed.KP1, fixed.KP6) == (8, 8)
    # the workloads with 8 or 16 items of 5 or 4 tokens: 3 or 4 self-attention groups, 3 or 4 row tiles
    assert halved == [1, 5, 6, 11]
    # more programs fit more: 192 items (#5) still not on a B200's 148, 256 (#6) on 264
    assert kernel.make_plan(8, 5, 2048, cfg, 148).KP1 == 4
    assert kernel.make_plan(16, 4, 4096, cfg, 264).KP1 == 8


def test_csplit_fit_rule(task):
    """With csplit_fit (off by default), phases 2 / 6 and 1 take csplit / csplit1 column parts where their work
    items fit the programs, else half as many (once); off, the configured split stands."""
    assert kernel.DEFAULT_CONFIG.csplit_fit is False
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, csplit=8, csplit1=8, csplit_fit=True)
    fits = []
    for w in task.workloads:
        NI, T, S = _items(w)
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.CP == (8 if 8 * plan.NRT * 8 <= 132 else 4)
        assert plan.CP1 == (8 if 8 * plan.NG * 8 <= 132 else 4)
        assert plan.work[2] == plan.work[6] == 8 * plan.NRT * plan.CP
        fits.append(plan.CP == 8)
        off = kernel.make_plan(NI, T, S, dataclasses.replace(cfg, csplit_fit=False), 132)
        assert (off.CP, off.CP1) == (8, 8)
    assert any(fits) and not all(fits)


def test_tune_variants_plan_and_time_wrong_rule():
    """tune.py's variants are valid configurations (a variant naming a removed knob fails at import) that plan
    every official workload; `--time-wrong` times variants that ran with wrong outputs, never ones that failed."""
    tune = load_module(SOLUTION_DIR / "tune.py", "_test075_tune")
    task = load_task("075")
    shapes = {tune._items(w) for w in task.workloads}
    for name, cfg in tune.VARIANTS.items():
        for NI, T, S in shapes:
            assert tune.kernel.make_plan(NI, T, S, cfg, 132).n_ch >= 1, name
    wrong, failed = {"ok": False}, {"ok": False, "error": "timeout after 120 s"}
    assert tune._timeable({"ok": True}, False) and not tune._timeable(wrong, False)
    assert tune._timeable(wrong, True) and not tune._timeable(failed, True)


@pytest.mark.parametrize(
    "field, value",
    [
        ("hb", 24),
        ("nc", 48),
        ("kc", 8),
        ("q_terms", 2),
        ("q3_phases", (3,)),
        ("bs2", 16),
        ("nd", 3),
        ("bs1", 8),
        ("csplit", 3),
        ("csplit1", 32),
        ("ksplit1", 3),
        ("ksplit6", 16),
        ("p4_chunks", -1),
        ("p4_gfirst", 3),
        ("p3_fp16", 1),
        ("p7_tl_fp16", True),
        ("p7_tl_fp16", -1),
        ("p7_tl_fp16_short", 1),
        ("p7_tl_fp16_short", (2,)),
        ("p7_tl_fp16_short", (8, 8)),
        ("p7_launch_short", (1, 8, 0, 32)),
        ("p7_launch_fp16", (1, 8, 0, 32, 1)),
        ("prefetch_late", 5),
        ("prefetch_late", 1),
        ("tpk_min", 2),
        ("tpk7_min", 16),
        ("tpk4_chunk", -1),
        ("pre5", 48),
        ("pre6", 1),
        ("plan_programs", -1),
        ("stages1", -1),
        ("stages1_tpk4", 9),
        ("qstages", 0),
        ("cstages", 9),
        ("split7", -1),
        ("split7_tiles4", -1),
        ("p7_launch_long4", (5, 4, 0, 32, 1)),
        ("p7_launch_tpk8", (1, 4, 0, 48, 1)),
        ("p7_launch", (1, 2, 0, 32, 1)),
        ("p7_launch", (1, 8, 32, 32, 1)),
        ("p7_launch", (1, 8, 0, 16, 1)),
        ("p7_launch", (1, 8, 0, 32, 4)),
        ("p7_launch", (1, 8, 0)),
        ("p7_launch", 8),
        ("kproj", -1),
        ("kproj_bs", 48),
        ("kproj_ncb", 3),
        ("kproj_items", 0),
        ("kproj_kc", 8),
        ("kproj_stages", 0),
        ("kproj_w16", -1),
        ("kproj_p4_chunks", -1),
    ],
)
def test_make_plan_rejects_bad_config(field, value):
    """A bad Config value is refused with its field's name, before anything is launched."""
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, **{field: value})
    with pytest.raises(ValueError, match=field):
        kernel.make_plan(4, 5, 1024, cfg, 132)
    with pytest.raises(ValueError, match="n_query_tokens"):
        kernel.make_plan(4, 17, 1024, kernel.DEFAULT_CONFIG, 132)
    with pytest.raises(ValueError, match="n_key_tokens"):
        kernel.make_plan(4, 5, 0, kernel.DEFAULT_CONFIG, 132)
    with pytest.raises(ValueError, match="batch_size"):
        kernel.make_plan(0, 5, 1024, kernel.DEFAULT_CONFIG, 132)


@pytest.mark.parametrize("B, P", [(0, 2), (2, 0)])
def test_empty_batch_is_a_no_op(task, B, P):
    """No (batch, point) item: `run` returns before planning (both outputs are empty), whatever the other axes."""
    args = _inputs(task, B, P, 4, 37, False, random_norms=False)
    outs = _poisoned_outputs(B, P, 4, 37)
    kernel.run(*args, *outs)
    assert [o.numel() for o in outs] == [0, 0]


def test_phase3_stages_by_tpk(monkeypatch):
    """Phase 3's pipeline depth: `stages1_tpk4` where the t2i side has TPK 4, `stages1` otherwise, and the
    architecture's rule (3 on sm_90, 2 elsewhere) where both are 0."""
    cpu = torch.device("cpu")
    monkeypatch.setenv(kernel.TARGET_ARCH_ENV, "sm_90a")
    base = kernel.DEFAULT_CONFIG
    assert kernel._stages1(base, cpu, 4) == kernel._stages1(base, cpu, 8) == 3
    cfg = dataclasses.replace(base, stages1_tpk4=4)
    assert (kernel._stages1(cfg, cpu, 4), kernel._stages1(cfg, cpu, 8)) == (4, 3)
    cfg = dataclasses.replace(base, stages1=2, stages1_tpk4=4)
    assert (kernel._stages1(cfg, cpu, 4), kernel._stages1(cfg, cpu, 16)) == (4, 2)
    monkeypatch.setenv(kernel.TARGET_ARCH_ENV, "sm_100a")
    assert kernel._stages1(base, cpu, 4) == 2


def test_split7_rule():
    """Phase 7 gets its own launch from `split7` key tokens, with `p7_launch_long4` for T <= 4 where chunks
    have `split7_tiles4` tiles or more, `p7_launch_tpk8` for T 5..8 and `p7_launch` otherwise; never in multi
    mode. With `p7_tl_fp16` (64 by default) chunks of 64 tokens or more take `p7_launch_fp16` instead (below)."""
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, p7_tl_fp16=0, p7_tl_fp16_short=())
    assert (cfg.split7, cfg.split7_tiles4) == (1, 4)
    assert (cfg.p7_launch, cfg.p7_launch_long4) == ((1, 8, 0, 32, 1), (2, 4, 0, 32, 1))
    assert cfg.p7_launch_tpk8 == (1, 4, 0, 32, 1)

    def p7(NI, T, S, **kw):
        plan = kernel.make_plan(NI, T, S, dataclasses.replace(cfg, **kw), 132)
        assert plan.work[7] == plan.NI * plan.n_ch * max(1, plan.P7PARTS)
        return plan.CH, (plan.P7PARTS, plan.P7WARPS, plan.P7MAXNREG, plan.P7BS, plan.P7STAGES)

    assert p7(16, 4, 4096) == (512, (2, 4, 0, 32, 1))  # #11: 16 tiles per chunk, TPK7 4: two CTAs per SM
    assert p7(4, 4, 4096) == (128, (2, 4, 0, 32, 1))  # #7: 4 tiles
    assert p7(4, 6, 4096) == (128, (1, 4, 0, 32, 1))  # #12: TPK7 8, one CTA of 4 warps
    assert p7(16, 5, 4096) == (512, (1, 4, 0, 32, 1))  # TPK7 8: long chunks too
    assert p7(2, 12, 4096)[1] == (1, 8, 0, 32, 1)  # TPK7 16: p7_launch
    assert p7(2, 4, 4096) == (64, (1, 8, 0, 32, 1))  # #3: 2 tiles per chunk
    assert p7(1, 4, 4096) == (32, (1, 8, 0, 32, 1))  # #14: 1 tile
    assert p7(2, 5, 1024)[1] == (1, 4, 0, 32, 1)  # #10: 2048 key tokens
    assert p7(2, 5, 1024, split7=4096)[1] == (0, 0, 0, 0, 0)  # ... below a threshold
    assert p7(16, 4, 4096, split7=0)[1] == (0, 0, 0, 0, 0)
    # multi mode launches phase 7 on its own anyway
    assert p7(16, 4, 4096, mode="multi")[1] == (0, 0, 0, 0, 0)
    assert p7(2, 4, 4096, split7=1, split7_tiles4=2, p7_launch_long4=(3, 8, 128, 64, 2)) == (
        64,
        (3, 8, 128, 64, 2),
    )
    # the default: fp16 operands in 64-token tiles from 64-token chunks (#3, #11, #12 here); below, at TPK7 8
    # (#10, #8, #13) fp16 on `p7_launch_short`'s 32-token tiles, at TPK7 4 (#14) TF32
    fp16 = dataclasses.replace(cfg, p7_tl_fp16=64, p7_tl_fp16_short=(8,))
    assert fp16 == kernel.DEFAULT_CONFIG and fp16.p7_launch_fp16 == (1, 8, 0, 64, 1)
    assert fp16.p7_launch_short == (1, 8, 0, 32, 1)
    for NI, T, S, ch, f16, launch in (
        (2, 4, 4096, 64, True, fp16.p7_launch_fp16),
        (16, 4, 4096, 512, True, fp16.p7_launch_fp16),
        (4, 6, 4096, 128, True, fp16.p7_launch_fp16),
        (1, 4, 4096, 32, False, fp16.p7_launch),
        (2, 5, 1024, 32, True, fp16.p7_launch_short),
        (1, 8, 4096, 32, True, fp16.p7_launch_short),
        (1, 12, 4096, 64, True, fp16.p7_launch_fp16),  # T > 8: 64-token chunks here
    ):
        plan = kernel.make_plan(NI, T, S, fp16, 132)
        assert (plan.CH, plan.P7F16) == (ch, f16), (NI, T, S)
        assert (plan.P7PARTS, plan.P7WARPS, plan.P7MAXNREG, plan.P7BS, plan.P7STAGES) == launch, (NI, T, S)


def test_direct_runner_parameters_and_cache(monkeypatch):
    """The split's launches go through `_direct_runners` (GPU only; its host logic checked here with a stand-in
    for Triton's warmup): every kernel parameter in signature order, tensors as their addresses (ints),
    constexprs from the launch's keywords or the signature's defaults; one compile per launch key, and the key
    holds the device (a compiled kernel belongs to one)."""
    import inspect

    compiled = []

    class Compiled:
        def __getitem__(self, grid):
            return ("runner", grid)

    def warmup(*args, grid, **meta):
        compiled.append((grid, meta["PHASE"]))
        return Compiled()

    device = [0]
    monkeypatch.setattr(kernel._two_way_kernel, "warmup", warmup)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: device[0])
    monkeypatch.setattr(kernel, "_RUNNERS", {})
    names = list(inspect.signature(kernel._two_way_kernel.fn).parameters)
    K = kernel._two_way_kernel
    t = torch.zeros(4)
    args = [t] * names.index("NI") + [3, 5, 7, 15, 16, 1.0, 2, 64, 1]  # tensors, then the runtime scalars
    meta = {"PHASE": 7, "P7PARTS": 2, "num_warps": 4, "TPK": 8}
    (first, runner, params), second = kernel._direct_runners(
        [(K, 12, args, meta), (K, 12, args, dict(meta, PHASE=0))]
    )
    assert runner == ("runner", (12, 1, 1)) and compiled == [((12,), 7), ((12,), 0)]
    assert len(params) == len(names)  # num_warps is a launch option, not a parameter
    assert params[: names.index("NI")] == [t.data_ptr()] * names.index("NI")
    assert params[names.index("NI") : len(args)] == args[names.index("NI") :]
    assert params[names.index("P7PARTS")] == 2 and params[names.index("TPK")] == 8
    assert params[names.index("SPLIT7")] is False and params[names.index("ACC_T")] is False  # defaults
    assert second[0] is not first  # one compile per launch key
    assert second[2][: len(args)] == params[: len(args)] and second[2][names.index("PHASE")] == 0
    assert kernel._direct_runners([(K, 12, args, meta)])[0][0] is first and len(compiled) == 2  # cached
    device[0] = 1
    assert (
        kernel._direct_runners([(K, 12, args, meta)])[0][0] is not first and len(compiled) == 3
    )  # another device


def test_column_splits_multiply_the_query_side_work_items():
    """csplit / csplit1 give phases 2 and 6 / phase 1 that many times the work items; the others keep theirs."""
    base = dataclasses.replace(kernel.DEFAULT_CONFIG, csplit=1, csplit1=1)
    one = kernel.make_plan(4, 5, 1024, base, 132).work
    for cp, cp1 in ((2, 1), (1, 4), (4, 4), (16, 8)):
        split = kernel.make_plan(4, 5, 1024, dataclasses.replace(base, csplit=cp, csplit1=cp1), 132).work
        assert split[1] == cp1 * one[1] and split[2] == cp * one[2] and split[6] == cp * one[6]
        others = {k: n for k, n in one.items() if k not in (1, 2, 6)}  # (no phase 6a with pre6)
        assert {k: n for k, n in split.items() if k not in (1, 2, 6)} == others and 3 in others


def test_phases_4_and_5_fit_one_wave():
    """nd_fit: phase 4's work items (row tiles x 8 heads x channel slices x chunk parts) fit the programs
    where they can, channel slices going first; p4_chunks sets the chunk parts of the many-chunk workloads;
    hb_fit: phase 5's (row tiles x MLP blocks) fit them too."""
    cfg = kernel.DEFAULT_CONFIG
    assert cfg.nd_fit and cfg.p4_chunks > 0
    for NI, T, S in ((1, 4, 4096), (8, 5, 1024), (16, 4, 4096), (2, 5, 1024), (64, 16, 4096)):
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.work[4] <= 132 or (plan.ND == 1 and plan.NSP4 == 1)
        assert plan.NSP4 == 1 or plan.n_ch > cfg.p4_chunks
        if plan.ND < cfg.nd and not plan.KPJ:  # halved only because the next size up would not fit (kproj: 1)
            assert plan.NRT * 8 * (2 * plan.ND) * plan.NSP4 > 132
        # hb_fit (on by default): phase 5's MLP blocks doubled once when they exceed the programs
        assert cfg.hb_fit and plan.HB in (cfg.hb, 2 * cfg.hb)
        assert (plan.HB > cfg.hb) == (plan.NRT * (2048 // cfg.hb) > 132)
    one = kernel.make_plan(1, 4, 4096, dataclasses.replace(cfg, kproj=0), 132)
    assert one.n_ch == 128 and one.NSP4 == 4 and one.ND == 4
    assert kernel.make_plan(1, 4, 4096, cfg, 132).ND == 1  # phase 0's [16]-wide partials: one slice
    three = kernel.make_plan(8, 5, 1024, cfg, 132)
    assert three.HB == 2 * cfg.hb and three.work[5] <= 132  # 3 row tiles: 192 blocks of 32 do not fit
    off = kernel.make_plan(8, 5, 1024, dataclasses.replace(cfg, p4_chunks=0, nd_fit=False, hb_fit=False), 132)
    assert off.NSP4 == 1 and off.ND == cfg.nd and off.HB == cfg.hb
    # a few programs (a GPU partition, or one interpreted program) must not grow hb past one doubling: hb 2048
    # needs 1.5 MB of shared memory
    assert kernel.make_plan(8, 5, 1024, cfg, 1).HB == 2 * cfg.hb


def test_shift56_puts_phases_5_and_6_after_the_previous_phase_programs():
    """shift56: phase 5's items start on the program after phase 4's last, phase 6's after phase 5's, where the
    two phases' items fit the programs together; otherwise (and in multi mode, and by default) on program 0."""
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, shift56=True)
    one = kernel.make_plan(1, 4, 4096, cfg, 132)  # #14: 32 + 64 + 32 items
    w = one.work
    assert (one.SH5, one.SH6) == (w[4], w[4] + w[5]) and w[4] + w[5] + w[6] <= 132
    assert kernel.make_plan(1, 4, 4096, kernel.DEFAULT_CONFIG, 132).SH5 == 0 < one.SH5  # the knob moves it
    for NI, T, S in ((8, 5, 1024), (16, 4, 4096), (4, 5, 1024)):  # phase 5 fills the wave with its neighbours
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.SH5 == (plan.work[4] if plan.work[4] + plan.work[5] <= 132 else 0)
        assert plan.SH6 == ((plan.SH5 + plan.work[5]) % 132 if plan.work[5] + plan.work[6] <= 132 else 0)
    assert kernel.make_plan(8, 5, 1024, cfg, 132).SH5 == 0  # 3 row tiles: 96 + 96 items do not fit
    # shift2: phase 2 after phase 1's programs, inside those phase 0 leaves to the query chain (from P0LO on)
    two = kernel.make_plan(1, 4, 4096, dataclasses.replace(cfg, shift2=True), 132)
    assert two.KPJ and two.SH2 == two.work[1] and two.SH2 + two.work[2] <= two.P0LO and two.P0LO == one.P0LO
    assert one.SH2 == 0 and kernel.make_plan(8, 5, 1024, dataclasses.replace(cfg, shift2=True), 132).SH2 == 0
    multi = kernel.make_plan(1, 4, 4096, dataclasses.replace(cfg, mode="multi"), 132)
    default = kernel.make_plan(1, 4, 4096, kernel.DEFAULT_CONFIG, 132)
    assert (multi.SH5, multi.SH6, default.SH5, default.SH6, default.SH2) == (0, 0, 0, 0, 0)


@triton.jit
def _slot_probe(out, n, SH: tl.constexpr):
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    for w in range(kernel._slot(pid, G, SH), n, G):
        tl.store(out + w + tl.arange(0, 1), pid + tl.zeros([1], tl.int32))


@pytest.mark.parametrize("G, n, SH", [(7, 5, 0), (7, 5, 3), (7, 16, 4), (5, 12, 9), (1, 3, 32), (4, 4, 4)])
def test_slot_assigns_every_item_once_from_program_sh(G, n, SH):
    """_slot (interpreter): items start on program SH % G and go round the programs, each item exactly once."""
    out = torch.full((n,), -1, dtype=torch.int32, device=DEVICE)
    _slot_probe[(G,)](out, n, SH)
    assert out.tolist() == [(w + SH) % G for w in range(n)]


@triton.jit
def _dry_probe(out, dry_out, n, nxt_n, WS: tl.constexpr):
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    dry, end = kernel._dry_end(pid, G, pid, n, pid >= nxt_n, WS)
    tl.store(dry_out + pid + tl.arange(0, 1), tl.zeros([1], tl.int32) + dry.to(tl.int32))
    for w in range(pid, end, G):  # live items: their program; the dry one: -2 - pid (past the n items)
        lv = kernel._live(w, n, WS)
        tl.store(out + w + tl.arange(0, 1), tl.where(lv, pid, -2 - pid) + tl.zeros([1], tl.int32))


@pytest.mark.parametrize(
    "G, n, nxt_n, WS, dry",
    [
        (8, 5, 6, 1, [7]),  # the last program: no item here (5) nor in the next phase (6)
        (8, 5, 6, 3, [6, 7]),  # the last three: program 5 has an item in the next phase
        (8, 5, 8, 3, []),  # every program has an item in the next phase
        (8, 8, 0, 4, []),  # every program has an item here
        (8, 2, 2, 8, [2, 3, 4, 5, 6, 7]),
        (4, 9, 0, 2, []),  # several items a program
    ],
)
def test_warm_sites_dry_runners(G, n, nxt_n, WS, dry):
    """_dry_end / _live in their GPU form (WS > 0, interpreter): only the last WS programs with no item in the
    phase nor the next run one dry iteration, past the items; every item still runs once, on its program."""
    out = torch.full((n + G,), -1, dtype=torch.int32, device=DEVICE)
    dry_out = torch.full((G,), -1, dtype=torch.int32, device=DEVICE)
    _dry_probe[(G,)](out, dry_out, n, nxt_n, WS)
    assert out[:n].tolist() == [w % G for w in range(n)]
    assert [p for p in range(G) if dry_out[p] == 1] == dry and set(dry_out.tolist()) <= {0, 1}
    # each dry runner's one iteration, at w = pid
    assert sorted(-2 - v for v in out[n:].tolist() if v != -1) == dry
    assert all(out[n + k] in (-1, -2 - (n + k)) for k in range(G))


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize(
    "B, P, T, S, overrides",
    [
        (1, 2, 5, 70, dict()),  # the defaults' forms: pre2, kproj's phase 3 where planned, pre5, pre6
        (1, 1, 4, 40, dict(pre2=False, pre5=0, pre6=False, kproj=0)),  # the K-loop forms, phase 6a, t2i pass
    ],
)
def test_warm_sites_dry_iterations_change_nothing(task, B, P, T, S, overrides):
    """warm_sites' test form (interpreter, one program; the CPU path of the default since session 61): a dry
    iteration after the program's items at each of phases 2-6's call sites (live False) leaves the outputs bit for
    bit as they are without it (warm_sites 0), and the counters and accumulators end clean."""
    args = _inputs(task, B, P, T, S, False, random_norms=True)
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, grid=1, plan_programs=132, warm_sites=0, **overrides)
    off, on = _poisoned_outputs(B, P, T, S), _poisoned_outputs(B, P, T, S)
    kernel.launch(args, off, cfg)
    plan = kernel.launch(args, on, dataclasses.replace(cfg, warm_sites=1))
    for a, b in zip(off, on, strict=True):
        assert torch.equal(a, b)
    _check(on, task.reference(*args), TOLERANCE, all_matched=False)
    assert _state_is_clean(kernel)
    if overrides:
        assert plan.KP6 > 1 and not plan.KPJ


@pytest.mark.usefixtures("poisoned_workspaces")
def test_diag_stores_replaces_the_accumulator_atomics(task):
    """diag_stores (a timing diagnostic): phase 5's items store their y3acc rows instead of adding them, so with
    several MLP blocks the output queries go wrong while the default's are right; phases outside (4, 5) are refused."""
    B, P, T, S = 1, 1, 4, 40
    args = _inputs(task, B, P, T, S, False, random_norms=False)
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, **EXACT, grid=1, plan_programs=132)  # hb 32: pre5
    right, wrong = _poisoned_outputs(B, P, T, S), _poisoned_outputs(B, P, T, S)
    kernel.launch(args, right, cfg)
    plan = kernel.launch(args, wrong, dataclasses.replace(cfg, diag_stores=(5,)))
    assert plan.work[5] > 1 and plan.HB <= cfg.pre5  # several blocks, the preloaded form
    _check(right, task.reference(*args), TOLERANCE)
    assert torch.isfinite(wrong[0]).all() and not torch.allclose(wrong[0], right[0], atol=1e-2)
    with pytest.raises(ValueError, match="diag_stores"):
        kernel.make_plan(1, 4, 40, dataclasses.replace(cfg, diag_stores=(3,)), 132)


def test_hb_spread_halves_the_mlp_blocks_where_twice_the_items_fit():
    """hb_spread: phase 5's blocks halved once where twice its work items still fit the programs (one row tile:
    128 blocks of 16), never below 16, and left alone where hb_fit doubled them or two row tiles fill a wave."""
    cfg = dataclasses.replace(kernel.DEFAULT_CONFIG, hb_spread=True)
    base = kernel.DEFAULT_CONFIG
    for NI, T, S, hb in (
        (1, 4, 4096, 16),
        (2, 5, 1024, 16),
        (1, 16, 4096, 16),
        (2, 16, 4096, 32),
        (4, 5, 1024, 32),
        (8, 5, 1024, 64),
    ):
        plan = kernel.make_plan(NI, T, S, cfg, 132)
        assert plan.HB == hb and plan.work[5] <= 132
        assert plan.HB in (
            kernel.make_plan(NI, T, S, base, 132).HB // 2,
            kernel.make_plan(NI, T, S, base, 132).HB,
        )
    assert kernel.make_plan(1, 4, 4096, dataclasses.replace(cfg, hb=16), 132).HB == 16  # not below 16
    few = kernel.make_plan(1, 4, 4096, cfg, 40)  # hb_fit doubled the blocks for 40 programs: spread keeps 64
    assert few.HB == 64 == kernel.make_plan(1, 4, 4096, base, 40).HB


def test_plan_programs_decouple_the_plan_from_the_launch():
    """plan_programs: the chunking and the one-wave fits follow it, the persistent grid does not. The CPU path
    of `run` (one interpreted program) thus plans exactly as an H200 does for every official workload."""
    task = load_task("075")
    cpu = dataclasses.replace(kernel.DEFAULT_CONFIG, grid=1, plan_programs=kernel.H200_SMS)
    for w in task.workloads:
        a = w.axes
        NI, T, S = a["batch_size"] * a["point_batch_size"], a["n_query_tokens"], a["n_key_tokens"]
        gpu = kernel.make_plan(NI, T, S, kernel.DEFAULT_CONFIG, 132)
        plan = kernel.make_plan(NI, T, S, cpu, 1)
        assert plan.grid == 1 and dataclasses.replace(plan, grid=gpu.grid) == gpu
    assert kernel.make_plan(1, 4, 4096, dataclasses.replace(kernel.DEFAULT_CONFIG, grid=1), 1).n_ch == 1


def test_contraction_splits_add_phases_1a_and_6a():
    """ksplit1 / ksplit6 add phase 1a ("8") before phase 1 and phase 6a ("9") before phase 6, with that many
    work items per (group or row tile, head); 1 removes them."""
    # (no phase 0 either, and pre6, which would override ksplit6, off)
    none = dataclasses.replace(kernel.DEFAULT_CONFIG, ksplit1=1, ksplit6=1, kproj=0, pre6=False)
    plan = kernel.make_plan(4, 5, 1024, none, 132)
    assert plan.phases == [1, 2, 3, 4, 5, 6, 7] and set(plan.work) == set(plan.phases)
    for k1, k6 in ((2, 1), (1, 8), (4, 4)):
        split = kernel.make_plan(4, 5, 1024, dataclasses.replace(none, ksplit1=k1, ksplit6=k6), 132)
        order = [p for p in split.phases if p < 8]
        assert order == [1, 2, 3, 4, 5, 6, 7] and set(split.work) == set(split.phases)
        if k1 > 1:
            assert split.phases[0] == 8 and split.work[8] == 8 * split.NG * k1
        if k6 > 1:
            assert split.phases.index(9) == split.phases.index(6) - 1 and split.work[9] == 8 * split.NRT * k6
        assert all(split.work[k] == plan.work[k] for k in range(1, 8))


@pytest.mark.usefixtures("poisoned_workspaces")
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


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 5, 3, 1000, True), (1, 1, 16, 4097, False), (2, 3, 1, 777, True)])
def test_odd_shapes_gpu(task, shape):
    """Key counts that are no multiple of any block, point_batch_size > 4, T = 1 and 16, on the GPU."""
    B, P, T, S, skip = shape
    solution = load_solution(SOLUTION_DIR)
    args = _inputs(task, B, P, T, S, skip, random_norms=False, device="cuda")
    outs = _poisoned_outputs(B, P, T, S, "cuda")
    solution.fn(*args, *outs)
    _check(outs, task.reference(*args), TOLERANCE)


# ---------------------------------------------------------------- phase 7 in Gluon (Config.p7_gluon)
G7 = dataclasses.replace(kernel.DEFAULT_CONFIG, p7_gluon=(232, 40, 6, 10, 2, 2), p7_gluon_fp16=False)  # TF32
TL7 = dataclasses.replace(kernel.DEFAULT_CONFIG, p7_gluon=())  # the tl phase-7 launch everywhere


@pytest.mark.parametrize(
    "where, items, T, S, gluon",
    [
        ("cpu", 16, 4, 4096, False),  # the interpreter cannot run Gluon
        ("sm_90a", 16, 4, 4096, True),  # 8 tiles per program
        ("sm_90a", 4, 6, 4096, True),  # TPK7 8, 2 tiles
        ("sm_90a", 1, 4, 4096, False),  # 1 tile per program: the tl launch is faster
        ("sm_100a", 16, 4, 4096, False),  # B200: no wgmma
    ],
)
def test_gluon_phase7_default_is_fp16_from_two_tiles_on_sm90(monkeypatch, where, items, T, S, gluon):
    """The shipped configuration: phase 7 in Gluon with fp16 operands on sm_90 where key chunks hold two 64-token
    tiles or more; a recording on meta tensors (`solbench build`) plans for the targeted architecture."""
    cfg = kernel.DEFAULT_CONFIG
    assert cfg.p7_gluon_fp16 and cfg.p7_gluon[5] == 2 and kernel.G7_TPK8
    if kernel.gluon is None:
        pytest.skip("this Triton has no Gluon")
    plan = kernel.make_plan(items, T, S, cfg, 132)
    if where != "cpu":
        monkeypatch.setenv(kernel.TARGET_ARCH_ENV, where)
    device = torch.device("cpu" if where == "cpu" else "meta")
    assert kernel.gluon_phase7_ok(device, plan, cfg) == gluon


@pytest.mark.parametrize(
    "value",
    [(232, 40, 6, 10, 2), (232, 40, 2, 10, 2, 2), (232, 40, 6, 10, 0, 2), (300, 40, 6, 10, 2, 2), [1] * 6],
)
def test_gluon_phase7_configuration_is_checked(value):
    with pytest.raises(ValueError, match="p7_gluon"):
        kernel.make_plan(16, 4, 4096, dataclasses.replace(G7, p7_gluon=value), 132)


def test_gluon_phase7_precision_flag_is_checked():
    with pytest.raises(ValueError, match="p7_gluon_fp16"):
        kernel.make_plan(16, 4, 4096, dataclasses.replace(G7, p7_gluon_fp16=1), 132)


@pytest.mark.parametrize(
    "items, T, S, tiles, m8",
    [(16, 4, 4096, 8, 32), (8, 4, 4096, 4, 32), (4, 6, 4096, 2, 64), (1, 4, 4096, 1, 32), (3, 2, 130, 1, 32)],
)
def test_gluon_phase7_chunks_and_launch_fields(monkeypatch, items, T, S, tiles, m8):
    """Chunks of whole 64-token tiles, about one per SM; the rule's fewest tiles per program; every field of the
    configuration reaches the launch (077's session 20 found a field that never did); copy groups in flight at
    most ring slots - 2 (more deadlocks: NOTES.md, "Session 22")."""
    if kernel.gluon is None:
        pytest.skip("this Triton has no Gluon")
    plan = kernel.make_plan(items, T, S, G7, 132)
    ch = kernel._g7_chunk_tokens(plan, 132)
    assert ch % 64 == 0 and ch // 64 == tiles and -(-S // ch) * ch >= S
    monkeypatch.setattr(kernel, "_gpu_info", lambda device: (9, 132))
    cuda = torch.device("cuda")
    monkeypatch.setattr(kernel, "G7_TPK8", False)
    assert kernel.gluon_phase7_ok(cuda, plan, G7) == (tiles >= 2 and m8 == 32)
    monkeypatch.setattr(kernel, "G7_TPK8", True)
    assert kernel.gluon_phase7_ok(cuda, plan, G7) == (tiles >= 2)
    cfg = dataclasses.replace(G7, p7_gluon=(216, 56, 5, 9, 8, 2))
    tensors = [torch.zeros(1) for _ in range(40)]
    views = [torch.zeros(1) for _ in range(9)]
    out_k, accs = torch.zeros(2), torch.zeros(3)
    fn, grid, args, meta = kernel._gluon_phase7(plan, cfg, 132, tensors, out_k, accs, views)
    assert fn is kernel._i2t_gluon_kernel and grid == items * -(-S // ch)
    assert args[:10] == [tensors[1], tensors[3], views[5], views[6], views[7], tensors[37], tensors[38],
                         tensors[39], out_k, accs]  # fmt: skip
    assert args[10:] == [plan.n_accs * plan.NRT * 16 * 256, T, S, ch]
    ns = 5 if m8 == 64 else 9
    assert (meta["M8"], meta["TPK"], meta["NS"], meta["LAG"]) == (m8, m8 // 8, ns, ns - 2)
    assert (meta["CONSUMER_REGS"], meta["LOADER_REGS"]) == (216, 56)
    assert meta["S4_L"] == kernel.g7_score_layout(m8) and meta["PDL"] == 1 and meta["launch_pdl"]
    half = dataclasses.replace(cfg, p7_gluon_fp16=True)
    fn16, grid16, args16, meta16 = kernel._gluon_phase7(plan, half, 132, tensors, out_k, accs, views)
    assert fn16 is kernel._i2t_gluon16_kernel and (grid16, args16) == (grid, args)
    assert meta16["S3_L"] == kernel.g7_softmax_layout(m8 // 8) and "S4_L" not in meta16
    assert {k: v for k, v in meta16.items() if k != "S3_L"} == {k: v for k, v in meta.items() if k != "S4_L"}


def test_gluon_phase7_builds_for_sm90a():
    """The Gluon phase 7 (TF32 and fp16 operands; TPK7 4 and 8, the ring sizes of the tune variants) compiles for
    the H200 without a GPU, within the shared-memory and register limits."""
    from harness.aot import REGISTER_LIMIT, SHARED_LIMIT, compile_in_child

    if kernel.gluon is None:
        pytest.skip("this Triton has no Gluon")
    code = f"""
import json, torch
from pathlib import Path
from harness.aot import compile_for, kernel_resources
from harness.tasks import load_module
mod = load_module(Path({str(SOLUTION_DIR / "kernel.py")!r}), "g7_build")
e = torch.empty
for fn, layout, ring in ((mod._i2t_gluon_kernel, "S4_L", (10, 6)), (mod._i2t_gluon16_kernel, "S3_L", (11, 9))):
    for m8, ns in zip((32, 64), ring):
        args = (e(4096 * 256), e(4096 * 256), e(m8 * 256), e(m8), e(256 * m8), e(256), e(256), e(256),
                e(4096 * 256), e(4096), 3000, 3, 4096, 512)
        lay = mod.g7_score_layout(m8) if layout == "S4_L" else mod.g7_softmax_layout(m8 // 8)
        meta = {{"M8": m8, "TPK": m8 // 8, layout: lay, "NS": ns, "LAG": 2, "PDL": 1, "num_warps": 4}}
        print(json.dumps({{"kernel": fn.__name__, "M8": m8, **kernel_resources(compile_for(fn, args, meta, 90))}}))
"""
    rows = compile_in_child(["-c", code])  # compiled, not interpreted
    assert [(r["kernel"][5:], r["M8"]) for r in rows] == [
        ("gluon_kernel", 32), ("gluon_kernel", 64), ("gluon16_kernel", 32), ("gluon16_kernel", 64)
    ]  # fmt: skip
    for row in rows:
        assert 0 < row["shared"] <= SHARED_LIMIT[90], row
        assert row["registers"] is not None and row["registers"] <= REGISTER_LIMIT, row


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
@pytest.mark.parametrize("fp16", [False, True], ids=["tf32", "fp16"])
@pytest.mark.parametrize(
    "shape",
    [(16, 1, 4, 4096), (8, 1, 3, 4096), (4, 2, 2, 2049), (2, 3, 1, 1000), (8, 1, 5, 2048), (4, 1, 8, 4097)],
)
def test_gluon_phase7_matches_tl_gpu(task, monkeypatch, shape, fp16):
    """The Gluon phase 7 (TF32 or fp16 operands; TPK7 8 switched on) against the tl launch and the reference,
    outputs poisoned, two calls (the second one reads the accumulators the first one's phase 7 zeroed)."""
    B, P, T, S = shape
    if kernel.gluon is None or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon phase 7 runs on sm_90 only")
    monkeypatch.setattr(kernel, "G7_TPK8", True)
    # from one tile per program up (the shipped rule would leave 2x3x1x1000 to the tl launch)
    if fp16:
        g7 = dataclasses.replace(G7, p7_gluon=(232, 40, 9, 11, 2, 0), p7_gluon_fp16=True)
    else:
        g7 = dataclasses.replace(G7, p7_gluon=(232, 40, 6, 10, 2, 0))
    plan = kernel.make_plan(B * P, T, S, g7, kernel._sm_count(torch.device("cuda")))
    assert kernel.gluon_phase7_ok(torch.device("cuda"), plan, g7)
    args = _inputs(task, B, P, T, S, False, random_norms=False, device="cuda")
    refs = task.reference(*args)
    outs = {}
    for name, cfg in (("tl", TL7), ("gluon", g7)):
        for _ in range(2):
            o = _poisoned_outputs(B, P, T, S, "cuda")
            kernel.launch(list(args), o, cfg)
        torch.cuda.synchronize()
        assert (name == "gluon") == kernel.last_kernels[-1].name.startswith("_i2t_gluon")
        # 16x1x4x4096 has 16.7M output_keys elements: under the tightest official atol (0.0016; the official
        # workload of this shape allows 0.0023) one or two of them land up to 1 % over it (H100, session 44: once in
        # the fp16 Gluon run, once in the TF32 one, the same seed), so that shape is held to the official rule (99 %
        # matched) and a bound of two atol; the smaller shapes to every element matched
        _check(o, refs, TOLERANCE, max_abs=2 * TOLERANCE.max_atol, all_matched=B * P * S < 16 * 4096)
        outs[name] = o
    assert (outs["gluon"][1] - outs["tl"][1]).abs().max() < 4e-3  # TF32 rounding apart, the same maths


def test_gluon_phase7_ring_protocol_model():
    """The ring protocol's model (g7_ring_model.py, mbarrier parity semantics, random interleavings): with the turn
    barriers no deadlock and no piece read before its copy is signalled for the kernel's ring sizes and up to
    ring slots - 2 groups in flight (the launch's bound); one more deadlocks, and without the turn barriers the
    6-slot ring of TPK7 8 goes wrong once both consumers have tiles (what the H200 showed in session 22)."""
    model = load_module(SOLUTION_DIR / "g7_ring_model.py", "_test075_g7_ring_model")
    for ns in (6, 10):
        for lag in (1, 2, ns - 2):
            for n_t in (1, 2, 3, 8):
                assert model.outcomes(ns, lag, n_t, runs=40) == {"ok"}, (ns, lag, n_t)
        assert "deadlock" in model.outcomes(ns, ns - 1, 2, runs=40)
    assert model.outcomes(6, 2, 2, runs=200, turn=False) - {"ok"}
    assert model.outcomes(10, 2, 8, runs=100, turn=False) == {"ok"}  # TPK7 4's 10 slots were safe without
    for ns in (9, 11):  # the fp16 kernel's consumers free a slot once read: one more group may be in flight
        for lag in (2, ns - 2, ns - 1):
            assert model.outcomes(ns, lag, 3, runs=40, early=True) == {"ok"}, (ns, lag)
