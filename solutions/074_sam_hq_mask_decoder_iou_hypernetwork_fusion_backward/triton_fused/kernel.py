"""074: backward of SAM-HQ's IoU MLP (256->1024->1024->4) and four hypernetwork MLPs (256->256->256->32).

One Triton launch computes all 14 outputs. Every MLP ("mlp" 0 = IoU, 1..4 = hypernetwork 0..3) is the chain
(M rows, D = 1024 or 256 hidden, KG = 4 or 32 outputs, C = 256 inputs; all matrices row-major):

    D2 = (G @ W_out) * (H2 > 0)      [M, D]   stage P  -> workspace (fp16) + per-tile column sums
    dW_out = G^T @ H2r, db_out       [KG, D]  stage O  (fp32-accurate; db_out = column sums of G)
    D1 = (D2 @ W_hid) * (H1 > 0)     [M, D]   stage Q  -> workspace (fp16) + per-tile column sums;
                                                        waits for P (or recomputes D2)
    dW_hid = D2^T @ H1r, db_hid      [D, D]   stage R  (waits for P; db_hid = sum of P's column sums)
    dx = D1 @ W_in                   [M, C]   stage T  (waits for Q)
    dW_in = D1^T @ X, db_in          [D, C]   stage S  (waits for Q; db_in = sum of Q's column sums)

Bias gradients are column sums over M; the producing tiles (P, Q) write their tile's column sums to a small
fp32 workspace, and the first column tile of R / S adds those up (one load, not a second pass over M: an
unpipelined pass over M was the long tail of the first version).

Work items: every stage is a set of output tiles of a tiled GEMM; Q and T (K = D, 1024 for the IoU MLP)
are also split along K ("split-K": the item does one K range), so that no item streams a long K loop: a
long loop on one SM is what made the critical path P -> Q -> T slow. A split tile is finished by the last
of its split items to arrive (a per-tile atomic counter; the last one adds the other partial sums, kept in
an fp32 workspace, and runs the epilogue), or, for T with `t_atomic`, every split item adds its partial
into dx with fp32 atomics (dx is zeroed by the Q items, which T waits for anyway, where T splits the
MLP's K; unsplit, T's one item a tile stores dx).

Scheduling: one launch, a flat list of items in a configurable stage order; each program takes a *ticket*
from an atomic counter and does the item with that number. An item that needs a workspace waits (spins)
on a per-MLP counter bumped by the items that produce it. Tickets are handed out in the order programs
actually start and an item only ever waits for items with smaller tickets (the stage order puts producers
first), so whatever it waits for belongs to a program that is already running: no deadlock whatever order
the hardware schedules blocks in. With `q_recompute`, Q items compute their D2 chunk themselves (a K = 32
GEMM plus the H2 mask) instead of waiting for P, which takes one dependency hop off the critical path.
With `prefetch`, T items (and Q items that wait for P) load their weight operand before they wait;
with `single_k`, R and S items (K = M, when M fits one chunk) load theirs before they wait. A waiting
program polls its counter with one thread (`poll_one`), and every counter sits in its own 128-byte line,
so hundreds of waiting programs do not swamp the L2 slice that also serves the producers' increments.
Under TRITON_INTERPRET=1 programs run one after another in ticket order, so no wait ever spins.

Options (Config): `q_atomic`: Q items apply the H1 mask to their split-K partial and add it into an fp32 D1
(zeroed by the P tiles, which Q waits for) with relaxed atomics, then signal; T/S wait for every Q item;
P also zeroes dx (T adds into it) and S takes db_in from the column sums of the D1 it loads. `cvt`: stage P
makes fp16 copies of operands that K loops re-read after a wait: H1r ("h") and X ("x") tile by tile in the
P tiles, W_hid ("w") and W_in ("i") in extra P items (`cvt_block` elements each) that count towards the
P counter; R and Q wait for P directly, T and S through Q. The copies are fp16 whatever the precision.
`cvt_stage`: the same copies by items of two stages of their own, each with a per-MLP counter: W (W_hid's
blocks; Q waits for it) and C (W_in's, H1r's and X's blocks; R, T and S wait for it); P's tiles then compute D2
alone. `o_iou_fma`: the IoU MLP's O items (G has 4 columns) in fp32 FMA instead of the tf32x3 tensor-core product,
whose 32-row tile is 28 rows of padding there.

The sync counters are double-buffered: call k uses set k % 2 and the program with ticket 0 zeroes the
other set, which call k + 1 uses (launches on one stream run one after another). Per-tile counters are put
back to zero by the last arriver. No output is accumulated into pre-existing contents: every element is
written by this call (dx with `t_atomic`: zeroed, then summed into, within the call, where T splits K).

Precision: matmul operands are rounded to fp16 (round to nearest even: the same 10-bit mantissa as TF32, at
twice the TF32 tensor-core rate), accumulation is fp32; the D1/D2 workspaces are stored in fp16 (what the
MMAs would round them to anyway), split-K partial sums and bias sums stay fp32; dW_out (K = M, the output
closest to its tolerance with fp16 operands: 0.85 of allowed at M = 128) uses fp32-accurate "tf32x3" dots
(it is tiny). This reproduces TF32 with
round-to-nearest operands (what cuBLAS's TF32 gives the reference) exactly for values in fp16's range.
Plain Triton "tf32" hands the raw fp32 bits to the tensor core, which truncates them; that bias fails the
99 % rule (NOTES.md), so it is only a test/tune variant, next to "tf32rn" and the fp32-exact "ieee".
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

# Fixed sizes of the task.
C_IN = 256  # hidden_size: input width of every MLP
D_IOU = 1024  # iou_head_hidden_dim
D_HYP = 256  # hypernetwork hidden width (= hidden_size)
KG_IOU = 4  # num_mask_tokens: IoU head outputs
KG_HYP = 32  # output_channels: hypernetwork outputs
N_HYP = 4  # number of hypernetwork MLPs

# Counter buffer (int32): two header sets of 32 slots (ticket, P done per MLP, Q done per MLP, W and C done per
# MLP with cvt_stage), then per-tile split-K counters (Q tiles, then T tiles). Every counter has its own 128-byte
# line (a stride of 32 ints): programs that poll one counter, or bump another, do not queue on the same L2 line.
_LINE = tl.constexpr(32)
_CNT_P = tl.constexpr(1)
_CNT_Q = tl.constexpr(6)
_CNT_W = tl.constexpr(11)
_CNT_C = tl.constexpr(16)
_SLOTS = tl.constexpr(32)
_HDR = 32 * 32
_CNT_TILES = 2 * _HDR

# Stage numbers (the `order` string of a Config permutes them; W and C have items only with cvt_stage).
_STAGES = "POQRTSWC"

_PRECISIONS = ("fp16", "tf32rn", "tf32", "tf32x3", "ieee")
_CVT = "wihx"  # operands stage P can convert to fp16 (Config.cvt)


@dataclasses.dataclass(frozen=True)
class Config:
    """One variant of the kernel. Tile sizes are (rows, cols[, K range per item], K chunk) per stage."""

    p: tuple[int, int] = (64, 64)  # D2 tiles [rows of M, cols of D]; K (4 or 32) is one chunk of 32
    o: tuple[int, int] = (64, 64)  # dW_out tiles: 32 rows (all of KG), cols of D; K chunk over M
    q: tuple[int, int, int, int] = (64, 64, 256, 256)  # D1 tiles [M, D], K range per item (split-K), chunk
    r: tuple[int, int, int] = (64, 128, 128)  # dW_hid tiles [D, D], K chunk over M
    t: tuple[int, int, int, int] = (64, 64, 256, 256)  # dx tiles [M, C], K range per item, chunk
    s: tuple[int, int, int] = (64, 64, 128)  # dW_in tiles [D, C], K chunk over M
    q_recompute: bool = False  # Q items compute their D2 chunk (no wait for P)
    prefetch: bool = True  # T (and waiting Q) items load the weight tile before waiting (chunk == range)
    t_atomic: bool = True  # T split-K partials are added into dx with atomics (else: last arriver sums)
    single_k: bool = True  # R and S (K = M) in one chunk, operand B loaded before the wait (M <= RK, SK)
    poll_one: bool = True  # one thread per waiting program polls its counter (else all threads do)
    order: str = "POQRTS"  # ticket order of the stages (producers before consumers)
    num_warps: int = 8
    num_stages: int = 3
    maxnreg: int | None = 128  # register cap (128 at 8 warps: two programs per SM); None: the compiler's
    precision: str = "fp16"  # "fp16" | "tf32rn" | "tf32" | "tf32x3" | "ieee" (see _mma); fp32 accumulation
    q_atomic: bool = False  # Q split items add their masked partials into an fp32 D1 (zeroed by P) with
    # atomics and signal directly (no last-arriver round trip); dx is zeroed by P; db_in comes from S
    cvt: str = ""  # fp16 copies made in stage P of operands that are re-read: "w" W_hid (Q loops), "i" W_in
    # (T loops), "h" H1r (R loops), "x" X (S loops); used where the operand is loaded after the wait
    cvt_block: int = 16384  # weight elements per conversion item ("w", "i": extra items of stage P)
    rs_split: int = 1  # R and S K loops (K = M) split into this many M ranges per tile; the items add into
    # dW_hid / dW_in (zeroed by extra P items, `cvt_block` elements each) with atomics; not with single_k
    # the fp16 copies (cvt) made by items of their own stages instead of by P: "W" (W_hid, which Q waits for) and
    # "C" (W_in, H1r, X: T, R, S wait for it), `cvt_block` elements each, with their own per-MLP counters; P's items
    # then compute D2 alone (the order names W and C, e.g. "PWCOQRTS")
    cvt_stage: bool = False
    # the IoU MLP's O items (G has 4 columns) as fp32 FMA broadcast products over 32-row chunks, 4 chunks in flight,
    # instead of the tf32x3 tensor-core product padded to 32 rows (the hypernetworks' O items unchanged)
    o_iou_fma: bool = False

    def __post_init__(self) -> None:
        if self.precision not in _PRECISIONS:
            raise ValueError(f"Config.precision: expected one of {_PRECISIONS}, got {self.precision!r}")
        for name in ("p", "o", "q", "r", "t", "s"):
            for v in getattr(self, name):
                if v < 16 or v & (v - 1) or v > 1024:
                    raise ValueError(
                        f"Config.{name}: tile sizes must be powers of two in [16, 1024], got {v}"
                    )
        for name in ("q", "t"):
            _, _, k_range, chunk = getattr(self, name)
            if chunk > k_range:
                raise ValueError(f"Config.{name}: K chunk {chunk} larger than the K range {k_range}")
        if self.prefetch and self.t[3] != self.t[2]:
            raise ValueError("Config: prefetch needs the T chunk to equal the T K range")
        if self.prefetch and not self.q_recompute and self.q[3] != self.q[2]:
            raise ValueError(
                "Config: prefetch needs the Q chunk to equal the Q K range (without q_recompute)"
            )
        if self.cvt_block & (self.cvt_block - 1) or not 1024 <= self.cvt_block <= 65536:
            raise ValueError(f"Config.cvt_block: a power of two in [1024, 65536], got {self.cvt_block}")
        if self.rs_split not in (1, 2, 4, 8, 16):
            raise ValueError(f"Config.rs_split: 1, 2, 4, 8 or 16, got {self.rs_split}")
        if self.q_recompute and self.rs_split > 1:
            raise ValueError("Config: rs_split needs Q to wait for P (P zeroes dW_in, S waits for Q)")
        if set(self.cvt) - set(_CVT) or len(set(self.cvt)) != len(self.cvt):
            raise ValueError(f"Config.cvt: expected distinct letters of {_CVT!r}, got {self.cvt!r}")
        if self.q_recompute and (self.q_atomic or set(self.cvt) & set("wix")):
            raise ValueError("Config: q_atomic and cvt 'w', 'i', 'x' need Q to wait for P (not q_recompute)")
        stages = _STAGES if self.cvt_stage else _STAGES[:6]
        if sorted(self.order) != sorted(stages):
            raise ValueError(f"Config.order: expected a permutation of {stages!r}, got {self.order!r}")
        if self.cvt_stage and (self.q_recompute or self.rs_split > 1):
            raise ValueError("Config.cvt_stage: not with q_recompute or rs_split > 1")
        pos = {c: i for i, c in enumerate(self.order)}
        deps = [("P", "R"), ("Q", "T"), ("Q", "S")] + ([] if self.q_recompute else [("P", "Q")])
        if self.cvt_stage:
            deps += [("W", "Q"), ("C", "R"), ("C", "T"), ("C", "S")]
        for a, b in deps:
            if pos[a] > pos[b]:
                raise ValueError(f"Config.order: {a} must come before {b} (it waits for it)")

    def flags(self, m: int) -> dict[str, bool | int]:
        """The kernel's path switches for M rows: SINGLE_K and the conversions that take effect (an operand
        is read from its fp16 copy only where it is loaded after the wait: K loops, not prefetches)."""
        single_k = self.single_k and m <= min(self.r[2], self.s[2])
        return {
            "SINGLE_K": single_k,
            "CVT_W": "w" in self.cvt and not self.prefetch,
            "CVT_I": "i" in self.cvt and not self.prefetch,
            "CVT_H": "h" in self.cvt and not single_k,
            "CVT_X": "x" in self.cvt and not single_k,
            "RSS": 1 if single_k else self.rs_split,
        }

    def order_code(self) -> int:
        """The stage order as the kernel's ORDER constexpr: stage number of position i in nibble i (W and C, which
        have no items without cvt_stage, last unless the order names them)."""
        order = self.order + "".join(c for c in "WC" if c not in self.order)
        return sum(_STAGES.index(c) << (4 * i) for i, c in enumerate(order))


DEFAULT_CONFIG = Config()
_S3 = Config(r=(64, 128, 64), s=(64, 64, 64))  # tune.py variant 's3': 64-row tiles, prefetch, single_k
_B1N = Config(  # tune.py variant 'b1n_cv32k': 128-row tiles, K chunks of 64, fp16 copies made in stage P
    p=(64, 128),
    q=(128, 64, 512, 64),
    r=(128, 128, 64),
    t=(128, 128, 512, 64),
    s=(128, 64, 64),
    prefetch=False,
    single_k=False,
    poll_one=False,
    maxnreg=None,
    cvt="whix",
    cvt_block=32768,
)
CONFIG_TABLE: list[tuple[int, Config]] = [
    # 's3_hx_nr_r128s128': 's3_hx_nr' (session 3: M=64 17.2 us against 19.2 for 's3') with R and S tiles 128 rows
    # high (session 12: M=64 16.6 against 17.2 us), the IoU MLP's O items in fp32 FMA (`o_iou_fma`, session 43)
    (96, dataclasses.replace(_S3, cvt="hx", maxnreg=None, r=(128, 128, 64), s=(128, 64, 64), o_iou_fma=True)),
    # 's3_w4_x_cs': 's3' with one warpgroup per program, no register cap and the fp16 copy of X for S (session 13:
    # M=128/131 21.2/23.2 us against 22.4/25.5 for 's3'), the copy made by stage C instead of P's tiles (session 38:
    # M=128/131 19.6/22.5 against 21.0/23.1 us)
    (192, dataclasses.replace(_S3, maxnreg=None, num_warps=4, cvt="x", cvt_stage=True, order="PWCOQRTS")),
    # 'b1n32_o128_cs': 'b1_cvt_k64_nr' (session 3: M=256 27.3 / M=512 42.3 us against 32.1 / 44.3) with conversion
    # items of 32768 elements (session 12: M=449/512 0.5-0.8 us faster in two sweeps), O tiles 128 wide (session 37:
    # M=256 26.7 against 27.3-27.4 us) and the copies by stages W and C, P's tiles computing D2 alone (session 38:
    # M=256 25.4 against 26.9 us)
    (384, dataclasses.replace(_B1N, o=(128, 64), cvt_stage=True, order="PWCOQRTS")),
    # 'b1n32_best_o128': 'b1n32_q1r256t1' (session 12: M=449/512 35.6-37.0 us against 40.8-42.5 for 'b1n_cv32k'):
    # Q and T without K splits, R tiles 256 wide; and O tiles 128 wide (session 37: 16 O items instead of 32, each
    # as long, on a quarter of the SMs until the end: M=449/512 33.7-34.0/34.9-35.5 against 35.6-35.7/36.9-37.1 us);
    # and the IoU MLP's O items in fp32 FMA, 'b1n32_best_o128_ofma' (session 42, official A/Bs with --repeat 2: on the
    # H200 M = 512 34.7-34.8 -> 33.8-34.0 us, M = 449 33.7 -> 33.5; on an H100 the eight M > 384 workloads 2.2-3.3 %)
    (
        1 << 62,
        dataclasses.replace(
            _B1N, q=(128, 64, 1024, 64), r=(128, 256, 64), t=(128, 128, 1024, 64), o=(128, 64), o_iou_fma=True
        ),
    ),
]
"""(largest M, variant) pairs in increasing M; the first that fits is used (chosen with tune.py, whose --select
writes the chosen variants in full)."""
CONFIG_OVERRIDE: Config | None = None
"""Forces the variant `run` uses (experiments); None: CONFIG_TABLE decides."""


def pick_config(m: int) -> Config:
    """The variant used for M rows."""
    if CONFIG_OVERRIDE is not None:
        return CONFIG_OVERRIDE
    for max_m, cfg in CONFIG_TABLE:
        if m <= max_m:
            return cfg
    return CONFIG_TABLE[-1][1]


# ------------------------------------------------------------------------------------------ device code


@triton.jit
def _sel(cond, a, b):
    """a if cond else b, for scalars and pointers (a runtime branch, so any type works)."""
    r = b
    if cond:
        r = a
    return r


@triton.jit
def _pick5(i, p0, p1, p2, p3, p4):
    r = p0
    if i == 1:
        r = p1
    if i == 2:
        r = p2
    if i == 3:
        r = p3
    if i == 4:
        r = p4
    return r


@triton.jit
def _pick8(i, p0, p1, p2, p3, p4, p5, p6, p7, N: tl.constexpr = 8):
    """Entry i of eight (i a compile-time or a runtime value); of the first six when N is 6 (i < 6 known)."""
    r = p0
    if i == 1:
        r = p1
    if i == 2:
        r = p2
    if i == 3:
        r = p3
    if i == 4:
        r = p4
    if i == 5:
        r = p5
    if N > 6:
        if i == 6:
            r = p6
        if i == 7:
            r = p7
    return r


@triton.jit
def _round_tf32(x):
    """fp32 -> the nearest TF32 value (ties away from zero), still stored as fp32 (low 13 bits zero)."""
    bits = x.to(tl.int32, bitcast=True)
    return ((bits + 0x1000) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def _mma(a, b, acc, PREC: tl.constexpr):
    """acc + a @ b with fp32 accumulation; PREC picks how the fp32 operands enter the tensor cores.

    "fp16": rounded to nearest fp16 (the same 10-bit mantissa as TF32, at twice the TF32 rate);
    "tf32rn": rounded to nearest TF32 in registers; "tf32": the raw fp32 bits (the tensor core ignores the
    low 13 bits, i.e. truncates: biased, see NOTES.md); "tf32x3" and "ieee": fp32-accurate, slower.
    """
    if PREC == "fp16":
        acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)
    elif PREC == "tf32rn":
        acc = tl.dot(
            _round_tf32(a.to(tl.float32)), _round_tf32(b.to(tl.float32)), acc, input_precision="tf32"
        )
    else:
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision=PREC)
    return acc


@triton.jit
def _gemm_loop(
    a_ptr,
    lda,
    b_ptr,
    ldb,
    R,
    C,
    k_lo,
    k_hi,
    off_r,
    off_c,
    A_TRANS: tl.constexpr,
    A_CG: tl.constexpr,
    BR: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    PREC: tl.constexpr,
    B_CG: tl.constexpr = False,
    COLSUM: tl.constexpr = False,
):
    """(acc, cs): acc[BR, BC] = A[off_r:, k_lo:k_hi] @ B[k_lo:k_hi, off_c:], zero outside R x C.

    A is A[r, k] = a_ptr[r * lda + k], or a_ptr[k * lda + r] when A_TRANS (A stored K-major: a transposed
    view of a row-major [K, R] matrix); B[k, c] = b_ptr[k * ldb + c]. A_CG / B_CG load A / B with .cg
    (L2 only): a workspace written by other programs of the same launch. cs[BR] = sum over K of A (only
    with COLSUM, else zeros).
    """
    rr = off_r + tl.arange(0, BR)
    cc = off_c + tl.arange(0, BC)
    kk = tl.arange(0, BK)
    r_ok = rr < R
    c_ok = cc < C
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    cs = tl.zeros((BR,), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        k = k0 + kk
        k_ok = k < k_hi
        if A_TRANS:
            a_ptrs = a_ptr + k[:, None] * lda + rr[None, :]  # [BK, BR]
            a_msk = k_ok[:, None] & r_ok[None, :]
            if A_CG:
                a_t = tl.load(a_ptrs, mask=a_msk, other=0.0, cache_modifier=".cg")
            else:
                a_t = tl.load(a_ptrs, mask=a_msk, other=0.0)
            a = tl.trans(a_t)  # [BR, BK]
            if COLSUM:
                cs += tl.sum(a_t.to(tl.float32), axis=0)
        else:
            a_ptrs = a_ptr + rr[:, None] * lda + k[None, :]  # [BR, BK]
            a_msk = r_ok[:, None] & k_ok[None, :]
            if A_CG:
                a = tl.load(a_ptrs, mask=a_msk, other=0.0, cache_modifier=".cg")
            else:
                a = tl.load(a_ptrs, mask=a_msk, other=0.0)
            if COLSUM:
                cs += tl.sum(a.to(tl.float32), axis=1)
        b_ptrs = b_ptr + k[:, None] * ldb + cc[None, :]
        b_msk = k_ok[:, None] & c_ok[None, :]
        if B_CG:
            b = tl.load(b_ptrs, mask=b_msk, other=0.0, cache_modifier=".cg")
        else:
            b = tl.load(b_ptrs, mask=b_msk, other=0.0)
        acc = _mma(a, b, acc, PREC)
    return acc, cs


@triton.jit
def _q_recompute_loop(
    g,
    ld_g,
    w_out,
    h2,
    w_hid,
    D,
    KG,
    M,
    k_lo,
    k_hi,
    off_r,
    off_c,
    BR: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    PREC: tl.constexpr,
):
    """acc[BR, BC] = D2[off_r:, k_lo:k_hi] @ W_hid[k_lo:k_hi, off_c:] with D2 recomputed chunk by chunk:
    D2[m, k] = (G[m, :KG] @ W_out[:KG, k]) * (H2[m, k] > 0) (the same fp16 rounding as the workspace)."""
    rr = off_r + tl.arange(0, BR)
    cc = off_c + tl.arange(0, BC)
    kk = tl.arange(0, BK)
    gk = tl.arange(0, 32)
    r_ok = rr < M
    c_ok = cc < D
    g_ok = gk < KG
    gt = tl.load(g + rr[:, None] * ld_g + gk[None, :], mask=r_ok[:, None] & g_ok[None, :], other=0.0)
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        k = k0 + kk
        k_ok = k < k_hi
        wo = tl.load(w_out + gk[:, None] * D + k[None, :], mask=g_ok[:, None] & k_ok[None, :], other=0.0)
        pre2 = tl.load(h2 + rr[:, None] * D + k[None, :], mask=r_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_hid + k[:, None] * D + cc[None, :], mask=k_ok[:, None] & c_ok[None, :], other=0.0)
        d2 = _mma(gt, wo, tl.zeros((BR, BK), dtype=tl.float32), PREC)
        d2 = tl.where(pre2 > 0, d2, 0.0)
        if PREC == "fp16":
            d2 = d2.to(tl.float16)
        acc = _mma(d2, b, acc, PREC)
    return acc


@triton.jit
def _col_partial_sums(ws, n_rows, col0, R, off_r, BR: tl.constexpr):
    """sum_t ws[t, col0 + r] over the n_rows per-tile column sums (ws rows of 2048): a bias gradient."""
    rr = off_r + tl.arange(0, BR)
    r_ok = rr < R
    tt = tl.arange(0, 16)
    acc = tl.zeros((BR,), dtype=tl.float32)
    for t0 in range(0, n_rows, 16):
        t = t0 + tt
        v = tl.load(
            ws + t[:, None] * 2048 + col0 + rr[None, :],
            mask=(t < n_rows)[:, None] & r_ok[None, :],
            other=0.0,
            cache_modifier=".cg",
        )
        acc += tl.sum(v, axis=0)
    return acc


@triton.jit
def _o_loop(g, ld_g, h2r, D, KG, M, off_c, ON: tl.constexpr, OK: tl.constexpr):
    """dW_out tile [32, ON] = G^T @ H2r[:, off_c:] (fp32-accurate tf32x3) and the column sums of G."""
    kk = tl.arange(0, OK)
    gk = tl.arange(0, 32)
    cc = off_c + tl.arange(0, ON)
    g_ok = gk < KG
    c_ok = cc < D
    acc = tl.zeros((32, ON), dtype=tl.float32)
    gs = tl.zeros((32,), dtype=tl.float32)
    for k0 in range(0, M, OK):
        k = k0 + kk
        k_ok = k < M
        a_t = tl.load(g + k[:, None] * ld_g + gk[None, :], mask=k_ok[:, None] & g_ok[None, :], other=0.0)
        b = tl.load(h2r + k[:, None] * D + cc[None, :], mask=k_ok[:, None] & c_ok[None, :], other=0.0)
        acc = tl.dot(tl.trans(a_t), b, acc, input_precision="tf32x3")
        gs += tl.sum(a_t, axis=0)
    return acc, gs


@triton.jit
def _o_iou_fma(g, h2r, D, M, off_c, dw_out, db_out, ON: tl.constexpr, OKF: tl.constexpr, OFS: tl.constexpr):
    """The IoU MLP's O item (`o_iou_fma`): dW_out[0:4, off_c:off_c + ON] = G^T @ H2r[:, off_c:] and db_out = colsum G
    in fp32 FMA (G[m, k] = g[m * 4 + k]): per OKF-row chunk four broadcast products into [OKF, ON] accumulators,
    summed over the rows once at the end; the loop's loads pipelined OFS deep (Triton's cp.async pipelining)."""
    kk = tl.arange(0, OKF)
    cc = off_c + tl.arange(0, ON)
    c_ok = cc < D
    a0 = tl.zeros((OKF, ON), dtype=tl.float32)
    a1 = tl.zeros((OKF, ON), dtype=tl.float32)
    a2 = tl.zeros((OKF, ON), dtype=tl.float32)
    a3 = tl.zeros((OKF, ON), dtype=tl.float32)
    s0 = tl.zeros((OKF,), dtype=tl.float32)
    s1 = tl.zeros((OKF,), dtype=tl.float32)
    s2 = tl.zeros((OKF,), dtype=tl.float32)
    s3 = tl.zeros((OKF,), dtype=tl.float32)
    for k0 in tl.range(0, M, OKF, num_stages=OFS):
        k = k0 + kk
        k_ok = k < M
        b = tl.load(h2r + k[:, None] * D + cc[None, :], mask=k_ok[:, None] & c_ok[None, :], other=0.0)
        g0 = tl.load(g + k * 4, mask=k_ok, other=0.0)
        g1 = tl.load(g + k * 4 + 1, mask=k_ok, other=0.0)
        g2 = tl.load(g + k * 4 + 2, mask=k_ok, other=0.0)
        g3 = tl.load(g + k * 4 + 3, mask=k_ok, other=0.0)
        a0 += g0[:, None] * b
        a1 += g1[:, None] * b
        a2 += g2[:, None] * b
        a3 += g3[:, None] * b
        s0 += g0
        s1 += g1
        s2 += g2
        s3 += g3
    tl.store(dw_out + cc, tl.sum(a0, axis=0), mask=c_ok)
    tl.store(dw_out + D + cc, tl.sum(a1, axis=0), mask=c_ok)
    tl.store(dw_out + 2 * D + cc, tl.sum(a2, axis=0), mask=c_ok)
    tl.store(dw_out + 3 * D + cc, tl.sum(a3, axis=0), mask=c_ok)
    if off_c == 0:
        i4 = tl.arange(0, 4)
        t0, t1, t2, t3 = tl.sum(s0, axis=0), tl.sum(s1, axis=0), tl.sum(s2, axis=0), tl.sum(s3, axis=0)
        gs = tl.where(i4 == 0, t0, tl.where(i4 == 1, t1, tl.where(i4 == 2, t2, t3)))
        tl.store(db_out + i4, gs)


@triton.jit
def _store_tile(acc, out, ld, R, C, off_r, off_c, BR: tl.constexpr, BC: tl.constexpr):
    rr = off_r + tl.arange(0, BR)
    cc = off_c + tl.arange(0, BC)
    tl.store(out + rr[:, None] * ld + cc[None, :], acc, mask=(rr < R)[:, None] & (cc < C)[None, :])


@triton.jit
def _single_k_t(
    a_ptr, lda, b_ptr, ldb, R, C, M, off_r, off_c, BR: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr
):
    """The B tile [BK, BC] (all of K = M <= BK) of a K-major-A product, loaded before a wait (see _finish_k_t)."""
    kk = tl.arange(0, BK)
    cc = off_c + tl.arange(0, BC)
    return tl.load(
        b_ptr + kk[:, None] * ldb + cc[None, :], mask=(kk < M)[:, None] & (cc < C)[None, :], other=0.0
    )


@triton.jit
def _finish_k_t(
    a_ptr, lda, b, R, M, off_r, BR: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr
):
    """(acc, cs): acc = A[off_r:, :M] @ b with A stored K-major (a workspace: .cg loads), all of K in one
    chunk; cs[BR] = the sums of A over K (its column sums: a bias gradient, used by S with q_atomic)."""
    kk = tl.arange(0, BK)
    rr = off_r + tl.arange(0, BR)
    a_t = tl.load(
        a_ptr + kk[:, None] * lda + rr[None, :],
        mask=(kk < M)[:, None] & (rr < R)[None, :],
        other=0.0,
        cache_modifier=".cg",
    )
    acc = _mma(tl.trans(a_t), b, tl.zeros((BR, BC), dtype=tl.float32), PREC)
    return acc, tl.sum(a_t.to(tl.float32), axis=0)


@triton.jit
def _wait_for(cnt_ptr, target, NW: tl.constexpr, POLL1: tl.constexpr):
    """Spin until *cnt_ptr >= target, then acquire and let the whole program go on.

    The poll is a volatile load by one thread (a [32 * num_warps] tensor has one element per thread; only
    element 0 loads), shared through a max-reduction: one L2 request per program and round trip instead
    of one per warp, so the hundreds of waiting programs do not swamp the counter's L2 slice. One acquire
    after it orders the workspace reads that follow.
    """
    if POLL1:
        offs = tl.arange(0, NW * 32)
        one = offs == 0
        seen = tl.max(tl.load(cnt_ptr + offs * 0, mask=one, other=0, volatile=True), axis=0)
        while seen < target:
            seen = tl.max(tl.load(cnt_ptr + offs * 0, mask=one, other=0, volatile=True), axis=0)
    else:  # every thread polls (a request per warp)
        seen = tl.load(cnt_ptr, volatile=True)
        while seen < target:
            seen = tl.load(cnt_ptr, volatile=True)
    tl.atomic_add(cnt_ptr, 0, sem="acquire")
    tl.debug_barrier()


@triton.jit
def _signal(cnt_ptr):
    """Publish this program's stores (all threads done, then a release increment)."""
    tl.debug_barrier()
    tl.atomic_add(cnt_ptr, 1, sem="release")


@triton.jit
def _now(dep):
    """%globaltimer (ns) for TRACE builds (inline PTX: not available in the interpreter)."""
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _clock(dep):
    """%clock64 (SM cycles) for TRACE builds."""
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64;", "=l,r", [dep], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _smid(dep):
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _reduce_split(acc, part, tile_cnt, ks, nsplit, SMAX: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """Split-K: store this item's partial tile, count it in; the last arriver adds the others.

    Returns (last, acc): `last` is true in exactly one of the tile's nsplit items, whose acc is then the
    full sum; that item also puts the tile counter back to zero (nobody touches it again this call). The
    other partials are read with SMAX unrolled, predicated loads (one round trip, not nsplit - 1).
    """
    offs = tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :]
    tl.store(part + ks * (BR * BC) + offs, acc, cache_modifier=".cg")
    tl.debug_barrier()
    old = tl.atomic_add(tile_cnt, 1, sem="acq_rel")
    last = old == nsplit - 1
    if last:
        tl.debug_barrier()
        for s in tl.static_range(SMAX):
            use = offs * 0 + ((ks != s) & (nsplit > s)).to(tl.int32) > 0
            acc += tl.load(part + s * (BR * BC) + offs, mask=use, other=0.0, cache_modifier=".cg")
        tl.store(tile_cnt, 0)
    return last, acc


@triton.jit
def _split(u, n_iou, n_hyp):
    """Item u of a stage -> (mlp, local index): the IoU items first, then n_hyp items per hypernetwork."""
    is_hyp = u >= n_iou
    v = u - n_iou
    j = v // tl.maximum(n_hyp, 1)
    mlp = _sel(is_hyp, 1 + j, 0)
    lt = _sel(is_hyp, v - j * n_hyp, u)
    return mlp, lt


@triton.jit
def _rs_item(lt, RSS: tl.constexpr, n_cols, BM: tl.constexpr, BN: tl.constexpr, rs_len, M):
    """R / S item lt: its [BM, BN] tile of a weight gradient with n_cols columns and its M range [k_lo, k_hi)."""
    n_c = tl.cdiv(n_cols, BN)
    tile = lt // RSS
    ks = lt % RSS  # M range of this item (RSS > 1)
    k_lo = ks * rs_len
    return (tile // n_c) * BM, (tile % n_c) * BN, k_lo, tl.minimum(k_lo + rs_len, M)


@triton.jit(do_not_specialize=["M"])
def _fused_bwd_kernel(
    # inputs (biases are not read by the backward)
    g_iou,  # grad_iou_scores [M, 4]
    g_hyp,  # grad_hyper_weights [M, 4, 32]
    x_iou,  # iou_token_out [M, 256]
    x_hyp,  # mask_tokens_out [M, 4, 256]
    w_in_iou,  # [1024, 256]
    w_hid_iou,  # [1024, 1024]
    w_out_iou,  # [4, 1024]
    h1_iou,  # [M, 1024] pre-ReLU
    h1r_iou,  # [M, 1024]
    h2_iou,  # [M, 1024] pre-ReLU
    h2r_iou,  # [M, 1024]
    w_in_hyp,  # [4, 256, 256]
    w_hid_hyp,  # [4, 256, 256]
    w_out_hyp,  # [4, 32, 256]
    h1_0,
    h1_1,
    h1_2,
    h1_3,  # [M, 256] each, pre-ReLU
    h1r_0,
    h1r_1,
    h1r_2,
    h1r_3,
    h2_0,
    h2_1,
    h2_2,
    h2_3,
    h2r_0,
    h2r_1,
    h2r_2,
    h2r_3,
    # outputs
    dx_iou,  # [M, 256]
    dx_hyp,  # [M, 4, 256]
    dw_in_iou,  # [1024, 256]
    db_in_iou,  # [1024]
    dw_hid_iou,  # [1024, 1024]
    db_hid_iou,  # [1024]
    dw_out_iou,  # [4, 1024]
    db_out_iou,  # [4]
    dw_in_hyp,  # [4, 256, 256]
    db_in_hyp,  # [4, 256]
    dw_hid_hyp,  # [4, 256, 256]
    db_hid_hyp,  # [4, 256]
    dw_out_hyp,  # [4, 32, 256]
    db_out_hyp,  # [4, 32]
    # workspaces and sync
    ws_d2,  # [M*1024 + 4*M*256] fp16 (fp32 unless fp16 operands): D2 of the IoU MLP, then hypernetworks 0..3
    ws_d1,  # same layout, D1
    ws_qp,  # fp32 split-K partials of Q: [Q tiles, max splits, QM * QN]
    ws_tp,  # fp32 split-K partials of T: [T tiles, max splits, TM * TN] (unused with T_ATOMIC)
    ws_cs2,  # fp32 [P row tiles, 2048]: column sums of each P tile of D2 (all MLPs side by side)
    ws_cs1,  # fp32 [Q row tiles, 2048]: column sums of each finished Q tile of D1
    ws_h16,  # fp16 copy of H1r (CVT_H), the layout of ws_d1; a dummy otherwise
    ws_w16,  # fp16 copy of W_hid (CVT_W): IoU [1024, 1024], then [4, 256, 256]
    ws_i16,  # fp16 copy of W_in (CVT_I): IoU [1024, 256], then [4, 256, 256]
    ws_x16,  # fp16 copy of X (CVT_X): IoU [M, 256], then [M, 4, 256]
    cnt,  # int32 [16 * 32]: this call's header, one counter per 32 ints (zero at entry)
    cnt_next,  # int32 [16 * 32]: the next call's header (zeroed here by ticket 0)
    cnt_tile,  # int32 per-tile split-K counters, one per 32 ints (zero at entry, left zero)
    trace,  # int64 [items, 6] when TRACE: globaltimer start/end, clock64 wait/end - start, stage/mlp/SM
    M,
    PM: tl.constexpr,
    PN: tl.constexpr,
    ON: tl.constexpr,
    OK: tl.constexpr,
    QM: tl.constexpr,
    QN: tl.constexpr,
    QKS: tl.constexpr,
    QBK: tl.constexpr,
    RM: tl.constexpr,
    RN: tl.constexpr,
    RK: tl.constexpr,
    TM: tl.constexpr,
    TN: tl.constexpr,
    TKS: tl.constexpr,
    TBK: tl.constexpr,
    SM: tl.constexpr,
    SN: tl.constexpr,
    SK: tl.constexpr,
    Q_RECOMP: tl.constexpr,
    PRE: tl.constexpr,
    T_ATOMIC: tl.constexpr,
    SINGLE_K: tl.constexpr,
    ORDER: tl.constexpr,
    PREC: tl.constexpr,
    NW: tl.constexpr,  # num_warps
    POLL1: tl.constexpr,  # one thread polls a counter (else every thread)
    Q_ATOMIC: tl.constexpr = False,
    CVT_W: tl.constexpr = False,
    CVT_I: tl.constexpr = False,
    CVT_H: tl.constexpr = False,
    CVT_X: tl.constexpr = False,
    CVE: tl.constexpr = 16384,  # weight elements per conversion item
    RSS: tl.constexpr = 1,  # M ranges per R / S tile (atomics into zeroed dW_hid / dW_in when > 1)
    CVS: tl.constexpr = False,  # Config.cvt_stage: the copies by stages W and C, not by P
    O_FMA: tl.constexpr = False,  # Config.o_iou_fma
    TRACE: tl.constexpr = False,
):
    OM: tl.constexpr = 32  # dW_out rows: all KG rows in one tile (IoU uses 4 of them)
    PK: tl.constexpr = 32  # K of stage P (KG = 4 or 32, zero-padded)
    SQ_MAX: tl.constexpr = (1024 + QKS - 1) // QKS  # most K splits of a Q tile (IoU)
    ST_MAX: tl.constexpr = (1024 + TKS - 1) // TKS

    t = tl.atomic_add(cnt + 0, 1, sem="relaxed")  # ticket: the order programs really started in
    if TRACE:
        g0 = _now(t)
        c0 = _clock(t)
        cw = c0
    if t == 0:  # every slot, W's and C's too: the next call may use cvt_stage where this one does not
        tl.store(cnt_next + tl.arange(0, _SLOTS) * _LINE, tl.zeros((_SLOTS,), dtype=tl.int32))

    # ---- items per stage (IoU tiles, hypernetwork tiles per MLP, K splits) ---------------------------
    zero = M * 0
    # conversion items of stage P (after its tiles, per MLP): W_hid blocks, then W_in blocks
    NCW_I: tl.constexpr = (1024 * 1024 // CVE) * CVT_W
    NCW_H: tl.constexpr = (256 * 256 // CVE) * CVT_W
    NCI_I: tl.constexpr = (1024 * 256 // CVE) * CVT_I
    NCI_H: tl.constexpr = (256 * 256 // CVE) * CVT_I
    NZ_I: tl.constexpr = ((1024 * 1024 + 1024 * 256) // CVE) * (RSS > 1)  # zero items: dW_hid, dW_in
    NZ_H: tl.constexpr = ((256 * 256 + 256 * 256) // CVE) * (RSS > 1)
    mt_p = tl.cdiv(M, PM)
    np_i = mt_p * ((1024 + PN - 1) // PN) + (NCW_I + NCI_I) * (not CVS) + NZ_I
    np_h = mt_p * ((256 + PN - 1) // PN) + (NCW_H + NCI_H) * (not CVS) + NZ_H
    # cvt_stage: W_hid copies (stage W); W_in, H1r and X copies (stage C), per MLP
    CV_H: tl.constexpr = CVS and CVT_H
    CV_X: tl.constexpr = CVS and CVT_X
    nw_i = zero + NCW_I * CVS
    nw_h = zero + NCW_H * CVS
    nch_i = tl.cdiv(M * 1024, CVE) * CV_H
    nch_h = tl.cdiv(M * 256, CVE) * CV_H
    ncx = tl.cdiv(M * 256, CVE) * CV_X
    nc_i = NCI_I * CVS + nch_i + ncx
    nc_h = NCI_H * CVS + nch_h + ncx
    no_i = zero + (1024 + ON - 1) // ON
    no_h = zero + (256 + ON - 1) // ON
    mt_q = tl.cdiv(M, QM)
    nq_i = mt_q * ((1024 + QN - 1) // QN)
    nq_h = mt_q * ((256 + QN - 1) // QN)
    sq_i = zero + SQ_MAX
    sq_h = zero + (256 + QKS - 1) // QKS
    nr_i = zero + ((1024 + RM - 1) // RM) * ((1024 + RN - 1) // RN) * RSS
    nr_h = zero + ((256 + RM - 1) // RM) * ((256 + RN - 1) // RN) * RSS
    mt_t = tl.cdiv(M, TM)
    nt_i = mt_t * ((256 + TN - 1) // TN)
    nt_h = nt_i
    st_i = zero + ST_MAX
    st_h = zero + (256 + TKS - 1) // TKS
    ns_i = zero + ((1024 + SM - 1) // SM) * ((256 + SN - 1) // SN) * RSS
    ns_h = zero + ((256 + SM - 1) // SM) * ((256 + SN - 1) // SN) * RSS
    n0 = np_i + 4 * np_h
    n1 = no_i + 4 * no_h
    n2 = nq_i * sq_i + 4 * nq_h * sq_h
    n3 = nr_i + 4 * nr_h
    n4 = nt_i * st_i + 4 * nt_h * st_h
    n5 = ns_i + 4 * ns_h
    n6 = nw_i + 4 * nw_h
    n7 = nc_i + 4 * nc_h

    # ---- locate the item: stage (in ORDER), index u inside the stage -------------------------------
    stage = zero - 1
    u = t
    start = zero
    # W and C (positions 6 and 7 of the order code unless named) have items only with cvt_stage
    for pos in tl.static_range(6 + 2 * CVS):
        n = _pick8((ORDER >> (4 * pos)) & 15, n0, n1, n2, n3, n4, n5, n6, n7)
        if t >= start:
            stage = zero + ((ORDER >> (4 * pos)) & 15)
            u = t - start
        start = start + n
    n_iou = _pick8(stage, np_i, no_i, nq_i * sq_i, nr_i, nt_i * st_i, ns_i, nw_i, nc_i, 6 + 2 * CVS)
    n_hyp = _pick8(stage, np_h, no_h, nq_h * sq_h, nr_h, nt_h * st_h, ns_h, nw_h, nc_h, 6 + 2 * CVS)
    mlp, lt = _split(u, n_iou, n_hyp)

    # ---- this MLP's tensors ---------------------------------------------------------------------------
    is_iou = mlp == 0
    j = tl.maximum(mlp - 1, 0)  # hypernetwork index (0 for the IoU MLP; unused there)
    D = _sel(is_iou, 1024, 256)
    KG = _sel(is_iou, 4, 32)
    g = _sel(is_iou, g_iou, g_hyp + j * 32)  # G[m, k] = g[m * ld_g + k]
    ld_g = _sel(is_iou, 4, 128)
    x = _sel(is_iou, x_iou, x_hyp + j * 256)  # X[m, c] = x[m * ld_x + c]
    ld_x = _sel(is_iou, 256, 1024)
    w_in = _sel(is_iou, w_in_iou, w_in_hyp + j * 65536)  # [D, 256]
    w_hid = _sel(is_iou, w_hid_iou, w_hid_hyp + j * 65536)  # [D, D]
    w_out = _sel(is_iou, w_out_iou, w_out_hyp + j * 8192)  # [KG, D]
    h1 = _pick5(mlp, h1_iou, h1_0, h1_1, h1_2, h1_3)
    h1r = _pick5(mlp, h1r_iou, h1r_0, h1r_1, h1r_2, h1r_3)
    h2 = _pick5(mlp, h2_iou, h2_0, h2_1, h2_2, h2_3)
    h2r = _pick5(mlp, h2r_iou, h2r_0, h2r_1, h2r_2, h2r_3)
    ws_off = _sel(is_iou, 0, M * 1024 + j * M * 256)
    col0 = _sel(is_iou, 0, 1024 + j * 256)  # this MLP's columns in the 2048-wide column-sum workspaces
    d2 = ws_d2 + ws_off  # [M, D]
    d1 = ws_d1 + ws_off  # [M, D]
    ncw = _sel(is_iou, NCW_I, NCW_H)  # conversion items of this MLP (W_hid, W_in)
    nci = _sel(is_iou, NCI_I, NCI_H)
    nz = _sel(is_iou, NZ_I, NZ_H)
    if CVS:  # P items of this MLP
        p_target = mt_p * tl.cdiv(D, PN) + nz
    else:  # (with the conversion items)
        p_target = mt_p * tl.cdiv(D, PN) + ncw + nci + nz
    w_target = ncw  # W items of this MLP (CVS)
    c_target = _sel(is_iou, nc_i, nc_h)  # C items of this MLP (CVS)
    dw_hid = _sel(is_iou, dw_hid_iou, dw_hid_hyp + j * 65536)
    dw_in = _sel(is_iou, dw_in_iou, dw_in_hyp + j * 65536)
    db_in = _sel(is_iou, db_in_iou, db_in_hyp + j * 256)
    # K = M range of an R / S item (RSS of them per tile; a range may be empty when M is small)
    rs_len = tl.cdiv(tl.cdiv(M, RSS), 16) * 16
    q_target = mt_q * tl.cdiv(D, QN)  # Q tiles of this MLP (with Q_ATOMIC: Q items, every split signals)
    if Q_ATOMIC:
        q_target = q_target * tl.cdiv(D, QKS)
    h1r16 = ws_h16 + ws_off  # fp16 copies (CVT_*), same layouts as the originals
    w_hid16 = _sel(is_iou, ws_w16, ws_w16 + 1048576 + j * 65536)
    w_in16 = _sel(is_iou, ws_i16, ws_i16 + 262144 + j * 65536)
    x16 = _sel(is_iou, ws_x16, ws_x16 + M * 256 + j * 256)

    # ---- the item ---------------------------------------------------------------------------------------
    if stage == 0:
        # P: D2 = (G @ W_out) * (H2 > 0)
        # (+ its column sums into ws_cs2[row tile], for db_hid)
        n_c = tl.cdiv(D, PN)
        n_tiles = mt_p * n_c
        if ((CVT_W or CVT_I) and not CVS) or RSS > 1:
            is_cv = lt >= n_tiles
        else:
            is_cv = False
        if is_cv:
            c = lt - n_tiles
            if c < ncw + nci:
                # conversion item: a contiguous block of CVE elements of W_hid (blocks first) or W_in -> fp16
                src = w_in
                dst = w_in16
                e0 = (c - ncw) * CVE
                if c < ncw:
                    src = w_hid
                    dst = w_hid16
                    e0 = c * CVE
                e = e0 + tl.arange(0, CVE)
                tl.store(dst + e, tl.load(src + e).to(tl.float16))
            else:
                # zero item (RSS > 1): a block of CVE elements of dW_hid (blocks first) or dW_in
                z = c - ncw - nci
                nzw = (D * D) // CVE
                dz = dw_in + (z - nzw) * CVE
                if z < nzw:
                    dz = dw_hid + z * CVE
                tl.store(dz + tl.arange(0, CVE), tl.zeros((CVE,), dtype=tl.float32))
        else:
            mt = lt // n_c
            off_r = mt * PM
            off_c = (lt % n_c) * PN
            rr = off_r + tl.arange(0, PM)
            cc = off_c + tl.arange(0, PN)
            msk = (rr < M)[:, None] & (cc < D)[None, :]
            offs = rr[:, None] * D + cc[None, :]
            pre2 = tl.load(h2 + offs, mask=msk, other=0.0)  # first: it does not depend on the product
            x_offs = rr[:, None] * ld_x + cc[None, :]
            x_msk = (rr < M)[:, None] & (cc < 256)[None, :]  # X, dx: [M, 256] (ld_x)
            if CVT_H and not CVS:
                h1r_v = tl.load(h1r + offs, mask=msk, other=0.0)
            if CVT_X and not CVS:
                x_v = tl.load(x + x_offs, mask=x_msk, other=0.0)
            acc_p, _ = _gemm_loop(
                g, ld_g, w_out, D, M, D, 0, KG, off_r, off_c, False, False, PM, PN, PK, PREC
            )
            v_p = tl.where(pre2 > 0, acc_p, 0.0)
            tl.store(d2 + offs, v_p.to(d2.dtype.element_ty), mask=msk)
            tl.store(ws_cs2 + mt * 2048 + col0 + cc, tl.sum(v_p, axis=0), mask=cc < D)
            if CVT_H and not CVS:
                tl.store(h1r16 + offs, h1r_v.to(tl.float16), mask=msk)
            if CVT_X and not CVS:
                tl.store(x16 + x_offs, x_v.to(tl.float16), mask=x_msk)
            if Q_ATOMIC and RSS > 1:
                if mt == 0:  # S items add their parts of db_in (D1's column sums)
                    tl.store(db_in + cc, tl.zeros((PN,), dtype=tl.float32), mask=cc < D)
            if Q_ATOMIC:
                # Q adds its split partials into D1 (fp32): zero it; dx likewise when T adds into it
                tl.store(d1 + offs, tl.zeros((PM, PN), dtype=d1.dtype.element_ty), mask=msk)
                if T_ATOMIC:
                    dx_z = _sel(is_iou, dx_iou, dx_hyp + j * 256)
                    tl.store(dx_z + x_offs, tl.zeros((PM, PN), dtype=tl.float32), mask=x_msk)
        _signal(cnt + (_CNT_P + mlp) * _LINE)
    elif stage == 1:
        # O: dW_out[k, n] = sum_m G[m, k] H2r[m, n]; db_out[k] = sum_m G[m, k]
        # (fp32-accurate: a tiny product whose K = M sum is where fp16 operands would cost the most)
        off_c = lt * ON
        # (O_FMA is a compile-time switch: without it, the code the table was measured with)
        if O_FMA and is_iou:
            _o_iou_fma(g, h2r, D, M, off_c, dw_out_iou, db_out_iou, ON, 32, 4)
        else:
            acc_o, gs = _o_loop(g, ld_g, h2r, D, KG, M, off_c, ON, OK)
            dw_out = _sel(is_iou, dw_out_iou, dw_out_hyp + j * 8192)
            db_out = _sel(is_iou, db_out_iou, db_out_hyp + j * 32)
            _store_tile(acc_o, dw_out, D, KG, D, 0, off_c, OM, ON)
            if off_c == 0:
                tl.store(db_out + tl.arange(0, 32), gs, mask=tl.arange(0, 32) < KG)
    elif stage == 2:
        # Q: D1 = (D2 @ W_hid) * (H1 > 0), one K range [k_lo, k_hi) of D per item
        nsplit = tl.cdiv(D, QKS)
        tile = lt // nsplit
        ks = lt % nsplit
        n_c = tl.cdiv(D, QN)
        off_r = (tile // n_c) * QM
        off_c = (tile % n_c) * QN
        k_lo = ks * QKS
        k_hi = tl.minimum(k_lo + QKS, D)
        rr = off_r + tl.arange(0, QM)
        cc = off_c + tl.arange(0, QN)
        msk = (rr < M)[:, None] & (cc < D)[None, :]
        offs = rr[:, None] * D + cc[None, :]
        if Q_RECOMP:
            acc_q = _q_recompute_loop(
                g, ld_g, w_out, h2, w_hid, D, KG, M, k_lo, k_hi, off_r, off_c, QM, QN, QBK, PREC
            )
        elif PRE:
            kq = k_lo + tl.arange(0, QKS)
            b_q = tl.load(
                w_hid + kq[:, None] * D + cc[None, :],
                mask=(kq < k_hi)[:, None] & (cc < D)[None, :],
                other=0.0,
            )
            pre1_q = tl.load(h1 + offs, mask=msk, other=0.0)
            _wait_for(cnt + (_CNT_P + mlp) * _LINE, p_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            a_q = tl.load(
                d2 + rr[:, None] * D + kq[None, :],
                mask=(rr < M)[:, None] & (kq < k_hi)[None, :],
                other=0.0,
                cache_modifier=".cg",
            )
            acc_q = _mma(a_q, b_q, tl.zeros((QM, QN), dtype=tl.float32), PREC)
        else:
            if Q_ATOMIC:  # every split item applies the mask: load it before waiting
                pre1_q = tl.load(h1 + offs, mask=msk, other=0.0)
            if CVS and CVT_W:  # W_hid's copy (stage W)
                _wait_for(cnt + (_CNT_W + mlp) * _LINE, w_target, NW, POLL1)
            _wait_for(cnt + (_CNT_P + mlp) * _LINE, p_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            # the fp16 copy of P's conversion items when CVT_W (a compile-time choice of the operand)
            acc_q, _ = _gemm_loop(
                d2, D, w_hid16 if CVT_W else w_hid, D, M, D, k_lo, k_hi, off_r, off_c, False, True,
                QM, QN, QBK, PREC, CVT_W,
            )  # fmt: skip
        done = nsplit == 1
        if Q_ATOMIC:
            # masked partial into D1 (fp32, zeroed by P; the mask commutes with the split-K sum)
            done = False
            v_qa = tl.where(pre1_q > 0, acc_q, 0.0)
            if nsplit > 1:
                tl.atomic_add(d1 + offs, v_qa, mask=msk, sem="relaxed")
            else:
                tl.store(d1 + offs, v_qa, mask=msk)
            _signal(cnt + (_CNT_Q + mlp) * _LINE)
        elif nsplit > 1:
            tile_g = _sel(is_iou, tile, nq_i + j * nq_h + tile)  # Q tiles of all MLPs, IoU first
            done, acc_q = _reduce_split(
                acc_q,
                ws_qp + tile_g * (SQ_MAX * QM * QN),
                cnt_tile + tile_g * _LINE,
                ks,
                nsplit,
                SQ_MAX,
                QM,
                QN,
            )
        if done:
            if (PRE and not Q_RECOMP) or Q_ATOMIC:
                pre1 = pre1_q
            else:
                pre1 = tl.load(h1 + offs, mask=msk, other=0.0)
            v_q = tl.where(pre1 > 0, acc_q, 0.0)
            tl.store(d1 + offs, v_q.to(d1.dtype.element_ty), mask=msk)
            tl.store(ws_cs1 + (tile // n_c) * 2048 + col0 + cc, tl.sum(v_q, axis=0), mask=cc < D)
            if T_ATOMIC and TKS < 1024:  # (TKS >= 1024: no MLP's T splits K, each T item stores its dx tile)
                if D > TKS:  # T splits this MLP's K and adds into dx (else its one item a tile stores dx)
                    # zero dx[rows of this tile, cols off_c .. off_c + QN] (inside 0..255)
                    dx_z = _sel(is_iou, dx_iou, dx_hyp + j * 256)
                    ld_dx_z = _sel(is_iou, 256, 1024)
                    z_msk = (rr < M)[:, None] & (cc < 256)[None, :]
                    tl.store(
                        dx_z + rr[:, None] * ld_dx_z + cc[None, :],
                        tl.zeros((QM, QN), dtype=tl.float32),
                        mask=z_msk,
                    )
            _signal(cnt + (_CNT_Q + mlp) * _LINE)
    elif stage == 3:
        # R: dW_hid[o, i] = sum_m D2[m, o] H1r[m, i]; db_hid[o] = sum_m D2[m, o]
        off_r, off_c, k_lo, k_hi = _rs_item(lt, RSS, D, RM, RN, rs_len, M)
        if SINGLE_K:  # all of K = M in one chunk: load H1r before waiting for D2
            b_r = _single_k_t(d2, D, h1r, D, D, D, M, off_r, off_c, RM, RN, RK)
            _wait_for(cnt + (_CNT_P + mlp) * _LINE, p_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            acc_r, _ = _finish_k_t(d2, D, b_r, D, M, off_r, RM, RN, RK, PREC)
        else:
            if CVS and CVT_H:  # H1r's copy (stage C)
                _wait_for(cnt + (_CNT_C + mlp) * _LINE, c_target, NW, POLL1)
            _wait_for(cnt + (_CNT_P + mlp) * _LINE, p_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            acc_r, _ = _gemm_loop(
                d2, D, h1r16 if CVT_H else h1r, D, D, D, k_lo, k_hi, off_r, off_c, True, True,
                RM, RN, RK, PREC, CVT_H,
            )  # fmt: skip
        if RSS > 1:  # dW_hid zeroed by the P stage's zero items
            rr_w = off_r + tl.arange(0, RM)
            cc_w = off_c + tl.arange(0, RN)
            tl.atomic_add(
                dw_hid + rr_w[:, None] * D + cc_w[None, :],
                acc_r,
                mask=(rr_w < D)[:, None] & (cc_w < D)[None, :],
                sem="relaxed",
            )
        else:
            _store_tile(acc_r, dw_hid, D, D, D, off_r, off_c, RM, RN)
        if (off_c == 0) & (k_lo == 0):  # db_hid from the P tiles' column sums
            db_hid = _sel(is_iou, db_hid_iou, db_hid_hyp + j * 256)
            rr_b = off_r + tl.arange(0, RM)
            tl.store(db_hid + rr_b, _col_partial_sums(ws_cs2, mt_p, col0, D, off_r, RM), mask=rr_b < D)
    elif stage == 4:
        # T: dx[m, c] = sum_i D1[m, i] W_in[i, c], one K range of D per item
        nsplit = tl.cdiv(D, TKS)
        tile = lt // nsplit
        ks = lt % nsplit
        n_c = tl.cdiv(256, TN)
        off_r = (tile // n_c) * TM
        off_c = (tile % n_c) * TN
        k_lo = ks * TKS
        k_hi = tl.minimum(k_lo + TKS, D)
        rr = off_r + tl.arange(0, TM)
        cc = off_c + tl.arange(0, TN)
        if PRE:
            kt = k_lo + tl.arange(0, TKS)
            b_t = tl.load(w_in + kt[:, None] * 256 + cc[None, :], mask=(kt < k_hi)[:, None], other=0.0)
            _wait_for(cnt + (_CNT_Q + mlp) * _LINE, q_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            a_t = tl.load(
                d1 + rr[:, None] * D + kt[None, :],
                mask=(rr < M)[:, None] & (kt < k_hi)[None, :],
                other=0.0,
                cache_modifier=".cg",
            )
            acc_t = _mma(a_t, b_t, tl.zeros((TM, TN), dtype=tl.float32), PREC)
        else:
            if CVS and CVT_I:  # W_in's copy (stage C)
                _wait_for(cnt + (_CNT_C + mlp) * _LINE, c_target, NW, POLL1)
            _wait_for(cnt + (_CNT_Q + mlp) * _LINE, q_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            acc_t, _ = _gemm_loop(
                d1, D, w_in16 if CVT_I else w_in, 256, M, 256, k_lo, k_hi, off_r, off_c, False, True,
                TM, TN, TBK, PREC, CVT_I,
            )  # fmt: skip
        dx = _sel(is_iou, dx_iou, dx_hyp + j * 256)
        ld_dx = _sel(is_iou, 256, 1024)
        dx_ptrs = dx + rr[:, None] * ld_dx + cc[None, :]
        dx_msk = (rr < M)[:, None] & (cc < 256)[None, :]
        if T_ATOMIC:
            if nsplit > 1:
                tl.atomic_add(dx_ptrs, acc_t, mask=dx_msk, sem="relaxed")
            else:
                tl.store(dx_ptrs, acc_t, mask=dx_msk)
        else:
            done = nsplit == 1
            if nsplit > 1:
                tile_g = _sel(is_iou, tile, nt_i + j * nt_h + tile)
                done, acc_t = _reduce_split(
                    acc_t,
                    ws_tp + tile_g * (ST_MAX * TM * TN),
                    cnt_tile + (nq_i + 4 * nq_h + tile_g) * _LINE,
                    ks,
                    nsplit,
                    ST_MAX,
                    TM,
                    TN,
                )
            if done:
                tl.store(dx_ptrs, acc_t, mask=dx_msk)
    elif (stage == 6) & CVS:
        # W (cvt_stage): a block of CVE elements of W_hid -> its fp16 copy
        e = lt * CVE + tl.arange(0, CVE)
        tl.store(w_hid16 + e, tl.load(w_hid + e).to(tl.float16))
        _signal(cnt + (_CNT_W + mlp) * _LINE)
    elif (stage == 7) & CVS:
        # C (cvt_stage): a block of CVE elements of W_in (blocks first), H1r [M, D] or X [M, 256] (ld_x) -> fp16
        e = tl.arange(0, CVE)
        # not `nci`: the factor CVS is a compile-time 0 without cvt_stage, where the build then drops these branches
        nci_m = _sel(is_iou, NCI_I, NCI_H) * CVS
        nch_m = _sel(is_iou, nch_i, nch_h)
        if lt < nci_m:
            e = lt * CVE + e
            tl.store(w_in16 + e, tl.load(w_in + e).to(tl.float16))
        elif lt < nci_m + nch_m:
            e = (lt - nci_m) * CVE + e
            ok = e < M * D
            tl.store(h1r16 + e, tl.load(h1r + e, mask=ok, other=0.0).to(tl.float16), mask=ok)
        else:
            e = (lt - nci_m - nch_m) * CVE + e
            ok = e < M * 256
            xo = (e // 256) * ld_x + e % 256
            tl.store(x16 + xo, tl.load(x + xo, mask=ok, other=0.0).to(tl.float16), mask=ok)
        _signal(cnt + (_CNT_C + mlp) * _LINE)
    else:
        # S: dW_in[i, c] = sum_m D1[m, i] X[m, c]; db_in[i] = sum_m D1[m, i]
        off_r, off_c, k_lo, k_hi = _rs_item(lt, RSS, 256, SM, SN, rs_len, M)
        if SINGLE_K:  # all of K = M in one chunk: load X before waiting for D1
            b_s = _single_k_t(d1, D, x, ld_x, D, 256, M, off_r, off_c, SM, SN, SK)
            _wait_for(cnt + (_CNT_Q + mlp) * _LINE, q_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            acc_s, cs_s = _finish_k_t(d1, D, b_s, D, M, off_r, SM, SN, SK, PREC)
        else:
            if CVS and CVT_X:  # X's copy (stage C)
                _wait_for(cnt + (_CNT_C + mlp) * _LINE, c_target, NW, POLL1)
            _wait_for(cnt + (_CNT_Q + mlp) * _LINE, q_target, NW, POLL1)
            if TRACE:
                cw = _clock(t)
            acc_s, cs_s = _gemm_loop(
                d1, D, x16 if CVT_X else x, ld_x, D, 256, k_lo, k_hi, off_r, off_c, True, True,
                SM, SN, SK, PREC, CVT_X, Q_ATOMIC,
            )  # fmt: skip
        if RSS > 1:  # dW_in zeroed by the P stage's zero items
            rr_w = off_r + tl.arange(0, SM)
            cc_w = off_c + tl.arange(0, SN)
            tl.atomic_add(
                dw_in + rr_w[:, None] * 256 + cc_w[None, :],
                acc_s,
                mask=(rr_w < D)[:, None] & (cc_w < 256)[None, :],
                sem="relaxed",
            )
        else:
            _store_tile(acc_s, dw_in, 256, D, 256, off_r, off_c, SM, SN)
        rr_b = off_r + tl.arange(0, SM)
        if Q_ATOMIC and RSS > 1:  # db_in: D1's column sums over this M range, into zeros (P)
            if off_c == 0:
                tl.atomic_add(db_in + rr_b, cs_s, mask=rr_b < D, sem="relaxed")
        elif (off_c == 0) & (k_lo == 0):  # db_in: D1's column sums (Q_ATOMIC) or the sum of Q's tile sums
            if Q_ATOMIC:
                tl.store(db_in + rr_b, cs_s, mask=rr_b < D)
            else:
                tl.store(db_in + rr_b, _col_partial_sums(ws_cs1, mt_q, col0, D, off_r, SM), mask=rr_b < D)

    if TRACE:
        tl.debug_barrier()
        ce = _clock(t)
        g1 = _now(t)
        rec = trace + t.to(tl.int64) * 6
        tl.store(rec + 0, g0)
        tl.store(rec + 1, g1)
        tl.store(rec + 2, cw - c0)
        tl.store(rec + 3, ce - c0)
        tl.store(rec + 4, (stage + 16 * mlp + 256 * _smid(t)).to(tl.int64))
        tl.store(rec + 5, lt.to(tl.int64))


# ------------------------------------------------------------------------------------------ host code

_COUNTERS: dict[torch.device, torch.Tensor] = {}
_PARITY: dict[torch.device, int] = {}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tile_counts(m: int, cfg: Config) -> tuple[int, int]:
    """Split-K tiles (all MLPs) of Q and of T: the per-tile counters and partial workspaces."""
    qm, qn, _, _ = cfg.q
    tm, tn, _, _ = cfg.t
    nq = _cdiv(m, qm) * (_cdiv(D_IOU, qn) + N_HYP * _cdiv(D_HYP, qn))
    nt = (1 + N_HYP) * _cdiv(m, tm) * _cdiv(C_IN, tn)
    return nq, nt


def _counters(device: torch.device, n_tiles: int) -> torch.Tensor:
    """The per-device int32 counter buffer: two headers and >= n_tiles tile counters, zero where unused.

    Grown (a fresh zero buffer) when a call needs more tile counters; every call leaves the tile counters
    and the next call's header at zero.
    """
    buf = _COUNTERS.get(device)
    if buf is None or buf.numel() < _CNT_TILES + n_tiles * 32:
        size = _CNT_TILES + max(n_tiles, 1024) * 32
        if buf is not None:
            size = max(size, 2 * buf.numel())
        buf = torch.zeros(size, dtype=torch.int32, device=device)
        _COUNTERS[device] = buf
    return buf


def _stage_sizes(m: int, cfg: Config) -> dict[str, int]:
    """Items per stage, IoU and the four hypernetworks together."""
    (pm, pn), (on, _), (qm, qn, qks, _) = cfg.p, cfg.o, cfg.q
    (rm, rn, _), (tm, tn, tks, _), (sm, sn, _) = cfg.r, cfg.t, cfg.s
    fl = cfg.flags(m)
    rss = fl["RSS"]
    blk = cfg.cvt_block
    # weight elements copied to fp16 (IoU, one hypernetwork): W_hid, W_in
    w_i, w_h = (D_IOU * D_IOU, D_HYP * D_HYP) if fl["CVT_W"] else (0, 0)
    i_i, i_h = (D_IOU * C_IN, D_HYP * C_IN) if fl["CVT_I"] else (0, 0)
    # P's conversion and zero items' elements (the copies are stages W and C's with cvt_stage)
    cv_i, cv_h = (0, 0) if cfg.cvt_stage else (w_i + i_i, w_h + i_h)
    if rss > 1:  # zero items: dW_hid and dW_in
        cv_i += D_IOU * D_IOU + D_IOU * C_IN
        cv_h += D_HYP * D_HYP + D_HYP * C_IN

    def both(ti: int, th: int, si: int = 1, sh: int = 1) -> int:
        return ti * si + N_HYP * th * sh

    w_items = c_items = 0
    if cfg.cvt_stage:  # the copies in stages W (W_hid) and C (W_in, H1r, X)
        w_items = both(w_i // blk, w_h // blk)
        c_items = both(i_i // blk, i_h // blk)
        c_items += both(_cdiv(m * D_IOU, blk), _cdiv(m * D_HYP, blk)) if fl["CVT_H"] else 0
        c_items += both(_cdiv(m * C_IN, blk), _cdiv(m * C_IN, blk)) if fl["CVT_X"] else 0

    return {
        "P": both(
            _cdiv(m, pm) * _cdiv(D_IOU, pn) + cv_i // blk,
            _cdiv(m, pm) * _cdiv(D_HYP, pn) + cv_h // blk,
        ),
        "O": both(_cdiv(D_IOU, on), _cdiv(D_HYP, on)),
        "Q": both(
            _cdiv(m, qm) * _cdiv(D_IOU, qn),
            _cdiv(m, qm) * _cdiv(D_HYP, qn),
            _cdiv(D_IOU, qks),
            _cdiv(D_HYP, qks),
        ),
        "R": both(_cdiv(D_IOU, rm) * _cdiv(D_IOU, rn), _cdiv(D_HYP, rm) * _cdiv(D_HYP, rn), rss, rss),
        "T": both(
            _cdiv(m, tm) * _cdiv(C_IN, tn),
            _cdiv(m, tm) * _cdiv(C_IN, tn),
            _cdiv(D_IOU, tks),
            _cdiv(D_HYP, tks),
        ),
        "S": both(_cdiv(D_IOU, sm) * _cdiv(C_IN, sn), _cdiv(D_HYP, sm) * _cdiv(C_IN, sn), rss, rss),
        "W": w_items,
        "C": c_items,
    }


def _check(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: expected float32, got {t.dtype}")
    return t if t.is_contiguous() else t.contiguous()


def n_items(m: int, cfg: Config) -> int:
    """Programs (work items) of one launch."""
    return sum(_stage_sizes(m, cfg).values())


def launch(
    inputs: list[torch.Tensor], outputs: list[torch.Tensor], cfg: Config, trace: torch.Tensor | None = None
) -> None:
    """Inputs and outputs in definition order (36 and 14 tensors); writes every output element.

    trace: an int64 tensor of n_items(m, cfg) * 6 elements makes a TRACE build record per item (tune.py).
    """
    (
        g_iou,
        g_hyp,
        x_iou,
        x_hyp,
        w_in_iou,
        _b_in_iou,
        w_hid_iou,
        _b_hid_iou,
        w_out_iou,
        _b_out_iou,
        h1_iou,
        h1r_iou,
        h2_iou,
        h2r_iou,
        w_in_hyp,
        _b_in_hyp,
        w_hid_hyp,
        _b_hid_hyp,
        w_out_hyp,
        _b_out_hyp,
        *hyper_acts,  # hidden1 x4, hidden1_relu x4, hidden2 x4, hidden2_relu x4
    ) = inputs
    m = g_iou.numel() // KG_IOU
    ins = [g_iou, g_hyp, x_iou, x_hyp, w_in_iou, w_hid_iou, w_out_iou, h1_iou, h1r_iou, h2_iou, h2r_iou]
    ins += [w_in_hyp, w_hid_hyp, w_out_hyp, *hyper_acts]
    ins = [_check(t, f"input {i}") for i, t in enumerate(ins)]
    for i, t in enumerate(outputs):
        if not t.is_contiguous() or t.dtype != torch.float32:
            raise TypeError(f"output {i}: expected a contiguous float32 tensor")
    device = g_iou.device
    ws_elems = max(1, m * (D_IOU + N_HYP * D_HYP))
    # With fp16 operands the MMAs round D1/D2 to fp16 anyway: storing them so halves their traffic (only
    # the bias sums see the rounding, ~1e-4 relative).
    ws_dtype = torch.float16 if cfg.precision == "fp16" else torch.float32
    ws_d2 = torch.empty(ws_elems, dtype=ws_dtype, device=device)
    # q_atomic: Q adds fp32 partials into D1 (T and S round it to fp16 in registers)
    ws_d1 = torch.empty(ws_elems, dtype=torch.float32 if cfg.q_atomic else ws_dtype, device=device)
    fl = cfg.flags(m)

    def half(n: int, used: bool) -> torch.Tensor:
        return torch.empty(max(1, n) if used else 1, dtype=torch.float16, device=device)

    ws_h16 = half(ws_elems, fl["CVT_H"])
    ws_w16 = half(D_IOU * D_IOU + N_HYP * D_HYP * D_HYP, fl["CVT_W"])
    ws_i16 = half(D_IOU * C_IN + N_HYP * D_HYP * C_IN, fl["CVT_I"])
    ws_x16 = half(m * C_IN * (1 + N_HYP), fl["CVT_X"])
    nq, nt = _tile_counts(m, cfg)
    (qm, qn, qks, _), (tm, tn, tks, _) = cfg.q, cfg.t
    ws_qp = torch.empty(max(1, nq * _cdiv(D_IOU, qks) * qm * qn), dtype=torch.float32, device=device)
    tp_elems = 1 if cfg.t_atomic else nt * _cdiv(D_IOU, tks) * tm * tn
    ws_tp = torch.empty(max(1, tp_elems), dtype=torch.float32, device=device)
    ws_cs2 = torch.empty(_cdiv(m, cfg.p[0]) * 2048, dtype=torch.float32, device=device)
    ws_cs1 = torch.empty(_cdiv(m, qm) * 2048, dtype=torch.float32, device=device)
    buf = _counters(device, nq + nt)
    # this call's counter set; the flip waits for the launch to be issued: a launch that raises (e.g. out of
    # shared memory) must not leave the next call on the set this one would have zeroed (the next call would
    # start from the previous call's counts and spin on targets it never reaches: a GPU hang, session 12)
    par = _PARITY.get(device, 0)
    grid = (n_items(m, cfg),)
    if trace is not None and trace.numel() < grid[0] * 6:
        raise ValueError(f"trace: needs {grid[0] * 6} int64 elements, got {trace.numel()}")
    _fused_bwd_kernel[grid](
        *ins,
        *outputs,
        ws_d2,
        ws_d1,
        ws_qp,
        ws_tp,
        ws_cs2,
        ws_cs1,
        ws_h16,
        ws_w16,
        ws_i16,
        ws_x16,
        buf[par * _HDR :],
        buf[(1 - par) * _HDR :],
        buf[_CNT_TILES:],
        buf if trace is None else trace,
        m,
        PM=cfg.p[0],
        PN=cfg.p[1],
        ON=cfg.o[0],
        OK=cfg.o[1],
        QM=cfg.q[0],
        QN=cfg.q[1],
        QKS=cfg.q[2],
        QBK=cfg.q[3],
        RM=cfg.r[0],
        RN=cfg.r[1],
        RK=cfg.r[2],
        TM=cfg.t[0],
        TN=cfg.t[1],
        TKS=cfg.t[2],
        TBK=cfg.t[3],
        SM=cfg.s[0],
        SN=cfg.s[1],
        SK=cfg.s[2],
        Q_RECOMP=cfg.q_recompute,
        PRE=cfg.prefetch,
        T_ATOMIC=cfg.t_atomic,
        SINGLE_K=fl["SINGLE_K"],  # else the chunked K loops (any M)
        ORDER=cfg.order_code(),
        PREC=cfg.precision,
        NW=cfg.num_warps,
        POLL1=cfg.poll_one,
        Q_ATOMIC=cfg.q_atomic,
        CVT_W=fl["CVT_W"],
        CVT_I=fl["CVT_I"],
        CVT_H=fl["CVT_H"],
        CVT_X=fl["CVT_X"],
        CVE=cfg.cvt_block,
        RSS=fl["RSS"],
        CVS=cfg.cvt_stage,
        O_FMA=cfg.o_iou_fma,
        TRACE=trace is not None,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
        **({} if cfg.maxnreg is None else {"maxnreg": cfg.maxnreg}),
    )
    _PARITY[device] = 1 - par


N_INPUTS = 36  # the definition's inputs; the 14 outputs follow them in run()'s parameters


def run(
    grad_iou_scores,
    grad_hyper_weights,
    iou_token_out,
    mask_tokens_out,
    iou_proj_in_weight,
    iou_proj_in_bias,
    iou_hidden_weight,
    iou_hidden_bias,
    iou_proj_out_weight,
    iou_proj_out_bias,
    iou_hidden1,
    iou_hidden1_relu,
    iou_hidden2,
    iou_hidden2_relu,
    hyper_proj_in_weights,
    hyper_proj_in_biases,
    hyper_hidden_weights,
    hyper_hidden_biases,
    hyper_proj_out_weights,
    hyper_proj_out_biases,
    hyper_hidden1_0,
    hyper_hidden1_1,
    hyper_hidden1_2,
    hyper_hidden1_3,
    hyper_hidden1_relu_0,
    hyper_hidden1_relu_1,
    hyper_hidden1_relu_2,
    hyper_hidden1_relu_3,
    hyper_hidden2_0,
    hyper_hidden2_1,
    hyper_hidden2_2,
    hyper_hidden2_3,
    hyper_hidden2_relu_0,
    hyper_hidden2_relu_1,
    hyper_hidden2_relu_2,
    hyper_hidden2_relu_3,
    grad_iou_token_out,
    grad_mask_tokens_out,
    grad_iou_proj_in_weight,
    grad_iou_proj_in_bias,
    grad_iou_hidden_weight,
    grad_iou_hidden_bias,
    grad_iou_proj_out_weight,
    grad_iou_proj_out_bias,
    grad_hyper_proj_in_weights,
    grad_hyper_proj_in_biases,
    grad_hyper_hidden_weights,
    grad_hyper_hidden_biases,
    grad_hyper_proj_out_weights,
    grad_hyper_proj_out_biases,
) -> None:
    """Entry point (destination-passing style): inputs, then outputs, in definition order."""
    arguments = list(locals().values())  # the parameters above, in order
    inputs, outputs = arguments[:N_INPUTS], arguments[N_INPUTS:]
    m = grad_iou_scores.numel() // KG_IOU
    launch(inputs, outputs, pick_config(m))
