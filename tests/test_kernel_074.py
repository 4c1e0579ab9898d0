"""solutions/074_.../triton_fused against the reference, on small M (Triton interpreter on CPU-only machines).

Every output is poisoned with NaN before the call (every element must be written), the inputs are the
official kind (independent random tensors: each ReLU mask must come from its pre-activation input, each
weight gradient from the post-ReLU input), and M covers 1, odd sizes and more than one row tile. The
reference runs in float64; the interpreter computes the kernel's dots in fp32 ("ieee"), so the bound is
tight. The shipped table runs once through the entry point (fp16 operands); the other cases use large tiles
(fewer programs, so the interpreter is faster) and cover the code paths a Config selects: Q waiting for P
or recomputing D2, prefetching or chunked K loops, split-K by atomics or by the last arriver, R/S in one
K chunk or in a loop, one or every thread polling, several stage orders. After each call the per-tile
counters and the next call's counter header must be zero. A TRACE build's per-item records (timers read as
zero in the interpreter) check the ticket order: stage by stage, the IoU MLP's items first. The `gpu` test checks
official workloads with the official tolerance.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
import triton
import triton.language as tl

from harness import PROJECT_ROOT
from harness.correctness import compute_error_stats
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes
from harness.schema import Workload
from harness.solution import load_solution
from harness.tasks import load_task

TASK = "074_sam_hq_mask_decoder_iou_hypernetwork_fusion_backward"
SOLUTION_DIR = PROJECT_ROOT / "solutions" / TASK / "triton_fused"
ABS_BOUND = 1e-4  # fp32 ("ieee") kernel vs float64 reference, outputs of magnitude up to ~50 at M = 131
CVT_BOUND = 5e-3  # fp32 dots, but the `cvt` copies are fp16 (operand rounding: ~1e-4 at these sizes)
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


def _check_counters(kernel) -> None:
    """Tile counters back at zero; the next call's header zeroed by this call's ticket-0 program."""
    dev = torch.device("cpu")
    buf = kernel._COUNTERS[dev]
    nxt = kernel._PARITY[dev]  # the parity the next call uses
    assert int(buf[kernel._CNT_TILES :].abs().sum()) == 0, "per-tile counters must be left at zero"
    header = buf[nxt * kernel._HDR : (nxt + 1) * kernel._HDR]
    assert int(header.abs().sum()) == 0, "the next call's counters must be zero"


def _big(kernel, **changes):
    """Few programs per launch (the interpreter runs them one by one), fp32 dots."""
    base = kernel.Config(
        p=(64, 256),
        o=(256, 64),
        q=(64, 128, 256, 256),
        r=(256, 256, 64),
        t=(64, 256, 256, 256),
        s=(256, 256, 64),
        q_recompute=False,
        prefetch=True,
        t_atomic=True,
        single_k=True,
        order="POQRTS",
        precision="ieee",
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.usefixtures("poisoned_workspaces")
def test_entry_point_default_config(solution, kernel):
    """The shipped table (fp16 operands) through `run` (DPS, definition order), M = 3."""
    assert solution.spec.precision == "fp16-operands"
    assert kernel.pick_config(3).precision == "fp16"
    task, args, outs = _case(1, 3, seed=1)
    solution.fn(*args, *outs)
    _check(task, args, outs, FP16_BOUND)
    _check_counters(kernel)


@pytest.mark.usefixtures("poisoned_workspaces")
def test_empty_batch_writes_zero_gradients(solution, kernel):
    """M = 0 (batch_size 0) through `run`: the dx outputs are empty, every weight and bias gradient is zero."""
    task, args, outs = _case(0, 3, seed=2)
    solution.fn(*args, *outs)
    for name, out in zip(task.definition.outputs, outs, strict=True):
        assert out.numel() == 0 or bool((out == 0).all()), name
    assert sum(o.numel() for o in outs) > 0
    _check_counters(kernel)


# chunked K loops over every operand (no prefetch, R / S K loops over M): M = 70 with 64-row Q / T tiles and
# 32-row chunks; M = 20 with 16-row P tiles, 16-row R / S chunks and T by last-arriver sums
LOOPS_70 = dict(
    q=(64, 128, 256, 128),
    t=(64, 256, 256, 128),
    r=(256, 256, 32),
    s=(256, 256, 32),
    prefetch=False,
    single_k=False,
)
LOOPS_20 = dict(
    p=(16, 256),
    q=(64, 128, 512, 256),
    t=(64, 256, 512, 256),
    r=(256, 256, 16),
    s=(256, 256, 16),
    prefetch=False,
    single_k=False,
    t_atomic=False,
)

CASES = {
    # Q waits for P with a prefetched W_hid tile, T prefetches and adds atomically, R/S in one K chunk
    "m1-prefetch": ((1, 1), {}),
    # Q recomputes D2 (no wait for P), T split-K by last-arriver sums, chunked loops, another order
    "m3-recompute": (
        (3, 1),
        dict(
            q=(64, 128, 256, 128),
            t=(64, 256, 256, 128),
            q_recompute=True,
            prefetch=False,
            t_atomic=False,
            order="QSPTRO",
        ),
    ),
    # 2 row tiles (M = 70), R/S still in one K chunk (128 >= M), T prefetching with last-arriver sums
    "m70-single": ((2, 35), dict(r=(256, 256, 128), s=(256, 256, 128), t_atomic=False)),
    # 2 row tiles of Q/T/P, R/S K loops over M (M > their chunk), every thread polls, 2 K splits of 512
    "m131-loops": (
        (1, 131),
        dict(
            q=(128, 128, 512, 128),
            t=(128, 256, 512, 256),
            prefetch=False,
            single_k=False,
            poll_one=False,
            order="PQTSRO",
        ),
    ),
    # q_atomic: Q split items add masked partials into an fp32 D1 zeroed by P (IoU: 4 splits, atomics;
    # hypernetworks: 1 split, stores), P zeroes dx, S takes db_in from D1's column sums (one K chunk)
    "m3-qatomic": ((1, 3), dict(q_atomic=True)),
    # q_atomic with K loops (Q loads its mask before waiting, S sums D1 columns in its loop) and every fp16
    # copy: W_hid / W_in in conversion items of stage P (4 blocks of the IoU W_hid), H1r / X in P's tiles;
    # R / S in 2 M ranges adding into dW_hid / dW_in / db_in zeroed by P (zero items, P's first row tile)
    "m70-qatomic-cvt": ((2, 35), dict(LOOPS_70, q_atomic=True, cvt="whix", cvt_block=65536, rs_split=2)),
    # fp16 copies without q_atomic (last-arriver Q, T by last arriver), 2 row tiles of P, small blocks;
    # R / S in 4 M ranges of 16 rows (two of them empty), db_hid / db_in from the first range's items
    "m20-cvt": ((4, 5), dict(LOOPS_20, cvt="xhiw", cvt_block=32768, rs_split=4)),
    # cvt_stage: every fp16 copy by items of stages W (W_hid: Q waits) and C (W_in, H1r, X: T, R, S wait), P's
    # tiles computing D2 alone; 2 row tiles (M = 70), K loops, H1r / X blocks ending inside a block
    "m70-cvt-stage": ((2, 35), dict(LOOPS_70, cvt="whix", cvt_block=65536, cvt_stage=True, order="PWCOQRTS")),
    # the same with small blocks (80 W items) and another order (C first, O between P and W); M = 20, 16-row P tiles
    "m20-cvt-stage": ((4, 5), dict(LOOPS_20, cvt="whix", cvt_block=16384, cvt_stage=True, order="CPOWQRTS")),
    # the IoU MLP's O items in fp32 FMA (32-row chunks: M = 70 ends inside one; O 128 wide: 8 IoU items, one of them
    # with db_out), the hypernetworks' through the tensor cores
    "m70-o-fma": ((2, 35), dict(LOOPS_70, o=(128, 64), o_iou_fma=True)),
    # O 64 wide (the M <= 96 band's tiles): 16 IoU items, M = 70 ending inside the third chunk
    "m70-o64-fma": ((2, 35), dict(LOOPS_70, o=(64, 64), o_iou_fma=True)),
    # and M = 3, below one chunk, O 128 wide
    "m3-o-fma": ((1, 3), dict(o=(128, 32), o_iou_fma=True)),
    # only H1r and X copied (stage W empty), M = 131: X blocks of hypernetwork rows (a stride of 1024)
    "m131-cvt-stage-hx": (
        (1, 131),
        dict(
            q=(128, 128, 512, 128),
            t=(128, 256, 512, 256),
            r=(256, 256, 64),
            s=(256, 256, 64),
            prefetch=False,
            single_k=False,
            cvt="hx",
            cvt_block=32768,
            cvt_stage=True,
            order="PWCQOSTR",
        ),
    ),
}


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("case", list(CASES))
def test_any_m(kernel, case):
    (batch, points), changes = CASES[case]
    task, args, outs = _case(batch, points, seed=batch * 1000 + points)
    cfg = _big(kernel, **changes)
    kernel.launch(args, outs, cfg)
    _check(task, args, outs, CVT_BOUND if changes.get("cvt") else ABS_BOUND)
    _check_counters(kernel)
    sizes = kernel._stage_sizes(batch * points, cfg)
    if cfg.cvt_stage:  # the copies' items are in W / C, none in P (P's tiles: D2 only)
        fl = cfg.flags(batch * points)
        assert (sizes["W"] > 0) == fl["CVT_W"] and (sizes["C"] > 0) == (
            fl["CVT_I"] or fl["CVT_H"] or fl["CVT_X"]
        )
        assert sizes["P"] == kernel._stage_sizes(batch * points, dataclasses.replace(cfg, cvt=""))["P"]
    else:
        assert sizes["W"] == sizes["C"] == 0


def test_masks_come_from_pre_activations(kernel):
    """All pre-activations <= 0: every gradient behind a ReLU is zero, the output layer's is not."""
    task, args, outs = _case(1, 3, seed=7)
    names = list(task.definition.inputs)
    for i, name in enumerate(names):
        if name == "iou_hidden2" or (name.startswith("hyper_hidden2_") and "relu" not in name):
            args[i] = -args[i].abs()
    kernel.launch(args, outs, _big(kernel))
    _check(task, args, outs)
    by_name = dict(zip(task.definition.outputs, outs, strict=True))
    assert float(by_name["grad_iou_hidden_weight"].abs().max()) == 0.0
    assert float(by_name["grad_hyper_proj_in_weights"].abs().max()) == 0.0
    assert float(by_name["grad_iou_proj_out_weight"].abs().max()) > 0.0


def test_failed_launch_keeps_the_counter_set(kernel, monkeypatch):
    """A launch that raises (a configuration out of shared memory, say) leaves the counter parity as it was:
    the next call then uses the set the last issued call zeroed, and computes the right numbers."""
    task, args, outs = _case(1, 3, seed=7)
    cfg = _big(kernel)
    kernel.launch(args, outs, cfg)  # a call that runs: the counter buffer and the parity exist
    dev = torch.device("cpu")
    before = kernel._PARITY[dev]

    class _Refuses:
        def __getitem__(self, grid):
            def launch(*_args, **_kwargs):
                raise RuntimeError("out of resource: shared memory")

            return launch

    with monkeypatch.context() as patched:
        patched.setattr(kernel, "_fused_bwd_kernel", _Refuses())
        with pytest.raises(RuntimeError, match="out of resource"):
            kernel.launch(args, outs, cfg)
    assert kernel._PARITY[dev] == before, "a launch that raised flipped the counter parity"
    _check_counters(kernel)
    for out in outs:
        out.fill_(float("nan"))
    kernel.launch(args, outs, cfg)
    _check(task, args, outs)
    _check_counters(kernel)


@triton.jit
def _zero_i64(dep):
    return dep.to(tl.int64) * 0


@triton.jit
def _zero_i32(dep):
    return dep.to(tl.int32) * 0


def _ticket_items(kernel, monkeypatch, m: int, cfg) -> list[tuple[str, int, int]]:
    """(stage letter, MLP, index in the MLP's stage) of every ticket, from a TRACE build's records (the
    interpreter has no timers or SM ids: those read as 0)."""
    for name, fn in (("_now", _zero_i64), ("_clock", _zero_i64), ("_smid", _zero_i32)):
        monkeypatch.setattr(kernel, name, fn)
    task, args, outs = _case(1, m, seed=11)
    n = kernel.n_items(m, cfg)
    trace = torch.full((n * 6,), -1, dtype=torch.int64)
    kernel.launch(args, outs, cfg, trace=trace)
    _check(task, args, outs)
    rec = trace.view(n, 6)
    return [(kernel._STAGES[int(r[4]) & 15], (int(r[4]) >> 4) & 15, int(r[5])) for r in rec]


@pytest.mark.parametrize("order", ["POQRTS", "PQTSRO"])
def test_ticket_order_follows_the_stage_order(kernel, monkeypatch, order):
    """Stages take their tickets in Config.order; inside a stage the IoU MLP's items come first, then the
    hypernetworks' (MLPs 1..4), each MLP's items in index order, every item of the stage exactly once."""
    cfg = _big(kernel, order=order)
    items = _ticket_items(kernel, monkeypatch, 3, cfg)
    assert [st for st, _, _ in items] == sorted((st for st, _, _ in items), key=order.index)
    sizes = kernel._stage_sizes(3, cfg)
    for st in order:
        got = [(mlp, lt) for s, mlp, lt in items if s == st]
        assert len(got) == sizes[st] and [mlp for mlp, _ in got] == sorted(mlp for mlp, _ in got), st
        for mlp in range(5):
            lts = [lt for k, lt in got if k == mlp]
            assert lts and lts == list(range(len(lts))), (st, mlp)


#: The tune.py variant each CONFIG_TABLE band ships (NOTES.md holds their measurements): the table must not
#: drift from what was measured.
MEASURED_BANDS = {
    96: "s3_hx_nr_r128s128_ofma",
    192: "s3_w4_x_cs",
    384: "b1n32_o128_cs",
    1 << 62: "b1n32_best_o128_ofma",
}


def test_config_table_is_the_measured_variants(kernel):
    from harness.tasks import load_module

    tune = load_module(SOLUTION_DIR / "tune.py", "_test074_tune")
    assert [m for m, _ in kernel.CONFIG_TABLE] == list(MEASURED_BANDS)
    for max_m, cfg in kernel.CONFIG_TABLE:
        measured = tune.VARIANTS[MEASURED_BANDS[max_m]]
        assert dataclasses.asdict(cfg) == dataclasses.asdict(measured), f"band M <= {max_m}"


def test_config_table_and_validation(kernel):
    table = kernel.CONFIG_TABLE
    assert [m for m, _ in table] == sorted(m for m, _ in table) and table[-1][0] >= 1 << 31
    for m in (1, 64, 384, 385, 2048):
        assert kernel.pick_config(m) in [cfg for _, cfg in table]
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, q=(48, 64, 256, 256))
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, precision="bf16")
    with pytest.raises(ValueError):  # T waits for Q: Q must come first in ticket order
        dataclasses.replace(kernel.DEFAULT_CONFIG, order="POTQRS")
    with pytest.raises(ValueError):  # prefetch needs the whole K range in one chunk
        dataclasses.replace(kernel.DEFAULT_CONFIG, t=(64, 64, 256, 64), prefetch=True)
    with pytest.raises(ValueError):  # q_atomic needs Q to wait for P (P zeroes D1)
        dataclasses.replace(kernel.DEFAULT_CONFIG, q_recompute=True, q_atomic=True, q=(64, 64, 256, 64))
    with pytest.raises(ValueError):  # W_in's copy is made by P: T must wait for Q waiting for P
        dataclasses.replace(kernel.DEFAULT_CONFIG, q_recompute=True, cvt="i", q=(64, 64, 256, 64))
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt="wz")
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt_block=3000)
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, rs_split=3)
    with pytest.raises(ValueError):  # P zeroes dW_in, which S adds into: S must wait (via Q) for P
        dataclasses.replace(kernel.DEFAULT_CONFIG, q_recompute=True, rs_split=2, q=(64, 64, 256, 64))
    with pytest.raises(ValueError):  # cvt_stage: the order names W and C
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt_stage=True)
    with pytest.raises(ValueError):  # W and C only with cvt_stage
        dataclasses.replace(kernel.DEFAULT_CONFIG, order="PWCOQRTS")
    with pytest.raises(ValueError):  # Q waits for W (W_hid's copy)
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt_stage=True, order="POQWCRTS")
    with pytest.raises(ValueError):  # R, T, S wait for C
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt_stage=True, order="PWOQRCTS")
    with pytest.raises(ValueError):
        dataclasses.replace(kernel.DEFAULT_CONFIG, cvt_stage=True, order="PWCOQRTS", rs_split=2)
    # W and C, which have no items without cvt_stage, take the last positions of the ORDER code
    assert kernel.DEFAULT_CONFIG.order_code() == sum(
        "POQRTSWC".index(c) << (4 * i) for i, c in enumerate("POQRTSWC")
    )
    # copies only where the operand is loaded after the wait (not prefetched, not single-chunk)
    flags = dataclasses.replace(kernel.DEFAULT_CONFIG, cvt="whix", rs_split=2).flags(64)
    assert flags == {
        "SINGLE_K": True,
        "CVT_W": False,
        "CVT_I": False,
        "CVT_H": False,
        "CVT_X": False,
        "RSS": 1,
    }
    flags = dataclasses.replace(kernel.DEFAULT_CONFIG, cvt="hx", prefetch=False, rs_split=2).flags(1000)
    assert flags == {
        "SINGLE_K": False,
        "CVT_W": False,
        "CVT_I": False,
        "CVT_H": True,
        "CVT_X": True,
        "RSS": 2,
    }


def _check_on_gpu(solution, task, workload, tolerance, label: str) -> None:
    """One fresh round on the GPU against the fp32 reference; outputs start as NaN (every element written)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    args = gen_inputs(task.definition, workload, device="cuda")
    outs = allocate_outputs(task.definition, resolve_axes(task.definition, workload), device="cuda")
    for out in outs:
        out.fill_(float("nan"))
    refs = task.reference(*args)
    solution.fn(*args, *outs)
    torch.cuda.synchronize()
    for name, out, ref in zip(task.definition.outputs, outs, refs, strict=True):
        stats = compute_error_stats(out, ref, tolerance)
        assert stats.passed, f"{label} {name}: {stats.report()}"


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
def test_official_workloads_gpu(solution):
    """Every official workload, one fresh round each, official tolerance (fp16 operands vs the fp32 reference)."""
    task = load_task(TASK)
    torch.manual_seed(200)
    for workload in task.workloads:
        _check_on_gpu(solution, task, workload, workload.tolerance, workload.uuid[:8])


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 96, 97, 192, 193, 385, 1000, 2048])
def test_odd_sizes_gpu(solution, m):
    """M on both sides of every CONFIG_TABLE boundary, odd and beyond the official range, with the tightest
    official tolerance."""
    task = load_task(TASK)
    tolerance = min((w.tolerance for w in task.workloads), key=lambda t: t.max_atol)
    workload = Workload(uuid=f"odd-{m}", axes={"batch_size": m, "point_batch_size": 1}, inputs={})
    torch.manual_seed(m)
    _check_on_gpu(solution, task, workload, tolerance, f"M={m}")
