"""Probe (session 19): 077's window-attention core in Gluon, warp-specialized, against the same maths in Triton.

Not part of the solution (`sources` lists kernel.py only). Gluon (`triton.experimental.gluon`) ships inside Triton
3.6, the official environment's version, and a Python solution may use it: the evaluator blocks only in-process
C++ compilation. It exposes what Triton's `tl` does not on sm_90: warp specialization with explicit register
budgets, mbarriers, TMA and asynchronous wgmma.

The core: items are (window, head) pairs, Q, K, V [items * 256, 64] fp16 (already gathered); key slots >= N_REAL
are padding (masked). Per item S = Q K^T, softmax over the real keys, O = P V / l. No rel-pos bias, no gather:
the question is what warp specialization does for the softmax-bound part of the shipped kernel.

Gluon kernel: per CTA one TMA loader warp and two consumer warpgroups, persistent over items. The loader streams
each item's K and V (two stages) and its four 64-row Q tiles; consumer warpgroup w takes tiles w and w + 2, so the
two work on the same K / V but drift apart freely (one's softmax beside the other's wgmma). Triton twin: the same
maths as one tl kernel (persistent, pipelined loads, 128 x 256 or 64 x 256 tiles).

    python <this folder>/gluon_attn_probe.py                  # H200: check, time (writes $OUT/gluon_attn.json)
    python <this folder>/gluon_attn_probe.py --compile-only   # no GPU: build both for sm_90a, print resources
"""

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# Triton 3.6 (the H200's and the official environment's) names the TMA copies async_copy_global_to_shared /
# async_copy_shared_to_global; 3.9 (CI's) renamed them async_load / async_store and made the old names raise.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

SLOTS = 256
HD = 64
QT = 64  # query rows per consumer tile


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, kv_ready, kv_free, n_items):
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    li = 0
    for item in range(pid, n_items, nprog):
        s = li % 2
        mbarrier.wait(kv_free.index(s), ((li // 2) & 1) ^ 1)
        mbarrier.expect(kv_ready.index(s), 2 * k_desc.block_type.nbytes)
        tma_load(k_desc, [item * 256, 0], kv_ready.index(s), k_smem.index(s))
        tma_load(v_desc, [item * 256, 0], kv_ready.index(s), v_smem.index(s))
        for t in gl.static_range(4):
            mbarrier.wait(q_free.index(t), (li & 1) ^ 1)
            mbarrier.expect(q_ready.index(t), q_desc.block_type.nbytes)
            tma_load(q_desc, [item * 256 + t * 64, 0], q_ready.index(t), q_smem.index(t))
        li += 1


@gluon.jit
def _consumer(
    o_desc,
    q_smem,
    k_smem,
    v_smem,
    o_smem,
    q_ready,
    q_free,
    kv_ready,
    kv_free,
    n_items,
    qk_scale,
    WG: gl.constexpr,
    N_REAL: gl.constexpr,
):
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    col = gl.arange(0, 256, layout=gl.SliceLayout(0, s_layout))
    key_ok = gl.expand_dims(col < N_REAL, 0)
    s_zero = gl.zeros([64, 256], gl.float32, s_layout)
    o_zero = gl.zeros([64, 64], gl.float32, o_layout)
    my_o = o_smem.index(WG)
    li = 0
    for item in range(pid, n_items, nprog):
        s = li % 2
        mbarrier.wait(kv_ready.index(s), (li // 2) & 1)
        k_t = k_smem.index(s).permute((1, 0))
        for tt in gl.static_range(2):
            t = WG + 2 * tt
            q_t = q_smem.index(t)
            mbarrier.wait(q_ready.index(t), li & 1)
            acc = warpgroup_mma(q_t, k_t, s_zero, use_acc=False, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(q_free.index(t))
            x = gl.where(key_ok, acc, -float("inf"))
            m = gl.max(x, axis=1)
            p = gl.exp2((x - gl.expand_dims(m, 1)) * qk_scale)
            l_sum = gl.sum(p, axis=1)
            pa = gl.convert_layout(p.to(gl.float16), p_layout)
            o = warpgroup_mma(pa, v_smem.index(s), o_zero, use_acc=False, is_async=True)
            o = warpgroup_mma_wait(num_outstanding=0, deps=(o,))
            inv = gl.convert_layout(1.0 / l_sum, gl.SliceLayout(1, o_layout))
            o = o * gl.expand_dims(inv, 1)
            tma.store_wait(pendings=0)
            my_o.store(o.to(gl.float16))
            fence_async_shared()
            tma_store(o_desc, [item * 256 + t * 64, 0], my_o)
        mbarrier.arrive(kv_free.index(s))
        li += 1
    tma.store_wait(pendings=0)


@gluon.jit
def gluon_attn_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    n_items,
    qk_scale,
    N_REAL: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    LOADER_REGS: gl.constexpr,
):
    q_smem = gl.allocate_shared_memory(gl.float16, [4, 64, 64], q_desc.layout)
    k_smem = gl.allocate_shared_memory(gl.float16, [2, 256, 64], k_desc.layout)
    v_smem = gl.allocate_shared_memory(gl.float16, [2, 256, 64], v_desc.layout)
    o_smem = gl.allocate_shared_memory(gl.float16, [2, 64, 64], o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    q_free = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    kv_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    kv_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(4):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_free.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(kv_ready.index(i), count=1)
        mbarrier.init(kv_free.index(i), count=2)
    fence_async_shared()
    # both consumers run _consumer with their warpgroup index; N_REAL reaches them as a runtime value, as it did
    # in the measured build (there through a tuple variable, which turns constexprs into tensors)
    n_real = gl.to_tensor(N_REAL)
    gl.warp_specialize(
        [
            (
                _consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    o_smem,
                    q_ready,
                    q_free,
                    kv_ready,
                    kv_free,
                    n_items,
                    qk_scale,
                    0,
                    n_real,
                ),
            ),
            (
                _consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    o_smem,
                    q_ready,
                    q_free,
                    kv_ready,
                    kv_free,
                    n_items,
                    qk_scale,
                    1,
                    n_real,
                ),
            ),
            (
                _loader,
                (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, kv_ready, kv_free, n_items),
            ),
        ],
        [4, 1],
        [CONSUMER_REGS, LOADER_REGS],
    )


def gluon_descs(q, k, v, o):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    lq = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16)
    lk = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16)
    return (
        TensorDescriptor.from_tensor(q, [64, 64], lq),
        TensorDescriptor.from_tensor(k, [256, 64], lk),
        TensorDescriptor.from_tensor(v, [256, 64], lk),
        TensorDescriptor.from_tensor(o, [64, 64], lq),
    )


def gluon_attn(q, k, v, o, n_items, sms, n_real=196, consumer_regs=232, loader_regs=40):
    grid = (min(n_items, sms),)
    gluon_attn_kernel[grid](
        *gluon_descs(q, k, v, o), n_items, SCALE, n_real, consumer_regs, loader_regs, num_warps=4
    )


@triton.jit
def triton_attn_kernel(
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    n_items,
    qk_scale,
    N_REAL: tl.constexpr,
    BM: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    tiles: tl.constexpr = 256 // BM
    col = tl.arange(0, 256)
    for unit in tl.range(pid, n_items * tiles, nprog, num_stages=STAGES):
        item = unit // tiles
        t = unit % tiles
        q = q_desc.load([item * 256 + t * BM, 0])
        k = k_desc.load([item * 256, 0])
        v = v_desc.load([item * 256, 0])
        s = tl.dot(q, tl.trans(k))
        s = tl.where(col[None, :] < N_REAL, s, -float("inf"))
        m = tl.max(s, axis=1)
        p = tl.math.exp2((s - m[:, None]) * qk_scale)
        l_sum = tl.sum(p, axis=1)
        o = tl.dot(p.to(tl.float16), v)
        o = o / l_sum[:, None]
        o_desc.store([item * 256 + t * BM, 0], o.to(tl.float16))


def triton_attn(q, k, v, o, n_items, sms, n_real=196, bm=128, warps=8, stages=2, ctas=1):
    from triton.tools.tensor_descriptor import TensorDescriptor

    descs = (
        TensorDescriptor.from_tensor(q, [bm, 64]),
        TensorDescriptor.from_tensor(k, [256, 64]),
        TensorDescriptor.from_tensor(v, [256, 64]),
        TensorDescriptor.from_tensor(o, [bm, 64]),
    )
    grid = (min(n_items * (256 // bm), ctas * sms),)
    triton_attn_kernel[grid](*descs, n_items, SCALE, n_real, bm, stages, num_warps=warps)


HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp")
SCALE = 1.4426950408889634 / 8  # log2(e) / sqrt(64): softmax in exp2
res = {"log": [], "times": {}}


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    res["log"].append(s)


def save():
    with open(os.path.join(OUT, "gluon_attn.json"), "w") as f:
        json.dump(res, f, indent=1)


def make(n, dev="cuda"):
    g = torch.Generator(device=dev).manual_seed(n)
    q, k, v = (torch.randn(n * 256, 64, device=dev, generator=g).half() for _ in range(3))
    o = torch.full(
        (n * 256, 64), float("nan"), device=dev, dtype=torch.float16
    )  # every element must be written
    return q, k, v, o


def reference(q, k, v, n, lo, hi, n_real=196):
    qq, kk, vv = (t.view(n, 256, 64)[lo:hi].float() for t in (q, k, v))
    s = qq @ kk.transpose(1, 2) / 8
    s[:, :, n_real:] = -float("inf")
    return torch.softmax(s, -1) @ vv


def check(fn, label, n, n_real=196):
    q, k, v, o = make(n)
    fn(q, k, v, o, n)
    torch.cuda.synchronize()
    worst = 0.0
    for lo in range(0, n, 512):
        hi = min(n, lo + 512)
        got = o.view(n, 256, 64)[lo:hi].float()
        if not torch.isfinite(got).all():
            log(label, "n", n, "NON-FINITE output")
            return math.inf
        worst = max(worst, (got - reference(q, k, v, n, lo, hi, n_real)).abs().max().item())
    log(label, "n", n, "max err", f"{worst:.2e}")
    return worst


def _repository() -> None:
    """Put the repository on sys.path (harness, tune.py's imports) when the probe runs as a script."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    if root not in sys.path:
        sys.path.insert(0, root)


def load_tune():
    """tune.py of this folder: its stage Timer (2 x L2 flushed, a GPU spin ahead of the events, median of 10)
    and its attention case (the tl stage with its data) are this probe's timer and reference stage."""
    _repository()
    from harness.tasks import load_module

    return load_module(Path(HERE) / "tune.py", "_tune077_probe")


def compile_only() -> int:
    """Build the Gluon kernel and the Triton twin for sm_90a (no GPU); print their resources."""
    _repository()
    from triton.tools.tensor_descriptor import TensorDescriptor as TlDescriptor

    from harness.aot import compile_for, kernel_resources

    q, k, v, o = make(8, "cpu")
    built = {
        "gluon_ws": compile_for(
            gluon_attn_kernel, (*gluon_descs(q, k, v, o), 8, SCALE, 196, 232, 40), {"num_warps": 4}, 90
        ),
        "triton_bm128_w8": compile_for(
            triton_attn_kernel,
            (
                *(TlDescriptor.from_tensor(t, [b, 64]) for t, b in ((q, 128), (k, 256), (v, 256), (o, 128))),
                8,
                SCALE,
                196,
                128,
                2,
            ),
            {"num_warps": 8},
            90,
        ),
    }
    for name, kern in built.items():
        print(json.dumps({"kernel": name, **kernel_resources(kern)}))
    return 0


def main() -> int:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    t0 = time.time()
    log("torch", torch.__version__, "triton", triton.__version__, "SMs", sms)
    variants = {
        "gluon_ws": lambda q, k, v, o, n: gluon_attn(q, k, v, o, n, sms),
        "gluon_ws_r240": lambda q, k, v, o, n: gluon_attn(
            q, k, v, o, n, sms, consumer_regs=240, loader_regs=24
        ),
        "triton_bm128_w8": lambda q, k, v, o, n: triton_attn(q, k, v, o, n, sms, bm=128, warps=8, stages=2),
        "triton_bm64_w4_c2": lambda q, k, v, o, n: triton_attn(
            q, k, v, o, n, sms, bm=64, warps=4, stages=2, ctas=2
        ),
    }
    ok = {}
    for name, fn in variants.items():
        try:
            ok[name] = max(check(fn, name, n, 196) for n in (1, 3, 133, 1000)) < 5e-3
        except Exception:  # noqa: BLE001
            log(name, "FAILED", traceback.format_exc()[-1500:])
            ok[name] = False
        save()
    tune = load_tune()
    timer = tune.Timer()
    try:  # 077's tl attention stage at 2 x 256 x 256 (bias and gathers included), built once
        stage, stage_cfg = tune._attn_case(2, 256, 256)[0], tune.kernel.ATTN_CONFIGS["fp16"]
    except Exception:  # noqa: BLE001
        log("shipped stage FAILED", traceback.format_exc()[-1500:])
        stage = None
    n = 2 * 19 * 19 * 12  # the (window, head) items of a 2 x 256 x 256 call
    q, k, v, o = make(n)
    for rnd in range(3):
        for name, fn in variants.items():
            if ok[name]:
                t = timer.median_ms(lambda fn=fn: fn(q, k, v, o, n))
                res["times"].setdefault(name, []).append(t)
                log(f"round {rnd} {name}: {t:.4f} ms for {n} items")
        if stage is not None:
            t = timer.median_ms(lambda: stage(stage_cfg))
            res["times"].setdefault("shipped_077_stage", []).append(t)
            log(f"round {rnd} shipped 077 attention stage (2 x 256 x 256, bias and gathers): {t:.4f} ms")
        save()
    log(f"done in {time.time() - t0:.0f}s")
    save()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true", help="build for sm_90a without a GPU")
    sys.exit(compile_only() if parser.parse_args().compile_only else main())
