"""075 SAM-HQ two-way transformer block: one persistent Triton kernel (or seven launches of its phases).

Per item n = (batch, point): T prompt tokens q [T, 256] (+ pe qp), S image tokens k [S, 256] (+ pe kp).
The key side is folded so that every key token only meets 8*T vectors of width 256:
  token->image (t2i), head h, token t:  score(s) = (Wk_h^T q_ht) . (k_s + kp_s) + q_ht . bk_h   (times 1/4)
      softmax over s, then sum_s p(s) v_s = Wv_h (sum_s p(s) k_s) + bv_h   (the weights sum to 1)
  image->token (i2t), head h, token t:  score(s) = (Wq_h^T K_ht) . (k_s + kp_s) + bq_h . K_ht  (times 1/4)
      softmax over t, out_s = k_s + sum_ht p(s,h,t) (Wout[:, h] V_ht) + bout, then LayerNorm4.
Scores are kept in the log2 domain (the 1/4 scale and log2(e) are folded into the vectors), so exp2.

Query rows are flat: row r = item * T + t (R = items * T rows, as the [B, P, T, 256] tensors lie).
Phases (work items in brackets; a row tile is 16 flat rows):
  1 [8 heads x item groups]  self-attention of one head for IPB = 16 // T whole items: q, k, v of the head,
                             softmax, its slice of the out-projection, atomically into y1acc (head 0 adds
                             the residual q + bout)
  2 [8 heads x row tiles]    LN1 -> x1 (head 0 adds x1 + bout_t2i into y2acc); t2i query of head h folded:
                             A1 = Wk_h^T q_h (rounded to TF32), c1 = q_h . bk_h
  3 [items x chunks x halves] t2i pass over a key chunk: scores A1 (k + kp)^T (TF32 tensor cores), online
                             softmax, sum_s p k_s; partial (max, sum, acc) per chunk
  4 [row tiles x 8 x ND]     combine the chunk partials of head h on one channel slice (summed against their
                             global max, read first: Config.p4_gfirst), @ Wv_h(slice)^T, @ Wout_h^T,
                             atomically into y2acc
  5 [row tiles x 2048/HB]    LN2, one MLP hidden block (lin1, ReLU, lin2), atomically into y3acc (block 0
                             adds the residual x2 + b2)
  6 [8 heads x row tiles]    LN3 -> output_queries (head 0); i2t key/value of head h folded:
                             A2 = Wq_h^T K_h (TF32), c2 = bq_h . K_h, VW = Wout[:, h] V_h (stored transposed,
                             split into a TF32 part and the rest for 3xTF32)
  7 [items x chunks]         i2t pass: scores, softmax over each head's tokens, values (p split in two TF32
                             parts; VW's TF32 residual too with v_terms=3), residual, LN4, store; also
                             re-zeroes the accumulators for the next call (its own launch since session 10;
                             Config.p7_gluon: that launch in Gluon on sm_90 with fp16 operands where key
                             chunks have two 64-token tiles or more, `_i2t_gluon16_kernel`)
Key-side rows: 8 heads x TPK padded tokens per item (TPK 8 for T <= 8, 16 above, and 4 for T <= 4 where key
chunks are short: Config.tpk4_chunk; the i2t side, phases 6 and 7, has its own TPK7, 4 for T <= 4:
Config.tpk7_min). Phases 1a and 6a split the contractions of 1 and 6.
The query side (phases 1, 2, 4, 5, 6) runs on the tensor cores in one TF32 product of operands rounded to
nearest (Config.q_terms 1; 3xTF32, about fp32, with q_terms 3 or per phase with q3_phases), the 256-wide
contractions in a real loop over KC-wide pieces (one copy of the code), the [16, 256] outputs optionally in a
real loop over NC-wide column pieces (Config.nc < 256: less code), spread over many small work items;
only the tiny attention products are fp32 FMA dots (an unrolled FMA dot is ~16 B of code per FMA, and code
is what costs here: see NOTES.md). The key passes work on transposed tiles [256 channels, BS tokens], so
every tensor-core operand that comes from memory (A1, A2, VW) is the A operand and every computed one the B
operand (Triton keeps a computed A operand in registers, replicated per warpgroup).
In "persistent" mode one launch runs all phases on a grid of one program per SM; phase k starts when its
counter (work items of phase k done, release/acquire atomics, bounded spins) reaches its item count; the
last program out resets the counters. In "multi" mode each phase is its own launch (one item per program).
Layouts: every tensor is contiguous fp32; weights are [out, in] as in F.linear. No `from __future__ import
annotations` here: @triton.jit reads the real `tl.constexpr` annotations.
"""

import inspect
import math
import os
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

C_HID = 256  # hidden width
D_MLP = 2048
H200_SMS = 132  # the programs the CPU path plans for (Config.plan_programs) when it targets sm_90a
#: The CPU path (interpreter; `solbench build`'s recording) plans for a GPU it does not have: the target named
#: by this environment variable (the harness sets it per architecture it builds for), sm_90a by default.
TARGET_ARCH_ENV = "SOLBENCH_TARGET_ARCH"
TARGETS = {"sm_90a": (9, H200_SMS), "sm_100a": (10, 148)}  # (compute capability major, SMs: H200, B200)
RT = 16  # query rows per row tile
SA_SCALE = tl.constexpr(1.4426950408889634 / math.sqrt(32.0))  # log2(e) / sqrt(head_dim 32)
X_SCALE = tl.constexpr(0.25 * 1.4426950408889634)  # log2(e) / sqrt(head_dim 16)
_NEG = tl.constexpr(-1.0e30)  # finite "minus infinity": fully masked rows stay NaN-free
# phase 3 with fp16 operands: its softmax weights p scaled by 2^15 (at most 32768, below fp16's 65504), so that
# weights down to 2^-29 stay in fp16's normal range (its smallest normal is 2^-14)
P16_SHIFT = tl.constexpr(15.0)
_RT = tl.constexpr(RT)


# ----------------------------------------------------------------------------------------- helpers


@triton.jit
def _arrive(ptr):
    # every thread's stores/atomics of this phase precede the release by the one thread doing the add
    tl.debug_barrier()
    tl.atomic_add(ptr, 1, sem="release", scope="gpu")


@triton.jit
def _wait(ptr, target, MAXSPIN: tl.constexpr, SPIN_NS: tl.constexpr):
    v = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
    i = 0
    while (v < target) & (i < MAXSPIN):  # bounded: a broken schedule gives wrong numbers, never a hang
        if SPIN_NS > 0:  # back off a little: fewer polls of the counter's L2 line
            tl.inline_asm_elementwise(
                "mov.u32 $0, 0;\n\tnanosleep.u32 $1;",
                "=r,r",
                [v * 0 + SPIN_NS],
                dtype=tl.int32,
                is_pure=False,
                pack=1,
            )
        v = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
        i += 1
    tl.debug_barrier()


@triton.jit
def _gtime():
    """%globaltimer (ns, one clock for all SMs; GPU only: inline PTX), as a [1] tensor."""
    z = tl.zeros([1], tl.int64)
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,l", [z], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _stamp(times, k, pid):
    """Program 0 writes %clock64 and %globaltimer to times[2k], times[2k+1] (GPU only: inline PTX)."""
    if pid == 0:
        z = tl.zeros([1], tl.int64)
        ck = tl.inline_asm_elementwise(
            "mov.u64 $0, %clock64;", "=l,l", [z], dtype=tl.int64, is_pure=False, pack=1
        )
        o = tl.arange(0, 1)
        tl.store(times + 2 * k + o, ck)
        tl.store(times + 2 * k + 1 + o, _gtime())


@triton.jit
def _item_start(INSTR: tl.constexpr):
    """A work item's start time for its INSTR trace (globaltimer; 0 when not tracing)."""
    if INSTR:
        return _gtime()
    else:
        return tl.zeros([1], tl.int64)


@triton.jit
def _item_done(
    sync, slot, times, G, NMAX, ph: tl.constexpr, w, t0, PERSIST: tl.constexpr, INSTR: tl.constexpr
):
    """Work item w of phase ph is done: persistent mode counts it in sync[slot]; INSTR records that it ran from
    t0 to now (globaltimer; the layout is `instr_size`'s)."""
    if PERSIST:
        _arrive(sync + slot)
    if INSTR:
        o = 16 + 6 * G + ((ph - 1) * NMAX + w) * 2 + tl.arange(0, 1)
        tl.store(times + o, t0)
        tl.store(times + o + 1, _gtime())


@triton.jit
def _phase_barrier(
    sync,
    k: tl.constexpr,
    n_items,
    times,
    pid,
    MAXSPIN: tl.constexpr,
    SPIN_NS: tl.constexpr,
    INSTR: tl.constexpr,
):
    """Persistent mode, after phase k + 1: wait until its n_items items arrived (counter k); with INSTR,
    program 0 then stamps the start of phase k + 2."""
    _wait(sync + k, n_items, MAXSPIN, SPIN_NS)
    if INSTR:
        _stamp(times, k + 1, pid)
        tl.store(times + 16 + k * tl.num_programs(0) + pid + tl.arange(0, 1), _gtime())  # every program


@triton.jit
def _slot(pid, G, SH: tl.constexpr):
    """Persistent mode: the first work item of program pid in a phase whose items start on program SH (item w on
    program (w + SH) % G; `Config.shift2`, `shift56`). SH 0: pid itself, the code of the unshifted phases."""
    if SH == 0:
        return pid
    else:
        return (pid + (G - SH % G)) % G


@triton.jit
def _acc_add(ptr, val, mask, ST: tl.constexpr):
    """Add val into a query-side accumulator (relaxed atomics). ST (`Config.diag_stores`, a diagnostic that computes
    wrong sums): plain stores instead, to time a phase without its atomics."""
    if ST:
        tl.store(ptr, val, mask=mask)
    else:
        tl.atomic_add(ptr, val, mask=mask, sem="relaxed", scope="gpu")


@triton.jit
def _first_live(pid, n):
    """Whether program pid has a first work item among n, as a [1] mask for the loads of that item issued
    before the phase's barrier (the interpreter refuses a scalar comparison as a load mask)."""
    return pid + tl.zeros([1], tl.int32) < n


@triton.jit
def _live(w, n, WS: tl.constexpr):
    """Whether item w of a phase's n is live, where `Config.warm_sites` may run the phase's code dry at its call
    site (WS != 0; GPU: a scalar, the interpreter's test form WS < 0: a [1] mask); compile-time True otherwise."""
    if WS == 0:
        return True
    elif WS > 0:
        return w < n
    else:
        return _first_live(w, n)


@triton.jit
def _dry_end(pid, G, w0, n, nxt, WS: tl.constexpr):
    """`Config.warm_sites`: (dry, loop end) of a phase whose items for program pid are w0, w0 + G, ... below n.
    WS > 0 (GPU, persistent): one of the last WS programs with no item in this phase nor in the next (`nxt`) runs
    the phase's code once with `live` False (masked memory operations, no count) at the call site that the live
    items use, so that those instructions are in L2 when the chain reaches them; being dry, it does not wait for
    the phase before. WS < 0 (the interpreter's test form, one program): every program runs one dry iteration
    after its items and waits as before. WS 0: (False, n), the loop as it was."""
    if WS == 0:
        return False, n
    elif WS > 0:
        dry = (pid >= G - WS) & (w0 >= n) & nxt
        return dry, tl.where(dry, w0 + 1, n)
    else:
        return False, w0 + tl.cdiv(tl.maximum(n - w0, 0), G) * G + 1


@triton.jit
def _prefetch_l2(ptrs):
    """Fire-and-forget L2 prefetch of the 128 B lines holding `ptrs` (GPU only: inline PTX)."""
    tl.inline_asm_elementwise(
        "mov.u32 $0, 0;\n\tprefetch.global.L2 [$1];", "=r,l", [ptrs], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _prefetch_share(ptr, n_elem, part, n_parts, LP: tl.constexpr):
    """Prefetch share `part` of `n_parts` of a contiguous fp32 array (at most LP lines of 32 floats)."""
    n_lines = (n_elem + 31) // 32
    per = (n_lines + n_parts - 1) // n_parts
    ln = part * per + tl.arange(0, LP)
    ok = (ln < n_lines) & (tl.arange(0, LP) < per)
    _prefetch_l2(ptr + tl.where(ok, ln, 0) * 32)


@triton.jit
def _prefetch_vectors(
    pid, G, ln1w, ln1b, t_bq, t_bk, t_bv, t_bo, ln2w, ln2b, m_b1, m_b2, ln3w, ln3b, i_bq, i_bk, i_bv, i_bo, ln4w,
    ln4b,
):  # fmt: skip
    """L2 prefetches of the LayerNorm parameters and biases that phases 2..7 read right after their barriers
    (`Config.prefetch_vectors`): 17 vectors, ~24 KB, all by the last program (one instruction a thread each)."""
    if pid == G - 1:  # each vector whole (one share of one): 64, 8 or 4 lines of 128 B
        _prefetch_share(m_b1, 2048, 0, 1, 64)
        for v in tl.static_range(11):  # the 256-wide ones
            _prefetch_share(
                (ln1w, ln1b, t_bo, ln2w, ln2b, m_b2, ln3w, ln3b, i_bo, ln4w, ln4b)[v], 256, 0, 1, 8
            )
        for v in tl.static_range(6):  # the 128-wide ones (t2i / i2t q, k, v biases)
            _prefetch_share((t_bq, t_bk, t_bv, i_bq, i_bk, i_bv)[v], 128, 0, 1, 4)


@triton.jit
def _prefetch_tokens(k_ptr, kp_ptr, item, S, first, lo, hi, NT: tl.constexpr, C: tl.constexpr):
    """Prefetch the key and key-pe rows [first, first + NT) of an item, clipped to [lo, hi)."""
    ln = tl.arange(0, NT * 8)  # 8 lines of 128 B per 1 KB token row
    tok = first + ln // 8
    tok = tl.where((tok >= lo) & (tok < hi), tok, lo)
    off = (item * S + tok) * C + (ln % 8) * 32
    _prefetch_l2(k_ptr + off)
    _prefetch_l2(kp_ptr + off)


@triton.jit
def _prefetch_later(
    t_wq, t_wk, t_wv, t_wo, m_w1, m_w2, i_wq, i_wk, i_wv, i_wo, k_ptr, kp_ptr, pid, G, n3, NHALF, n_ch, CH, S,
    PF_W: tl.constexpr, PF_TOK: tl.constexpr, C: tl.constexpr, PARTS: tl.constexpr = 7,
):  # fmt: skip
    """L2 prefetches of what phases 2..6 read from HBM first (PARTS 1: the t2i weights, 4: the MLP and i2t
    weights, with PF_W) and of the start of this program's first key chunk (PARTS 2: PF_TOK tokens); the
    self-attention's weights are not among them."""
    if PF_W and (PARTS & 1) != 0:
        _prefetch_share(t_wq, 32768, pid, G, 8)
        _prefetch_share(t_wk, 32768, pid, G, 8)
        _prefetch_share(t_wv, 32768, pid, G, 8)
        _prefetch_share(t_wo, 32768, pid, G, 8)
    if PF_W and (PARTS & 4) != 0:
        _prefetch_share(m_w1, 524288, pid, G, 128)
        _prefetch_share(m_w2, 524288, pid, G, 128)
        _prefetch_share(i_wq, 32768, pid, G, 8)
        _prefetch_share(i_wk, 32768, pid, G, 8)
        _prefetch_share(i_wv, 32768, pid, G, 8)
        _prefetch_share(i_wo, 32768, pid, G, 8)
    if PF_TOK > 0 and (PARTS & 2) != 0:
        if pid < n3:
            ic = pid // NHALF
            s0 = (ic % n_ch) * CH
            _prefetch_tokens(k_ptr, kp_ptr, ic // n_ch, S, s0, s0, tl.minimum(s0 + CH, S), PF_TOK, C)


@triton.jit
def _ph7_tiles(part, ch, live, S, CH, BS: tl.constexpr, PARTS: tl.constexpr):
    """Phase 7, part `part` (of PARTS) of an item's key chunk `ch`: the chunk's tokens [s0, s1) (a dry run:
    one token) and the part's tiles [t_lo, t_end) of BS tokens."""
    s0 = ch * CH
    s1 = tl.where(live, tl.minimum(s0 + CH, S), s0 + 1)
    n_all = tl.cdiv(s1 - s0, BS)
    per = tl.cdiv(n_all, PARTS)
    return s0, s1, part * per, tl.minimum(n_all, (part + 1) * per)


@triton.jit
def _zero_share(ptr, n_elem, part, n_parts, ZB: tl.constexpr):
    """Zero share `part` of `n_parts` of a contiguous fp32 array, ZB elements per step."""
    per = (n_elem + n_parts - 1) // n_parts
    lo = part * per
    hi = tl.minimum(lo + per, n_elem)
    for st in range(lo, hi, ZB):
        o = st + tl.arange(0, ZB)
        tl.store(ptr + o, tl.zeros([ZB], tl.float32), mask=o < hi)


@triton.jit
def _tf32_rn(x, RN: tl.constexpr = True):
    """fp32 -> nearest TF32 value (ties away from zero), still fp32: the tensor core then drops zero bits.
    RN=False returns x unchanged (the tensor core truncates; in the interpreter, exact fp32 dots)."""
    if RN:
        bits = x.to(tl.int32, bitcast=True)
        return ((bits + 0x1000) & -8192).to(tl.float32, bitcast=True)
    else:
        return x


@triton.jit
def _fma_dot(a, b):
    """[M, K] @ [K, N] in fp32 on the CUDA cores (exact; only for tiny K * N: the code is unrolled)."""
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _tdot(a, b, acc, P3: tl.constexpr, RN: tl.constexpr):
    """acc + a @ b on the tensor cores: 3xTF32 (P3: about fp32) or one TF32 product of rounded operands."""
    ab = _tf32_rn(a, RN)
    bb = _tf32_rn(b, RN)
    if P3:
        acc = tl.dot(a - ab, bb, acc, input_precision="tf32")
        acc = tl.dot(ab, b - bb, acc, input_precision="tf32")
    return tl.dot(ab, bb, acc, input_precision="tf32")


@triton.jit
def _row_stats(y):
    """Mean and 1/std of the rows of a [16, 256] block (LayerNorm, eps 1e-6)."""
    mean = tl.sum(y, 1) / 256
    yc = y - mean[:, None]
    return mean, 1.0 / tl.sqrt(tl.sum(yc * yc, 1) / 256 + 1e-6)


@triton.jit
def _ln_cols(y, mean, rstd, lnw, lnb, cols, live):
    """LayerNorm of the columns `cols` of a row block, given its rows' mean and 1/std (_row_stats)."""
    x = (y - mean[:, None]) * rstd[:, None] * tl.load(lnw + cols, mask=live, other=0.0)[None, :]
    x += tl.load(lnb + cols, mask=live, other=0.0)[None, :]
    return x


@triton.jit
def _head_rows(w, live, acc, R, C: tl.constexpr):
    """Work item w = (row tile, head) of phases 2 and 6: head h, the tile's rows r (valid: r < R), the head's
    16 channels d, the rows y from `acc`, their mean and 1/std."""
    h = w % 8
    rt = w // 8
    r = rt * _RT + tl.arange(0, _RT)
    valid = (r < R) & live
    c = tl.arange(0, C)
    d = h * 16 + tl.arange(0, 16)
    off = r[:, None] * C + c[None, :]
    y = tl.load(acc + off, mask=valid[:, None], other=0.0, cache_modifier=".cg")
    mean, rstd = _row_stats(y)
    return h, r, valid, d, y, mean, rstd


@triton.jit
def _row_piece(acc, y, offn, valid, NC: tl.constexpr, C: tl.constexpr):
    """Columns offn of a row block whose whole rows y were loaded from acc: y itself when the piece is the
    whole row (NC == C), else this piece of the rows again (L1)."""
    if NC < C:
        return tl.load(acc + offn, mask=valid[:, None], other=0.0, cache_modifier=".cg")
    else:
        return y


@triton.jit
def _proj(
    x_ptr, off, ok, mean, rstd, lnw, lnb, pe_ptr, w_ptr, wrow, live,
    N: tl.constexpr, LN: tl.constexpr, PE: tl.constexpr, C: tl.constexpr, KC: tl.constexpr,
    P3: tl.constexpr, RN: tl.constexpr, QS: tl.constexpr = 1,
):  # fmt: skip
    """[16, N] = f(X) @ W[wrow, :]^T, f(X) = LN(X) (+ PE), in a real loop over KC-wide pieces of the
    contraction (one copy of the code; the rows are re-read per piece from L1/L2)."""
    acc = tl.zeros([_RT, N], tl.float32)
    for kb in tl.range(0, C, KC, num_stages=QS):  # QS > 1: the next pieces' loads in flight (cp.async)
        cols = kb + tl.arange(0, KC)
        xo = off[:, None] + cols[None, :]
        x = tl.load(x_ptr + xo, mask=ok[:, None], other=0.0, cache_modifier=".cg")
        if LN:
            x = _ln_cols(x, mean, rstd, lnw, lnb, cols, live)
        if PE:
            x += tl.load(pe_ptr + xo, mask=ok[:, None], other=0.0)
        wk = tl.load(w_ptr + wrow[:, None] * C + cols[None, :], mask=live, other=0.0)  # [N, KC]
        acc = _tdot(x, tl.trans(wk), acc, P3, RN)
    return acc


# ----------------------------------------------------------------------------------------- phases
# Every phase takes `live`: False runs the code on masked-off memory operations only (a "dry run"; with
# `Config.warm`, six idle programs execute the code of phases 2..7 once during phase 1 to pull it into L2.
# Measured on the H200: no gain (3 % slower), so it is off by default; see NOTES.md, "Where the time goes").


@triton.jit
def _qkv_rows(
    r, valid, live, h, k0, q_ptr, qp_ptr, wq, bq, wk, bk, wv, bv, pe_sa,
    C: tl.constexpr, KR: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr,
    QS: tl.constexpr, BIAS: tl.constexpr,
):  # fmt: skip
    """Head h's self-attention q, k ([16, 64]: q columns then k) and v ([16, 32]) of rows r, over the
    contraction range [k0, k0 + KR) in KC-wide pieces; BIAS adds the biases."""
    d = h * 32 + tl.arange(0, 32)  # this head's rows of the q/k/v weights
    d2 = tl.arange(0, 64)
    dqk = h * 32 + d2 % 32
    wqk = tl.where(d2 < 32, wq, wk)  # the q and k rows of head h as one [64, C] operand
    acc_qk = tl.zeros([_RT, 64], tl.float32)
    acc_v = tl.zeros([_RT, 32], tl.float32)
    for kb in tl.range(k0, k0 + KR, KC, num_stages=QS):
        cols = kb + tl.arange(0, KC)
        xo = r[:, None] * C + cols[None, :]
        x = tl.load(q_ptr + xo, mask=valid[:, None], other=0.0)
        xp = x + pe_sa * tl.load(qp_ptr + xo, mask=valid[:, None], other=0.0)
        w_qk = tl.load(wqk[:, None] + dqk[:, None] * C + cols[None, :], mask=live, other=0.0)  # [64, KC]
        w_v = tl.load(wv + d[:, None] * C + cols[None, :], mask=live, other=0.0)  # [32, KC]
        acc_qk = _tdot(xp, tl.trans(w_qk), acc_qk, P3, RN)
        acc_v = _tdot(x, tl.trans(w_v), acc_v, P3, RN)
    if BIAS:
        acc_qk += tl.load(tl.where(d2 < 32, bq, bk) + dqk, mask=live, other=0.0)[None, :]
        acc_v += tl.load(bv + d, mask=live, other=0.0)[None, :]
    return acc_qk, acc_v


@triton.jit
def _ph1a_qkv_part(
    w, live, q_ptr, qp_ptr, wq, bq, wk, bk, wv, bv, qkv, R, T, IPB, pe_sa,
    C: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, QS: tl.constexpr, KP: tl.constexpr,
):  # fmt: skip
    """Phase 1a (Config.ksplit1 = KP > 1): work item (group, head, contraction part) adds head h's q, k, v over
    its C / KP contraction columns into the [rows, 3 C] accumulator qkv (q | k | v, head-major); part 0 adds
    the biases."""
    KR: tl.constexpr = C // KP
    KCA: tl.constexpr = KC if KC < KR else KR
    kp = w % KP
    h = (w // KP) % 8
    g = w // (8 * KP)
    i = tl.arange(0, _RT)
    r = g * (IPB * T) + i
    valid = (i < IPB * T) & (r < R) & live
    qk, v = _qkv_rows(
        r, valid, live, h, kp * KR, q_ptr, qp_ptr, wq, bq, wk, bk, wv, bv, pe_sa,
        C, KR, KCA, P3, RN, QS, kp == 0,
    )  # fmt: skip
    d2 = tl.arange(0, 64)
    col = tl.where(d2 < 32, h * 32 + d2, C + h * 32 + d2 - 32)  # q columns, then k columns
    tl.atomic_add(
        qkv + r[:, None] * (3 * C) + col[None, :], qk, mask=valid[:, None], sem="relaxed", scope="gpu"
    )
    dv = 2 * C + h * 32 + tl.arange(0, 32)
    tl.atomic_add(
        qkv + r[:, None] * (3 * C) + dv[None, :], v, mask=valid[:, None], sem="relaxed", scope="gpu"
    )


@triton.jit
def _ph1_self_attn(
    w, live, q_ptr, qp_ptr, wq, bq, wk, bk, wv, bv, wo, bo, y1acc, qkv, R, T, IPB, pe_sa,
    C: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, NC: tl.constexpr,
    QS: tl.constexpr = 1, CP: tl.constexpr = 1, KP: tl.constexpr = 1,
):  # fmt: skip
    NCS: tl.constexpr = C // CP  # CP > 1: the out-projection columns split over CP work items (NC <= NCS)
    part = w % CP
    h = (w // CP) % 8
    g = w // (8 * CP)
    i = tl.arange(0, _RT)
    r = g * (IPB * T) + i  # flat rows of the IPB whole items of group g
    valid = (i < IPB * T) & (r < R) & live
    d = h * 32 + tl.arange(0, 32)
    if KP > 1:  # q, k, v from phase 1a's accumulator
        ro = r[:, None] * (3 * C) + d[None, :]
        qh = tl.load(qkv + ro, mask=valid[:, None], other=0.0, cache_modifier=".cg")
        kh = tl.load(qkv + C + ro, mask=valid[:, None], other=0.0, cache_modifier=".cg")
        vh = tl.load(qkv + 2 * C + ro, mask=valid[:, None], other=0.0, cache_modifier=".cg")
    else:
        qk, vh = _qkv_rows(
            r, valid, live, h, 0, q_ptr, qp_ptr, wq, bq, wk, bk, wv, bv, pe_sa, C, C, KC, P3, RN, QS, True
        )
        qh, kh = tl.split(tl.permute(tl.reshape(qk, (_RT, 2, 32)), (0, 2, 1)))  # [16, 32] each
    s = _fma_dot(qh, tl.trans(kh)) * SA_SCALE  # [16, 16] log2-domain scores
    item = r // T
    same = (item[:, None] == item[None, :]) & valid[None, :]  # block-diagonal: tokens of the same item
    s = tl.where(same, s, _NEG)
    p = tl.exp2(s - tl.max(s, 1)[:, None])
    p = p / tl.sum(p, 1)[:, None]
    o = _fma_dot(p, vh)  # [16, 32]
    for nb in range(part * NCS, part * NCS + NCS, NC):  # this item's output columns in NC-wide pieces
        cn = nb + tl.arange(0, NC)
        w_o = tl.load(wo + cn[:, None] * C + d[None, :], mask=live, other=0.0)  # [NC, 32] = Wout[cn, head]
        u = _tdot(o, tl.trans(w_o), tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC] this head's share
        off = r[:, None] * C + cn[None, :]
        if h == 0:  # the residual and the out-projection bias
            u += (
                tl.load(q_ptr + off, mask=valid[:, None], other=0.0)
                + tl.load(bo + cn, mask=live, other=0.0)[None, :]
            )
        tl.atomic_add(y1acc + off, u, mask=valid[:, None], sem="relaxed", scope="gpu")


@triton.jit
def _ph2_ln1_t2i_fold(
    w, live, y1acc, qp_ptr, ln1w, ln1b, wq, bq, wk, bk, bo_t2i, y2acc, a1, c1, R, T,
    C: tl.constexpr, TPK: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr,
    NC: tl.constexpr, QS: tl.constexpr = 1, CP: tl.constexpr = 1, KPJ: tl.constexpr = False,
):  # fmt: skip
    part = w % CP
    h, r, valid, d, y, mean, rstd = _head_rows(w // CP, live, y1acc, R, C)
    qh = _proj(
        y1acc, r * C, valid, mean, rstd, ln1w, ln1b, qp_ptr, wq, d, live, 16, True, True, C, KC, P3, RN, QS
    )
    _ph2_fold(
        qh, qh, part, live, h, r, valid, d, y, mean, rstd, y1acc, ln1w, ln1b, bq, wk, bk, bo_t2i, y2acc, a1,
        c1, T, C, TPK, P3, RN, NC, CP, False, KPJ,
    )  # fmt: skip


@triton.jit
def _ph2_operands(w, live, qp_ptr, wq, wk, R, C: tl.constexpr, CP: tl.constexpr, KPJ: tl.constexpr = False):
    """What phase-2 work item w reads that phase 1 does not write: the query PE of its rows [16, C], head h's
    Wq rows [16, C] and its Wk columns [16, C / CP] (KPJ: no A1 to fold, so no Wk columns). Loaded before the
    phase's barrier (`PRE2`)."""
    NCS: tl.constexpr = C // CP
    hw = w // CP
    d = (hw % 8) * 16 + tl.arange(0, 16)
    r = (hw // 8) * _RT + tl.arange(0, _RT)
    c = tl.arange(0, C)
    ok = (c[None, :] < C) & live  # [1, C]; `live` may be a runtime [1] mask (the first item: pid < items)
    pe = tl.load(qp_ptr + r[:, None] * C + c[None, :], mask=ok & (r < R)[:, None], other=0.0)
    w_q = tl.load(wq + d[:, None] * C + c[None, :], mask=ok, other=0.0)
    cn = (w % CP) * NCS + tl.arange(0, NCS)
    if KPJ:
        w_k = tl.zeros([16, NCS], tl.float32)  # (unused by `_ph2_fold`)
    else:
        w_k = tl.load(wk + d[:, None] * C + cn[None, :], mask=(cn[None, :] < C) & live, other=0.0)
    return pe, w_q, w_k


@triton.jit
def _ph2_loaded(
    w, live, y1acc, pe, w_q, w_k, ln1w, ln1b, bq, wk, bk, bo_t2i, y2acc, a1, c1, R, T,
    C: tl.constexpr, TPK: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, CP: tl.constexpr,
    KPJ: tl.constexpr = False,
):  # fmt: skip
    """Phase-2 work item w with its PE rows and weights already in registers (`_ph2_operands`): LayerNorm 1
    of the rows it loads anyway, + PE, one K = 256 product for the head's query, then as `_ph2_ln1_t2i_fold`
    (the same operations but for the contraction's summation order)."""
    part = w % CP
    h, r, valid, d, y, mean, rstd = _head_rows(w // CP, live, y1acc, R, C)
    x = _ln_cols(y, mean, rstd, ln1w, ln1b, tl.arange(0, C), live) + pe
    qh = _tdot(x, tl.trans(w_q), tl.zeros([_RT, 16], tl.float32), P3, RN)
    _ph2_fold(
        qh, w_k, part, live, h, r, valid, d, y, mean, rstd, y1acc, ln1w, ln1b, bq, wk, bk, bo_t2i, y2acc, a1,
        c1, T, C, TPK, P3, RN, C // CP, CP, True, KPJ,
    )  # fmt: skip


@triton.jit
def _ph2_fold(
    qh, w_kp, part, live, h, r, valid, d, y, mean, rstd, y1acc, ln1w, ln1b, bq, wk, bk, bo_t2i, y2acc, a1, c1,
    T, C: tl.constexpr, TPK: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, NC: tl.constexpr,
    CP: tl.constexpr, PRE: tl.constexpr, KPJ: tl.constexpr = False,
):  # fmt: skip
    """The rest of phase-2 work item (row tile, head h, column part): the head's pre-scaled query, A1 = Wk_h^T
    q_ht on the part's columns in NC-wide pieces (PRE: the part's Wk columns w_kp were loaded already, one
    piece), c1 = q_ht . bk_h; head 0 seeds y2acc with x1 + bout_t2i. KPJ (`Config.kproj`: the keys projected by
    phase 0): no A1 and no c1; part 0 stores the pre-scaled query itself, [16] per row of a1 (fp16)."""
    M8: tl.constexpr = 8 * TPK
    NCS: tl.constexpr = C // CP  # CP > 1: the output columns split over CP work items (NC <= NCS)
    tl.static_assert(not PRE or NC == NCS, "preloaded Wk columns: one piece")
    qh = (qh + tl.load(bq + d, mask=live, other=0.0)[None, :]) * X_SCALE  # [16, 16] pre-scaled
    cb = tl.sum(qh * tl.load(bk + d, mask=live, other=0.0)[None, :], 1)  # [16]  q_ht . bk_h
    item = r // T
    j = item * M8 + h * TPK + r % T  # row of A1 [items, 8 * TPK] (head-major inside an item)
    for nb in range(part * NCS, part * NCS + NCS, NC):  # this item's output columns in NC-wide pieces
        cn = nb + tl.arange(0, NC)
        if not KPJ:
            if PRE:
                w_k = w_kp
            else:
                w_k = tl.load(wk + d[:, None] * C + cn[None, :], mask=live, other=0.0)  # [16, NC]
            a = _tdot(qh, w_k, tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC]  Wk_h^T q_ht
            a = _tf32_rn(a, RN).to(a1.dtype.element_ty)  # fp16 for phase 3's fp16 products (Config.p3_fp16)
            tl.store(a1 + j[:, None] * C + cn[None, :], a, mask=valid[:, None])
        if h == 0:  # x1 + bout_t2i seeds y2acc (phase 4 adds the attention)
            offn = r[:, None] * C + cn[None, :]
            yn = _row_piece(y1acc, y, offn, valid, NC, C)
            x1 = _ln_cols(yn, mean, rstd, ln1w, ln1b, cn, live)
            x1 += tl.load(bo_t2i + cn, mask=live, other=0.0)[None, :]
            tl.atomic_add(y2acc + offn, x1, mask=valid[:, None], sem="relaxed", scope="gpu")
    if part == 0:
        # KPJ: the head's query (bias, 1/4 and log2 e in it) for phase 3's products with the projected keys
        if KPJ:
            q16 = qh.to(a1.dtype.element_ty)
            tl.store(a1 + j[:, None] * 16 + tl.arange(0, 16)[None, :], q16, mask=valid[:, None])
        else:
            tl.store(c1 + j, cb, mask=valid)


@triton.jit
def _ph3_t2i_pass(
    w, live, k_ptr, kp_ptr, a1, c1, pm, pl, pacc, T, S, n_ch, CH,
    C: tl.constexpr, TPK: tl.constexpr, BS: tl.constexpr, NHALF: tl.constexpr, PF_DIST: tl.constexpr,
    RN: tl.constexpr, KS: tl.constexpr = 1, ACC_T: tl.constexpr = False, F16: tl.constexpr = False,
):  # fmt: skip
    """ACC_T: the running sum kept transposed, acc^T [C, RB] += k^T [C, BS] @ p^T [BS, RB] (the key tile as
    the register operand, p^T the shared-memory one), instead of acc [RB, C] += p @ k (k^T through shared
    memory as the B operand). F16 (`Config.p3_fp16`): both products take fp16 operands (fp32 accumulation; A1
    arrives as fp16, stored so by phase 2), and p is scaled by 2^P16_SHIFT, so that its small values stay in
    fp16's normal range; the partial sum and the partial acc carry the same factor, which phase 4's acc / sum
    cancels."""
    M8: tl.constexpr = 8 * TPK
    RB: tl.constexpr = M8 // NHALF  # rows per work item: 64, or 32 (TPK 4)
    half = w % NHALF
    ic = w // NHALF  # item * n_ch + chunk
    item = ic // n_ch
    ch = ic % n_ch
    c = tl.arange(0, C)
    j = half * RB + tl.arange(0, RB)  # RB rows of [8 heads x TPK tokens]
    jv = ((j % TPK) < T) & live
    a = tl.load(a1 + (item * M8 + j)[:, None] * C + c[None, :], mask=jv[:, None], other=0.0)  # [RB, C]
    cb = tl.load(c1 + item * M8 + j, mask=jv, other=0.0)
    m = tl.full([RB], _NEG, tl.float32)
    l_sum = tl.zeros([RB], tl.float32)
    if ACC_T:
        acc = tl.zeros([C, RB], tl.float32)
    else:
        acc = tl.zeros([RB, C], tl.float32)
    s0 = ch * CH
    s1 = tl.where(live, tl.minimum(s0 + CH, S), s0 + 1)  # a dry run does one tile
    for st in tl.range(s0, s1, BS, num_stages=KS):  # KS > 1: cp.async software pipeline
        if PF_DIST > 0:  # pull a later tile of this chunk into L2 while this one computes
            _prefetch_tokens(k_ptr, kp_ptr, item, S, st + PF_DIST * BS, s0, s1, BS, C)
        tok = st + tl.arange(0, BS)
        tm = (tok < s1) & live
        off = (item * S + tok)[None, :] * C + c[:, None]  # [C, BS] transposed tile
        kt = tl.load(k_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        xs = kt + tl.load(kp_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        if F16:
            s = tl.dot(a, xs.to(tl.float16)) + cb[:, None]  # [RB, BS] log2-domain scores
        else:
            s = tl.dot(a, _tf32_rn(xs, RN), input_precision="tf32") + cb[:, None]
        s = tl.where(tm[None, :], s, _NEG)
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        if F16:  # p in (0, 2^P16_SHIFT]: its small values stay normal in fp16
            p = tl.exp2(s - (m_new - P16_SHIFT)[:, None])
        else:
            p = tl.exp2(s - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, 1)
        if F16 and ACC_T:
            acc = tl.dot(kt.to(tl.float16), tl.trans(p.to(tl.float16)), acc * alpha[None, :])
        elif F16:
            acc = tl.dot(p.to(tl.float16), tl.trans(kt.to(tl.float16)), acc * alpha[:, None])
        elif ACC_T:
            acc = tl.dot(
                _tf32_rn(kt, RN), tl.trans(_tf32_rn(p, RN)), acc * alpha[None, :], input_precision="tf32"
            )
        else:
            acc = tl.dot(
                _tf32_rn(p, RN), tl.trans(_tf32_rn(kt, RN)), acc * alpha[:, None], input_precision="tf32"
            )
        m = m_new
    base = ic * M8 + j
    tl.store(pm + base, m, mask=jv)
    tl.store(pl + base, l_sum, mask=jv)
    if ACC_T:
        tl.store(pacc + base[None, :] * C + c[:, None], acc, mask=jv[None, :])
    else:
        tl.store(pacc + base[:, None] * C + c[None, :], acc, mask=jv[:, None])


@triton.jit
def _ph0_key_proj(
    w, live, k_ptr, kp_ptr, wk, bk, wv, bv, kvp, S, C: tl.constexpr, BSP: tl.constexpr, KC: tl.constexpr,
    ST: tl.constexpr = 1, W16: tl.constexpr = False, w16=None,
):  # fmt: skip
    """Phase 0 (`Config.kproj`) work item w = (item, tile of BSP key tokens): the t2i keys K = Wk (k + k_pe) + bk
    and values V = Wv k + bv of the tile's tokens, fp16 operands, fp32 accumulation, the contraction in KC-wide
    pieces (ST > 1: a cp.async pipeline over them), stored as fp16 rows [K (128) | V (128)] of kvp [items * S,
    256]. W16 (`Config.kproj_w16`): Wk and Wv read as the fp16 copy w16 [Wk | Wv] (`_ph0_weights16`)."""
    n_t = tl.cdiv(S, BSP)
    item = w // n_t
    tok = (w % n_t) * BSP + tl.arange(0, BSP)
    tm = (tok < S) & live
    o = tl.arange(0, 128)
    key = tl.zeros([BSP, 128], tl.float32)
    val = tl.zeros([BSP, 128], tl.float32)
    for kc in tl.range(0, C, KC, num_stages=ST):
        c = kc + tl.arange(0, KC)
        off = (item * S + tok)[:, None] * C + c[None, :]
        kt = tl.load(k_ptr + off, mask=tm[:, None], other=0.0, cache_modifier=".cg")
        xs = kt + tl.load(kp_ptr + off, mask=tm[:, None], other=0.0, cache_modifier=".cg")
        if W16:
            w_k = tl.load(w16 + o[:, None] * C + c[None, :], mask=live, other=0.0, cache_modifier=".cg")
            w_v = tl.load(
                w16 + (128 + o)[:, None] * C + c[None, :], mask=live, other=0.0, cache_modifier=".cg"
            )
        else:
            w_k = tl.load(wk + o[:, None] * C + c[None, :], mask=live, other=0.0)  # [128, KC]
            w_v = tl.load(wv + o[:, None] * C + c[None, :], mask=live, other=0.0)
        key = tl.dot(xs.to(tl.float16), tl.trans(w_k.to(tl.float16)), key)  # (a no-op conversion with W16)
        val = tl.dot(kt.to(tl.float16), tl.trans(w_v.to(tl.float16)), val)
    key += tl.load(bk + o, mask=live, other=0.0)[None, :]
    val += tl.load(bv + o, mask=live, other=0.0)[None, :]
    row = (item * S + tok)[:, None] * C + o[None, :]
    tl.store(kvp + row, key.to(tl.float16), mask=tm[:, None])
    tl.store(kvp + row + 128, val.to(tl.float16), mask=tm[:, None])


@triton.jit
def _ph0_weights16(wk, wv, w16, part, n_parts, C: tl.constexpr):
    """`Config.kproj_w16`: share `part` of `n_parts` of Wk and Wv ([128, C] fp32 each) converted to the fp16 copy
    w16 [Wk | Wv] that phase 0's items read (half the bytes a piece, no conversion per item)."""
    n: tl.constexpr = 128 * C
    per = (2 * n + n_parts - 1) // n_parts
    per = (per + 1023) // 1024 * 1024
    lo = part * per
    hi = tl.minimum(lo + per, 2 * n)
    for st in range(lo, hi, 1024):
        o = st + tl.arange(0, 1024)
        m = o < hi
        x = tl.load(tl.where(o < n, wk + o, wv + (o - n)), mask=m, other=0.0)
        tl.store(w16 + o, x.to(tl.float16), mask=m)


@triton.jit
def _ph3_kpj_pass(
    w, live, kvp, a1, pm, pl, pacc, T, S, n_ch, CH,
    TPK: tl.constexpr, BS: tl.constexpr, NHALF: tl.constexpr, KS: tl.constexpr = 1,
):  # fmt: skip
    """Phase 3 on the projected keys (`Config.kproj`): as `_ph3_t2i_pass` with fp16 operands, but the scores are
    q'_h . K_s,h (a1: the [16] pre-scaled queries, spread into a block-diagonal [RB, 128] operand) and the running
    sum is acc^T [128, RB] += V^T p^T, of which each row keeps its own head's 16 channels: the partial acc is
    [M8, 16] a chunk (V holds bv: the weights sum to one, so phase 4 adds no bias)."""
    M8: tl.constexpr = 8 * TPK
    RB: tl.constexpr = M8 // NHALF
    half = w % NHALF
    ic = w // NHALF
    item = ic // n_ch
    ch = ic % n_ch
    c = tl.arange(0, 128)
    j = half * RB + tl.arange(0, RB)
    jv = ((j % TPK) < T) & live
    blk = (c[None, :] // 16) == (j // TPK)[:, None]  # [RB, 128]: row j's head block
    a = tl.load(a1 + (item * M8 + j)[:, None] * 16 + (c % 16)[None, :], mask=blk & jv[:, None], other=0.0)
    m = tl.full([RB], _NEG, tl.float32)
    l_sum = tl.zeros([RB], tl.float32)
    acc = tl.zeros([128, RB], tl.float32)
    s0 = ch * CH
    s1 = tl.where(live, tl.minimum(s0 + CH, S), s0 + 1)
    for st in tl.range(s0, s1, BS, num_stages=KS):
        tok = st + tl.arange(0, BS)
        tm = (tok < s1) & live
        off = (item * S + tok)[None, :] * 256 + c[:, None]  # [128, BS] transposed tiles
        kt = tl.load(kvp + off, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        vt = tl.load(kvp + off + 128, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        s = tl.dot(a.to(tl.float16), kt)  # [RB, BS] log2-domain scores
        s = tl.where(tm[None, :], s, _NEG)
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - (m_new - P16_SHIFT)[:, None])
        l_sum = l_sum * alpha + tl.sum(p, 1)
        acc = tl.dot(vt, tl.trans(p.to(tl.float16)), acc * alpha[None, :])
        m = m_new
    base = ic * M8 + j
    tl.store(pm + base, m, mask=jv)
    tl.store(pl + base, l_sum, mask=jv)
    tl.store(pacc + base[None, :] * 16 + (c % 16)[:, None], acc, mask=tl.trans(blk) & jv[None, :])


@triton.jit
def _chunk_partials(pm, pl, item, n_ch, chs, lim, jrow, valid, M8: tl.constexpr):
    """Phase 3's partial maxima and sums of chunks chs (those < lim) for rows jrow of the items: the [n, 16]
    offsets and mask, and the loaded (max, sum)."""
    base = (item[None, :] * n_ch + chs[:, None]) * M8 + jrow[None, :]
    ok = (chs < lim)[:, None] & valid[None, :]
    mc = tl.load(pm + base, mask=ok, other=_NEG, cache_modifier=".cg")
    lc = tl.load(pl + base, mask=ok, other=0.0, cache_modifier=".cg")
    return base, ok, mc, lc


@triton.jit
def _merge_partials(m_run, l_run, mc, lc):
    """Online-softmax merge of [n, 16] chunk partials (max mc, sum lc) into the running (m_run, l_run): the new
    max and sum, and the factors for the running values (fa) and for each chunk (fb)."""
    m_new = tl.maximum(m_run, tl.max(mc, 0))
    fa = tl.exp2(m_run - m_new)
    fb = tl.exp2(mc - m_new[None, :])  # [n, 16]
    return m_new, l_run * fa + tl.sum(lc * fb, 0), fa, fb


@triton.jit
def _global_step(m_all, l_all, pm, pl, item, n_ch, cb, jrow, valid, M8: tl.constexpr):
    """(m_all, l_all) merged with the chunk partials [cb, cb + 32) of rows jrow of the items."""
    _, _, mc, lc = _chunk_partials(pm, pl, item, n_ch, cb + tl.arange(0, 32), n_ch, jrow, valid, M8)
    m_all, l_all, _, _ = _merge_partials(m_all, l_all, mc, lc)
    return m_all, l_all


@triton.jit
def _global_partials(pm, pl, item, n_ch, jrow, valid, M8: tl.constexpr):
    """The max and sum over all n_ch chunk partials of rows jrow of the items ([32, 16] blocks, one after the
    other; a cp.async pipeline over them measured level or slower, session 15)."""
    m_all = tl.full([_RT], _NEG, tl.float32)
    l_all = tl.zeros([_RT], tl.float32)
    for cb in range(0, n_ch, 32):
        m_all, l_all = _global_step(m_all, l_all, pm, pl, item, n_ch, cb, jrow, valid, M8)
    return m_all, l_all


@triton.jit
def _ph4_t2i_combine(
    w, live, pm, pl, pacc, wv, bv, wo, y2acc, R, T, n_ch, nsp,
    C: tl.constexpr, TPK: tl.constexpr, ND: tl.constexpr, NCB: tl.constexpr, P3: tl.constexpr,
    RN: tl.constexpr, NC: tl.constexpr, CS: tl.constexpr = 1, SPLIT: tl.constexpr = False, GF: tl.constexpr = 0,
    KPJ: tl.constexpr = False, ST: tl.constexpr = False,
):  # fmt: skip
    """Work item (row tile, head, channel slice[, chunk part]). SPLIT: an item's chunk partials are split over
    nsp work items; each scales its part by the global max and sum over all chunks ([32, 16] blocks of the
    partial maxima and sums), so that the parts add up in y2acc like the channel slices do. GF (`p4_gfirst`) 1:
    split items read the global max and sum first and then sum their chunks against it (no running max, no
    rescaling per step); 2: every item does. KPJ (`Config.kproj`, ND 1): the partials are the head's 16 value
    channels (`_ph3_kpj_pass`), already through Wv and bv."""
    M8: tl.constexpr = 8 * TPK
    PW: tl.constexpr = 16 if KPJ else C  # floats per row of a chunk partial
    DS: tl.constexpr = PW // ND
    if SPLIT:
        sp = w % nsp
        wc = w // nsp
        per = tl.cdiv(n_ch, nsp)
        c_lo = sp * per
        c_hi = tl.where(live, tl.minimum(c_lo + per, n_ch), c_lo + 1)
        c_end = c_hi
    else:
        sp = 0
        wc = w
        c_lo = 0
        c_hi = tl.where(live, n_ch, 1)
        c_end = n_ch
    ds = wc % ND
    h = (wc // ND) % 8
    rt = wc // (ND * 8)
    r = rt * _RT + tl.arange(0, _RT)
    valid = (r < R) & live
    item = r // T
    jrow = h * TPK + r % T
    dd = ds * DS + tl.arange(0, DS)  # this program's channel slice
    d = h * 16 + tl.arange(0, 16)
    m_run = tl.full([_RT], _NEG, tl.float32)
    l_run = tl.zeros([_RT], tl.float32)
    acc = tl.zeros([_RT, DS], tl.float32)
    FIRST: tl.constexpr = GF == 2 or (GF == 1 and SPLIT)
    if FIRST:
        m_all, l_all = _global_partials(pm, pl, item, n_ch, jrow, valid, M8)
    # NCB chunks per step: one round trip for NCB partials (CS > 1: the next steps' loads in flight)
    for cb0 in tl.range(c_lo, c_hi, NCB, num_stages=CS):
        base, ok, mc, lc = _chunk_partials(
            pm, pl, item, n_ch, cb0 + tl.arange(0, NCB), c_end, jrow, valid, M8
        )
        ac = tl.load(
            pacc + base[:, :, None] * PW + dd[None, None, :],
            mask=ok[:, :, None],
            other=0.0,
            cache_modifier=".cg",
        )  # [NCB, 16, DS]
        if FIRST:  # against the global max: the chunks' terms are independent of each other
            acc += tl.sum(ac * tl.exp2(mc - m_all[None, :])[:, :, None], 0)
        else:
            m_run, l_run, fa, fb = _merge_partials(m_run, l_run, mc, lc)
            acc = acc * fa[:, None] + tl.sum(ac * fb[:, :, None], 0)
    if FIRST:
        pooled = acc / tl.where(valid, l_all, 1.0)[:, None]
    elif SPLIT:  # this part's share of the softmax over all chunks: the global max and sum
        m_all, l_all = _global_partials(pm, pl, item, n_ch, jrow, valid, M8)
        pooled = acc * (tl.exp2(m_run - m_all) / tl.where(valid, l_all, 1.0))[:, None]
    else:
        pooled = acc / tl.where(valid, l_run, 1.0)[:, None]  # softmax-weighted mean of raw keys, [16, DS]
    if KPJ:
        v = pooled  # [16, 16]: the head's values, bias included
    else:
        w_v = tl.load(wv + d[:, None] * C + dd[None, :], mask=live, other=0.0)  # [16, DS]
        v = _fma_dot(pooled, tl.trans(w_v))  # [16, 16] partial over the channel slice (fp32)
        if (ds == 0) & (sp == 0):  # (sp is the constant 0 without SPLIT)
            v += tl.load(bv + d, mask=live, other=0.0)[None, :]
    for nb in range(0, C, NC):  # output columns in NC-wide pieces
        cn = nb + tl.arange(0, NC)
        w_o = tl.load(wo + cn[:, None] * 128 + d[None, :], mask=live, other=0.0)  # [NC, 16] Wout_t2i[cn, h]
        u = _tdot(v, tl.trans(w_o), tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC]
        offn = r[:, None] * C + cn[None, :]
        _acc_add(y2acc + offn, u, valid[:, None], ST)


@triton.jit
def _ph5_rows(w, live, y2acc, R, C: tl.constexpr, HB: tl.constexpr):
    """Phase-5 work item w = (row tile, hidden block): the block's index hb, rows r (valid), channels c, the
    rows' offsets, the block's hidden units hh, the rows y of y2acc and their LayerNorm statistics."""
    NHB: tl.constexpr = 2048 // HB
    hb = w % NHB
    rt = w // NHB
    r = rt * _RT + tl.arange(0, _RT)
    valid = (r < R) & live
    c = tl.arange(0, C)
    off = r[:, None] * C + c[None, :]
    hh = hb * HB + tl.arange(0, HB)
    y = tl.load(y2acc + off, mask=valid[:, None], other=0.0, cache_modifier=".cg")
    mean, rstd = _row_stats(y)
    return hb, r, valid, c, off, hh, y, mean, rstd


@triton.jit
def _ph5_mlp(
    w, live, y2acc, ln2w, ln2b, w1, b1, w2, b2, y3acc, R,
    C: tl.constexpr, HB: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr,
    NC: tl.constexpr, QS: tl.constexpr = 1,
):  # fmt: skip
    hb, r, valid, c, off, hh, y, mean, rstd = _ph5_rows(w, live, y2acc, R, C, HB)
    hid = _proj(
        y2acc, r * C, valid, mean, rstd, ln2w, ln2b, y2acc, w1, hh, live, HB, True, False, C, KC, P3, RN, QS
    )
    hid = tl.maximum(hid + tl.load(b1 + hh, mask=live, other=0.0)[None, :], 0.0)  # [16, HB]
    for nb in range(0, C, NC):  # output columns in NC-wide pieces
        cn = nb + tl.arange(0, NC)
        offn = r[:, None] * C + cn[None, :]
        w_2 = tl.load(w2 + cn[:, None] * 2048 + hh[None, :], mask=live, other=0.0)  # [NC, HB] = W2[cn, block]
        u = _tdot(hid, tl.trans(w_2), tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC]
        if hb == 0:  # the residual x2 + b2
            x2 = _ln_cols(_row_piece(y2acc, y, offn, valid, NC, C), mean, rstd, ln2w, ln2b, cn, live)
            u += x2 + tl.load(b2 + cn, mask=live, other=0.0)[None, :]
        tl.atomic_add(y3acc + offn, u, mask=valid[:, None], sem="relaxed", scope="gpu")


@triton.jit
def _ph5_weights(w, live, w1, w2, C: tl.constexpr, HB: tl.constexpr):
    """The MLP weights of phase-5 work item w: its hidden block's W1 rows [HB, C] and W2 columns [C, HB].
    Loaded into registers before the phase's barrier (`PRE5`), they are in flight while the program waits."""
    NHB: tl.constexpr = 2048 // HB
    hh = (w % NHB) * HB + tl.arange(0, HB)
    c = tl.arange(0, C)
    ok = (c[None, :] < C) & live  # [1, C]; `live` may be a runtime [1] mask (the first item: pid < items)
    w_1 = tl.load(w1 + hh[:, None] * C + c[None, :], mask=ok, other=0.0)
    w_2 = tl.load(w2 + c[:, None] * 2048 + hh[None, :], mask=tl.trans(ok), other=0.0)
    return w_1, w_2


@triton.jit
def _ph5_mlp_loaded(
    w, live, y2acc, ln2w, ln2b, w_1, b1, w_2, b2, y3acc, R,
    C: tl.constexpr, HB: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, ST: tl.constexpr = False,
):  # fmt: skip
    """Phase-5 work item w with its weights already in registers (`_ph5_weights`): the LayerNorm-2 rows, one
    K = 256 product with W1's block, ReLU, one product with W2's block, atomics into y3acc (block 0 adds the
    residual x2 + b2). The same operations as `_ph5_mlp` but for the contraction's summation order."""
    hb, r, valid, c, off, hh, y, mean, rstd = _ph5_rows(w, live, y2acc, R, C, HB)
    x2 = _ln_cols(y, mean, rstd, ln2w, ln2b, c, live)  # [16, C]
    hid = _tdot(x2, tl.trans(w_1), tl.zeros([_RT, HB], tl.float32), P3, RN)
    hid = tl.maximum(hid + tl.load(b1 + hh, mask=live, other=0.0)[None, :], 0.0)  # [16, HB]
    u = _tdot(hid, tl.trans(w_2), tl.zeros([_RT, C], tl.float32), P3, RN)  # [16, C]
    if hb == 0:  # the residual x2 + b2
        u += x2 + tl.load(b2 + c, mask=live, other=0.0)[None, :]
    _acc_add(y3acc + off, u, valid[:, None], ST)


@triton.jit
def _kv_rows(
    r, valid, live, d, mean, rstd, k0, y3acc, qp_ptr, ln3w, ln3b, wk, wv,
    C: tl.constexpr, KR: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, QS: tl.constexpr,
):  # fmt: skip
    """K_h (from LN3(x) + pe) and V_h (from LN3(x)) of rows r, channels d, over the contraction range
    [k0, k0 + KR) in KC-wide pieces, without biases."""
    kh = tl.zeros([_RT, 16], tl.float32)
    vh = tl.zeros([_RT, 16], tl.float32)
    for kb in tl.range(k0, k0 + KR, KC, num_stages=QS):  # K_h and V_h in one pass over the pieces
        cols = kb + tl.arange(0, KC)
        xo = r[:, None] * C + cols[None, :]
        x3p = tl.load(y3acc + xo, mask=valid[:, None], other=0.0, cache_modifier=".cg")
        x3p = _ln_cols(x3p, mean, rstd, ln3w, ln3b, cols, live)
        xk = x3p + tl.load(qp_ptr + xo, mask=valid[:, None], other=0.0)
        w_k = tl.load(wk + d[:, None] * C + cols[None, :], mask=live, other=0.0)  # [16, KC]
        w_v = tl.load(wv + d[:, None] * C + cols[None, :], mask=live, other=0.0)
        kh = _tdot(xk, tl.trans(w_k), kh, P3, RN)
        vh = _tdot(x3p, tl.trans(w_v), vh, P3, RN)
    return kh, vh


@triton.jit
def _ph6a_kv_part(
    w, live, y3acc, qp_ptr, ln3w, ln3b, wk, bk, wv, bv, kv, R,
    C: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, QS: tl.constexpr, KP: tl.constexpr,
):  # fmt: skip
    """Phase 6a (Config.ksplit6 = KP > 1): work item (row tile, head, contraction part) adds head h's K_h and
    V_h over its C / KP contraction columns into the [rows, C] accumulator kv (K of the 8 heads | V of the 8
    heads, 16 columns each); part 0 adds the biases."""
    KR: tl.constexpr = C // KP
    KCA: tl.constexpr = KC if KC < KR else KR
    kp = w % KP
    h, r, valid, d, y, mean, rstd = _head_rows(w // KP, live, y3acc, R, C)
    kh, vh = _kv_rows(
        r, valid, live, d, mean, rstd, kp * KR, y3acc, qp_ptr, ln3w, ln3b, wk, wv, C, KR, KCA, P3, RN, QS
    )
    if kp == 0:
        kh += tl.load(bk + d, mask=live, other=0.0)[None, :]
        vh += tl.load(bv + d, mask=live, other=0.0)[None, :]
    o = r[:, None] * C + d[None, :]
    tl.atomic_add(kv + o, kh, mask=valid[:, None], sem="relaxed", scope="gpu")
    tl.atomic_add(kv + 128 + o, vh, mask=valid[:, None], sem="relaxed", scope="gpu")


@triton.jit
def _ph6_ln3_i2t_fold(
    w, live, y3acc, qp_ptr, ln3w, ln3b, out_q, wq, bq, wk, bk, wv, bv, wo, a2, c2, vwb, vws, kv, R, T,
    C: tl.constexpr, TPK: tl.constexpr, KC: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr,
    NC: tl.constexpr, QS: tl.constexpr = 1, CP: tl.constexpr = 1, KP: tl.constexpr = 1, V3: tl.constexpr = True,
):  # fmt: skip
    part = w % CP
    h, r, valid, d, y, mean, rstd = _head_rows(w // CP, live, y3acc, R, C)
    if KP > 1:  # K_h, V_h (with biases) from phase 6a's accumulator
        o = r[:, None] * C + d[None, :]
        kh = tl.load(kv + o, mask=valid[:, None], other=0.0, cache_modifier=".cg")
        vh = tl.load(kv + 128 + o, mask=valid[:, None], other=0.0, cache_modifier=".cg")
    else:
        kh, vh = _kv_rows(
            r, valid, live, d, mean, rstd, 0, y3acc, qp_ptr, ln3w, ln3b, wk, wv, C, C, KC, P3, RN, QS
        )
        kh += tl.load(bk + d, mask=live, other=0.0)[None, :]
        vh += tl.load(bv + d, mask=live, other=0.0)[None, :]
    _ph6_fold(
        kh, vh, kh, kh, part, live, h, r, valid, d, y, mean, rstd, y3acc, ln3w, ln3b, out_q, wq, bq, wo, a2,
        c2, vwb, vws, T, C, TPK, P3, RN, NC, CP, False, V3,
    )  # fmt: skip


@triton.jit
def _ph6_operands(w, live, wk, wv, wq, wo, C: tl.constexpr, CP: tl.constexpr):
    """The weights of phase-6 work item w (`Config.pre6`: no phase 6a): head h's Wk and Wv rows [16, C], its Wq
    rows on the part's output columns [16, C / CP] and Wout_i2t's [C / CP, 16] block of those columns. Loaded
    before the phase's barrier (with the query PE rows too, up to 64 more bytes of stack on sm_90a: they load after
    it, beside the LayerNorm-3 rows)."""
    NCS: tl.constexpr = C // CP
    d = ((w // CP) % 8) * 16 + tl.arange(0, 16)
    c = tl.arange(0, C)
    ok = (c[None, :] < C) & live  # [1, C]; `live` may be a runtime [1] mask (the first item: pid < items)
    w_k = tl.load(wk + d[:, None] * C + c[None, :], mask=ok, other=0.0)
    w_v = tl.load(wv + d[:, None] * C + c[None, :], mask=ok, other=0.0)
    cn = (w % CP) * NCS + tl.arange(0, NCS)
    okn = (cn[None, :] < C) & live  # [1, NCS]
    w_q = tl.load(wq + d[:, None] * C + cn[None, :], mask=okn, other=0.0)  # [16, NCS]
    # [NCS, 16]: Wout_i2t[cn, h]
    w_o = tl.load(wo + cn[:, None] * 128 + d[None, :], mask=tl.trans(okn), other=0.0)
    return w_k, w_v, w_q, w_o


@triton.jit
def _ph6_loaded(
    w, live, y3acc, qp_ptr, w_k, w_v, w_q, w_o, ln3w, ln3b, out_q, wq, bq, bk, bv, wo, a2, c2, vwb, vws, R, T,
    C: tl.constexpr, TPK: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, CP: tl.constexpr, V3: tl.constexpr,
):  # fmt: skip
    """Phase-6 work item w with its weights already in registers (`_ph6_operands`; no phase 6a): LayerNorm 3 of
    the rows it loads anyway, + the query PE for K, K_h and V_h as one K = 256 product each, then as
    `_ph6_ln3_i2t_fold` (the same operations but for the contraction's summation order)."""
    h, r, valid, d, y, mean, rstd = _head_rows(w // CP, live, y3acc, R, C)
    x3 = _ln_cols(y, mean, rstd, ln3w, ln3b, tl.arange(0, C), live)
    pe = tl.load(qp_ptr + r[:, None] * C + tl.arange(0, C)[None, :], mask=valid[:, None], other=0.0)
    kh = _tdot(x3 + pe, tl.trans(w_k), tl.zeros([_RT, 16], tl.float32), P3, RN)
    vh = _tdot(x3, tl.trans(w_v), tl.zeros([_RT, 16], tl.float32), P3, RN)
    kh += tl.load(bk + d, mask=live, other=0.0)[None, :]
    vh += tl.load(bv + d, mask=live, other=0.0)[None, :]
    _ph6_fold(
        kh, vh, w_q, w_o, w % CP, live, h, r, valid, d, y, mean, rstd, y3acc, ln3w, ln3b, out_q, wq, bq, wo, a2,
        c2, vwb, vws, T, C, TPK, P3, RN, C // CP, CP, True, V3,
    )  # fmt: skip


@triton.jit
def _ph6_fold(
    kh, vh, w_qp, w_op, part, live, h, r, valid, d, y, mean, rstd, y3acc, ln3w, ln3b, out_q, wq, bq, wo, a2, c2,
    vwb, vws, T, C: tl.constexpr, TPK: tl.constexpr, P3: tl.constexpr, RN: tl.constexpr, NC: tl.constexpr,
    CP: tl.constexpr, PRE: tl.constexpr, V3: tl.constexpr,
):  # fmt: skip
    """The rest of phase-6 work item (row tile, head h, column part), given K_h and V_h of its rows (biases in):
    c2 = bq_h . K_ht, A2 = Wq_h^T K_ht and VW = Wout_h V_ht on the part's columns in NC-wide pieces (PRE: the
    part's Wq rows w_qp and Wout columns w_op were loaded already, one piece); head 0 stores output_queries. V3
    (`Config.v_terms` 3): VW's TF32 rounding residual too (vws), which phase 7 reads only then."""
    M8: tl.constexpr = 8 * TPK
    NCS: tl.constexpr = C // CP  # CP > 1: the output columns split over CP work items (NC <= NCS)
    tl.static_assert(not PRE or NC == NCS, "preloaded Wq / Wout columns: one piece")
    kh = tl.where(valid[:, None], kh * X_SCALE, 0.0)
    cb = tl.sum(kh * tl.load(bq + d, mask=live, other=0.0)[None, :], 1)  # bq_h . K_ht
    item = r // T
    jl = h * TPK + r % T
    j = item * M8 + jl
    if part == 0:
        tl.store(c2 + j, cb, mask=valid)
    for nb in range(part * NCS, part * NCS + NCS, NC):  # this item's output columns in NC-wide pieces
        cn = nb + tl.arange(0, NC)
        if PRE:
            w_q = w_qp
        else:
            w_q = tl.load(wq + d[:, None] * C + cn[None, :], mask=live, other=0.0)  # [16, NC]
        a = _tdot(kh, w_q, tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC]  Wq_h^T K_ht
        tl.store(a2 + j[:, None] * C + cn[None, :], _tf32_rn(a, RN), mask=valid[:, None])
        if PRE:
            w_o = w_op
        else:
            # [NC, 16]: Wout_i2t[cn, h]
            w_o = tl.load(wo + cn[:, None] * 128 + d[None, :], mask=live, other=0.0)
        vw = _tdot(vh, tl.trans(w_o), tl.zeros([_RT, NC], tl.float32), P3, RN)  # [16, NC]  Wout_h V_ht
        vt = (item[:, None] * C + cn[None, :]) * M8 + jl[:, None]  # VW^T [items, C, 8 * TPK]
        big = _tf32_rn(vw, RN)
        tl.store(vwb + vt, big, mask=valid[:, None])
        if V3:  # VW's rounding residual: only phase 7 with v_terms 3 reads it
            tl.store(vws + vt, vw - big, mask=valid[:, None])
        if h == 0:  # output_queries
            offn = r[:, None] * C + cn[None, :]
            x3 = _ln_cols(_row_piece(y3acc, y, offn, valid, NC, C), mean, rstd, ln3w, ln3b, cn, live)
            tl.store(out_q + offn, x3, mask=valid[:, None])


@triton.jit
def _i2t_half(
    xt, a, cb, jv, vb, vs, o,
    TPK: tl.constexpr, BS: tl.constexpr, RN: tl.constexpr, V3: tl.constexpr, RB: tl.constexpr,
    F16: tl.constexpr = False,
):  # fmt: skip
    """o + p @ VW for RB rows of [heads x TPK tokens]: scores, softmax over each head's tokens, values. F16
    (`Config.p7_tl_fp16`): xt, a and vb arrive as fp16 and p is split into two fp16 parts (fp32 accumulation).
    F16 tiles under 64 tokens (`Config.p7_tl_fp16_short`) take the scores transposed, [BS, RB] = x a^T (mma.sync),
    so that p^T is stored with its RB rows contiguous and reaches the value product as a K-major operand: p [RB,
    BS] from the [RB, BS] accumulator would be a [RB, 32] fp16 buffer of 64-byte rows, the layout that read shared
    memory out of bounds on the H200 (Triton 3.6, session 35)."""
    if F16 and BS < 64:
        st = tl.dot(tl.trans(xt), tl.trans(a)) + cb[None, :]  # [BS, RB]
        st = tl.where(jv[None, :], st, _NEG)
        s3t = tl.reshape(st, (BS, RB // TPK, TPK))  # softmax over the tokens of each head
        p3t = tl.exp2(s3t - tl.max(s3t, 2)[:, :, None])
        p3t = p3t / tl.sum(p3t, 2)[:, :, None]
        p = tl.trans(tl.reshape(p3t, (BS, RB)))  # [RB, BS] in p^T's layout: rows of RB contiguous
    else:
        if F16:
            s = tl.dot(a, xt) + cb[:, None]  # [RB, BS]
        else:
            s = tl.dot(a, xt, input_precision="tf32") + cb[:, None]  # [RB, BS]
        s = tl.where(jv[:, None], s, _NEG)
        s3 = tl.reshape(s, (RB // TPK, TPK, BS))  # softmax over the tokens of each head
        p3 = tl.exp2(s3 - tl.max(s3, 1)[:, None, :])
        p3 = p3 / tl.sum(p3, 1)[:, None, :]
        p = tl.reshape(p3, (RB, BS))
    if F16:  # p in (0, 1]: hi + lo carry about 22 bits; VW^T is TF32-rounded, so its fp16 copy is exact
        pb16 = p.to(tl.float16)
        o = tl.dot(vb, (p - pb16.to(tl.float32)).to(tl.float16), o)
        o = tl.dot(vb, pb16, o)
    else:  # (one return at the end: the compiler visits what follows a return inside a constexpr branch)
        pb = _tf32_rn(p, RN)
        ps = p - pb
        if V3:  # VW's rounding residual
            o = tl.dot(vs, pb, o, input_precision="tf32")
        o = tl.dot(vb, ps, o, input_precision="tf32")
        o = tl.dot(vb, pb, o, input_precision="tf32")
    return o


@triton.jit
def _i2t_operands(
    a2, c2, vwb, vws, item, j, jv, C: tl.constexpr, M8: tl.constexpr, V3: tl.constexpr, F16: tl.constexpr = False
):  # fmt: skip
    """A2 rows j [RB, C], c2, and VW^T columns j [C, RB] (TF32 part, and the rest if V3) of one item; F16: A2 and
    VW^T as fp16 (`Config.p7_tl_fp16`)."""
    c = tl.arange(0, C)
    a = tl.load(a2 + (item * M8 + j)[:, None] * C + c[None, :], mask=jv[:, None], other=0.0)
    cb = tl.load(c2 + item * M8 + j, mask=jv, other=0.0)
    vt = (item * C + c)[:, None] * M8 + j[None, :]
    vb = tl.load(vwb + vt, mask=jv[None, :], other=0.0)
    vs = vb  # (unused unless V3)
    if V3:
        vs = tl.load(vws + vt, mask=jv[None, :], other=0.0)
    if F16:
        a = a.to(tl.float16)
        vb = vb.to(tl.float16)
    return a, cb, vb, vs


@triton.jit
def _ph7_i2t_pass(
    w, live, k_ptr, kp_ptr, a2, c2, vwb, vws, bo, ln4w, ln4b, out_k, T, S, n_ch, CH,
    C: tl.constexpr, TPK: tl.constexpr, BS: tl.constexpr, PF_DIST: tl.constexpr, RN: tl.constexpr,
    V3: tl.constexpr, RK: tl.constexpr = 0, PARTS: tl.constexpr = 1, STAGES: tl.constexpr = 1,
    F16: tl.constexpr = False,
):  # fmt: skip
    """Work item w: part w % PARTS of the tiles of chunk w // PARTS (PARTS > 1: phase 7 in its own launch);
    STAGES > 1: the tile loads of the next tiles in flight (cp.async) during this tile's maths. F16
    (`Config.p7_tl_fp16`): the two products take fp16 operands (A2 and VW^T converted once per chunk, x = k +
    k_pe rounded to fp16 per tile), fp32 accumulation."""
    M8: tl.constexpr = 8 * TPK
    NH: tl.constexpr = (M8 + 63) // 64  # 64-row halves of the [8 heads x TPK] rows (2 when T > 8)
    RB: tl.constexpr = M8 // NH  # rows per half: 64, or 32 (TPK 4)
    part = w % PARTS
    item = (w // PARTS) // n_ch
    ch = (w // PARTS) % n_ch
    c = tl.arange(0, C)
    j0 = tl.arange(0, RB)
    jv0 = ((j0 % TPK) < T) & live
    if NH == 1:  # the operands stay in shared memory for the whole chunk
        a, cb, vb, vs = _i2t_operands(a2, c2, vwb, vws, item, j0, jv0, C, M8, V3, F16)
    bo_c = tl.load(bo + c, mask=live, other=0.0)
    lw = tl.load(ln4w + c, mask=live, other=0.0)
    lb = tl.load(ln4b + c, mask=live, other=0.0)
    s0, s1, t_lo, t_end = _ph7_tiles(part, ch, live, S, CH, BS, PARTS)  # this part's tiles: [t_lo, t_end)
    n_t = tl.maximum(t_end - t_lo, 0)
    for it in tl.range(0, n_t, num_stages=STAGES):
        st = s0 + (t_end - 1 - it) * BS  # last tiles first: those phase 3 read most recently (L2)
        if PF_DIST > 0:
            _prefetch_tokens(k_ptr, kp_ptr, item, S, st - PF_DIST * BS, s0, s1, BS, C)
        tok = st + tl.arange(0, BS)
        tm = (tok < s1) & live
        off = (item * S + tok)[None, :] * C + c[:, None]  # [C, BS] transposed tile
        kt = tl.load(k_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        xt = kt + tl.load(kp_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".cg")
        if F16:
            xt = xt.to(tl.float16)
        else:
            xt = _tf32_rn(xt, RN)
        # [C, BS] residual + out bias, then p @ VW. RK: the residual tile is read again (L2) instead of
        # keeping kt live across the dots (1: before them, as their accumulator; 2: after them)
        if RK == 0:
            o = kt + bo_c[:, None]
        elif RK == 1:
            o = tl.load(k_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".ca") + bo_c[:, None]
        else:
            o = tl.zeros([C, BS], tl.float32)
        if NH == 1:
            o = _i2t_half(xt, a, cb, jv0, vb, vs, o, TPK, BS, RN, V3, RB, F16)
        else:  # T > 8: the two halves' operands do not fit in shared memory together; re-read per tile
            for hf in tl.static_range(NH):
                jh = hf * RB + j0
                jvh = ((jh % TPK) < T) & live
                ah, cbh, vbh, vsh = _i2t_operands(a2, c2, vwb, vws, item, jh, jvh, C, M8, V3, F16)
                o = _i2t_half(xt, ah, cbh, jvh, vbh, vsh, o, TPK, BS, RN, V3, RB, F16)
        if RK == 2:
            o += tl.load(k_ptr + off, mask=tm[None, :], other=0.0, cache_modifier=".ca") + bo_c[:, None]
        mean = tl.sum(o, 0) / C
        oc = o - mean[None, :]
        var = tl.sum(oc * oc, 0) / C
        rstd = 1.0 / tl.sqrt(var + 1e-6)
        tl.store(out_k + off, oc * rstd[None, :] * lw[:, None] + lb[:, None], mask=tm[None, :])


# ----------------------------------------------------------------------------------------- kernel


@triton.jit(do_not_specialize=["NI", "T", "S", "R", "IPB", "pe_sa", "n_ch", "CH", "NSP4", "P0LO"])
def _two_way_kernel(
    q_ptr, k_ptr, qp_ptr, kp_ptr,
    sa_wq, sa_bq, sa_wk, sa_bk, sa_wv, sa_bv, sa_wo, sa_bo, ln1w, ln1b,
    t_wq, t_bq, t_wk, t_bk, t_wv, t_bv, t_wo, t_bo, ln2w, ln2b,
    m_w1, m_b1, m_w2, m_b2, ln3w, ln3b,
    i_wq, i_bq, i_wk, i_bk, i_wv, i_bv, i_wo, i_bo, ln4w, ln4b,
    out_q, out_k,
    accs, a1, c1, pm, pl, pacc, a2, c2, vwb, vws, kvp, sync, times,
    NI, T, S, R, IPB, pe_sa, n_ch, CH, NSP4, P0LO,
    PHASE: tl.constexpr, TPK: tl.constexpr, NHALF: tl.constexpr, BS1: tl.constexpr, BS2: tl.constexpr,
    ND: tl.constexpr, NCB: tl.constexpr, HB: tl.constexpr, KC: tl.constexpr, Q3: tl.constexpr,
    PF_W: tl.constexpr, PF_TOK: tl.constexpr, PF_DIST: tl.constexpr, WARM: tl.constexpr,
    MAXSPIN: tl.constexpr, SPIN_NS: tl.constexpr, INSTR: tl.constexpr, RN: tl.constexpr, V3: tl.constexpr,
    NC: tl.constexpr, KS1: tl.constexpr, QS: tl.constexpr, CS: tl.constexpr, RK: tl.constexpr,
    CP: tl.constexpr, NC26: tl.constexpr, CP1: tl.constexpr, NC1: tl.constexpr, KP1: tl.constexpr,
    KP6: tl.constexpr, P4SPLIT: tl.constexpr, TPK7: tl.constexpr, ACC_T: tl.constexpr = False,
    SPLIT7: tl.constexpr = False, P7PARTS: tl.constexpr = 1, PDL: tl.constexpr = False, S7: tl.constexpr = 1,
    PRE5: tl.constexpr = False, PRE2: tl.constexpr = False, P4GF: tl.constexpr = 0, PF_LATE: tl.constexpr = 0,
    F16_3: tl.constexpr = False, F16_7: tl.constexpr = False, KPJ: tl.constexpr = False, BSP: tl.constexpr = 64,
    KC0: tl.constexpr = 64, ST0: tl.constexpr = 1, W16: tl.constexpr = False, PRE6: tl.constexpr = False,
    SH2: tl.constexpr = 0, SH5: tl.constexpr = 0, SH6: tl.constexpr = 0, DST: tl.constexpr = 0,
    PF_VEC: tl.constexpr = False, EXIT6: tl.constexpr = False, WS: tl.constexpr = 0,
):  # fmt: skip
    """PHASE 0: all phases, persistent, per-phase item counters in `sync` (SPLIT7: all but phase 7, which
    then runs as its own PHASE 7 launch); PHASE k in 1..9: that phase only, one work item per program (8 and
    9: phases 1a and 6a, with KP1 / KP6 > 1; 7: P7PARTS work items per key chunk, tiles of BS2 tokens in a
    cp.async pipeline of S7 stages). PDL: wait for the previous kernel of the stream first (programmatic
    dependent launch). KPJ (`Config.kproj`): phase 0 ("PHASE" 10) projects the t2i keys and values of every key
    token into kvp at the start, on the programs from P0LO on (those without phase-1a, 1 or 2 items; on all of them
    where no program is such), and phases 2-4 work on them (`_ph3_kpj_pass`). PRE6 (`Config.pre6`, only without
    phase 6a): phase 6's first work item loads its weights before the phase-5 barrier. SH2 / SH5 / SH6
    (persistent, `Config.shift2` / `shift56`): phases 2, 5 and 6 start their items on program SH2 / SH5 / SH6. DST
    (`Config.diag_stores`, diagnostic): bit k - 1 set, phase k (4; 5 with pre5) stores its accumulator rows instead
    of adding them (wrong sums). WS (persistent, `Config.warm_sites`): dry runs of phases 2-6 at their call sites
    (`_dry_end`)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
    C: tl.constexpr = 256
    PERSIST: tl.constexpr = PHASE == 0
    # phase 6 counted and waited for: not where phase 7 is the next launch and EXIT6 (`Config.exit6`) lets the
    # programs leave after their phase-6 items (the launch waits for the whole kernel); INSTR keeps it for its stamp
    B6: tl.constexpr = PERSIST and not (SPLIT7 and EXIT6 and not INSTR)
    P3_1: tl.constexpr = (Q3 & 1) != 0  # phase k's query-side products in 3xTF32: bit k - 1 of Q3
    P3_2: tl.constexpr = (Q3 & 2) != 0
    P3_4: tl.constexpr = (Q3 & 8) != 0
    P3_5: tl.constexpr = (Q3 & 16) != 0
    P3_6: tl.constexpr = (Q3 & 32) != 0
    ST_4: tl.constexpr = (DST & 8) != 0  # diag_stores: phase k's accumulator rows stored, bit k - 1
    ST_5: tl.constexpr = (DST & 16) != 0
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    NG = tl.cdiv(NI, IPB)  # item groups of the self-attention
    NRT = tl.cdiv(R, _RT)  # query row tiles
    n_acc = NRT * _RT * C  # floats per accumulator
    y1acc = accs
    y2acc = accs + n_acc
    y3acc = accs + 2 * n_acc
    qkv = accs + 3 * n_acc  # KP1 > 1: phase 1a's q | k | v accumulator, [NRT * 16, 3 C]
    kv = accs + 6 * n_acc  # KP6 > 1: phase 6a's K | V accumulator, [NRT * 16, C]
    n_key = NI * n_ch
    n1 = 8 * NG * CP1
    n1a = 8 * NG * KP1
    n6a = 8 * NRT * KP6
    n2 = 8 * NRT * CP
    n3 = n_key * NHALF
    n4 = NRT * 8 * ND * NSP4
    n5 = NRT * (2048 // HB)
    NMAX = tl.maximum(
        tl.maximum(tl.maximum(n1, n2), tl.maximum(n3, n4)),
        tl.maximum(tl.maximum(n5, n_key * P7PARTS), tl.maximum(n1a, n6a)),
    )
    n0 = NI * tl.cdiv(S, BSP)  # phase-0 work items (KPJ)
    w16 = kvp + NI * S * C  # W16: the fp16 copy of Wk | Wv, after K | V in the same workspace
    if KPJ:
        NMAX = tl.maximum(NMAX, n0)
    if INSTR:
        _stamp(times, 0, pid)

    if PERSIST:
        if PF_W:  # the self-attention's 1 MB of weights, spread over the programs, into L2 (HBM is idle now)
            _prefetch_share(sa_wq, 65536, pid, G, 16)
            _prefetch_share(sa_wk, 65536, pid, G, 16)
            _prefetch_share(sa_wv, 65536, pid, G, 16)
            _prefetch_share(sa_wo, 65536, pid, G, 16)
        if PF_VEC:  # the LayerNorm parameters and biases of phases 2..7 (Config.prefetch_vectors)
            _prefetch_vectors(
                pid, G, ln1w, ln1b, t_bq, t_bk, t_bv, t_bo, ln2w, ln2b, m_b1, m_b2, ln3w, ln3b, i_bq, i_bk, i_bv,
                i_bo, ln4w, ln4b,
            )  # fmt: skip
        # the rest, and the start of this program's first key chunk (PF_LATE > 0: after phase 1 / 2)
        if PF_LATE == 0:
            _prefetch_later(
                t_wq, t_wk, t_wv, t_wo, m_w1, m_w2, i_wq, i_wk, i_wv, i_wo, k_ptr, kp_ptr, pid, G, n3, NHALF,
                n_ch, CH, S, PF_W, PF_TOK, C,
            )  # fmt: skip
        if WARM:  # dry runs: the last six programs fetch the code of phases 2..7 into L2 during phase 1
            # (the same specializations as the live calls below, so that it is their code)
            if pid == (G - 1) % G:
                _ph2_ln1_t2i_fold(
                    0, False, y1acc, qp_ptr, ln1w, ln1b, t_wq, t_bq, t_wk, t_bk, t_bo, y2acc, a1, c1, R, T,
                    C, TPK, KC, P3_2, RN, NC26, QS, CP,
                )  # fmt: skip
            if pid == (G - 2) % G:
                _ph3_t2i_pass(
                    0,
                    False,
                    k_ptr,
                    kp_ptr,
                    a1,
                    c1,
                    pm,
                    pl,
                    pacc,
                    T,
                    S,
                    n_ch,
                    CH,
                    C,
                    TPK,
                    BS1,
                    NHALF,
                    PF_DIST,
                    RN,
                    KS1,
                    ACC_T,
                    F16_3,
                )
            if pid == (G - 3) % G:
                _ph4_t2i_combine(
                    0, False, pm, pl, pacc, t_wv, t_bv, t_wo, y2acc, R, T, n_ch, NSP4,
                    C, TPK, ND, NCB, P3_4, RN, NC, CS, P4SPLIT, P4GF,
                )  # fmt: skip
            if pid == (G - 4) % G:
                _ph5_mlp(
                    0, False, y2acc, ln2w, ln2b, m_w1, m_b1, m_w2, m_b2, y3acc, R, C, HB, KC, P3_5, RN, NC, QS
                )
            if pid == (G - 5) % G:
                _ph6_ln3_i2t_fold(
                    0, False, y3acc, qp_ptr, ln3w, ln3b, out_q, i_wq, i_bq, i_wk, i_bk, i_wv, i_bv, i_wo, a2, c2,
                    vwb, vws, kv, R, T, C, TPK7, KC, P3_6, RN, NC26, QS, CP, KP6, V3,
                )  # fmt: skip
            if pid == (G - 6) % G:
                _ph7_i2t_pass(
                    0, False, k_ptr, kp_ptr, a2, c2, vwb, vws, i_bo, ln4w, ln4b, out_k, T, S, n_ch, CH,
                    C, TPK7, BS2, PF_DIST, RN, V3, RK, 1, 1, F16_7,
                )  # fmt: skip

    if KPJ:
        # phase 0: the t2i keys and values, on the programs that the query chain leaves idle
        if PERSIST or PHASE == 10:
            lo0 = tl.where(G > P0LO, P0LO, 0)  # phase 0's first program (all of them where none is idle)
            if pid >= lo0:
                if W16 and PERSIST:  # the fp16 copy of Wk and Wv, shared out over these programs, first
                    _ph0_weights16(t_wk, t_wv, w16, pid - lo0, G - lo0, C)
                    _arrive(sync + 10)
                    _wait(sync + 10, G - lo0, MAXSPIN, SPIN_NS)
                for w in range(pid - lo0, n0, G - lo0):
                    t0 = _item_start(INSTR)
                    _ph0_key_proj(
                        w, True, k_ptr, kp_ptr, t_wk, t_bk, t_wv, t_bv, kvp, S, C, BSP, KC0, ST0, W16 and PERSIST,
                        w16,
                    )  # fmt: skip
                    _item_done(sync, 9, times, G, NMAX, 10, w, t0, PERSIST, INSTR)

    if KP1 > 1:
        if PERSIST or PHASE == 8:  # phase 1a: q, k, v split by contraction columns
            for w in range(pid, n1a, G):
                t0 = _item_start(INSTR)
                _ph1a_qkv_part(
                    w, True, q_ptr, qp_ptr, sa_wq, sa_bq, sa_wk, sa_bk, sa_wv, sa_bv, qkv, R, T, IPB, pe_sa,
                    C, KC, P3_1, RN, QS, KP1,
                )  # fmt: skip
                _item_done(sync, 6, times, G, NMAX, 8, w, t0, PERSIST, INSTR)
        if PERSIST:
            _phase_barrier(sync, 6, n1a, times, pid, MAXSPIN, SPIN_NS, False)  # (no stamp slots for 1a)

    if PERSIST or PHASE == 1:
        for w in range(pid, n1, G):
            t0 = _item_start(INSTR)
            _ph1_self_attn(
                w, True, q_ptr, qp_ptr, sa_wq, sa_bq, sa_wk, sa_bk, sa_wv, sa_bv, sa_wo, sa_bo, y1acc, qkv, R, T,
                IPB, pe_sa, C, KC, P3_1, RN, NC1, QS, CP1, KP1,
            )  # fmt: skip
            _item_done(sync, 0, times, G, NMAX, 1, w, t0, PERSIST, INSTR)
    if PERSIST and PF_LATE > 0:  # ... once this program's phase-1 loads are done
        _prefetch_later(
            t_wq, t_wk, t_wv, t_wo, m_w1, m_w2, i_wq, i_wk, i_wv, i_wo, k_ptr, kp_ptr, pid, G, n3, NHALF,
            n_ch, CH, S, PF_W, PF_TOK, C, 3 if PF_LATE == 3 else 7,
        )  # fmt: skip
    w2 = _slot(pid, G, SH2)  # this program's first phase-2 item
    dry2, e2 = _dry_end(pid, G, w2, n2, pid >= n3, WS)
    if PRE2 and (PERSIST or PHASE == 2):  # the first phase-2 item's PE rows and weights, during the barrier
        pe2, w_q2, w_k2 = _ph2_operands(w2, _first_live(w2, n2), qp_ptr, t_wq, t_wk, R, C, CP, KPJ)
    if PERSIST and not dry2:
        _phase_barrier(sync, 0, n1, times, pid, MAXSPIN, SPIN_NS, INSTR)

    if PERSIST or PHASE == 2:
        for w in range(w2, e2, G):
            lv = _live(w, n2, WS)
            t0 = _item_start(INSTR)
            if PRE2:
                if w != w2:
                    pe2, w_q2, w_k2 = _ph2_operands(w, lv, qp_ptr, t_wq, t_wk, R, C, CP, KPJ)
                _ph2_loaded(
                    w, lv, y1acc, pe2, w_q2, w_k2, ln1w, ln1b, t_bq, t_wk, t_bk, t_bo, y2acc, a1, c1, R, T,
                    C, TPK, P3_2, RN, CP, KPJ,
                )  # fmt: skip
            else:
                _ph2_ln1_t2i_fold(
                    w, lv, y1acc, qp_ptr, ln1w, ln1b, t_wq, t_bq, t_wk, t_bk, t_bo, y2acc, a1, c1, R, T,
                    C, TPK, KC, P3_2, RN, NC26, QS, CP, KPJ,
                )  # fmt: skip
            if lv:
                _item_done(sync, 1, times, G, NMAX, 2, w, t0, PERSIST, INSTR)
    if PERSIST and PF_LATE == 3:  # PF_LATE 3: the MLP and i2t weights after the program's phase-2 items
        _prefetch_later(
            t_wq, t_wk, t_wv, t_wo, m_w1, m_w2, i_wq, i_wk, i_wv, i_wo, k_ptr, kp_ptr, pid, G, n3, NHALF,
            n_ch, CH, S, PF_W, PF_TOK, C, 4,
        )  # fmt: skip
    dry3, e3 = _dry_end(pid, G, pid, n3, pid >= n4, WS)
    if PERSIST and not dry3:
        _phase_barrier(sync, 1, n2, times, pid, MAXSPIN, SPIN_NS, INSTR)
        if KPJ:
            _phase_barrier(sync, 9, n0, times, pid, MAXSPIN, SPIN_NS, False)

    if PERSIST or PHASE == 3:
        for w in range(pid, e3, G):
            lv = _live(w, n3, WS)
            t0 = _item_start(INSTR)
            if KPJ:
                _ph3_kpj_pass(w, lv, kvp, a1, pm, pl, pacc, T, S, n_ch, CH, TPK, BS1, NHALF, KS1)
            else:
                _ph3_t2i_pass(
                    w, lv, k_ptr, kp_ptr, a1, c1, pm, pl, pacc, T, S, n_ch, CH,
                    C, TPK, BS1, NHALF, PF_DIST, RN, KS1, ACC_T, F16_3,
                )  # fmt: skip
            if lv:
                _item_done(sync, 2, times, G, NMAX, 3, w, t0, PERSIST, INSTR)
    w5 = _slot(pid, G, SH5)  # this program's first phase-5 item
    dry4, e4 = _dry_end(pid, G, pid, n4, w5 >= n5, WS)
    if PERSIST and not dry4:
        _phase_barrier(sync, 2, n3, times, pid, MAXSPIN, SPIN_NS, INSTR)

    if PERSIST or PHASE == 4:
        for w in range(pid, e4, G):
            lv = _live(w, n4, WS)
            t0 = _item_start(INSTR)
            _ph4_t2i_combine(
                w, lv, pm, pl, pacc, t_wv, t_bv, t_wo, y2acc, R, T, n_ch, NSP4,
                C, TPK, ND, NCB, P3_4, RN, NC, CS, P4SPLIT, P4GF, KPJ, ST_4,
            )  # fmt: skip
            if lv:
                _item_done(sync, 3, times, G, NMAX, 4, w, t0, PERSIST, INSTR)
    w6 = _slot(pid, G, SH6)  # this program's first phase-6 item
    dry5, e5 = _dry_end(pid, G, w5, n5, (w6 >= n2) & ((KP6 == 1) | (pid >= n6a)), WS)
    if PRE5 and (PERSIST or PHASE == 5):  # the first phase-5 item's weights, in flight during the barrier
        w_1, w_2 = _ph5_weights(w5, _first_live(w5, n5), m_w1, m_w2, C, HB)
    if PERSIST and not dry5:
        _phase_barrier(sync, 3, n4, times, pid, MAXSPIN, SPIN_NS, INSTR)

    if PERSIST or PHASE == 5:
        for w in range(w5, e5, G):
            lv = _live(w, n5, WS)
            t0 = _item_start(INSTR)
            if PRE5:
                if w != w5:
                    w_1, w_2 = _ph5_weights(w, lv, m_w1, m_w2, C, HB)
                _ph5_mlp_loaded(
                    w, lv, y2acc, ln2w, ln2b, w_1, m_b1, w_2, m_b2, y3acc, R, C, HB, P3_5, RN, ST_5,
                )  # fmt: skip
            else:
                _ph5_mlp(
                    w, lv, y2acc, ln2w, ln2b, m_w1, m_b1, m_w2, m_b2, y3acc, R, C, HB, KC, P3_5, RN, NC, QS
                )
            if lv:
                _item_done(sync, 4, times, G, NMAX, 5, w, t0, PERSIST, INSTR)
    # (phase 6 runs dry only without phase 6a, whose barrier it would otherwise wait for too)
    dry6, e6 = _dry_end(pid, G, w6, n2, (KP6 == 1) & (SPLIT7 | (pid >= n_key * P7PARTS)), WS)
    if PRE6 and (PERSIST or PHASE == 6):  # the first phase-6 item's weights, in flight during the barrier
        tl.static_assert(KP6 == 1, "pre6: phase 6 computes K_h and V_h itself (no phase 6a)")
        w_k6, w_v6, w_q6, w_o6 = _ph6_operands(w6, _first_live(w6, n2), i_wk, i_wv, i_wq, i_wo, C, CP)
    if PERSIST and not dry6:
        _phase_barrier(sync, 4, n5, times, pid, MAXSPIN, SPIN_NS, INSTR)

    if KP6 > 1:
        if PERSIST or PHASE == 9:  # phase 6a: K, V split by contraction columns
            for w in range(pid, n6a, G):
                t0 = _item_start(INSTR)
                _ph6a_kv_part(
                    w, True, y3acc, qp_ptr, ln3w, ln3b, i_wk, i_bk, i_wv, i_bv, kv, R, C, KC, P3_6, RN, QS, KP6,
                )  # fmt: skip
                _item_done(sync, 8, times, G, NMAX, 9, w, t0, PERSIST, INSTR)
        if PERSIST:
            _phase_barrier(sync, 8, n6a, times, pid, MAXSPIN, SPIN_NS, False)  # (nor for 6a)

    if PERSIST or PHASE == 6:
        for w in range(w6, e6, G):
            lv = _live(w, n2, WS)
            t0 = _item_start(INSTR)
            if PRE6:
                if w != w6:
                    w_k6, w_v6, w_q6, w_o6 = _ph6_operands(w, lv, i_wk, i_wv, i_wq, i_wo, C, CP)
                _ph6_loaded(
                    w, lv, y3acc, qp_ptr, w_k6, w_v6, w_q6, w_o6, ln3w, ln3b, out_q, i_wq, i_bq, i_bk, i_bv, i_wo,
                    a2, c2, vwb, vws, R, T, C, TPK7, P3_6, RN, CP, V3,
                )  # fmt: skip
            else:
                _ph6_ln3_i2t_fold(
                    w, lv, y3acc, qp_ptr, ln3w, ln3b, out_q, i_wq, i_bq, i_wk, i_bk, i_wv, i_bv, i_wo, a2, c2,
                    vwb, vws, kv, R, T, C, TPK7, KC, P3_6, RN, NC26, QS, CP, KP6, V3,
                )  # fmt: skip
            if lv:
                _item_done(sync, 5, times, G, NMAX, 6, w, t0, B6, INSTR)
    if B6:
        _phase_barrier(sync, 5, n2, times, pid, MAXSPIN, SPIN_NS, INSTR)

    if (PERSIST and not SPLIT7) or PHASE == 7:
        # the accumulators are dead now (read in phases 1, 2, 5, 6): zero them for the next call (Plan.n_accs)
        _zero_share(accs, (7 if KP6 > 1 else (6 if KP1 > 1 else 3)) * n_acc, pid, G, 1024)
        n7 = n_key * P7PARTS
        n_mine = tl.cdiv(n7 - pid, G)
        for i in range(0, n_mine):
            w = pid + (n_mine - 1 - i) * G  # this program's chunks, last first (L2 reuse after phase 3)
            t0 = _item_start(INSTR)
            _ph7_i2t_pass(
                w, True, k_ptr, kp_ptr, a2, c2, vwb, vws, i_bo, ln4w, ln4b, out_k, T, S, n_ch, CH,
                C, TPK7, BS2, PF_DIST, RN, V3, RK, P7PARTS, S7, F16_7,
            )  # fmt: skip
            _item_done(sync, 7, times, G, NMAX, 7, w, t0, False, INSTR)  # (phase 7 is not counted)

    if PERSIST:  # the last program out resets the counters for the next call (stream order publishes it)
        tl.debug_barrier()
        done = tl.atomic_add(sync + 7, 1, sem="acq_rel", scope="gpu")
        if done == G - 1:
            for k in tl.static_range(10):
                tl.atomic_xchg(sync + k, 0, sem="relaxed", scope="gpu")
            if W16:  # phase 0's fp16-weights counter
                tl.atomic_xchg(sync + 10, 0, sem="relaxed", scope="gpu")
        if INSTR:
            _stamp(times, 7, pid)


# ------------------------------------------------------------------------ phase 7 in Gluon (sm_90)
# Gluon (triton.experimental.gluon, inside Triton 3.6: the H200's and the official environment's) gives what tl
# does not on sm_90: warp specialization with register budgets, mbarriers and asynchronous wgmma. 077 ships a
# Gluon window attention since its session 19; here the i2t key pass (phase 7's own launch) takes the same
# shape: a cp.async loader warpgroup streams each 64-token tile's k and k_pe rows in 32-channel pieces into a
# shared-memory ring, and two consumer warpgroups take alternate tiles, with the tokens on the wgmma's M.
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy as _gl_cp
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared as _gl_fence,
    )
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier as _gl_bar,
    )
    from triton.experimental.gluon.language.nvidia.hopper import (
        warpgroup_mma as _gl_mma,
    )
    from triton.experimental.gluon.language.nvidia.hopper import (
        warpgroup_mma_wait as _gl_mma_wait,
    )

    # cp.async into shared memory: async_copy_global_to_shared in Triton 3.6, renamed async_load by 3.9 (CI's)
    _gl_cp_load = getattr(_gl_cp, "async_load", None) or _gl_cp.async_copy_global_to_shared
    _gl_sync = getattr(gl, "thread_barrier", None) or gl.barrier  # the partition's threads (renamed by 3.9)
except ImportError:  # a Triton without Gluon's Hopper API: phase 7 stays in the tl kernel
    gluon = None

# key tokens per tile of the Gluon phase 7: the wgmma's M (one warpgroup; the kernel spells it 64); a tile streams
# in 8 pieces of 32 channels
G7_TILE = 64

if gluon is not None:

    @gluon.jit
    def _g7_gdc_wait(PDL: gl.constexpr):
        if PDL > 0:  # the persistent kernel's writes (A2, c2, VW^T) are visible after this
            gl.inline_asm_elementwise(
                "griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1
            )

    @gluon.jit
    def _g7_chunk(S, CH):
        """This program's key chunk: its item, its tokens [s0, s1) and its number of 64-token tiles."""
        n_ch = gl.cdiv(S, CH)
        pid = gl.program_id(0)
        s0 = (pid % n_ch) * CH
        s1 = gl.minimum(s0 + CH, S)
        return pid // n_ch, s0, s1, gl.cdiv(s1 - s0, 64)

    @gluon.jit
    def _g7_rn(x):
        """fp32 -> nearest TF32 value (ties away from zero), as _tf32_rn."""
        bits = x.to(gl.int32, bitcast=True)
        return ((bits + 0x1000) & -8192).to(gl.float32, bitcast=True)

    @gluon.jit
    def _g7_kappa(c):
        """The key-side row (head-major: 8 h + t with TPK 8, 4 h + t with TPK 4) that column c of the score
        accumulator holds: the value product takes the accumulator's registers as its A operand as they lie, and
        the A operand's K index of the register of column 8 g + 2 t + b is 8 g + 4 b + t."""
        return 8 * (c // 8) + 4 * (c % 2) + (c % 8) // 2

    @gluon.jit
    def _g7_signal(ready, turn, g, NS: gl.constexpr, LEFT: gl.constexpr):
        """Copy group g has landed (with LEFT newer ones in flight: the operands' group, issued first, too).
        The first piece of tile i also completes a phase of turn[i % 2], the barrier its consumer waits on
        before the tile (see _g7_consumer)."""
        _gl_cp.wait_group(LEFT)
        _gl_sync()
        _gl_fence()
        _gl_bar.arrive(ready.index(g % NS))
        if g % 8 == 0:
            _gl_bar.arrive(turn.index((g // 8) % 2))

    @gluon.jit
    def _g7_vw(vw_ptr, vw_smem, item, T, M8: gl.constexpr, TPK: gl.constexpr, OP: gl.constexpr):
        """VW^T [256, M8] of the item into shared memory as OP (fp32 or fp16: exact, phase 6 stores it
        TF32-rounded), its padded columns (t >= T of a head's TPK: see _g7_loader) zeros. Loaded whole and then
        selected: a mask along the contiguous columns would split the 16-byte loads. With M8 32 the layout's 64
        columns wrap (each element loaded twice)."""
        lv: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])
        kv = gl.arange(0, M8, layout=gl.SliceLayout(0, lv))
        cv = gl.arange(0, 64, layout=gl.SliceLayout(1, lv))
        keep = ((kv % TPK) < T)[None, :]
        for b in gl.static_range(4):  # 64 channels at a time
            v = gl.load(vw_ptr + (item * 256 + b * 64 + cv)[:, None] * M8 + kv[None, :])
            vw_smem.slice(b * 64, 64).store(gl.where(keep, v, 0.0).to(OP))

    @gluon.jit
    def _g7_operands16(a2_ptr, vw_ptr, a2_smem, vw_smem, item, T, M8: gl.constexpr, TPK: gl.constexpr):
        """A2 (8 pieces [M8, 32]) and VW^T [256, M8] of the item as fp16, in natural row order: both are stored
        TF32-rounded by phase 6, so the fp16 copies are exact inside fp16's normal range. Padded rows are
        zeros (see _g7_loader)."""
        lay: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
        ra = gl.arange(0, M8, layout=gl.SliceLayout(1, lay))
        ca = gl.arange(0, 32, layout=gl.SliceLayout(0, lay))
        for q in gl.static_range(8):
            a = gl.load(
                a2_ptr + (item * M8 + ra)[:, None] * 256 + (q * 32 + ca)[None, :],
                mask=((ra % TPK) < T)[:, None], other=0.0,
            )  # fmt: skip
            a2_smem.index(q).store(a.to(gl.float16))
        _g7_vw(vw_ptr, vw_smem, item, T, M8, TPK, gl.float16)
        _gl_fence()  # each thread's stores, before the first signal's barrier and arrive (the wgmma reads them)

    @gluon.jit
    def _g7_loader(
        k_ptr, kp_ptr, a2_ptr, vw_ptr, x_smem, p_smem, a2_smem, vw_smem, ready, free, turn, T, S, CH,
        M8: gl.constexpr, TPK: gl.constexpr, NS: gl.constexpr, LAG: gl.constexpr, PDL: gl.constexpr,
        F16: gl.constexpr = False,
    ):  # fmt: skip
        """4 warps: the item's A2 and VW^T into shared memory once, then every tile's k and k_pe rows, piece by
        piece (32 channels), into the ring of NS slots, LAG copy groups in flight before a group is signalled.
        F16: A2 and VW^T as fp16 copies, in natural row order, through registers (_g7_operands16).

        A head's rows t >= T (padding up to TPK) are never written by phase 6: the workspace holds whatever the
        allocator left there, NaN included (session 36: all of output_keys NaN). They arrive as zeros (A2's by
        a masked cp.async, which fills zeros; VW^T's selected, _g7_vw), so a padded score column is c2's -1e30
        and its VW^T column adds 0."""
        item, s0, s1, n_t = _g7_chunk(S, CH)
        _g7_gdc_wait(PDL)
        lay: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])  # [rows, 32 channels]
        ca = gl.arange(0, 32, layout=gl.SliceLayout(0, lay))
        if F16 and n_t > 0:
            _g7_operands16(a2_ptr, vw_ptr, a2_smem, vw_smem, item, T, M8, TPK)
        if not F16 and n_t > 0:
            # A2 [M8, 256] (TF32-rounded by phase 6) as 8 pieces [M8, 32], its rows in the accumulator's column
            # order: column c of s holds row _g7_kappa(c) (see the consumer)
            ra = _g7_kappa(gl.arange(0, M8, layout=gl.SliceLayout(1, lay)))
            for q in gl.static_range(8):
                _gl_cp_load(
                    a2_smem.index(q), a2_ptr + (item * M8 + ra)[:, None] * 256 + (q * 32 + ca)[None, :],
                    mask=((ra % TPK) < T)[:, None],
                )  # fmt: skip
            _gl_cp.commit_group()
            _g7_vw(vw_ptr, vw_smem, item, T, M8, TPK, gl.float32)  # through registers (its padding selected)
            _gl_fence()
        rt = gl.arange(0, 64, layout=gl.SliceLayout(1, lay))
        g = 0
        for i in range(0, n_t):
            st = s0 + (n_t - 1 - i) * 64  # the chunk's last tiles first (phase 3 read them most recently: L2)
            ok = (st + rt < s1)[:, None]
            off = (item * S + st + rt)[:, None] * 256 + ca[None, :]
            for q in gl.static_range(8):
                slot = g % NS
                _gl_bar.wait(free.index(slot), ((g // NS) & 1) ^ 1)
                _gl_cp_load(x_smem.index(slot), k_ptr + off + q * 32, mask=ok)
                _gl_cp_load(p_smem.index(slot), kp_ptr + off + q * 32, mask=ok)
                _gl_cp.commit_group()
                if g >= LAG:
                    _g7_signal(ready, turn, g - LAG, NS, LAG)
                g += 1
        for r in gl.static_range(LAG):  # the last LAG groups (fewer if the chunk has fewer)
            gs = g - LAG + r
            if gs >= 0:
                _g7_signal(ready, turn, gs, NS, LAG - 1 - r)

    @gluon.jit
    def _g7_barriers(NS: gl.constexpr):
        """The ring's mbarriers (ready and free per slot) and the consumers' turn barriers, initialised."""
        ready = gl.allocate_shared_memory(gl.int64, [NS, 1], _gl_bar.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [NS, 1], _gl_bar.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], _gl_bar.MBarrierLayout())  # per consumer
        for i in gl.static_range(NS):
            _gl_bar.init(ready.index(i), count=1)
            _gl_bar.init(free.index(i), count=1)
        for i in gl.static_range(2):
            _gl_bar.init(turn.index(i), count=1)
        _gl_fence()
        return ready, free, turn

    @gluon.jit
    def _g7_zero_share(accs_ptr, n_zero, WG: gl.constexpr):
        """The query-side accumulators are dead once phase 7 runs (phases 1-6 are done): zero this warpgroup's
        share of them for the next call."""
        zl: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
        parts = 2 * gl.num_programs(0)
        per = gl.cdiv(n_zero, parts)
        z_lo = (2 * gl.program_id(0) + WG) * per
        z_hi = gl.minimum(z_lo + per, n_zero)
        for zs in range(z_lo, z_hi, 1024):
            zo = zs + gl.arange(0, 1024, layout=zl)
            gl.store(accs_ptr + zo, gl.zeros([1024], gl.float32, zl), mask=zo < z_hi)

    @gluon.jit
    def _g7_setup(
        c2_ptr, accs_ptr, n_zero, T, S, CH, WG: gl.constexpr, M8: gl.constexpr, TPK: gl.constexpr,
        PDL: gl.constexpr, KAPPA: gl.constexpr, s_l: gl.constexpr, o_l: gl.constexpr,
    ):  # fmt: skip
        """A consumer's start: the PDL wait, its share of the accumulators zeroed, its chunk, the score
        accumulator's start row (c2 of the row each column holds, -1e30 for padded tokens; KAPPA: columns in
        _g7_kappa order) and the row / column indices of the output tile."""
        _g7_gdc_wait(PDL)
        _g7_zero_share(accs_ptr, n_zero, WG)
        item, s0, s1, n_t = _g7_chunk(S, CH)
        c = gl.arange(0, M8, layout=gl.SliceLayout(0, s_l))
        j = gl.where(KAPPA, _g7_kappa(c), c)
        jv = (j % TPK) < T
        cvec = gl.where(jv, gl.load(c2_ptr + item * M8 + j, mask=jv, other=0.0), -1.0e30)
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, o_l))
        cols = gl.arange(0, 256, layout=gl.SliceLayout(0, o_l))
        return item, s0, s1, n_t, cvec, rows, cols

    @gluon.jit
    def _g7_tail(k_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, item, S, st, s1, rows, cols, pb, ps, vw_smem):
        """out = LN4(k + bout + p VW) of one tile, stored from the accumulator's registers: the accumulator
        starts at the residual (read again, from L2); p in two parts (hi, lo), VW^T from shared memory."""
        ok = (st + rows < s1)[:, None]
        off = (item * S + st + rows)[:, None] * 256 + cols[None, :]
        o = gl.load(k_ptr + off, mask=ok, other=0.0) + gl.expand_dims(gl.load(bo_ptr + cols), 0)
        vwt = vw_smem.permute((1, 0))
        o = _gl_mma(ps, vwt, o, is_async=True)
        o = _gl_mma(pb, vwt, o, is_async=True)
        o = _gl_mma_wait(num_outstanding=0, deps=(o,))
        # LayerNorm4 along the accumulator's rows (in-thread and quad sums)
        mean = gl.sum(o, axis=1) / 256
        oc = o - gl.expand_dims(mean, 1)
        rstd = 1.0 / gl.sqrt(gl.sum(oc * oc, axis=1) / 256 + 1e-6)
        y = oc * gl.expand_dims(rstd, 1) * gl.expand_dims(gl.load(lw_ptr + cols), 0)
        gl.store(out_ptr + off, y + gl.expand_dims(gl.load(lb_ptr + cols), 0), mask=ok)

    @gluon.jit
    def _g7_x_tf32(x_smem, p_smem, x16_smem, g, q, WG: gl.constexpr, NS: gl.constexpr, blk: gl.constexpr):
        """x = RN(k + k_pe) of piece g in place of its k piece, which is then the score product's A operand."""
        xs = x_smem.index(g % NS)
        xs.store(_g7_rn(xs.load(blk) + p_smem.index(g % NS).load(blk)))
        return xs

    @gluon.jit
    def _g7_x_fp16(x_smem, p_smem, x16_smem, g, q, WG: gl.constexpr, NS: gl.constexpr, blk: gl.constexpr):
        """x = fp16(k + k_pe) of piece g into one of this warpgroup's two x buffers (its product two pieces ago is
        done: the consumer's wait), the score product's A operand; the ring slot is no longer needed."""
        xb = x16_smem.index(2 * WG + q % 2)
        xb.store((x_smem.index(g % NS).load(blk) + p_smem.index(g % NS).load(blk)).to(gl.float16))
        return xb

    @gluon.jit
    def _g7_p_tf32(acc, S_VIEW: gl.constexpr, M8: gl.constexpr, TPK: gl.constexpr, p_op: gl.constexpr):
        """p (hi, lo: two TF32 parts) of the scores, columns in _g7_kappa order.

        Column 8 g + 2 t + b holds row 8 g + 4 b + t, so head h's columns are (g, b) = (h // 2, h % 2), t = 0..3
        with TPK 4 and g = h, t and b with TPK 8; in the accumulator's own layout (S_VIEW, checked) t is a quad's
        lanes and b a register pair. p with its columns in K order (8 g + 4 b + t) is then the A operand's
        layout: no data moves."""
        s4 = gl.convert_layout(gl.reshape(acc, [64, M8 // 8, 4, 2]), S_VIEW, assert_trivial=True)
        m = gl.max(s4, axis=2)
        m = gl.where(TPK == 8, gl.expand_dims(gl.max(m, axis=2), 2), m)
        p4 = gl.exp2(s4 - gl.expand_dims(m, 2))
        den = gl.sum(p4, axis=2)
        den = gl.where(TPK == 8, gl.expand_dims(gl.sum(den, axis=2), 2), den)
        p4 = p4 / gl.expand_dims(den, 2)
        p = gl.convert_layout(gl.reshape(gl.permute(p4, (0, 1, 3, 2)), [64, M8]), p_op, assert_trivial=True)
        pb = _g7_rn(p)
        return pb, p - pb

    @gluon.jit
    def _g7_p_fp16(acc, S_VIEW: gl.constexpr, M8: gl.constexpr, TPK: gl.constexpr, p_op: gl.constexpr):
        """p (hi, lo: two fp16 parts) of the scores, natural head-major columns: the softmax over each head's TPK
        columns (a quad's lanes and registers: S_VIEW is the accumulator's own layout, checked); each register pair
        of the accumulator is a column pair of the fp16 A operand, so no data moves."""
        s3 = gl.convert_layout(gl.reshape(acc, [64, 8, TPK]), S_VIEW, assert_trivial=True)
        p3 = gl.exp2(s3 - gl.expand_dims(gl.max(s3, axis=2), 2))
        p3 = p3 / gl.expand_dims(gl.sum(p3, axis=2), 2)
        p = gl.reshape(p3, [64, M8])
        pb = p.to(gl.float16)
        ps = (p - pb.to(gl.float32)).to(gl.float16)
        return gl.convert_layout(pb, p_op, assert_trivial=True), gl.convert_layout(
            ps, p_op, assert_trivial=True
        )

    @gluon.jit
    def _g7_consumer(
        k_ptr, c2_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, x_smem, p_smem, x16_smem, a2_smem,
        vw_smem, ready, free, turn, T, S, CH, WG: gl.constexpr, M8: gl.constexpr, TPK: gl.constexpr,
        NS: gl.constexpr, PDL: gl.constexpr, S_VIEW: gl.constexpr, F16: gl.constexpr,
    ):  # fmt: skip
        """One warpgroup: tiles WG, WG + 2, ... of the chunk. Per tile s = x A2^T + c2 (the tokens on M), the
        softmax over each head's TPK columns, out = LN4(k + bout + p VW) (p in two parts), stored from the
        accumulator's registers. TF32 operands (x = RN(k + k_pe) in place, columns in _g7_kappa order; x16_smem
        unused), or with F16 fp16 operands (x into this warpgroup's x16_smem buffers, natural columns)."""
        KI: gl.constexpr = 16 if F16 else 8  # the wgmma's K per instruction
        x_step: gl.constexpr = _g7_x_fp16 if F16 else _g7_x_tf32
        p_step: gl.constexpr = _g7_p_fp16 if F16 else _g7_p_tf32
        s_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, M8, KI]
        )
        o_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, KI]
        )
        p_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_l, k_width=KI // 8)
        blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])  # [64 tokens, 32 channels]
        item, s0, s1, n_t, cvec, rows, cols = _g7_setup(
            c2_ptr, accs_ptr, n_zero, T, S, CH, WG, M8, TPK, PDL, not F16, s_l, o_l
        )
        for i in range(WG, n_t, 2):
            # the tile's first piece has landed (and with it every earlier copy group, the operands' included).
            # Needed before the parity waits on `ready` below: a consumer's first piece of a tile can sit in a
            # slot whose earlier use (the other consumer's) is not yet signalled, and a parity wait one phase
            # ahead passes at once (session 22: with 6 slots and 2 tiles per program no run finished). From
            # here on the tile's pieces are consecutive, so each slot's previous use is signalled before its
            # wait. A model of the protocol: g7_ring_model.py (NOTES.md, "Session 22")
            _gl_bar.wait(turn.index(WG), ((i - WG) // 2) & 1)
            st = s0 + (n_t - 1 - i) * 64
            # s = x A2^T + c2, over the 8 pieces of the ring
            acc = gl.zeros([64, M8], gl.float32, s_l) + cvec[None, :]
            for q in gl.static_range(8):
                g = i * 8 + q
                _gl_bar.wait(ready.index(g % NS), (g // NS) & 1)
                xa = x_step(x_smem, p_smem, x16_smem, g, q, WG, NS, blk)
                _gl_fence()  # each thread's stores, then all of them, before the wgmma reads the piece
                _gl_sync()
                if F16:  # the ring slot is read: back to the loader at once
                    _gl_bar.arrive(free.index(g % NS))
                acc = _gl_mma(xa, a2_smem.index(q).permute((1, 0)), acc, is_async=True)
                acc = _gl_mma_wait(num_outstanding=1, deps=(acc,))
                if (
                    not F16 and q > 0
                ):  # the previous piece's product is done: its slot goes back to the loader
                    _gl_bar.arrive(free.index((g - 1) % NS))
            acc = _gl_mma_wait(num_outstanding=0, deps=(acc,))
            if not F16:
                _gl_bar.arrive(free.index((i * 8 + 7) % NS))
            pb, ps = p_step(acc, S_VIEW, M8, TPK, p_op)
            _g7_tail(k_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, item, S, st, s1, rows, cols, pb, ps, vw_smem)

    @gluon.jit
    def _g7_partitions(
        k_ptr, kp_ptr, a2_ptr, c2_ptr, vw_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, T, S, CH,
        M8: gl.constexpr, TPK: gl.constexpr, S_VIEW: gl.constexpr, NS: gl.constexpr, LAG: gl.constexpr,
        CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, PDL: gl.constexpr, F16: gl.constexpr,
    ):  # fmt: skip
        """The kernel's shared memory and the ring's barriers, then the two consumer warpgroups (this one and a
        worker) and the loader warpgroup. The ring holds fp32 k and k_pe pieces; A2 and VW^T are fp32 (TF32
        operands) or, with F16, fp16 (half the shared memory: room for a deeper ring), and then each consumer has
        two fp16 x buffers (x16_smem; without F16 x is computed in place and x16_smem is the ring, unused)."""
        xl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 32], gl.float32)
        x_smem = gl.allocate_shared_memory(
            gl.float32, [NS, 64, 32], xl
        )  # k pieces (TF32: then x = RN(k + k_pe))
        p_smem = gl.allocate_shared_memory(gl.float32, [NS, 64, 32], xl)  # k_pe pieces
        op: gl.constexpr = gl.float16 if F16 else gl.float32  # the operands' type
        if F16:
            x16l: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 32], gl.float16)
            x16_smem = gl.allocate_shared_memory(gl.float16, [4, 64, 32], x16l)  # two per consumer
        else:
            x16_smem = x_smem
        al: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M8, 32], op)
        vl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([256, M8], op)
        a2_smem = gl.allocate_shared_memory(op, [8, M8, 32], al)
        vw_smem = gl.allocate_shared_memory(op, [256, M8], vl)
        ready, free, turn = _g7_barriers(NS)
        # the argument tuples are written out in the call: a tuple held in a variable turns its constexprs into
        # tensors (Triton 3.6; 077's NOTES, session 19)
        gl.warp_specialize(
            [
                (
                    _g7_consumer,
                    (k_ptr, c2_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, x_smem, p_smem, x16_smem,
                     a2_smem, vw_smem, ready, free, turn, T, S, CH, 0, M8, TPK, NS, PDL, S_VIEW, F16),
                ),
                (
                    _g7_consumer,
                    (k_ptr, c2_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, x_smem, p_smem, x16_smem,
                     a2_smem, vw_smem, ready, free, turn, T, S, CH, 1, M8, TPK, NS, PDL, S_VIEW, F16),
                ),
                (
                    _g7_loader,
                    (k_ptr, kp_ptr, a2_ptr, vw_ptr, x_smem, p_smem, a2_smem, vw_smem, ready, free, turn, T, S, CH,
                     M8, TPK, NS, LAG, PDL, F16),
                ),
            ],
            [4, 4],
            [CONSUMER_REGS, LOADER_REGS],
        )  # fmt: skip

    @gluon.jit(do_not_specialize=["n_zero", "T", "S", "CH"])
    def _i2t_gluon16_kernel(
        k_ptr, kp_ptr, a2_ptr, c2_ptr, vw_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, T, S, CH,
        M8: gl.constexpr, TPK: gl.constexpr, S3_L: gl.constexpr, NS: gl.constexpr = 9, LAG: gl.constexpr = 4,
        CONSUMER_REGS: gl.constexpr = 232, LOADER_REGS: gl.constexpr = 40, PDL: gl.constexpr = 0,
    ):  # fmt: skip
        """_i2t_gluon_kernel with fp16 operands for both products (fp32 accumulation; Config.p7_gluon_fp16):
        A2 and VW^T take half the shared memory (room for a deeper ring), each consumer has two fp16 x buffers."""
        _g7_partitions(
            k_ptr, kp_ptr, a2_ptr, c2_ptr, vw_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, T, S, CH,
            M8, TPK, S3_L, NS, LAG, CONSUMER_REGS, LOADER_REGS, PDL, True,
        )  # fmt: skip

    @gluon.jit(do_not_specialize=["n_zero", "T", "S", "CH"])
    def _i2t_gluon_kernel(
        k_ptr, kp_ptr, a2_ptr, c2_ptr, vw_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, T, S, CH,
        M8: gl.constexpr, TPK: gl.constexpr, S4_L: gl.constexpr, NS: gl.constexpr = 6, LAG: gl.constexpr = 4,
        CONSUMER_REGS: gl.constexpr = 232, LOADER_REGS: gl.constexpr = 40, PDL: gl.constexpr = 0,
    ):  # fmt: skip
        """Phase 7 (the i2t key pass, LayerNorm4 and the store of output_keys) as its own launch on sm_90: one
        program per key chunk (CH tokens of one item), a loader warpgroup and two consumer warpgroups; also
        zeroes the persistent kernel's query-side accumulators (n_zero floats) for the next call."""
        _g7_partitions(
            k_ptr, kp_ptr, a2_ptr, c2_ptr, vw_ptr, bo_ptr, lw_ptr, lb_ptr, out_ptr, accs_ptr, n_zero, T, S, CH,
            M8, TPK, S4_L, NS, LAG, CONSUMER_REGS, LOADER_REGS, PDL, False,
        )  # fmt: skip

    def g7_softmax_layout(tpk: int):
        """The [64 tokens, 8 heads, TPK] view (column 8 h + t, or 4 h + t) of the [64, 8 TPK] wgmma accumulator of
        the fp16 kernel, whose columns are in natural order (the kernel checks that the view is the accumulator's
        own layout)."""
        if tpk == 8:
            regs = [[0, 0, 1], [8, 0, 0], [0, 1, 0], [0, 2, 0], [0, 4, 0]]
            lanes = [[0, 0, 2], [0, 0, 4], [1, 0, 0], [2, 0, 0], [4, 0, 0]]
        elif tpk == 4:
            regs = [[0, 0, 1], [8, 0, 0], [0, 2, 0], [0, 4, 0]]
            lanes = [[0, 0, 2], [0, 1, 0], [1, 0, 0], [2, 0, 0], [4, 0, 0]]
        else:
            raise ValueError(f"the Gluon phase 7 takes 4 or 8 key-side rows per head, got {tpk}")
        return gl.DistributedLinearLayout(
            reg_bases=regs,
            lane_bases=lanes,
            warp_bases=[[16, 0, 0], [32, 0, 0]],
            block_bases=[],
            shape=[64, 8, tpk],
        )

    def g7_score_layout(m8: int):
        """The [64 tokens, M8 / 8, 4, 2] view (g, t, b of column 8 g + 2 t + b) of the [64, M8] wgmma accumulator
        (tf32, one warpgroup): its registers hold column bit 0, row bit 3 and the column bits from 3 up, its
        lanes column bits 1, 2 and row bits 0-2 (the kernel checks that the view is the accumulator's layout)."""
        if m8 not in (32, 64):
            raise ValueError(f"the Gluon phase 7 takes 32 or 64 key-side rows, got {m8}")
        g_bits = [[0, 1 << i, 0, 0] for i in range((m8 // 8).bit_length() - 1)]
        return gl.DistributedLinearLayout(
            reg_bases=[[0, 0, 0, 1], [8, 0, 0, 0], *g_bits],
            lane_bases=[[0, 0, 1, 0], [0, 0, 2, 0], [1, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 0]],
            warp_bases=[[16, 0, 0, 0], [32, 0, 0, 0]],
            block_bases=[],
            shape=[64, m8 // 8, 4, 2],
        )


# ----------------------------------------------------------------------------------------- host side


@dataclass(frozen=True)
class Config:
    """Launch variants; tune.py sweeps them. The defaults are the shipped choice."""

    mode: str = "persistent"  # "persistent" (one launch) or "multi" (one launch per phase)
    grid: int = 0  # persistent programs; 0: one per SM (they must all be co-resident)
    # the programs the chunking and the one-wave fits (nd_fit, hb_fit, ksplit_fit) plan for; 0: the launch's (grid, or
    # one per SM). `run` on the CPU launches one program but plans for an H200's 132, so that the interpreter
    # and the recorded launches of `solbench build` take the H200's constexprs (HB, ND, NCB, P4SPLIT)
    plan_programs: int = 0
    num_warps: int = 8
    num_stages: int = 1
    # key tile of the t2i pass: 32 since session 7 (with acc_t: 224 KB of shared memory, sm_90a; 16 before)
    bs1: int = 32
    bs2: int = 32  # key tile of the i2t pass (16 before 2026-11-29: 32 is 2.7 % faster in the official run)
    # key-side rows per head, max(tpk_min, next power of two >= T), of the t2i side (A1 and the chunk partials:
    # phases 2-4) and of the i2t side (A2, VW: phases 6, 7). 4 lets T <= 4 run a key pass on 8 x 4 = 32 rows
    # instead of 8 x 8 (half of them padding). Session 6 (H200): tpk7_min 4 takes the geomean from 128.9 to
    # 122.3 us (phase 7 item at #6 156 -> 120 us); tpk_min 4 is slower (phase 3's 32-row products are
    # mma.sync with the A1 operand in registers: spills; #6 phase 3 117 -> 175 us). With phase 3's fp16 operands
    # (p3_fp16) tpk_min 4 pays everywhere: session 33 (H200, tune.py, all 16 workloads) 89.71 -> 88.14 us, #6's
    # phase-3 item 54.0 -> 41.4 us and its phase 4 8.5 -> 6.2 us, the T > 4 workloads unchanged
    tpk_min: int = 4
    tpk7_min: int = 4
    # ... with tpk_min 8, the t2i side takes TPK 4 anyway (T <= 4) when a chunk has at most this many key tokens
    # (0: never): with TF32 operands phase 3's 32-row products cost less than its padded 64-row ones only while a
    # program's chunk is one or two tiles (tune.py round 17 with tpk_min 4: #14 75.5 -> 72.2 us, #3 86.0 -> 84.3),
    # more from four items up (#6 245 -> 256)
    tpk4_chunk: int = 64
    min_chunk: int = 32  # fewest key tokens per chunk
    waves: float = 1.0  # key chunks (t2i pass work items) per program
    nd: int = 8  # phase-4 channel slices (256 / nd channels each; 4 until session 4)
    ncb: int = 2  # chunk partials combined per step in phase 4 (16, then 4 until session 4)
    # phase 4: more than this many chunk partials per item are split over ceil(n_ch / p4_chunks) work items
    # (at most 16), each scaled by the global max and sum over all chunks; 0: never. Session 5 (H200, with
    # nd_fit): 129.6 against 131.2 us; the one-item workloads (128 chunks) 5-7 % faster
    p4_chunks: int = 32
    # phase 4: 1 = the split items (above) read the global max and sum before their chunks and sum the chunks
    # against it (no running max: the steps' terms are independent); 2 = every item does; 0 = online merge.
    # H200 (session 14, tune.py round 30, CUPTI): geomean of 9 workloads 94.76 / 93.93 / 93.87 us for 0 / 1 / 2;
    # official run with 2: 102.8 -> 101.5 us, every workload level or 1-2 us faster
    p4_gfirst: int = 2
    # phase 4: halve nd (then fewer chunk parts) while its work items exceed the programs
    nd_fit: bool = True
    hb: int = 32  # MLP hidden block
    # phase 5: double hb once when its work items (row tiles x 2048 / hb) exceed the programs (hb 64 for the 3-
    # and 4-row-tile workloads #1, #5, #6, #11: 4-5 % faster in session 6's sweep; geomean 122.3 -> 121.4 us).
    # Once: a few programs (a small GPU partition) would otherwise grow hb past what fits in shared memory
    hb_fit: bool = True
    # phase 5: halve hb once (to 16 at least) where twice its work items still fit the programs, so that more SMs
    # share the MLP's 4 MB of weights (hb 16 on the one-row-tile workloads: 128 items of 32 KB each, twice the
    # atomics into y3acc). Session 58 (H200, tune.py, #14 / #10 / #8, one run): -1.2 / -1.1 / +0.2 us, inside the
    # noise; off until an official A/B (NOTES, "Session 58")
    hb_spread: bool = False
    # persistent: phases 5 and 6 start their work items on the programs after the previous phase's (phase 5 after
    # phase 4's, phase 6 after phase 5's) where both phases' items fit the programs together, so that the weights
    # they load before their barrier (pre5, pre6) are issued by programs idle in the phase before, a phase early.
    # Session 58 (H200): the items take as long either way (their weights' arrival does not bound them); with
    # shift2 -1.4 / -0.3 / -0.2 us at #14 / #10 / #8 in one run, inside the noise; off until an official A/B
    shift56: bool = False
    # ... and phase 2 on the programs after phase 1's (within those the query chain keeps from phase 0), so that
    # its preloads (pre2) are issued by programs that only ran phase 1a
    shift2: bool = False
    # diagnostic (wrong outputs; tune.py --time-wrong with --instr): the phases among (4, 5) whose items store their
    # query-side accumulator rows with plain stores instead of atomics (phase 5: the pre5 form), to time them
    # without the atomics and the release that waits for them. Session 58: phase 5's 64 items at #14 add 4096
    # floats each into the same 16 KB of y3acc
    diag_stores: tuple = ()
    kc: int = 64  # contraction piece of the query-side projections (a real loop over 256 / kc pieces)
    nc: int = 256  # output-column piece of the query-side [16, 256] products (< 256: a real loop, less code)
    # query-side tensor-core products: 1 (one TF32 product of operands rounded to nearest) or 3 (3xTF32, about
    # fp32). 1 since session 5: 10 % faster on the H200 (geomean 140.9 against 154.7 us), worst output_keys
    # error 0.92 of atol against 0.47 (100 % matched; the rule asks for 99 %)
    q_terms: int = 1
    q3_phases: tuple = ()  # phases (1, 2, 4, 5, 6) whose query-side products use 3xTF32 whatever q_terms says
    warm: bool = False  # dry runs of phases 2..7 by six idle programs during phase 1 (measured slower)
    # persistent: the last `warm_sites` programs run phases 2..6 dry (live False: masked memory operations, no
    # count, no wait for the phase before) where they have no item in that phase nor the next, at the call sites
    # of the live items, so that the code the query chain runs after the official flush is in L2 before the
    # chain reaches it (ncu at #14, session 60: a third of the chain's stall samples are instruction fetch).
    # `warm` above ran other copies of the code (every call site is inlined). GPU; in the interpreter any value
    # but 0 runs the test form (one dry iteration after each program's items). 0: off. Session 61 (H100, official
    # A/Bs, both orders): 4 was faster on all 16 workloads, geomean 87.0 -> 83.7 us (-3.8 %; 10 workloads in the
    # other order -4.9 %), #1 -8.3 %, #6 -1.7 %; tune.py: 1, 4 and 16 within 0.5 % of each other
    warm_sites: int = 4
    # L2-prefetch the query-side weights (persistent, GPU): the self-attention's at the start, the rest as
    # prefetch_late says
    prefetch_weights: bool = True
    # persistent, GPU: also the LayerNorm parameters and biases of phases 2..7 (~24 KB, 17 vectors) at the start,
    # by the last program. After the official flush each is an HBM miss of the first item after a barrier
    # that reads it (LN2 / LN3 / biases right after the y2acc / y3acc rows)
    prefetch_vectors: bool = False
    # persistent with phase 7 in its own launch: the programs leave after their phase-6 items without counting them
    # or waiting for the phase (the phase-7 launch waits for the whole kernel: griddepcontrol.wait / stream order),
    # one release and one poll round trip fewer at the kernel's end. The last program out still resets every
    # counter once all have left. Session 60 (H100, official A/Bs, 12 workloads in three calls): 0.6-1.5 us (0.8-
    # 2.2 %) faster on every workload, 1.3-1.6 % on the geomean
    exit6: bool = True
    prefetch_tokens: int = 32  # key tokens prefetched of each program's first chunk (0: off)
    # when the prefetches other than the self-attention's weights (~5 MB of weights, each program's first key
    # tokens: ~13 MB at 132 programs) are issued: 0 at the start, 2 after the program's phase-1 items, so that they
    # do not queue in HBM before the self-attention's own loads; 3 as 2 but the MLP and i2t weights (needed from
    # phase 5 on) after its phase-2 items. H200 (session 24, tune.py, all 16 workloads): geomean 98.58 / 96.04 us
    # for 0 / 2 (without any of them 96.73), every workload 1-4 us faster with 2; then 96.15 / 95.51 us for 2 / 3
    # (14 workloads) and 94.67 / 94.18 (16). Measured and removed (NOTES.md): after phase 1a only, and the MLP and
    # i2t weights after phase 3
    prefetch_late: int = 3
    prefetch_dist: int = 0  # key passes: L2-prefetch the tile this many tiles ahead (0: off; 2 before)
    spin_ns: int = 0  # nanosleep between counter polls (0: busy polling)
    maxspin: int = 1 << 22
    v_terms: int = 2  # i2t values: 2 (VW rounded to TF32, p split) or 3 (3xTF32: +64 KB shared memory)
    tf32_rn: bool = True  # round key-side tensor-core operands to nearest (False: the tensor core truncates)
    # cp.async software pipelines (tl.range num_stages; 1: plain loads). Shared memory grows by a tile per
    # stage: check the 227 KB limit. Phase 7 is not pipelined: with TPK 8 two stages of 32-token tiles need
    # 229 KB (sm_90a); with TPK7 4 and reload_k 0 they fit but were slower (session 6: 126.2 against 122.3 us;
    # 262 KB with reload_k 2 on the H200's Triton 3.6). 16-token i2t tiles fail on the H200 (bs2). NOTES.md.
    # phase-3 (t2i key pass) tile loop; 0: 3 on sm_90 (224 KB of shared memory with bs1 32), 2 elsewhere (sm_100a
    # needs 233 KB for 3 stages, over its 227 KB)
    stages1: int = 0
    # phase 3's depth where the t2i side has 4 key-side rows per head (TPK 4: T <= 4); 0: as stages1. With fp16
    # operands 4 stages of 32-token tiles fit there (sm_90a: 215 KB; 246 KB at TPK 8, over the limit)
    stages1_tpk4: int = 0
    # phase 3 keeps its running sum transposed (k^T as the register operand; see _ph3_t2i_pass). Session 7
    # (H200): with bs1 32 the geomean goes from 121.8 to 113.6 us (#6 phase-3 item 118 -> 66 us); alone 134.2
    acc_t: bool = True
    # phase 3's two products with fp16 operands and fp32 accumulation (A1 stored as fp16 by phase 2, x = k + k_pe,
    # the key tile and p rounded to fp16, p scaled by 2^15 into fp16's normal range): the same 10-bit rounding to
    # nearest as the TF32 path for values in fp16's normal range (|A1|, |k + k_pe| must stay below 65504), at twice
    # the tensor rate, with half the registers for the key tile operand and half the shared memory for x and p.
    # H200 (session 33, tune.py, all 16 workloads): geomean 93.20 -> 89.47 us, every workload faster (#6 196.6 ->
    # 181.5 us, its phase-3 item 67.4 -> 54.1 us; sm_90a stack 248 -> 136 B, shared memory 224 -> 176 KB)
    p3_fp16: bool = True
    qstages: int = 4  # query-side K loops (phases 1, 2, 5, 6): cp.async pipeline depth over the kc pieces
    cstages: int = 4  # phase-4 combine steps: pipeline depth over the NCB-chunk steps
    # phase 7: 0 keeps the key tile live for the residual; 1/2 re-read it (L2) before/after the dots
    reload_k: int = 2
    # phase 5 loads its work item's MLP weights (W1 and W2 blocks, 2 x 32 KB with hb 32) into registers before
    # it waits for phase 4, and then runs one K = 256 product instead of the kc-piece loop, where its MLP
    # blocks (after hb_fit) are at most `pre5` wide (0: never; at most 64: 2 x 64 KB, 128 registers a thread
    # at 8 warps). H200 (session 11, tune.py round 22): 2-3 us off each workload with 32-wide blocks; with
    # hb_fit's 64-wide ones (#1, #5, #6, #11) level or 1 us slower, so 32
    pre5: int = 32
    # phase 2 loads its work item's query PE rows, Wq rows and Wk columns (36 KB with csplit 4) before it waits
    # for phase 1, and runs one K = 256 product for the query instead of the kc-piece loop. H200 (session 11,
    # tune.py round 23): geomean 105.3 -> 104.0 us, 0.4-2 us off most workloads
    pre2: bool = True
    # phase 6 without phase 6a (ksplit6 then counts as 1): each work item loads head h's Wk and Wv rows (2 x 16 KB)
    # and its column part's Wq rows and Wout_i2t columns before it waits for phase 5, then computes K_h and V_h as
    # one K = 256 product each from the LayerNorm-3 rows (+ the query PE for K), and A2, c2, VW^T from them: one
    # work item and one barrier after phase 5 instead of 6a's item, its barrier and phase 6's item. sm_90a (Triton
    # 3.6, local): the persistent kernel's stack 0-48 -> 0-144 B. H100 (session 56, official runs of all 16
    # workloads, both orders, --repeat 2): geomean 89.5 -> 88.7 and 89.4 -> 88.6 us (-0.92 / -0.95 %), 15 of 16
    # faster (#10 54.9 -> 53.1, #1 84.7 -> 82.8 us), #14 0.3-0.7 us slower; on since
    pre6: bool = True
    # phases 2 and 6 (csplit) and 1 (csplit1): output columns split over that many work items (more programs;
    # each redoes the K loop, and phase 1 the attention core)
    csplit: int = 4  # (1 until session 4)
    csplit1: int = 4
    # phases 1, 2 and 6 in one wave: halve csplit1 / csplit once where the phase's work items would exceed the
    # programs (as ksplit_fit below). Prepared in session 27 for csplit / csplit1 8 (tune.py cs8f, c1s8f, c26s8f);
    # session 28 (H200, NOTES.md): all three within 0.4 % of the default on 12 workloads: off
    csplit_fit: bool = False
    # phase 1's q/k/v contraction split over this many work items (phase 1a, "PHASE 8"), which add into an
    # accumulator that phase 1 then reads (one more barrier); 1: phase 1 does the whole K loop itself.
    # Session 5 (H200): 4 and 4 take the geomean from 138.9 to 131.5 us (phase 1 item 11.1 us -> 4.4 + 2.8), 8 and
    # 8 were level then. Session 27 (H200, NOTES.md): 8 and 8 with ksplit_fit below
    ksplit1: int = 8
    ksplit6: int = 8  # the same for phase 6's K_h / V_h contraction (phase 6a, "PHASE 9")
    # phases 1a and 6a in one wave: halve ksplit1 / ksplit6 once where the phase's work items would exceed the
    # programs. Session 27 (H200, official A/B of 8 and 8 against 4 and 4, all 16 workloads): 8 and 8 0.7-3.0 %
    # faster wherever phases 1a and 6a fit one wave with them (12 workloads, #14 62.0 -> 60.1 us), 2.4-4.4 % slower
    # where they do not (#1, #5, #6, #11: 192-256 items); this rule keeps 4 there
    ksplit_fit: bool = True
    instr: bool = False  # program 0 records clock64/globaltimer at every phase start (GPU, persistent)
    # phase 7 (the i2t key pass) as its own launch after the persistent one, with its own registers and
    # occupancy, from `split7` key tokens (B*P*S; 0: never). The launch: (work items per key chunk, warps,
    # register cap per thread or 0, key tile in tokens, cp.async stages of the tile loop): `p7_launch_long4` for
    # T <= 4 (TPK7 4) where a program's key chunk has at least `split7_tiles4` bs2 tiles, `p7_launch_tpk8` for
    # T 5..8 (TPK7 8), `p7_launch` otherwise.
    # (2, 4, 0, 32, 1): two CTAs of 4 warps per SM (96 KB of shared memory each on sm_90a); (1, 8, 0, 32, 1):
    # one CTA of 8 warps, 178-242 registers and no spills, where the persistent kernel runs phase 7 at 255
    # registers. H200 (session 10, NOTES.md): #6 and #11 245.7 / 247.2 -> 224.5 / 222.7 us with two CTAs, the
    # other workloads 3-8 us faster with one in the per-call probes. Session 11 (round 21): one CTA with a
    # two-stage pipeline or 64-token tiles is slower than two CTAs for the T <= 4 workloads with long chunks.
    # Needs direct launches (`_DIRECT_TRITON`): Triton's own launch of the second kernel takes longer on the
    # CPU than the first kernel runs. With tensors passed as tensors the runner still issued the second launch
    # 45-66 us after the first, and an official run with every workload split lost 4-13 us on workloads whose
    # first kernel runs only 60-70 us; with their addresses as ints it is 18-20 us (`_direct_runners`).
    split7: int = 1
    split7_tiles4: int = 4
    p7_launch: tuple = (1, 8, 0, 32, 1)
    p7_launch_long4: tuple = (2, 4, 0, 32, 1)
    # the launch for T 5..8 (TPK7 8): one CTA of 4 warps per chunk. H200 (session 13, tune.py round 25, CUPTI):
    # 0.5-5.5 us faster than 8 warps on the eight T 5..8 workloads (#5 119.7 -> 114.9, #12 117.2 -> 111.7 us),
    # while T <= 4 with short chunks (#14, #3) lost 2.9 us with 4 warps, so p7_launch keeps 8 there
    p7_launch_tpk8: tuple = (1, 4, 0, 32, 1)
    # phase 7's launch in Gluon on sm_90 (`_i2t_gluon_kernel`: a cp.async loader warpgroup, two consumer
    # warpgroups on 64-token tiles; `gluon_phase7_ok`): (consumer registers, loader registers, ring slots with
    # TPK7 8, ring slots with TPK7 4, copy groups in flight, fewest 64-token tiles per program); () keeps the tl
    # launch above, as do workloads whose key chunks would have fewer tiles per program than the last field.
    # H200 (NOTES.md, sessions 22-23): with TF32 operands 1-3.6 % faster at #4 / #6 (4 / 8 tiles per program),
    # level with 2 tiles; with fp16 operands (below) 3-8 % faster from 2 tiles per program on (#6 219.1 -> 202.7
    # us), 7-14 us slower with 1 tile (#10, #14: the last field keeps them on tl); one copy group in flight
    # instead of two another 0.1-2 % (#6 201.8 -> 198.8 us; loader registers 32 instead of 40: slower)
    p7_gluon: tuple = (232, 40, 9, 11, 1, 2)
    # ... with fp16 operands for both of its products (`_i2t_gluon16_kernel`; fp32 accumulation): the same
    # 10-bit rounding to nearest as the TF32 path's for values in fp16's normal range (k + k_pe, A2, VW and p's
    # two parts; |k + k_pe| must stay below 65504), at twice the tensor rate, with A2 and VW^T in half the shared
    # memory (ring slots up to 9 with TPK7 8, 11 with TPK7 4). Since session 23 (the geomean 3 % lower in tune.py)
    p7_gluon_fp16: bool = True
    # the tl phase-7 launch (the split7 launch the Gluon one does not replace: chunks under two 64-token tiles,
    # T > 8, the B200, the CPU) with fp16 operands for its two products, fp32 accumulation, where its key chunks
    # have at least this many tokens (0: never): A2 and VW^T (stored TF32-rounded, so their fp16 copies are exact
    # in fp16's normal range) converted once per chunk, x = k + k_pe rounded to fp16, p in two fp16 parts, as the
    # Gluon twin does; launched as `p7_launch_fp16`. Needs v_terms 2. Session 35 (H200, tune.py): with 32-token
    # tiles (p7h) the T 5..8 launch read shared memory out of bounds (Triton 3.6, compute-sanitizer: the fp16 p
    # operand of a 32-token tile has 64-byte rows, like TF32's 16-token tiles, bs2 16); with 64-token tiles in 8
    # warps (p7h64) 3.5 us faster where chunks have 64 tokens (#1, #2, #15: 84.2 -> 80.7, 80.0 -> 76.4, 78.1 ->
    # 74.5 us), 1.2-3.5 us slower where they have 32 (#8, #10, #13, #14: half of each tile padding). Session 36
    # (same machine, base / 64): geomean 88.84 / 87.93 us, #1 84.8 / 81.2, #2 80.8 / 77.2, #15 78.2 / 74.3; on
    # since then
    p7_tl_fp16: int = 64
    # (parts, warps, register cap, tile tokens >= 64, stages) of that launch, as `p7_launch`
    p7_launch_fp16: tuple = (1, 8, 0, 64, 1)
    # the TPK7 values (4, 8, 16) whose tl launches `p7_tl_fp16` leaves on TF32 (chunks under it) take fp16
    # products too, launched as `p7_launch_short`, on tiles under 64 tokens with the scores transposed ([tokens,
    # rows] by mma.sync, `_i2t_half`) so that p reaches the value product with 128-byte rows instead of the 64-byte
    # ones that read shared memory out of bounds in session 35. Session 43 (H100, official runs of five workloads,
    # both orders, 8 warps): TPK7 8 2.2-3.1 us faster (#8 73.9 -> 70.8, #10 64.4 -> 62.2, #13 73.3 -> 70.5 us),
    # TPK7 4 0.6-0.8 us slower (#14), so (8,); TPK7 16 (T > 8, no official workload) unmeasured
    p7_tl_fp16_short: tuple = (8,)
    # (parts, warps, register cap, tile tokens, stages) of that launch: 8 warps (sm_90a, local Triton 3.6: 250
    # registers and no stack at TPK7 8, where 4 warps spill 672 B)
    p7_launch_short: tuple = (1, 8, 0, 32, 1)
    # phase 0: the t2i keys and values of every key token projected first (K = Wk (k + k_pe) + bk, V = Wv k + bv:
    # fp16 operands, fp32 accumulation, stored as fp16) by the programs that phases 1a, 1 and 2 leave idle, where
    # the call has at most this many key tokens (B * P * S; 0: never) and those programs take at most
    # `kproj_items` items each. Phase 3 then reads 0.5 KB a token instead of 2 KB and phase 4 combines [16]-wide
    # partials instead of [256]-wide ones (`_ph3_kpj_pass`). Only with p3_fp16 (fp16 products there). H100
    # (session 49, official A/B, two runs each): #8 70.5 -> 59.1 us, #13 70.4 -> 59.8, #14 61.3 -> 53.8, #10 62.8 ->
    # 55.5, #2 80.0 -> 78.0, #3 71.5 -> 71.0; the other workloads do not take it (NOTES.md, "Session 49"). Measured
    # and removed: an L2 prefetch of each program's phase-0 tokens and weight share first (1 us slower; code at
    # bcfdccf)
    kproj: int = 16384
    kproj_bs: int = 64  # phase 0's key tokens per work item
    kproj_ncb: int = 8  # phase 4's chunk partials per step with kproj (ncb otherwise)
    # (session 53) phase 4's chunk partials per work item with kproj (p4_chunks otherwise; 0: no split). With
    # [16]-wide partials and one channel slice, phase 4 has only 8 x NRT x parts items (#14: 32 on 132 programs)
    kproj_p4_chunks: int = 32
    # at most this many items per idle program (4: #2 and #3 4-8 us slower, #1 28 us: phase 0 is then the chain)
    kproj_items: int = 2
    # phase 0's contraction piece and cp.async pipeline depth over the pieces: 32 and 4 (H100, tune.py: #8 61.4 ->
    # 59.7 us, #2 84.4 -> 77.5 against 64 and 1; a 64-token item took 14-16 us there, four dependent trips)
    kproj_kc: int = 32
    kproj_stages: int = 4
    # (session 50) the programs of phase 0 first convert Wk and Wv to an fp16 copy that its items read, where a
    # program takes at least this many items (persistent; 0: never). H100 (session 51, official A/B, the copy
    # always on, two runs each): #2 77.2 -> 74.1 us, #3 70.4 -> 68.1 (128 items on 68 programs), but #8 +0.9, #14
    # +1.3, #10 +1.4, #13 +0.5 (one item a program or less: the copy and its barrier are not paid back), so 2.
    # Measured and removed in session 51: `kproj_join`, phase-0 items from a ticket counter with the programs of
    # phases 1a / 1 / 2 joining after phase 2, and the rule it allowed (up to 4 items a program): 4.6-5.6 %
    # slower where phase 0 ran already, 4-12 % slower on the 16384-token workloads it admitted, 1.6 % faster on
    # #1 only (code at 9a21a6f)
    kproj_w16: int = 2
    # Measured on the H200 and removed in session 17 (NOTES.md, sessions 15-16; the code is in git history
    # at 41bffcc): the phase-7 launch started early (`p7_early`, with an L2 prefetch of its first tokens),
    # phase 3's lazy rescaling (`lazy3`) and a pipelined global pass in phase 4 (`p4_gstages`)


DEFAULT_CONFIG = Config()
last_kernels: list = []  # the compiled kernels of the latest launch (tune.py reads registers and spills)
last_times: list = []  # [the int64 stamp tensor] of the latest instrumented launch
_GPU_INFO: dict[int, tuple[int, int]] = {}  # device index -> (compute capability major, SMs)
_SYNC: dict[tuple, torch.Tensor] = {}
_ACCS: dict[tuple, torch.Tensor] = {}


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _target() -> tuple[int, int]:
    """(compute capability major, SMs) of the GPU the CPU path plans for (TARGET_ARCH_ENV)."""
    tag = os.environ.get(TARGET_ARCH_ENV, "sm_90a")
    if tag not in TARGETS:
        raise ValueError(f"{TARGET_ARCH_ENV}: expected one of {', '.join(TARGETS)}, got {tag!r}")
    return TARGETS[tag]


def _gpu_info(device: torch.device) -> tuple[int, int]:
    """(compute capability major, SMs) of a CUDA device, looked up once per device."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _GPU_INFO:
        props = torch.cuda.get_device_properties(idx)
        _GPU_INFO[idx] = (props.major, props.multi_processor_count)
    return _GPU_INFO[idx]


def _stages1(cfg: Config, device: torch.device, tpk: int) -> int:
    """Phase 3's pipeline depth: cfg.stages1_tpk4 at TPK 4 if set, cfg.stages1, or by the architecture (3 stages
    fit sm_90's shared memory)."""
    if tpk == 4 and cfg.stages1_tpk4:
        return cfg.stages1_tpk4
    if cfg.stages1:
        return cfg.stages1
    major = _gpu_info(device)[0] if device.type == "cuda" else _target()[0]
    return 3 if major == 9 else 2


def _sm_count(device: torch.device) -> int:
    return _gpu_info(device)[1] if device.type == "cuda" else 1


def _stream_key(device: torch.device) -> tuple:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    return (str(device), stream)


def _sync_buffer(device: torch.device) -> torch.Tensor:
    """Phase counters, zero between calls: each persistent launch resets them as its last program exits."""
    key = _stream_key(device)
    buf = _SYNC.get(key)
    if buf is None:
        buf = torch.zeros(16, dtype=torch.int32, device=device)
        _SYNC[key] = buf
    return buf


def _acc_buffer(device: torch.device, n: int) -> torch.Tensor:
    """The query-side accumulators (Plan.n_accs of them), zero between calls: phase 7 of every call zeroes
    what it used."""
    key = _stream_key(device)
    buf = _ACCS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 64 * 3 * C_HID), dtype=torch.float32, device=device)
        _ACCS[key] = buf
    return buf


@dataclass(frozen=True)
class Plan:
    """Sizes derived from one call's shapes and a Config."""

    NI: int  # items (batch x point)
    T: int
    S: int
    R: int  # query rows (NI * T)
    TPK: int  # padded tokens per head on the t2i side (4, 8 or 16): 8 * TPK rows of A1 and partials per item
    NHALF: int  # key passes: 64-row halves of the 8 * TPK rows (1 with TPK 4: one 32-row block)
    IPB: int  # items per self-attention group (16 // T)
    NG: int  # self-attention groups
    NRT: int  # query row tiles of 16 rows
    CH: int  # key tokens per chunk
    n_ch: int  # chunks per item
    ND: int  # channel slices in phase 4
    NCB: int  # chunk partials per combine step
    HB: int  # MLP hidden block
    CP: int  # column parts of phases 2 and 6
    CP1: int  # column parts of phase 1
    grid: int  # persistent programs (0 in multi mode)
    KP1: int = 1  # contraction parts of phase 1a (1: no phase 1a)
    KP6: int = 1  # contraction parts of phase 6a (1: no phase 6a)
    NSP4: int = 1  # chunk parts per phase-4 work item group
    TPK7: int = 8  # TPK of the i2t side (A2, c2, VW^T: phases 6 and 7)
    P7PARTS: int = 0  # 0: phase 7 in the persistent launch; k > 0: its own launch, k items per key chunk
    P7WARPS: int = 0  # ... with this many warps
    P7MAXNREG: int = 0  # ... and at most this many registers per thread (0: no cap)
    P7BS: int = 0  # ... key tiles of this many tokens
    P7STAGES: int = 0  # ... in a cp.async pipeline of this many stages (1: plain loads)
    P7F16: bool = False  # ... with fp16 operands (Config.p7_tl_fp16)
    KPJ: bool = False  # phase 0 projects the t2i keys and values (Config.kproj)
    BSP: int = 64  # ... in tiles of this many key tokens
    P0LO: int = 0  # ... on the programs from this one on (persistent; those without phase-1a, 1 or 2 items)
    W16: bool = False  # ... reading an fp16 copy of Wk and Wv made first (persistent; Config.kproj_w16)
    SH2: int = 0  # phase 2's first program (persistent, Config.shift2)
    SH5: int = 0  # phase 5's first program (persistent, Config.shift56)
    SH6: int = 0  # phase 6's first program (persistent, Config.shift56)

    @property
    def work(self) -> dict[int, int]:
        """Work items per phase (8: phase 1a, when phase 1's contraction is split)."""
        work = {
            1: 8 * self.NG * self.CP1,
            2: 8 * self.NRT * self.CP,
            3: self.NI * self.n_ch * self.NHALF,
            4: self.NRT * 8 * self.ND * self.NSP4,
            5: self.NRT * (D_MLP // self.HB),
            6: 8 * self.NRT * self.CP,
            7: self.NI * self.n_ch * max(1, self.P7PARTS),
        }
        if self.KP1 > 1:
            work[8] = 8 * self.NG * self.KP1
        if self.KP6 > 1:
            work[9] = 8 * self.NRT * self.KP6
        if self.KPJ:
            work[10] = self.NI * -(-self.S // self.BSP)
        return work

    @property
    def n_accs(self) -> int:
        """[rows, C] query-side accumulators: y1, y2, y3, then phase 1a's q | k | v (3), phase 6a's K | V (1);
        the kernel's phase 7 zeroes as many (its KP1 / KP6 constexprs)."""
        return 7 if self.KP6 > 1 else (6 if self.KP1 > 1 else 3)

    @property
    def acc_floats(self) -> int:
        """fp32 elements of the query-side accumulators this plan uses (and its phase 7 zeroes)."""
        return self.n_accs * self.NRT * RT * C_HID

    @property
    def phases(self) -> list[int]:
        """The phases in execution order (phase 0, "10", first; phase 1a, "8", next; phase 6a, "9", before 6)."""
        return [
            *([10] if self.KPJ else []), *([8] if self.KP1 > 1 else []), 1, 2, 3, 4, 5,
            *([9] if self.KP6 > 1 else []), 6, 7,
        ]  # fmt: skip


def instr_size(plan: Plan) -> int:
    """int64 slots of the `instr` buffer: [0, 16) program 0's (clock64, globaltimer) at each phase start and
    at its exit; [16, 16 + 6 G) every program's globaltimer when it passed barrier k (k * G + pid); then
    per phase ph = 1..10 (8, 9, 10: phases 1a, 6a, 0) and work item w the item's (start, end) globaltimer at
    2 ((ph - 1) NMAX + w), NMAX = the most work items of any phase."""
    return 16 + 6 * plan.grid + 20 * max(plan.work.values())


def _fit_once(parts: int, units: int, programs: int) -> int:
    """A phase of `units` x `parts` work items: half the parts (once) where the items would exceed the programs
    (csplit_fit, ksplit_fit)."""
    return parts // 2 if parts > 1 and units * parts > programs else parts


def make_plan(NI: int, T: int, S: int, cfg: Config, sms: int) -> Plan:
    if not 1 <= T <= 16:
        raise ValueError(f"n_query_tokens: expected 1..16, got {T}")
    if S < 1:  # the token->image softmax needs at least one key (the reference fails there too)
        raise ValueError(f"n_key_tokens: expected at least 1, got {S}")
    if NI < 1:
        raise ValueError(f"batch_size * point_batch_size: expected at least 1, got {NI}")
    for name in ("tpk_min", "tpk7_min"):
        if getattr(cfg, name) not in (4, 8):
            raise ValueError(f"{name}: expected 4 or 8, got {getattr(cfg, name)}")
    TPK = max(cfg.tpk_min, _next_pow2(T))
    if cfg.hb < 16 or D_MLP % cfg.hb or cfg.hb & (cfg.hb - 1):
        raise ValueError(f"hb: expected a power of two in 16..2048, got {cfg.hb}")
    if cfg.nc not in (16, 32, 64, 128, 256):
        raise ValueError(f"nc: expected 16, 32, 64, 128 or 256, got {cfg.nc}")
    if cfg.kc not in (16, 32, 64, 128, 256):
        raise ValueError(f"kc: expected 16, 32, 64, 128 or 256, got {cfg.kc}")
    if cfg.q_terms not in (1, 3):
        raise ValueError(f"q_terms: expected 1 or 3, got {cfg.q_terms}")
    if not set(cfg.diag_stores) <= {4, 5}:
        raise ValueError(f"diag_stores: expected phases among 4, 5, got {cfg.diag_stores}")
    if not set(cfg.q3_phases) <= {1, 2, 4, 5, 6}:
        raise ValueError(f"q3_phases: expected phases among 1, 2, 4, 5, 6, got {cfg.q3_phases}")
    for name in ("ksplit1", "ksplit6"):
        if getattr(cfg, name) not in (1, 2, 4, 8):
            raise ValueError(f"{name}: expected 1, 2, 4 or 8, got {getattr(cfg, name)}")
    for name in ("csplit", "csplit1"):
        if getattr(cfg, name) not in (1, 2, 4, 8, 16):
            raise ValueError(f"{name}: expected 1, 2, 4, 8 or 16, got {getattr(cfg, name)}")
    if cfg.nd not in (1, 2, 4, 8, 16):
        raise ValueError(f"nd: expected 1, 2, 4, 8 or 16, got {cfg.nd}")
    if cfg.bs1 not in (16, 32, 64, 128):
        raise ValueError(f"bs1: expected 16, 32, 64 or 128, got {cfg.bs1}")
    # bs2 16: illegal address or wrong output_keys on the H200 (Triton 3.6, session 5)
    if cfg.bs2 not in (32, 64, 128):
        raise ValueError(f"bs2: expected 32, 64 or 128 (16-token i2t tiles fail on the H200), got {cfg.bs2}")
    if cfg.plan_programs < 0:
        raise ValueError(f"plan_programs: expected 0 (the launch's) or a count, got {cfg.plan_programs}")
    for field in ("p4_chunks", "kproj_p4_chunks"):  # chunk partials per phase-4 part, without and with kproj
        if getattr(cfg, field) < 0:
            raise ValueError(f"{field}: expected 0 (off) or a positive count, got {getattr(cfg, field)}")
    if cfg.p4_gfirst not in (0, 1, 2):
        raise ValueError(f"p4_gfirst: expected 0, 1 or 2, got {cfg.p4_gfirst}")
    if cfg.prefetch_late not in (0, 2, 3):
        raise ValueError(f"prefetch_late: expected 0, 2 or 3, got {cfg.prefetch_late}")
    for name in ("stages1", "stages1_tpk4", "qstages", "cstages"):
        if not 0 <= getattr(cfg, name) <= 8 or (not name.startswith("stages1") and getattr(cfg, name) == 0):
            raise ValueError(
                f"{name}: expected a pipeline depth 1..8 (stages1: 0 by architecture, stages1_tpk4: 0 as "
                f"stages1), got {getattr(cfg, name)}"
            )
    if cfg.split7 < 0 or cfg.split7_tiles4 < 0:
        raise ValueError(f"split7, split7_tiles4: expected >= 0, got {cfg.split7}, {cfg.split7_tiles4}")
    for name in ("p7_launch", "p7_launch_long4", "p7_launch_tpk8", "p7_launch_fp16", "p7_launch_short"):
        value = getattr(cfg, name)
        parts, warps, maxnreg, bs, stages = (
            value if isinstance(value, (tuple, list)) and len(value) == 5 else (0,) * 5
        )
        if (
            parts not in (1, 2, 3, 4)
            or warps not in (4, 8, 16)
            or not (maxnreg == 0 or 64 <= maxnreg <= 255)
            or bs not in (32, 64, 128)
            or stages not in (1, 2, 3)
        ):
            raise ValueError(
                f"{name}: expected (parts 1..4, warps 4 / 8 / 16, register cap 0 or 64..255, tile 32 / 64 / 128 "
                f"tokens, stages 1..3), got {value}"
            )
    g7 = cfg.p7_gluon
    if g7 != () and not (
        isinstance(g7, tuple)
        and len(g7) == 6
        and all(isinstance(v, int) for v in g7)
        and all(24 <= r <= 256 and r % 8 == 0 for r in g7[:2])
        and min(g7[2:4]) >= 3
        and g7[4] >= 1
        and g7[5] >= 0
    ):
        raise ValueError(
            "p7_gluon: expected () or (consumer registers, loader registers: 24..256, multiples of 8; ring slots "
            f"for TPK7 8 and 4: >= 3; copy groups in flight >= 1; fewest tiles per program >= 0), got {g7!r}"
        )
    for field in ("p7_gluon_fp16", "p3_fp16", "pre6"):
        if not isinstance(getattr(cfg, field), bool):
            raise ValueError(f"{field}: expected True or False, got {getattr(cfg, field)!r}")
    if isinstance(cfg.p7_tl_fp16, bool) or not isinstance(cfg.p7_tl_fp16, int) or cfg.p7_tl_fp16 < 0:
        raise ValueError(
            f"p7_tl_fp16: expected the fewest chunk tokens >= 0 (0: never), got {cfg.p7_tl_fp16!r}"
        )
    short = cfg.p7_tl_fp16_short
    if not isinstance(short, tuple) or not set(short) <= {4, 8, 16} or len(set(short)) != len(short):
        raise ValueError(
            f"p7_tl_fp16_short: expected a tuple of distinct TPK7 values 4, 8, 16, got {short!r}"
        )
    for field in ("p7_tl_fp16", "p7_tl_fp16_short"):
        if getattr(cfg, field) and cfg.v_terms != 2:
            raise ValueError(f"{field}: needs v_terms 2 (VW in one rounded part), got v_terms {cfg.v_terms}")
    if cfg.p7_launch_fp16[3] < 64:
        raise ValueError(
            f"p7_launch_fp16: expected a tile of 64 or 128 tokens (32-token fp16 tiles read shared memory out of "
            f"bounds on the H200, Triton 3.6), got {cfg.p7_launch_fp16[3]}"
        )
    if cfg.pre5 not in (0, 16, 32, 64):
        raise ValueError(f"pre5: expected 0 (never) or an MLP block width 16 / 32 / 64, got {cfg.pre5}")
    if (
        cfg.kproj < 0
        or cfg.kproj_bs not in (16, 32, 64, 128)
        or cfg.kproj_ncb not in (1, 2, 4, 8, 16, 32)
        or cfg.kproj_items < 1
        or cfg.kproj_kc not in (16, 32, 64, 128)
        or not 1 <= cfg.kproj_stages <= 4
    ):
        raise ValueError(
            f"kproj, kproj_bs, kproj_ncb, kproj_items, kproj_kc, kproj_stages: expected >= 0 key tokens (0: never), "
            f"16 / 32 / 64 / 128 tokens, a power of two 1..32, >= 1, 16 / 32 / 64 / 128 channels, 1..4 stages; got "
            f"{cfg.kproj}, {cfg.kproj_bs}, {cfg.kproj_ncb}, {cfg.kproj_items}, {cfg.kproj_kc}, {cfg.kproj_stages}"
        )
    if cfg.kproj_w16 < 0:
        raise ValueError(
            f"kproj_w16: expected >= 0 items per phase-0 program (0: never), got {cfg.kproj_w16}"
        )
    if cfg.tpk4_chunk < 0:
        raise ValueError(f"tpk4_chunk: expected 0 (never) or a chunk length, got {cfg.tpk4_chunk}")
    NHALF = max(1, TPK // 8)  # 64-row halves of the 8 * TPK rows (one 32-row block with TPK 4)
    IPB = max(1, RT // T)
    NG = -(-NI // IPB)
    R = NI * T
    NRT = -(-R // RT)
    launched = max(1, cfg.grid or sms)  # persistent mode
    programs = max(1, cfg.plan_programs or launched)  # what the chunking and the fits plan for
    bs = max(cfg.bs1, cfg.bs2)
    per_item = max(1, int(cfg.waves * programs) // (NI * NHALF))  # t2i work items <= waves * programs
    ch = max(cfg.min_chunk, -(-S // per_item))
    ch = -(-ch // bs) * bs
    n_ch = -(-S // ch)
    if T <= 4 and ch <= cfg.tpk4_chunk:  # short chunks: phase 3 on 32 rows (NHALF stays 1)
        TPK = 4
    # phases 2 and 6 (8 heads x NRT row tiles), 1 and 1a (8 heads x NG groups), 6a (8 x NRT) in one wave
    cp = _fit_once(cfg.csplit, 8 * NRT, programs) if cfg.csplit_fit else cfg.csplit
    cp1 = _fit_once(cfg.csplit1, 8 * NG, programs) if cfg.csplit_fit else cfg.csplit1
    kp1 = _fit_once(cfg.ksplit1, 8 * NG, programs) if cfg.ksplit_fit else cfg.ksplit1
    kp6 = _fit_once(cfg.ksplit6, 8 * NRT, programs) if cfg.ksplit_fit else cfg.ksplit6
    if cfg.pre6:  # phase 6 computes K_h and V_h itself, from preloaded weights
        kp6 = 1
    # phase 0 (kproj): where the call is small enough and programs are left over by phases 1a, 1 and 2
    busy = max(8 * NG * (kp1 if kp1 > 1 else 0), 8 * NG * cp1, 8 * NRT * cp)
    n0 = NI * -(-S // cfg.kproj_bs)
    kpj = (
        cfg.p3_fp16
        and 0 < NI * S <= cfg.kproj
        and (cfg.mode != "persistent" or (programs > busy and n0 <= cfg.kproj_items * (programs - busy)))
    )
    # the fp16 weight copy first where phase 0's busiest program takes at least kproj_w16 items
    w16 = kpj and cfg.mode == "persistent" and 0 < cfg.kproj_w16 <= -(-n0 // (programs - busy))
    NCB = max(1, min(cfg.kproj_ncb if kpj else cfg.ncb, _next_pow2(n_ch)))
    p4c = cfg.kproj_p4_chunks if kpj else cfg.p4_chunks
    nsp4 = 1 if p4c == 0 or n_ch <= p4c else min(-(-n_ch // p4c), 16)
    nd = 1 if kpj else cfg.nd  # (kproj: [16]-wide partials, one slice)
    if cfg.nd_fit:  # phase 4 in one wave: fewer channel slices, then fewer chunk parts
        while nd > 1 and NRT * 8 * nd * nsp4 > programs:
            nd //= 2
        while nsp4 > 1 and NRT * 8 * nd * nsp4 > programs:
            nsp4 -= 1
    hb = cfg.hb
    if cfg.hb_fit:  # phase 5 in one wave: wider MLP blocks
        if hb < D_MLP and NRT * (D_MLP // hb) > programs:
            hb *= 2
    if cfg.hb_spread and hb > 16 and NRT * (D_MLP // (hb // 2)) <= programs:  # more, narrower MLP blocks
        hb //= 2
    grid = launched if cfg.mode == "persistent" else 0
    TPK7 = max(cfg.tpk7_min, _next_pow2(T))
    p7, f16_7 = (0, 0, 0, 0, 0), False
    if cfg.mode == "persistent" and 0 < cfg.split7 <= NI * S:
        f16_7 = 0 < cfg.p7_tl_fp16 <= min(ch, S)
        long4 = TPK7 == 4 and -(-ch // cfg.bs2) >= cfg.split7_tiles4
        p7 = cfg.p7_launch_long4 if long4 else (cfg.p7_launch_tpk8 if TPK7 == 8 else cfg.p7_launch)
        if f16_7:
            p7 = cfg.p7_launch_fp16
        elif TPK7 in cfg.p7_tl_fp16_short:  # fp16 under p7_tl_fp16 too (transposed scores on tiles under 64)
            p7, f16_7 = cfg.p7_launch_short, True
    plan = Plan(
        NI, T, S, R, TPK, NHALF, IPB, NG, NRT, ch, n_ch, nd, NCB, hb, cp, cp1, grid,
        kp1, kp6, nsp4, TPK7, *p7, f16_7, kpj, cfg.kproj_bs, busy if cfg.mode == "persistent" else 0,
        w16,
    )  # fmt: skip
    if cfg.mode != "persistent" or not (cfg.shift2 or cfg.shift56):
        return plan
    n = plan.work
    sh2 = sh5 = sh6 = 0
    if cfg.shift2:  # phase 0's programs (from busy on) stay as they are
        sh2 = n[1] if n[1] + n[2] <= (busy if kpj else programs) else 0
    if cfg.shift56:  # each phase on the programs after the previous phase's
        sh5 = n[4] % programs if n[4] + n[5] <= programs else 0
        sh6 = (sh5 + n[5]) % programs if n[5] + n[6] <= programs else 0
    return replace(plan, SH2=sh2, SH5=sh5, SH6=sh6)


#: Triton versions whose launch protocol (`CompiledKernel[grid](*every parameter, stream=)`) was checked on a
#: GPU: 3.6 (the H200's). A call of two launches (split7) issues them through the compiled kernel's runner:
#: Triton's own launch of this kernel (~80 arguments) costs ~170 us of CPU under the profiler (H200, session
#: 10), longer than the first kernel of a middle-sized workload runs: the second kernel started 60-120 us late.
_DIRECT_TRITON = frozenset({(3, 6)})
#: The GPU-only constexpr of the split pair's phase-7 launch: it waits for the persistent kernel through a
#: programmatic dependent launch (inline PTX: the CPU path leaves it off; tests/test_triton_build.py builds it).
PHASE7_GPU_META = {"PDL": True}
_TRITON_VERSION = tuple(int(v) for v in triton.__version__.split(".")[:2])
_RUNNERS: dict = {}  # launch key -> runner of the compiled kernel
_PARAMETERS: dict = {}  # kernel -> its parameters, in order


def _direct_ok() -> bool:
    return _TRITON_VERSION in _DIRECT_TRITON


def _launch_key(value) -> tuple:
    """What of an argument can decide Triton's specialisation, or finer: tensors by dtype and 16-byte
    alignment, everything else by value."""
    if isinstance(value, torch.Tensor):
        return ("t", value.dtype, value.data_ptr() % 16 == 0)
    return ("v", type(value), value)


def _direct_runners(launches: list) -> list:
    """(compiled kernel, runner, parameters) of each `fn[(grid,)](*args, **meta)` launch of one call, launches =
    [(fn, grid, args, meta), ...].

    `warmup` runs Triton's specialisation and cache lookup (compiling on a miss) without launching; the
    result is cached under `_launch_key`s. The parameters are every kernel parameter in signature order
    (constexprs and defaults included), as Triton's launch passes them; launch options (num_warps, maxnreg,
    launch_pdl) are not parameters."""
    device = torch.cuda.current_device()  # a compiled kernel's handles belong to one device
    out = []
    for fn, grid, args, meta in launches:
        key = (
            fn, device, grid, tuple(map(_launch_key, args)), tuple(sorted((k, _launch_key(v)) for k, v in meta.items()))
        )  # fmt: skip
        found = _RUNNERS.get(key)
        if found is None:
            if len(_RUNNERS) >= 1024:
                _RUNNERS.clear()
            compiled = fn.warmup(*args, grid=(grid,), **meta)
            found = _RUNNERS[key] = (compiled, compiled[(grid, 1, 1)])
        params = _PARAMETERS.get(fn)
        if params is None:
            params = _PARAMETERS[fn] = list(inspect.signature(fn.fn).parameters.values())
        # the tensors as their addresses: Triton's launcher takes an int as it is, where it would call each
        # tensor's data_ptr() between the two launches (H200, under the profiler: the second launch 18-20 us
        # after the first instead of 45-66, session 10)
        addresses = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        out.append((*found, [*addresses, *(meta.get(p.name, p.default) for p in params[len(args) :])]))
    return out


def _g7_chunk_tokens(plan: Plan, sms: int) -> int:
    """Key tokens per program of the Gluon phase 7: a multiple of its 64-token tile, about one chunk per SM."""
    n_ch = max(1, sms // plan.NI)
    per_chunk = -(-plan.S // n_ch)
    return -(-per_chunk // G7_TILE) * G7_TILE


#: TPK7 8 (T 5..8) in the Gluon phase 7. Off in session 22, when its 6-slot ring ran into the parity hazard that
#: the turn barriers fix (with two or more tiles per program no H200 run finished); on since session 23, when the
#: fixed kernel passed the GPU tests and the official run (NOTES.md).
G7_TPK8 = True


def _g7_gpu(device: torch.device) -> tuple[int, int] | None:
    """(compute capability major, SMs) of the GPU phase 7 is planned for: a CUDA device's, or on meta tensors (a
    build's recording, `solbench build`) the targeted architecture's; None on the CPU (the interpreter)."""
    if device.type == "cuda":
        return _gpu_info(device)
    return _target() if device.type == "meta" else None


def gluon_phase7_ok(device: torch.device, plan: Plan, cfg: Config) -> bool:
    """Whether phase 7's launch runs in Gluon: configured, an sm_90 GPU with Gluon in Triton (or a recording for
    sm_90a), TPK7 4 or 8 (T <= 8; 8 only with G7_TPK8), and at least the configured number of tiles per
    program."""
    gpu = _g7_gpu(device)
    return (
        bool(cfg.p7_gluon)
        and gluon is not None
        and gpu is not None
        and gpu[0] == 9
        and (plan.TPK7 == 4 or (plan.TPK7 == 8 and G7_TPK8))
        and _g7_chunk_tokens(plan, gpu[1]) >= cfg.p7_gluon[5] * G7_TILE
    )


def _gluon_phase7(plan: Plan, cfg: Config, sms: int, tensors: list, out_k, accs, views: list) -> tuple:
    """(kernel, grid, args, meta) of the Gluon phase-7 launch: one program per key chunk."""
    creg, lreg, ns8, ns4, lag, _ = cfg.p7_gluon
    ch = _g7_chunk_tokens(plan, sms)
    grid = plan.NI * -(-plan.S // ch)
    m8 = 8 * plan.TPK7
    ns = ns8 if m8 == 64 else ns4
    k, kp = tensors[1], tensors[3]
    bo, ln4w, ln4b = tensors[37], tensors[38], tensors[39]
    a2, c2, vwb = views[5], views[6], views[7]
    args = [k, kp, a2, c2, vwb, bo, ln4w, ln4b, out_k, accs, plan.acc_floats, plan.T, plan.S, ch]
    meta = dict(
        M8=m8, TPK=plan.TPK7, NS=ns, LAG=min(lag, ns - 2),  # (more would deadlock: g7_ring_model.py)
        CONSUMER_REGS=creg, LOADER_REGS=lreg, PDL=1, num_warps=4, launch_pdl=True,
    )  # fmt: skip
    if cfg.p7_gluon_fp16:
        return _i2t_gluon16_kernel, grid, args, dict(meta, S3_L=g7_softmax_layout(plan.TPK7))
    return _i2t_gluon_kernel, grid, args, dict(meta, S4_L=g7_score_layout(m8))


def launch(inputs: list, outputs: list, cfg: Config = DEFAULT_CONFIG) -> Plan:
    """inputs/outputs in definition order (40 tensors + skip_first_layer_pe; output_queries, output_keys)."""
    queries, keys = inputs[0], inputs[1]
    skip_pe = bool(inputs[-1])
    tensors = [t.contiguous() for t in inputs[:-1]]
    out_q, out_k = outputs
    B, P, T, C = queries.shape
    S = keys.shape[2]
    if C != C_HID:
        raise ValueError(f"hidden_size: expected {C_HID}, got {C}")
    if not (out_q.is_contiguous() and out_k.is_contiguous()):
        raise ValueError("outputs: expected contiguous tensors")
    NI = B * P
    device = queries.device
    gpu = device.type == "cuda"
    if gpu and not _direct_ok():  # Triton's own second launch would come too late: phase 7 stays inside
        cfg = replace(cfg, split7=0)
    plan = make_plan(NI, T, S, cfg, _sm_count(device))
    if cfg.mode == "persistent" and device.type != "cuda" and plan.grid != 1:
        raise ValueError("persistent mode needs grid=1 in the CPU interpreter (its programs run one by one)")
    M8, M8_7 = 8 * plan.TPK, 8 * plan.TPK7
    v3 = cfg.v_terms == 3  # VW's rounding residual stored (phase 6) and read (phase 7): its workspace and V3
    work = plan.work
    sizes = [
        NI * M8 * C,  # a1
        NI * M8,  # c1
        NI * plan.n_ch * M8,  # pm
        NI * plan.n_ch * M8,  # pl
        NI * plan.n_ch * M8 * C,  # pacc
        NI * M8_7 * C,  # a2
        NI * M8_7,  # c2
        NI * C * M8_7,  # vwb (VW^T, TF32 part)
        NI * C * M8_7 if v3 else 64,  # vws (the rest; stored and read with v_terms 3 only)
        (NI * S * C + (2 * 128 * C if plan.W16 else 0)) // 2
        if plan.KPJ
        else 64,  # kvp (K | V [| Wk | Wv], fp16)
    ]
    # one allocation (torch.empty runs no kernel), slices aligned to 256 B
    aligned = [-(-n // 64) * 64 for n in sizes]
    ws = torch.empty(sum(aligned), dtype=torch.float32, device=device)
    views, at = [], 0
    for n, a in zip(sizes, aligned, strict=True):
        views.append(ws[at : at + n])
        at += a
    if cfg.p3_fp16:  # A1 as fp16 (phase 2 stores it so, phase 3 reads it so), in the first half of its slice
        views[0] = views[0].view(torch.float16)[: sizes[0]]
    views[9] = views[9].view(torch.float16)
    accs = _acc_buffer(device, plan.acc_floats)
    sync = (
        _sync_buffer(device)
        if cfg.mode == "persistent"
        else torch.empty(16, dtype=torch.int32, device=device)
    )
    instr = bool(cfg.instr and gpu and cfg.mode == "persistent")
    times = torch.zeros(instr_size(plan), dtype=torch.int64, device=device) if instr else sync
    # warm_sites: a GPU's launch or its recording on meta tensors; the interpreter's test form (-1) on the CPU
    ws = 0
    if cfg.mode == "persistent" and cfg.warm_sites:
        ws = -1 if device.type == "cpu" else cfg.warm_sites
    scalars = [NI, T, S, plan.R, plan.IPB, 0.0 if skip_pe else 1.0, plan.n_ch, plan.CH, plan.NSP4, plan.P0LO]
    meta = dict(
        TPK=plan.TPK,
        NHALF=plan.NHALF,
        BS1=cfg.bs1,
        BS2=cfg.bs2,
        ND=plan.ND,
        NCB=plan.NCB,
        HB=plan.HB,
        KC=cfg.kc,
        NC=cfg.nc,
        Q3=(0b111111 if cfg.q_terms == 3 else 0) | sum(1 << (k - 1) for k in cfg.q3_phases),
        WARM=bool(cfg.warm and cfg.mode == "persistent"),
        PF_W=bool(cfg.prefetch_weights and gpu),  # inline PTX: never in the interpreter
        PF_TOK=cfg.prefetch_tokens if gpu else 0,
        PF_DIST=cfg.prefetch_dist if gpu else 0,
        MAXSPIN=cfg.maxspin,
        SPIN_NS=cfg.spin_ns if gpu else 0,
        INSTR=instr,
        RN=cfg.tf32_rn,
        V3=v3,
        KS1=_stages1(cfg, device, plan.TPK),
        ACC_T=cfg.acc_t,
        F16_3=cfg.p3_fp16,
        F16_7=False,  # (fp16 operands only in phase 7's own launch, Plan.P7F16)
        QS=cfg.qstages,
        CS=cfg.cstages,
        RK=cfg.reload_k,
        CP=cfg.csplit,
        NC26=min(cfg.nc, C_HID // cfg.csplit),
        CP1=cfg.csplit1,
        NC1=min(cfg.nc, C_HID // cfg.csplit1),
        KP1=plan.KP1,
        KP6=plan.KP6,
        P4SPLIT=plan.NSP4 > 1,
        TPK7=plan.TPK7,
        PRE5=plan.HB <= cfg.pre5,
        PRE2=cfg.pre2,
        P4GF=cfg.p4_gfirst,
        PF_LATE=cfg.prefetch_late,
        KPJ=plan.KPJ,
        BSP=plan.BSP,
        KC0=cfg.kproj_kc,
        ST0=cfg.kproj_stages,
        W16=plan.W16,
        PRE6=cfg.pre6,
        SH2=plan.SH2,
        SH5=plan.SH5,
        SH6=plan.SH6,
        DST=sum(1 << (k - 1) for k in set(cfg.diag_stores)),
        PF_VEC=bool(cfg.prefetch_vectors and gpu),  # inline PTX: never in the interpreter
        EXIT6=cfg.exit6,
        WS=ws,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    args = [*tensors, out_q, out_k, accs, *views, sync, times, *scalars]
    if cfg.mode == "persistent" and plan.P7PARTS:  # phases 1-6, then phase 7 in its own launch
        meta7 = dict(
            meta, INSTR=False, num_warps=plan.P7WARPS, P7PARTS=plan.P7PARTS, BS2=plan.P7BS, S7=plan.P7STAGES,
            F16_7=plan.P7F16, PF_VEC=False, EXIT6=False, WS=0,  # (the persistent launch's alone)
        )  # fmt: skip
        if plan.P7MAXNREG:
            meta7["maxnreg"] = plan.P7MAXNREG
        meta1 = dict(meta, PHASE=0, SPLIT7=True)
        if gpu:  # H200 (#12): 2.7 us between the kernels, 8.9 without
            meta7.update(PHASE7_GPU_META, launch_pdl=True)
        pair = [
            (_two_way_kernel, plan.grid, args, meta1),
            (_two_way_kernel, work[7], args, dict(meta7, PHASE=7)),
        ]
        if gluon_phase7_ok(device, plan, cfg):  # a GPU's launch, or its recording on meta tensors
            pair[1] = _gluon_phase7(plan, cfg, _g7_gpu(device)[1], tensors, out_k, accs, views)
        if gpu:
            runners = _direct_runners(pair)  # both ready before the first launch
            stream = torch.cuda.current_stream().cuda_stream  # Triton's choice too: the current device's
            for _, runner, params in runners:
                runner(*params, stream=stream)
            launched = [compiled for compiled, _, _ in runners]
        else:
            launched = [fn[(g,)](*a, **m) for fn, g, a, m in pair]
    elif cfg.mode == "persistent":
        launched = [_two_way_kernel[(plan.grid,)](*args, PHASE=0, **meta)]
    elif cfg.mode == "multi":
        launched = [_two_way_kernel[(work[ph],)](*args, PHASE=ph, **meta) for ph in plan.phases]
    else:
        raise ValueError(f"mode: expected 'persistent' or 'multi', got {cfg.mode!r}")
    last_kernels[:] = launched
    last_times[:] = [times] if instr else []
    return plan


def run(
    queries, keys, query_point_embedding, key_point_embedding,
    self_attn_q_weight, self_attn_q_bias, self_attn_k_weight, self_attn_k_bias,
    self_attn_v_weight, self_attn_v_bias, self_attn_out_weight, self_attn_out_bias,
    layer_norm1_weight, layer_norm1_bias,
    cross_t2i_q_weight, cross_t2i_q_bias, cross_t2i_k_weight, cross_t2i_k_bias,
    cross_t2i_v_weight, cross_t2i_v_bias, cross_t2i_out_weight, cross_t2i_out_bias,
    layer_norm2_weight, layer_norm2_bias,
    mlp_lin1_weight, mlp_lin1_bias, mlp_lin2_weight, mlp_lin2_bias,
    layer_norm3_weight, layer_norm3_bias,
    cross_i2t_q_weight, cross_i2t_q_bias, cross_i2t_k_weight, cross_i2t_k_bias,
    cross_i2t_v_weight, cross_i2t_v_bias, cross_i2t_out_weight, cross_i2t_out_bias,
    layer_norm4_weight, layer_norm4_bias,
    skip_first_layer_pe,
    output_queries, output_keys,
):  # fmt: skip
    """Destination-passing entry point: every input in definition order, then both outputs."""
    arguments = list(locals().values())  # the parameters above, in order
    inputs, outputs = arguments[:-2], arguments[-2:]
    if queries.shape[0] * queries.shape[1] == 0:  # no (batch, point) item: both outputs have no element
        return
    # the CPU (interpreter, `solbench build`'s recording): one program, planned as on the target GPU
    cfg = DEFAULT_CONFIG if queries.is_cuda else replace(DEFAULT_CONFIG, grid=1, plan_programs=_target()[1])
    launch(inputs, outputs, cfg)
