"""SAM-HQ ViT-B block with 14x14 window attention (task 077) in Triton, matmuls on the tensor cores.

Maths, per image b and real token t = (r, c) (rows of x in image layout, [B*H*W, 768]):
    a          = LN1(x), zero-padded to Hp x Wp (multiples of 14)
    q, k, v    = a Wqkv^T + bqkv                  padded tokens: q = k = v = the bias, exactly
    s[i, j]    = q_i.k_j / 8 + q_i.Rh[hi - hj + 13] + q_i.Rw[wi - wj + 13]     i, j in one 14x14 window
    o_i        = softmax_j(s[i, :]) v             12 heads of 64; padded keys take part, padded queries
                                                  are cropped, so they are never computed
    x1         = x + o Wp^T + bp
    y          = x1 + W2 gelu_erf(W1 LN2(x1) + b1) + b2

Everything runs on the B*H*W real tokens in image layout; windows are gathered by the attention kernel,
so no padded or windowed copy of anything exists. Per chunk of whole 14-row bands (contiguous rows),
T tokens, seven launches, all prepared before the first one is issued (fp16, COMPACT_LAYOUT):
    1. LN1(x), a zero row          -> a   [T + 1, 768]  fp16, in the chunk's rows of the fp32 output (free
                                                        until 4); chunk 0 also converts the weights
    2. a Wqkv^T + bqkv             -> qkv [T + 1, 2304] fp16; row T = the padded token's q, k, v
    3. window attention(qkv)       -> o = qkv[:, :768]  over q (each q is read by one item, then replaced);
                                                     in Gluon on sm_90 (GLUON_ATTENTION), tl elsewhere
    4. x + o Wp^T + bp + b2        -> out [T, 768]   fp32 (x1 + b2 lives in the output)
    5. LN2(out - b2)               -> a2  [T, 768]   at the start of qkv's space (qkv is dead after 4)
    6. gelu(a2 W1^T + b1)          -> h   [T, 3072]  after a2 in qkv's space; the GELU fit in packed fp16 on a
                                                     GPU (GELU_F16X2), in fp32 in the interpreter
    7. out + h W2^T                -> out            in place, by cuBLAS (torch.addmm, fp16 operands, fp32
                                                     result; MLP2_GEMM). With MLP2_GEMM "triton": 4 adds bp
                                                     only, 5 is LN2(out), 7 a Triton GEMM adding b2
On sm_90 with Gluon, 2, 4 and 6 (6 from GLUON_GEMM_MIN_ROWS rows) are warp-specialized Gluon GEMMs
(GLUON_GEMM: `_linear_gluon_kernel`, `_linear_gluon_residual_pp_kernel`), Triton GEMMs elsewhere.
With the MLP split (plan_scratch), 6 and 7 run per row sub-chunk (h [T / 2, 3072]: a2 + h fit in qkv's
space, 4.5 KB of scratch per chunk token). tf32 (and a pointer-GEMM projection) keep a separate `a`
buffer [T + 1, 768] for LN1's rows, o and LN2's rows, and h in qkv's space.

Memory: everything a call allocates (chunk buffers + the fp16 weight copies) stays within
max(WORKSPACE_RATIO x the bytes of x, MIN_WORKSPACE_BYTES) (plan_scratch; one band per chunk at least).

Precision: "fp16" (default) rounds only matmul operands to fp16 (10-bit mantissa like TF32, twice the tensor
rate): the intermediates a, qkv, o, h, which only feed matmuls, are stored in fp16; LayerNorm, softmax,
biases, residuals and every accumulator are fp32, except mlp1's GELU on a GPU, which evaluates its fit on
fp16(a2 W1^T + b1) in fp16 arithmetic (h is fp16 anyway; its rms error 1.5x that of rounding alone). "tf32" keeps fp32 intermediates and uses
tl.dot(input_precision="tf32"). The rel-pos bias enters the logits unrounded: in the tl kernels through a
one-hot matmul (BIAS_MODE 2) as an fp16 hi + lo pair, in the Gluon attention as the fp32 start of the
q.k accumulator.

Window attention layout: a window's 14x14 tokens sit in a 16x16 slot grid, slot = 16 * row + col, so
the key slots of a block form whole window rows and the decomposed bias is a broadcast
bias[i, (kh, kw)] = A_h[i, kh] + A_w[i, kw], with A_h[i, kh] = q_i.Rh[qh_i - kh + 13] picked from
T_h = q Rh^T [BM, 32] by a small gather. Slots with row or column >= 14 get weight 0; window tokens
outside the image are the zero-padded ones (k = k-bias, v = v-bias: row T of qkv).
"""

from __future__ import annotations

import bisect
import functools
import inspect
import os
import struct
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

HIDDEN = 768
HEADS = 12
HEAD_DIM = 64
WINDOW = 14
MLP_DIM = 3072
QKV_DIM = 3 * HIDDEN
REL_SIZE = 2 * WINDOW - 1  # 27 relative offsets per axis
SLOTS = 256  # 16 x 16 slot grid per window (196 used)

#: "fp16" (fp16 matmul operands, fp32 accumulation) or "tf32" (fp32 operands, TF32 tensor cores).
OPERAND_PRECISION = "fp16"

#: GEMM launch configurations: (kind, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages[, CTAs/SM]).
#: kind "ptr": pointer loads, one tile per program; "tma": TMA loads, one tile per program;
#: "tma_persistent": TMA loads, CTAs/SM x #SM programs looping over tiles, one flattened pipeline.
#: N (2304, 768, 3072) must be a multiple of BLOCK_N and K (768, 3072) of BLOCK_K.
GEMM_CONFIGS: dict[str, dict[str, tuple]] = {
    "fp16": {  # tune.py's per-stage winners at 2 x 256 x 256 on the H200 (2026-11-29; mlp2: session 3)
        "qkv": ("tma_persistent", 128, 256, 64, 8, 8, 3, 1),
        "proj": ("tma", 128, 128, 64, 8, 4, 3),
        "mlp1": ("tma_persistent", 128, 256, 64, 8, 8, 3, 1),
        "mlp2": ("tma", 128, 256, 64, 8, 8, 4),  # 4 stages: 1.023 ms against 1.066 with 3 (604 TFLOP/s)
    },
    "tf32": {
        "qkv": ("ptr", 128, 256, 32, 8, 8, 3),
        "proj": ("ptr", 128, 128, 32, 8, 8, 3),
        "mlp1": ("ptr", 128, 128, 32, 8, 8, 3),
        "mlp2": ("ptr", 128, 128, 32, 8, 8, 3),
    },
}
#: Window attention. ("persistent", BLOCK_M query slots, BLOCK_N key slots, BIAS_MODE, num_warps, STAGES,
#: CTAs/SM): fp16 only, programs loop over (window, query tile, head) items with pipelined loads.
#: (BLOCK_M, BLOCK_N, BIAS_MODE, num_warps, num_stages): one program per item (fp16 or tf32).
#: The rel-pos bias reaches the logits through a one-hot matmul on the tensor cores: BIAS_MODE 2 with the
#: bias as fp16 hi + lo (exact to ~2^-22); 3 hi only (the bias rounded to fp16).
ATTN_CONFIGS: dict[str, tuple] = {
    "fp16": ("persistent", 128, 256, 2, 8, 2, 1),
    "tf32": (128, 64, 2, 8, 1),
}
#: fp16 on sm_90 (H200, H100) where Triton has Gluon: the warp-specialized Gluon attention ("gluon", consumer
#: registers, loader registers) instead of ATTN_CONFIGS["fp16"], which stays for every other GPU
#: (B200: sm_100 has no wgmma), the interpreter and tune.py's attention search. None: the tl kernel everywhere.
GLUON_ATTENTION: tuple | None = ("gluon", 232, 40)
#: The Gluon attention's two consumers issue their q.k products (1), and also their P V products (2), in turns
#: (FA3's ping-pong: one consumer's softmax and gather beside the other's products); 0: each issues as soon as it is
#: ready. Session 26: 2 took 0.6-2.3 % off the block (#6, #12, #13, #16); 1 alone was slower.
GLUON_ATTENTION_PINGPONG = 2
#: The Gluon attention's row sums of p (the softmax denominators) on the tensor cores: per warp, mma.sync products of
#: its rows of the fp16 p (the P V product's A operand, already in registers) with ones, issued while P V runs,
#: instead of ~112 FADDs per thread and tile; the sums are then those of the weights P V uses. 1: one chain of 16
#: mma.sync per tile; 2: two chains of 8 (the key halves); 0: fp32 sums of p in registers (until session 27).
GLUON_ATTENTION_LSUM_MMA = 2
#: The Gluon attention's bias columns A_h, A_w (1, since session 31): A_h from per-tile tables of Rh laid out so that
#: the gather indices are warp-uniform (one shuffle a value), A_w by one shuffle a value between paired lanes of a
#: quad, each lane first picking the register its partner needs (`_ga_aw_shuffle`); the same bias bit for bit, ~130
#: fewer instructions per consumer thread and tile, 0.6-1.2 % off the block. 0: one `gl.gather` over [T_h | T_w]
#: and two layout conversions (until session 31).
GLUON_ATTENTION_BIAS_SHUFFLE = 1
#: The Gluon attention's consumers skip the products of a query tile whose four window rows all lie below the
#: image's last row (the bottom band of windows where H % 14 is small: 10 % of the tiles at 64 x 64, 7.5 % at
#: 128 x 128), keeping the barriers' and the turns' counts; the tile's o stores are masked off anyway. 1: on (since
#: session 60: official A/Bs on an H100, both orders, 0.8-2.3 % faster on the 64 x 64 workloads and #13, 0.3 % and
#: 1.0 % on the geomean); 0: every tile computed.
GLUON_ATTENTION_SKIP_PAD = 1
#: fp16 on sm_90 with Gluon: the GEMMs of the stages named here as warp-specialized Gluon GEMMs (qkv, mlp1:
#: `_linear_gluon_kernel`, ("gluon", consumer registers, epilogue registers, loader registers, rows per epilogue
#: pass); proj: `_linear_gluon_residual_pp_kernel`, ("gluon_pp", the same registers, BK)) where a launch has at
#: least GLUON_GEMM_MIN_ROWS[stage] rows, the Triton GEMMs of GEMM_CONFIGS elsewhere; None: Triton everywhere.
#: H200 (session 25, CUDA events, L2 flushed): qkv 0.170 against 0.179 ms at 32768 rows, 0.662 against 0.686 at
#: 131072; mlp1 0.245 against 0.261 at 32768, but 0.040 against 0.037 at 4097. The projection in ping-pong since
#: session 30 (one launch, 65536 rows, us): 190.0 at BK 64, 196.8 at 32, 311.1 at 16, against 205.9 for the
#: 128 x 128 form whose two warpgroups shared each tile (and cuBLAS in place 187.5).
GLUON_GEMM: dict[str, tuple] | None = {
    "qkv": ("gluon", 216, 80, 80, 16),
    "mlp1": ("gluon", 216, 80, 80, 16),
    "proj": ("gluon_pp", 216, 80, 80, 64),
}
GLUON_GEMM_MIN_ROWS: dict[str, int] = {"qkv": 0, "mlp1": 8192, "proj": 0}
#: The fp16 Gluon GEMM's epilogue stores its rows from registers (16-byte stores) instead of writing them back to
#: shared memory for a TMA store (session 25, measured below).
GLUON_GEMM_DIRECT_STORE = True
#: The next chunk's LayerNorm1 rows by an extra warp of this chunk's Gluon GEMMs (qkv, mlp1), as many as
#: ln_capacity gives them, instead of in its own launch (an HBM-bound pass beside compute-bound ones; session 28:
#: 0.2-1.0 % in A/Bs); the rest, and the first chunk's LayerNorm1 (with the weight conversion), keep a launch.
GLUON_GEMM_LN_NEXT = True
#: ln_capacity: a GEMM launch's LayerNorm warps busy for this share of its time, estimated at this rate, at this
#: many us a row (H200, session 28: ~0.54 us a row alone, ~1 us beside the GEMM's tiles with PARAMS 0; session 29:
#: PARAMS 1 rows 8-17 % cheaper, and 0.65 here instead of 0.8 faster on 6 of 7 workloads in an A/B).
GLUON_GEMM_LN_LOAD = 0.6
GLUON_GEMM_LN_TFLOPS = 650.0
GLUON_GEMM_LN_ROW_US = 0.65
#: The LayerNorm warp's ring: 256-column fp32 pieces of shared memory (1 KB each; the GEMM leaves 18 KB).
GLUON_GEMM_LN_PIECES = 16
#: Where the LayerNorm warp keeps the LayerNorm weight and bias (_gg_layernorm_rows): 0 the weight in registers, the
#: bias loaded per row (session 28's form); 1 the bias in the ring's spare pieces; 2 both there. Session 29 (one
#: launch, 65536 rows beside a 65537- / 16385-row qkv GEMM): 0 493 / 350 us, 1 451 / 291, 2 461 / 294.
GLUON_GEMM_LN_PARAMS = 1
#: The CPU path (interpreter; `solbench build`'s recording on meta tensors) plans for the GPU this environment
#: variable names (the harness sets it per architecture it builds for).
TARGET_ARCH_ENV = "SOLBENCH_TARGET_ARCH"
#: LayerNorm: (rows per program, num_warps).
LN_CONFIG: tuple[int, int] = (4, 4)
#: Elements per program of the fp32 -> fp16 weight conversion (divides every weight's size).
CVT_BLOCK = 8192
#: Convert the weights inside the first LayerNorm launch (False: torch .to() before it, four launches).
FUSED_WEIGHT_CONVERSION = True
#: fp16 weight copies (Wqkv, Wp, W1, W2), made on every call in the fp16 path: 7,077,888 elements.
WEIGHT_ELEMENTS = QKV_DIM * HIDDEN + HIDDEN * HIDDEN + 2 * MLP_DIM * HIDDEN
#: Scratch rule: everything one call allocates (the fp16 weight copies included) stays within
#: max(WORKSPACE_RATIO x the bytes of x, MIN_WORKSPACE_BYTES). The floor, twice the fp16 weight copy
#: (27 MiB), only matters for inputs below 9216 tokens (none of the official workloads).
#: 1.1 ("about one input"): 2 chunks with the MLP split instead of 3 on most workloads; on the H200 (2026-11-29)
#: 4.49 ms geomean against 4.57 ms at 1.0 and 4.14 ms with the old 512 MiB minimum (up to 2.8x the input).
WORKSPACE_RATIO = 1.1
MIN_WORKSPACE_BYTES = 2 * WEIGHT_ELEMENTS * 2
#: The MLP of a chunk over row sub-chunks (a smaller h buffer: 6 KB of fp16 scratch per chunk token instead
#: of 7.5 KB, for 2 more launches per chunk): "auto" (when it gives fewer launches), "never", "always".
MLP_SPLIT = "auto"
#: fp16 buffer layout without the `a` buffer (session 3): LN1 writes its fp16 rows into the chunk's rows of
#: the fp32 output (free until the projection writes x1 there), the attention writes o over q in the qkv
#: rows (each q is read by one item only), and after the projection LN2's rows and the MLP's h share the
#: qkv space (LN2 [T, 768] + h [T / 2, 3072] <= qkv [T + 1, 2304]). Scratch per chunk token: 4.5 KB with
#: the MLP in 2 sub-chunks (6 KB before), 7.5 KB without. Needs TMA kinds for the projection (strided A).
COMPACT_LAYOUT = True

EPILOGUE_BIAS = 0  # c = acc + bias
EPILOGUE_GELU = 1  # c = gelu_erf(acc + bias), erf GELU by a branch-free fit (4e-7 absolute)
EPILOGUE_GELU_LIBDEVICE = 3  # the same through libdevice erff
EPILOGUE_RESIDUAL = 2  # c = (residual + bias) + acc, fp32; residual may be c itself
EPILOGUE_ACCUMULATE = 4  # split-K: c += acc (+ bias from split 0) by fp32 atomics; c holds the residual
#: The MLP up-projection's epilogue: EPILOGUE_GELU or EPILOGUE_GELU_LIBDEVICE.
GELU_EPILOGUE = EPILOGUE_GELU
#: EPILOGUE_GELU with an fp16 output, on a GPU (and in a build's recording): the fit in packed fp16 arithmetic
#: (`_gelu_f16x2`: two elements per instruction, inline PTX; the interpreter cannot run it and keeps `_gelu`).
#: H200 (session 23): mlp1 1.018 against 1.052 ms at 131072 rows (-3.3 %), the block -1.2 % (A/B, official
#: timer); h's rms error 2.98e-4 against 1.95e-4 (the pre-activation rounded to fp16 first), worst 1.06 of atol.
GELU_F16X2 = True
#: erfc(z) = exp2(z P(min(z, GELU_ZMAX))): P's coefficients, highest degree first (see _gelu, which spells them out)
GELU_FIT = (
    -0.0027611238655430755,
    0.02879487759679611,
    -0.14749295110672542,
    -0.9191916888486517,
    -1.6277605770043662,
)
GELU_ZMAX = 3.92
#: `_gelu_f16x2` as a program on f16x2 registers: (operation, destination, sources...), x the input, y the
#: output; a float source is a constant (both halves). Turned into PTX by `gelu_f16x2_ptx`; the CPU tests run
#: the same program in numpy's fp16 (tests/test_kernel_077.py). gelu = max(x, 0) - z exp2(z P(zc) - 1/2) with
#: z = |x| / sqrt(2): x - x erfc / 2 for x >= 0, x erfc / 2 below.
GELU_F16X2_PROGRAM = (
    ("abs", "a", "x"),
    ("mul", "z", "a", 0.7071067811865476),
    ("min", "c", "z", GELU_ZMAX),
    ("fma", "p", "c", GELU_FIT[0], GELU_FIT[1]),
    ("fma", "p", "p", "c", GELU_FIT[2]),
    ("fma", "p", "p", "c", GELU_FIT[3]),
    ("fma", "p", "p", "c", GELU_FIT[4]),
    ("fma", "p", "z", "p", -0.5),
    ("ex2", "p", "p"),
    ("mul", "z", "z", "p"),
    ("max", "a", "x", 0.0),
    ("sub", "y", "a", "z"),
)
_F16X2_OPS = {
    "mul": "mul.rn.f16x2",
    "min": "min.f16x2",
    "max": "max.f16x2",
    "fma": "fma.rn.f16x2",
    "sub": "sub.rn.f16x2",
    "ex2": "ex2.approx.f16x2",
}


def gelu_f16x2_ptx(program=GELU_F16X2_PROGRAM) -> str:
    """The PTX of an f16x2 program for `tl.inline_asm_elementwise` (pack 2: $1 holds two fp16 inputs, $0 the two
    outputs). Constants are splat into both halves and moved into k0, k1 (PTX's f16x2 operations take registers)."""
    lines, regs = [], {"x": "$1", "y": "$0"}
    for op, dst, *srcs in program:
        regs.setdefault(dst, f"r{dst}")
        operands = []
        for src in srcs:
            if isinstance(src, float):
                k = f"k{sum(o.startswith('k') for o in operands)}"  # the op's first or second constant
                bits = struct.unpack("<H", struct.pack("<e", src))[0]  # fp16, rounded to nearest even
                lines.append(f"mov.b32 {k}, 0x{bits << 16 | bits:08X};")
                operands.append(k)
            else:
                operands.append(regs[src])
        if op == "abs":
            lines.append(f"and.b32 {regs[dst]}, {operands[0]}, 0x7FFF7FFF;")
        else:
            lines.append(f"{_F16X2_OPS[op]} {regs[dst]}, {', '.join(operands)};")
    names = sorted({r for r in regs.values() if not r.startswith("$")} | {"k0", "k1"})
    return "{ .reg .b32 " + ", ".join(names) + "; " + " ".join(lines) + " }"


_GELU_F16X2_PTX = tl.constexpr(gelu_f16x2_ptx())
_LOG2E = 1.4426950408889634
#: Programmatic dependent launch between the call's kernels (GPU only; see _pdl_enter): 0 off, 1 each kernel
#: waits for the previous one (the next launches as this one's programs exit), 2 also lets the next kernel
#: launch as soon as all of this one's programs have started. H200 (session 7, official timer, two interleaved
#: rounds): 1 is 1-3 % faster than 0 on #16, #2, #5, and level or faster on #4, #12; 2 is 1-2 % slower than 1
#: on the large workloads (the next kernel's waiting programs take SM resources early).
PDL = 1
#: Split-K of the in-place residual GEMM (the MLP down-projection, K = 3072): "auto" picks the number of K
#: splits (dividing K / BLOCK_K, at most SPLIT_K_MAX) that minimises waves x (K steps per split +
#: SPLIT_K_OVERHEAD) over the SMs, so that a row sub-chunk of a few thousand tokens fills more than one partial
#: wave; each split adds its partial into c with fp32 atomics (EPILOGUE_ACCUMULATE). An int forces that many
#: splits; 1: off. H200 (session 7, official timer): 2 splits on 192 / 294 / 663 tiles (#5, #11, #15) 1.6-2.7 %
#: faster; 4 splits on 96 tiles (#16) no faster (0.745 against 0.735 ms), hence at most 2.
SPLIT_K: str | int = "auto"
SPLIT_K_MAX = 2
SPLIT_K_OVERHEAD = 4.0  # K steps' worth of a tile's fixed cost (pipeline fill, atomic epilogue)
#: The MLP down-projection in the fp16 path: "cublas" (out += h W2^T by torch.addmm with fp16 operands and an
#: fp32 result, in place: cuBLAS accumulates in fp32, like the Triton GEMM; its bias b2 is added by the
#: projection's epilogue instead, into x1, and LayerNorm2 subtracts it again before its statistics) or "triton"
#: (the TMA GEMM above, split-K). H200 (session 8, CUDA events, L2 flushed): 32768 x 768 x 3072 0.233 against
#: 0.270 ms (663 against 574 TFLOP/s), 4096 rows 0.037 against 0.045 ms. "cublas" falls back to "triton"
#: where torch has no fp32-output addmm for fp16 operands (`out_dtype`, PyTorch 2.8+).
MLP2_GEMM = "cublas"
#: The fp16-output GEMMs (qkv, mlp1) store their tiles through shared memory by TMA: 1 (whole tile), 2 (two
#: halves along N: half the staging buffer); 0: plain stores from registers. H200 (session 9, CUDA events, L2
#: flushed, 65537 rows): qkv 0.362 / 0.347 / 0.344 ms for 0 / 1 / 2, mlp1 0.560 / 0.542 / 0.538.
TMA_STORE = 2


# --------------------------------------------------------------------------------------------- kernels
# Integer arguments that vary with the image are not specialised (no divisibility variants): one compiled
# kernel per configuration and dtype serves every workload.


@triton.jit
def _pdl_enter(PDL: tl.constexpr):
    """With programmatic dependent launch (PDL > 0, launch_pdl), a kernel may start while the previous one in
    the stream still runs: wait for it to finish and its writes to be visible (griddepcontrol.wait) before
    touching memory. PDL 2 then lets the next kernel launch (its programs wait the same way) without waiting
    for this one's programs to exit. Saves launch gaps; no work overlaps."""
    if PDL > 0:
        tl.extra.cuda.gdc_wait()
    if PDL > 1:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit(do_not_specialize=["n_rows", "eps", "n_ln_programs"])
def _prologue_kernel(
    x_ptr,  # [n_rows, C] fp32
    w_ptr,  # [C] fp32
    b_ptr,  # [C] fp32
    y_ptr,  # [n_rows (+ 1 with PAD_ROW), C] operand dtype
    n_rows,
    eps,
    n_ln_programs,
    src0_ptr,  # CONVERT: the four weights (fp32), converted into dst in this order
    src1_ptr,
    src2_ptr,
    src3_ptr,
    dst_ptr,  # CONVERT: [sum of the weight sizes] fp16
    shift_ptr,  # [C] fp32, SHIFT: subtracted from every row before the statistics
    C: tl.constexpr,
    BLOCK_C: tl.constexpr,
    ROWS: tl.constexpr,
    PAD_ROW: tl.constexpr,  # also write row n_rows as zeros (its qkv is the qkv bias: the padded token)
    CONVERT: tl.constexpr,
    CVT_BLOCK: tl.constexpr,
    NB0: tl.constexpr,  # conversion blocks per weight
    NB1: tl.constexpr,
    NB2: tl.constexpr,
    PDL: tl.constexpr = 0,  # programmatic dependent launch (see _pdl_enter)
    SHIFT: tl.constexpr = False,
):
    """LayerNorm of rows (programs < n_ln_programs); with CONVERT the remaining programs convert weights.
    SHIFT: the rows are x - shift (LayerNorm2 when x1 holds the MLP's output bias too, MLP2_GEMM "cublas")."""
    _pdl_enter(PDL)
    pid = tl.program_id(0)
    if pid < n_ln_programs:
        rows = pid * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK_C)
        col_ok = cols < C
        mask = (rows < n_rows)[:, None] & col_ok[None, :]
        offs = rows.to(tl.int64)[:, None] * C + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        if SHIFT:
            x -= tl.load(shift_ptr + cols, mask=col_ok, other=0.0)[None, :]
        mean = tl.sum(x, 1) / C
        xc = tl.where(col_ok[None, :], x - mean[:, None], 0.0)
        var = tl.sum(xc * xc, 1) / C  # biased variance, as the reference
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0)
        b = tl.load(b_ptr + cols, mask=col_ok, other=0.0)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        if PAD_ROW:
            y = tl.where((rows < n_rows)[:, None], y, 0.0)
            mask = (rows <= n_rows)[:, None] & col_ok[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    elif CONVERT:
        blk = pid - n_ln_programs
        if blk < NB0:
            src = src0_ptr + blk * CVT_BLOCK
        elif blk < NB0 + NB1:
            src = src1_ptr + (blk - NB0) * CVT_BLOCK
        elif blk < NB0 + NB1 + NB2:
            src = src2_ptr + (blk - NB0 - NB1) * CVT_BLOCK
        else:
            src = src3_ptr + (blk - NB0 - NB1 - NB2) * CVT_BLOCK
        cvt = tl.arange(0, CVT_BLOCK)
        tl.store(dst_ptr + blk * CVT_BLOCK + cvt, tl.load(src + cvt).to(dst_ptr.dtype.element_ty))


@triton.jit
def _tile_coords(
    tile, M, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr
):
    # grouped order: GROUP_M row tiles share each weight column tile while it is in L2
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n: tl.constexpr = N // BLOCK_N
    pids_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile // pids_in_group) * GROUP_M
    group_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile % pids_in_group) % group_m
    pid_n = (tile % pids_in_group) // group_m
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@triton.jit
def _acc_init(
    res_ptr,
    bias_ptr,
    offs_m,
    offs_n,
    M,
    N: tl.constexpr,
    EPILOGUE: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    bias2_ptr=None,
    BIAS2: tl.constexpr = False,
):
    if EPILOGUE == 2:
        # the residual seeds the accumulator: no second [BM, BN] fp32 tile is live in the epilogue
        res = tl.load(res_ptr + offs_m[:, None] * N + offs_n[None, :], mask=(offs_m < M)[:, None], other=0.0)
        bias = tl.load(bias_ptr + offs_n)
        if BIAS2:  # a later layer's bias, added here (MLP2_GEMM "cublas": b2 into x1)
            bias += tl.load(bias2_ptr + offs_n)
        acc = res + bias[None, :]
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    return acc


@triton.jit
def _gelu(x):
    """Erf GELU, x Phi(x), to 7.1e-7 absolute in fp32, branch-free and cheap.

    erfc(z) = exp2(z P(min(z, 3.92))) for z = |x| / sqrt(2), P a degree-4 fit of log2(erfc(z)) / z weighted by
    gelu's sensitivity: gelu error <= 5.3e-7 with float64 arithmetic, 7.1e-7 in fp32 on [-12, 12] (the
    interpreter; torch's fp32 gelu there: 3.7e-7), far below h's fp16 rounding (2^-11 relative). Degree 6 until
    session 21 (1.5e-7, two more FMAs). Then gelu = x - x erfc(z) / 2 for x >= 0, x erfc(z) / 2 below: 10
    FMA-pipe operations and one ex2 per element, against ~25 for 0.5 x (1 + erf(x / sqrt(2))) through libdevice.
    """
    z = tl.abs(x) * 0.7071067811865476
    zc = tl.minimum(z, 3.92)
    p = -0.0027611238655430755 * zc + 0.02879487759679611
    p = p * zc - 0.14749295110672542
    p = p * zc - 0.9191916888486517
    p = p * zc - 1.6277605770043662
    half_erfc = tl.exp2(z * p - 1.0)
    xe = x * half_erfc
    return tl.where(x >= 0, x - xe, xe)


@triton.jit
def _gelu_f16x2(x):
    """_gelu's fit on fp16(x) in packed fp16 arithmetic (GELU_F16X2_PROGRAM), two elements per instruction:
    fp16 result. Its exp2 is still one MUFU operation per element."""
    return tl.inline_asm_elementwise(
        _GELU_F16X2_PTX, "=r,r", [x.to(tl.float16)], dtype=tl.float16, is_pure=True, pack=2
    )


@triton.jit
def _bias_act(acc, bias_ptr, offs_n, EPILOGUE: tl.constexpr, GELU16: tl.constexpr = False):
    """The output tile of EPILOGUE 0-3 before its store (the residual's biases are in acc already: _acc_init);
    with GELU16 EPILOGUE 1 computes in fp16 (`_gelu_f16x2`) and returns fp16."""
    if EPILOGUE != 2:
        acc += tl.load(bias_ptr + offs_n)[None, :]
    if EPILOGUE == 1 and GELU16:  # (both branches return: one return type per compiled kernel)
        return _gelu_f16x2(acc)
    else:
        if EPILOGUE == 1:
            acc = _gelu(acc)
        if EPILOGUE == 3:  # exact (erf) GELU through libdevice erff (reference for EPILOGUE 1)
            acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
        return acc


@triton.jit
def _epilogue(
    acc,
    bias_ptr,
    c_ptr,
    offs_m,
    offs_n,
    M,
    N: tl.constexpr,
    EPILOGUE: tl.constexpr,
    split=0,
    GELU16: tl.constexpr = False,
):
    # int32 offsets: the wrapper keeps M * max(N, K) < 2**31
    c_ptrs = c_ptr + (offs_m[:, None] * N + offs_n[None, :])
    if EPILOGUE == 4:  # split-K: c (the residual) += this split's partial; the bias comes with split 0
        acc += tl.where(split == 0, tl.load(bias_ptr + offs_n), 0.0)[None, :]
        tl.atomic_add(c_ptrs, acc, mask=(offs_m < M)[:, None], sem="relaxed")
    else:
        acc = _bias_act(acc, bias_ptr, offs_n, EPILOGUE, GELU16)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m < M)[:, None])


@triton.jit(do_not_specialize=["M"])
def _linear_kernel(
    a_ptr,  # [M, K] operand dtype, row-major
    w_ptr,  # [N, K] operand dtype (nn.Linear weight)
    bias_ptr,  # [N] fp32
    res_ptr,  # [M, N] fp32 (EPILOGUE_RESIDUAL; may alias c_ptr)
    c_ptr,  # [M, N]
    M,
    bias2_ptr,  # [N] fp32, BIAS2: added to the residual's bias (EPILOGUE_RESIDUAL)
    N: tl.constexpr,
    K: tl.constexpr,
    EPILOGUE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PDL: tl.constexpr = 0,  # programmatic dependent launch (see _pdl_enter)
    BIAS2: tl.constexpr = False,
    GELU16: tl.constexpr = False,  # EPILOGUE 1 in packed fp16 (GELU_F16X2)
):
    """One output tile per program; cp.async-pipelined pointer loads."""
    _pdl_enter(PDL)
    off_m, off_n = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows = offs_m % M  # rows past M re-read valid rows: no load masks; not stored
    a_ptrs = a_ptr + rows[:, None] * K + offs_k[None, :]  # [BLOCK_M, BLOCK_K]
    w_ptrs = w_ptr + offs_n[None, :] * K + offs_k[:, None]  # [BLOCK_K, BLOCK_N] view of W^T
    acc = _acc_init(res_ptr, bias_ptr, offs_m, offs_n, M, N, EPILOGUE, BLOCK_M, BLOCK_N, bias2_ptr, BIAS2)
    for _ in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs)
        w = tl.load(w_ptrs)
        acc = tl.dot(a, w, acc, input_precision="tf32")
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    _epilogue(acc, bias_ptr, c_ptr, offs_m, offs_n, M, N, EPILOGUE, 0, GELU16)


@triton.jit(do_not_specialize=["M", "num_programs"])
def _linear_tma_kernel(
    a_desc,  # TMA descriptor of A [M, K], block [BLOCK_M, BLOCK_K]
    w_desc,  # TMA descriptor of W [N, K], block [BLOCK_N, BLOCK_K]
    bias_ptr,
    res_ptr,
    c_ptr,
    M,
    num_programs,
    bias2_ptr,  # [N] fp32, BIAS2: added to the residual's bias (EPILOGUE_RESIDUAL)
    N: tl.constexpr,
    K: tl.constexpr,
    EPILOGUE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr,
    SPLIT_K: tl.constexpr = 1,
    PDL: tl.constexpr = 0,  # programmatic dependent launch (see _pdl_enter)
    BIAS2: tl.constexpr = False,
    c_desc=None,  # TMA descriptor of c, block [BLOCK_M, BLOCK_N // C_SPLIT]: a TMA-store epilogue (bias, GELU)
    C_SPLIT: tl.constexpr = 1,
    GELU16: tl.constexpr = False,  # EPILOGUE 1 in packed fp16 (GELU_F16X2)
):
    """TMA loads; programs loop over output tiles (persistent when num_programs < the tile count).

    With FLATTEN the tile and K loops form one software pipeline: the next tile's loads are in flight
    during this tile's epilogue. Rows past M are zero-filled by TMA and not stored. SPLIT_K > 1
    (EPILOGUE_ACCUMULATE): a work unit is (tile, K split), each adding its partial into c.
    """
    _pdl_enter(PDL)
    tl.static_assert(c_desc is None or EPILOGUE <= 1, "the TMA-store epilogue takes EPILOGUE 0 or 1")
    K_STEPS: tl.constexpr = K // BLOCK_K // SPLIT_K
    num_units = tl.cdiv(M, BLOCK_M) * (N // BLOCK_N) * SPLIT_K
    for unit in tl.range(tl.program_id(0), num_units, num_programs, flatten=FLATTEN):
        tile = unit // SPLIT_K
        split = unit % SPLIT_K
        off_m, off_n = _tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        acc = _acc_init(res_ptr, bias_ptr, offs_m, offs_n, M, N, EPILOGUE, BLOCK_M, BLOCK_N, bias2_ptr, BIAS2)
        k0 = split * K_STEPS
        for kk in range(k0, k0 + K_STEPS):
            a = a_desc.load([off_m, kk * BLOCK_K])
            w = w_desc.load([off_n, kk * BLOCK_K])
            acc = tl.dot(a, tl.trans(w), acc, input_precision="tf32")
        if c_desc is not None:  # through shared memory; TMA clips the rows past M
            acc = _bias_act(acc, bias_ptr, offs_n, EPILOGUE, GELU16)
            if C_SPLIT == 2:  # two [BLOCK_M, BLOCK_N / 2] halves: half the staging buffer
                acc0, acc1 = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
                c_desc.store([off_m, off_n], acc0.to(c_desc.dtype))
                c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(c_desc.dtype))
            else:
                c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
        else:
            _epilogue(acc, bias_ptr, c_ptr, offs_m, offs_n, M, N, EPILOGUE, split, GELU16)


@triton.jit(do_not_specialize=["tok0", "H", "W", "n_wh", "n_ww", "band0", "qk_scale"])
def _window_attention_kernel(
    qkv_ptr,  # [T, 2304] operand dtype: the chunk's tokens in image layout (row = token - tok0)
    o_ptr,  # [T, 768] operand dtype, row stride O_STRIDE (2304: o in place of q in the qkv rows)
    qkv_bias_ptr,  # [2304] fp32: q, k, v of the zero-padded tokens
    rel_h_ptr,  # [27, 64] fp32
    rel_w_ptr,  # [27, 64] fp32
    tok0,  # first token of the chunk
    H,
    W,
    n_wh,  # windows per image column (ceil(H / 14))
    n_ww,  # windows per image row (ceil(W / 14))
    band0,  # first band (b * n_wh + window row) of the chunk
    qk_scale,  # head_dim**-0.5 * log2(e)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BIAS_MODE: tl.constexpr,
    O_STRIDE: tl.constexpr = 768,
    PDL: tl.constexpr = 0,  # programmatic dependent launch (see _pdl_enter)
):
    _pdl_enter(PDL)
    LOG2E: tl.constexpr = 1.4426950408889634
    N_QT: tl.constexpr = 256 // BLOCK_M  # query tiles per window
    pid = tl.program_id(0)
    qt = pid % N_QT  # query tile fastest: the programs of one (window, head) share K, V in L2
    head = (pid // N_QT) % 12
    win = pid // (N_QT * 12)
    band = band0 + win // n_ww
    img_row0 = (band // n_wh) * H + (band % n_wh) * 14  # first image row of the window, in [B*H]
    win_row0 = (band % n_wh) * 14
    win_col0 = (win % n_ww) * 14
    d = tl.arange(0, 64)
    q_col = head * 64 + d  # [64] column of q; k and v at +768, +1536

    # queries: slot = 16 * qh + qw
    qs = qt * BLOCK_M + tl.arange(0, BLOCK_M)
    qh = qs // 16
    qw = qs % 16
    q_ok = (qh < 14) & (qw < 14) & (win_row0 + qh < H) & (win_col0 + qw < W)
    q_tok = (img_row0 + qh).to(tl.int64) * W + (win_col0 + qw) - tok0
    q = tl.load(qkv_ptr + q_tok[:, None] * 2304 + q_col[None, :], mask=q_ok[:, None], other=0.0)

    # T_h[i, r] = q_i . Rh[r] (r < 27; rows 27..31 zero), in log2 units
    r = tl.arange(0, 32)
    r_ok = (r < 27)[:, None]
    rel_h = tl.load(rel_h_ptr + r[:, None] * 64 + d[None, :], mask=r_ok, other=0.0).to(q.dtype)
    rel_w = tl.load(rel_w_ptr + r[:, None] * 64 + d[None, :], mask=r_ok, other=0.0).to(q.dtype)
    t_h = tl.dot(q, tl.trans(rel_h), input_precision="tf32") * LOG2E
    t_w = tl.dot(q, tl.trans(rel_w), input_precision="tf32") * LOG2E

    j16 = tl.arange(0, 16)
    # A_w[i, kw] = T_w[i, qw_i - kw + 13] (indices clamp at 0 only for masked slots)
    a_w = tl.gather(t_w, tl.maximum(qw[:, None] + 13 - j16[None, :], 0), 1)  # [BLOCK_M, 16]
    a_h = tl.gather(t_h, tl.maximum(qh[:, None] + 13 - j16[None, :], 0), 1)  # [BLOCK_M, 16]
    a = tl.reshape(tl.join(a_h, a_w), (BLOCK_M, 32))  # column 2j: A_h[:, j], 2j + 1: A_w[:, j]
    a_hi = a.to(tl.float16)
    a_lo = (a - a_hi.to(tl.float32)).to(tl.float16)  # hi + lo = a to ~2^-22 relative
    e_row = tl.arange(0, 32)

    k_bias = tl.load(qkv_bias_ptr + 768 + q_col).to(q.dtype)
    v_bias = tl.load(qkv_bias_ptr + 1536 + q_col).to(q.dtype)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, 64), tl.float32)
    for kb in tl.static_range(256 // BLOCK_N):
        ks = kb * BLOCK_N + tl.arange(0, BLOCK_N)
        kh = ks // 16
        kw = ks % 16
        k_slot = (kh < 14) & (kw < 14)
        k_img = k_slot & (win_row0 + kh < H) & (win_col0 + kw < W)
        k_tok = (img_row0 + kh).to(tl.int64) * W + (win_col0 + kw) - tok0
        kv_ptrs = qkv_ptr + k_tok[:, None] * 2304 + q_col[None, :]
        k = tl.load(kv_ptrs + 768, mask=k_img[:, None], other=0.0)
        v = tl.load(kv_ptrs + 1536, mask=k_img[:, None], other=0.0)
        k = tl.where(k_img[:, None], k, k_bias[None, :])  # zero-padded tokens: k = bias, v = bias
        v = tl.where(k_img[:, None], v, v_bias[None, :])

        s = tl.dot(q, tl.trans(k), input_precision="tf32") * qk_scale
        # one-hot E[2j, slot] = (kh == j), E[2j + 1, slot] = (kw == j): s += A E, E exact in fp16
        e_j = (e_row // 2)[:, None]
        e = tl.where((e_row % 2 == 0)[:, None], kh[None, :] == e_j, kw[None, :] == e_j)
        e = e.to(tl.float16)
        s = tl.dot(a_hi, e, s)
        if BIAS_MODE == 2:  # mode 3 drops the low half: the bias rounded to fp16 (~1e-3 relative)
            s = tl.dot(a_lo, e, s)
        s = tl.where(k_slot[None, :], s, float("-inf"))

        # online softmax in base 2 (every key block holds valid keys, so m stays finite)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="tf32")
        m_i = m_new

    o = acc / l_i[:, None]
    tl.store(
        o_ptr + q_tok[:, None] * O_STRIDE + q_col[None, :], o.to(o_ptr.dtype.element_ty), mask=q_ok[:, None]
    )


@triton.jit
def _attn_bias(q, rel_hT, rel_wT, qh, qw, j16, a_col, BLOCK_M: tl.constexpr, NEG: tl.constexpr):
    """8 x the bias columns [A_h | A_w] (interleaved) of the queries, as fp16 hi + lo.

    8 A_h[i, kh] = 8 q_i . Rh[qh_i - kh + 13], from T_h = q Rh^T [BLOCK_M, 32] by a 16-wide gather; columns
    28..31 (kh or kw of 14, 15: not window slots) get NEG.
    """
    t_h = tl.dot(q, rel_hT)
    t_w = tl.dot(q, rel_wT)
    a_h = tl.gather(t_h, tl.maximum(qh[:, None] + 13 - j16[None, :], 0), 1)
    a_w = tl.gather(t_w, tl.maximum(qw[:, None] + 13 - j16[None, :], 0), 1)
    a = tl.reshape(tl.join(a_h, a_w), (BLOCK_M, 32)) * 8.0  # column 2j: A_h[:, j]; 2j + 1: A_w[:, j]
    a = tl.where(a_col[None, :] >= 28, NEG, a)
    a_hi = a.to(tl.float16)
    a_lo = (a - a_hi.to(tl.float32)).to(tl.float16)  # hi + lo = a to ~2^-22 relative
    return a_hi, a_lo


@triton.jit
def _attn_bias_hw(q, rel_hT, rel_wT, qh, qw, j16, NEG: tl.constexpr):
    """8 x the bias terms A_h [BLOCK_M, 16] and A_w [BLOCK_M, 16] in fp32; columns 14, 15 get NEG."""
    t_h = tl.dot(q, rel_hT)
    t_w = tl.dot(q, rel_wT)
    a_h = tl.gather(t_h, tl.maximum(qh[:, None] + 13 - j16[None, :], 0), 1) * 8.0
    a_w = tl.gather(t_w, tl.maximum(qw[:, None] + 13 - j16[None, :], 0), 1) * 8.0
    a_h = tl.where(j16[None, :] >= 14, NEG, a_h)
    a_w = tl.where(j16[None, :] >= 14, NEG, a_w)
    return a_h, a_w


@triton.jit(
    do_not_specialize=["tok0", "pad_row", "H", "W", "n_wh", "n_ww", "band0", "n_items", "num_programs"]
)
def _window_attention_persistent_kernel(
    qkv_ptr,  # [pad_row + 1, 2304] fp16: the chunk's tokens in image layout, then the padded token's qkv
    o_ptr,  # [pad_row, 768] fp16, row stride O_STRIDE (2304: o in place of q; each q is read by one item)
    rel_h_ptr,  # [27, 64] fp32
    rel_w_ptr,  # [27, 64] fp32
    tok0,  # first token of the chunk
    pad_row,  # tokens in the chunk: row pad_row of qkv holds q, k, v of a zero-padded token (= the bias)
    H,
    W,
    n_wh,
    n_ww,
    band0,
    n_items,  # windows x query tiles x 12 heads
    num_programs,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BIAS_MODE: tl.constexpr,  # 2: fp16 hi + lo one-hot dots; 3: hi only; 4: fp32 broadcast (BLOCK_N 256);
    # 5: fp32 gathered to the key columns (any BLOCK_N)
    STAGES: tl.constexpr,
    BIAS_ONCE: tl.constexpr = True,
    O_STRIDE: tl.constexpr = 768,
    PDL: tl.constexpr = 0,  # programmatic dependent launch (see _pdl_enter)
):
    """Window attention, persistent: each program loops over (item, key block) steps, one software pipeline.

    An item is (window, query tile, head). Window tokens outside the image read row pad_row, and so do slots
    outside the 14x14 window (their logits get -30000 through the one-hot bias columns 28..31, so their
    weight is exactly 0): no load is masked, and the loads of the next steps are in flight (cp.async,
    STAGES - 1 steps ahead) during this step's maths. The 1/8 scale is applied in the exponent:
    s' = q.k + 8 (A_h + A_w), p = exp2(log2(e) / 8 (s' - max)). Online softmax over the key blocks.
    """
    _pdl_enter(PDL)
    NEG: tl.constexpr = -30000.0  # exact in fp16; far below any logit
    C: tl.constexpr = 0.18033688011112042  # log2(e) / 8
    tl.static_assert(BIAS_MODE != 4 or BLOCK_N == 256, "BIAS_MODE 4 takes the whole 16 x 16 key grid")
    N_QT: tl.constexpr = 256 // BLOCK_M
    N_KB: tl.constexpr = 256 // BLOCK_N
    pid = tl.program_id(0)
    d = tl.arange(0, 64)
    # relative-position tables, transposed [64, 32] (columns 27..31 zero), fp16 like q
    r = tl.arange(0, 32)
    rel_ptrs = r[None, :] * 64 + d[:, None]
    rel_hT = tl.load(rel_h_ptr + rel_ptrs, mask=(r < 27)[None, :], other=0.0).to(tl.float16)
    rel_wT = tl.load(rel_w_ptr + rel_ptrs, mask=(r < 27)[None, :], other=0.0).to(tl.float16)
    e_row = tl.arange(0, 32)
    e_j = (e_row // 2)[:, None]
    e_even = (e_row % 2 == 0)[:, None]
    j16 = tl.arange(0, 16)
    a_col = tl.arange(0, 32)
    m_i = tl.zeros((BLOCK_M,), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, 64), tl.float32)
    a_hi = tl.zeros((BLOCK_M, 32), tl.float16)
    a_lo = tl.zeros((BLOCK_M, 32), tl.float16)

    n_steps = tl.cdiv(n_items - pid, num_programs) * N_KB
    for step in tl.range(0, n_steps, num_stages=STAGES):
        item = pid + (step // N_KB) * num_programs
        kb = step % N_KB
        head = item % 12  # heads fastest: concurrent programs share a window's rows in L2
        qt = (item // 12) % N_QT
        win = item // (12 * N_QT)
        band = band0 + win // n_ww
        img_row0 = (band // n_wh) * H + (band % n_wh) * 14  # first image row of the window, in [B*H]
        win_row0 = (band % n_wh) * 14
        win_col0 = (win % n_ww) * 14
        col = head * 64 + d

        qs = qt * BLOCK_M + tl.arange(0, BLOCK_M)  # query slot = 16 * row + column
        qh = qs // 16
        qw = qs % 16
        q_ok = (qh < 14) & (qw < 14) & (win_row0 + qh < H) & (win_col0 + qw < W)
        q_row = tl.where(q_ok, (img_row0 + qh) * W + (win_col0 + qw) - tok0, pad_row)
        q = tl.load(qkv_ptr + q_row[:, None] * 2304 + col[None, :])
        ks = kb * BLOCK_N + tl.arange(0, BLOCK_N)
        kh = ks // 16
        kw = ks % 16
        k_ok = (kh < 14) & (kw < 14) & (win_row0 + kh < H) & (win_col0 + kw < W)
        k_row = tl.where(k_ok, (img_row0 + kh) * W + (win_col0 + kw) - tok0, pad_row)
        kv_ptrs = qkv_ptr + k_row[:, None] * 2304 + col[None, :]
        k = tl.load(kv_ptrs + 768)
        v = tl.load(kv_ptrs + 1536)

        if BIAS_MODE == 4:  # fp32 broadcast over the 16 x 16 key grid (one key block: the whole grid)
            b_h, b_w = _attn_bias_hw(q, rel_hT, rel_wT, qh, qw, j16, NEG)
            s = tl.dot(q, tl.trans(k))
            s3 = tl.reshape(s, (BLOCK_M, 16, 16)) + b_h[:, :, None] + b_w[:, None, :]
            s = tl.reshape(s3, (BLOCK_M, BLOCK_N))
        elif BIAS_MODE == 5:  # fp32, gathered to the key columns: bias[i, j] = A_h[i, kh_j] + A_w[i, kw_j]
            b_h, b_w = _attn_bias_hw(q, rel_hT, rel_wT, qh, qw, j16, NEG)
            s = tl.dot(q, tl.trans(k))
            kh2 = tl.broadcast_to(kh[None, :], (BLOCK_M, BLOCK_N))
            kw2 = tl.broadcast_to(kw[None, :], (BLOCK_M, BLOCK_N))
            s = s + tl.gather(b_h, kh2, 1) + tl.gather(b_w, kw2, 1)
        else:
            if BIAS_ONCE:  # the bias columns of an item, computed at its first key block only
                if kb == 0:
                    a_hi, a_lo = _attn_bias(q, rel_hT, rel_wT, qh, qw, j16, a_col, BLOCK_M, NEG)
            else:
                a_hi, a_lo = _attn_bias(q, rel_hT, rel_wT, qh, qw, j16, a_col, BLOCK_M, NEG)
            # one-hot E[2j, slot] = (kh == j), E[2j + 1, slot] = (kw == j): s' += a E, E exact in fp16
            e = tl.where(e_even, kh[None, :] == e_j, kw[None, :] == e_j).to(tl.float16)

            s = tl.dot(q, tl.trans(k))
            s = tl.dot(a_hi, e, s)
            if BIAS_MODE == 2:  # mode 3 drops the low half: the bias rounded to fp16
                s = tl.dot(a_lo, e, s)
        m_prev = tl.where(kb == 0, float("-inf"), m_i)  # a new item starts: alpha = 0 drops l_i, acc
        m_i = tl.maximum(m_prev, tl.max(s, 1))
        mc = m_i * C
        alpha = tl.exp2(m_prev * C - mc)
        p = tl.exp2(s * C - mc[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        o = acc * (1.0 / l_i)[:, None]
        o_mask = q_ok & (qs * 0 + kb == N_KB - 1)  # the item's last key block
        tl.store(
            o_ptr + q_row[:, None] * O_STRIDE + col[None, :],
            o.to(o_ptr.dtype.element_ty),
            mask=o_mask[:, None],
        )


# ------------------------------------------------------------------------- window attention in Gluon (sm_90)
# Gluon (triton.experimental.gluon, inside Triton 3.6: the H200's and the official environment's) expresses
# what tl does not on sm_90: warp specialization with register budgets, mbarriers and asynchronous wgmma.
# Session 19's probe (gluon_attn_probe.py) ran the attention core 1.65x faster this way than as one tl kernel.
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy as _gl_cp
    from triton.experimental.gluon.language.nvidia.ampere import mma_v2 as _gl_mma2
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

    # cp.async into shared memory: async_copy_global_to_shared in Triton 3.6 (the H200's and the official
    # environment's), renamed async_load by 3.9 (CI's), where the old name raises
    _gl_cp_load = getattr(_gl_cp, "async_load", None) or _gl_cp.async_copy_global_to_shared
    _gl_sync = getattr(gl, "thread_barrier", None) or gl.barrier  # the partition's threads (renamed by 3.9)
    from triton.experimental.gluon.language.nvidia.hopper import tma as _gl_tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _GlDescriptor

    # TMA copies: async_copy_global_to_shared / async_copy_shared_to_global in Triton 3.6, async_load /
    # async_store in 3.9, where the old names raise
    _gl_tma_load = getattr(_gl_tma, "async_load", None) or _gl_tma.async_copy_global_to_shared
    _gl_tma_store = getattr(_gl_tma, "async_store", None) or _gl_tma.async_copy_shared_to_global
except ImportError:  # a Triton without Gluon's Hopper API: the tl kernels only
    gluon = None

if gluon is not None:

    @gluon.jit
    def _gl_pdl_enter(PDL: gl.constexpr):
        """_pdl_enter's wait for a Gluon partition: with programmatic dependent launch (PDL > 0) the previous
        kernel's reads and writes are done after this."""
        if PDL > 0:
            gl.inline_asm_elementwise(
                "griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1
            )

    @gluon.jit
    def _ga_group_landed(bar, LEFT: gl.constexpr):
        """Once at most LEFT copy groups are in flight, every loader thread's copies of the older ones are visible
        to the async proxy (the consumers' wgmma) and one thread arrives on bar."""
        _gl_cp.wait_group(LEFT)
        _gl_sync()
        _gl_fence()
        _gl_bar.arrive(bar)

    @gluon.jit
    def _ga_landed(kv_ready, q_ready, s):
        """Signal an item's five copy groups (K | V, then its four Q tiles) as each lands."""
        _ga_group_landed(kv_ready.index(s), 4)
        for t in gl.static_range(4):
            _ga_group_landed(q_ready.index(t), 3 - t)

    @gluon.jit
    def _ga_band(item, n_wh, n_ww, band0):
        """(window, head) item: its image and its window's first row in that image."""
        band = band0 + item // 12 // n_ww
        return band // n_wh, (band % n_wh) * 14

    @gluon.jit
    def _ga_item(item, j, H, W, n_wh, n_ww, band0):
        """(window, head) item: its head, its window's first token row in the image layout, the window's first
        row and column in its image, and which of the 16 slot columns j are window columns inside the image."""
        head = item % 12
        image, win_row0 = _ga_band(item, n_wh, n_ww, band0)
        img_row0 = image * H + win_row0
        win_col0 = (item // 12 % n_ww) * 14
        col_ok = (j < 14) & (win_col0 + j < W)
        return head, img_row0, win_row0, win_col0, col_ok

    @gluon.jit
    def _ga_window_row(j, col_ok, r, img_row0, win_row0, win_col0, H, W, tok0):
        """Slot row r (window row r, columns j): which slots are tokens of the image, and their rows in the
        chunk."""
        ok = col_ok & (r < 14) & (win_row0 + r < H)
        return ok, (img_row0 + r) * W + win_col0 + j - tok0

    @gluon.jit
    def _ga_slot_row(base, j, col_ok, r, img_row0, win_row0, win_col0, H, W, tok0, pad_row):
        """Addresses of slot row r's 16 tokens in qkv: base + token row x 2304. Slots outside the window or the
        image read the padded token's row, as the tl kernel's."""
        ok, row = _ga_window_row(j, col_ok, r, img_row0, win_row0, win_col0, H, W, tok0)
        return base[None, :] + gl.where(ok, row, pad_row)[:, None] * 2304

    @gluon.jit
    def _ga_store_o(
        o_ptr, o_smem, o_ready, o_free, item, li, tok0, H, W, n_wh, n_ww, band0, O_STRIDE: gl.constexpr
    ):
        """4 warps: store one item's four o tiles from shared memory (16-byte stores), one window row (16 slots)
        at a time; padded query slots are not stored."""
        st_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # [16 slots, 64 channels]
        j = gl.arange(0, 16, layout=gl.SliceLayout(1, st_l))
        d = gl.arange(0, 64, layout=gl.SliceLayout(0, st_l))
        head, img_row0, win_row0, win_col0, col_ok = _ga_item(item, j, H, W, n_wh, n_ww, band0)
        for t in gl.static_range(4):  # tile t: consumer t % 2, its tile t // 2
            buf = (t % 2) * 2 + t // 2
            _gl_bar.wait(o_ready.index(buf), li & 1)
            for r in gl.static_range(4):  # window row 4 t + r
                v = o_smem.index(buf).slice(16 * r, 16).load(st_l)
                ok, row = _ga_window_row(j, col_ok, 4 * t + r, img_row0, win_row0, win_col0, H, W, tok0)
                gl.store(o_ptr + (row * O_STRIDE + head * 64)[:, None] + d[None, :], v, mask=ok[:, None])
            _gl_sync()  # every thread's reads of the buffer are done
            _gl_bar.arrive(o_free.index(buf))

    @gluon.jit
    def _ga_loader(
        qkv_ptr, o_ptr, q_smem, k_smem, v_smem, o_smem, q_ready, q_free, kv_ready, kv_free, o_ready, o_free,
        tok0, pad_row, H, W, n_wh, n_ww, band0, n_items, PDL: gl.constexpr, O_STRIDE: gl.constexpr,
    ):  # fmt: skip
        """4 warps: gather each item's K and V (two stages) and its four 64-slot Q tiles (one set: the next item's
        Q tiles wait for this item's consumers) by cp.async, and store the previous item's o from shared memory
        once its consumers have put it there. The o stores come after an item's copies, so they never hold back
        the copies the consumers wait for."""
        _gl_pdl_enter(PDL)  # the previous kernel's writes (qkv) are visible after this
        lay: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # [16 slots, 64 channels]
        j = gl.arange(0, 16, layout=gl.SliceLayout(1, lay))
        d = gl.arange(0, 64, layout=gl.SliceLayout(0, lay))
        li = 0
        for item in range(gl.program_id(0), n_items, gl.num_programs(0)):
            # heads fastest: concurrent programs share a window's rows in L2
            head, img_row0, win_row0, win_col0, col_ok = _ga_item(item, j, H, W, n_wh, n_ww, band0)
            base = qkv_ptr + head * 64 + d
            s = li % 2
            _gl_bar.wait(kv_free.index(s), ((li // 2) & 1) ^ 1)
            for r in gl.static_range(16):  # slot row r of the 16 x 16 grid: window row r, columns 0..15
                ptr = _ga_slot_row(base, j, col_ok, r, img_row0, win_row0, win_col0, H, W, tok0, pad_row)
                _gl_cp_load(k_smem.index(s).slice(r * 16, 16), ptr + 768)
                _gl_cp_load(v_smem.index(s).slice(r * 16, 16), ptr + 1536)
            _gl_cp.commit_group()
            for t in gl.static_range(4):
                _gl_bar.wait(q_free.index(t), (li & 1) ^ 1)
                for rr in gl.static_range(4):
                    ptr = _ga_slot_row(
                        base, j, col_ok, 4 * t + rr, img_row0, win_row0, win_col0, H, W, tok0, pad_row
                    )
                    _gl_cp_load(q_smem.index(t).slice(rr * 16, 16), ptr)
                _gl_cp.commit_group()
            _ga_landed(kv_ready, q_ready, s)
            if li > 0:  # the previous item's o, once its consumers have put it in shared memory
                _ga_store_o(o_ptr, o_smem, o_ready, o_free, item - gl.num_programs(0), li - 1,
                            tok0, H, W, n_wh, n_ww, band0, O_STRIDE)  # fmt: skip
            li += 1
        if li > 0:
            _ga_store_o(o_ptr, o_smem, o_ready, o_free, gl.program_id(0) + (li - 1) * gl.num_programs(0), li - 1,
                        tok0, H, W, n_wh, n_ww, band0, O_STRIDE)  # fmt: skip

    @gluon.jit
    def _ga_turn(turn, g, WG: gl.constexpr, PINGPONG: gl.constexpr):
        """Wait for this consumer's g-th turn (consumer 0 goes first)."""
        if PINGPONG > 0:
            _gl_bar.wait(turn.index(WG), (g & 1) ^ (1 - WG))

    @gluon.jit
    def _ga_pass(turn, WG: gl.constexpr, PINGPONG: gl.constexpr):
        """Hand the turn to the other consumer."""
        if PINGPONG > 0:
            _gl_bar.arrive(turn.index(1 - WG))

    @gluon.jit
    def _ga_cand(t_w, EV: gl.constexpr, J: gl.constexpr, aw_l: gl.constexpr):
        """T_w[i, 2 c + EV + 8 J] (c: the thread's quad lane) broadcast to [64, 16] in aw_l."""
        t5 = gl.reshape(t_w, [64, 2, 2, 4, 2])  # [row, j_hi, j_lo, c, e]
        e0, e1 = gl.split(t5)
        if EV == 0:
            te = e0
        else:
            te = e1
        lo0, lo1 = gl.split(gl.permute(te, (0, 1, 3, 2)))  # [row, j_hi, c]
        if J % 2 == 0:
            tl_ = lo0
        else:
            tl_ = lo1
        hi0, hi1 = gl.split(gl.permute(tl_, (0, 2, 1)))  # [row, c]
        if J // 2 == 0:
            x = hi0
        else:
            x = hi1
        x2 = gl.join(gl.join(x, x), gl.join(x, x))  # [row, c, b0, b3]
        x2 = gl.reshape(gl.permute(x2, (0, 3, 1, 2)), [64, 16])  # kw = 8 b3 + 2 c + b0
        # registers only (checked): a_l's and aw_l's lanes hold the same rows and the same c
        return gl.convert_layout(x2, aw_l, assert_trivial=True)

    @gluon.jit
    def _ga_aw_shuffle(t_w, qw, kw, aw_l: gl.constexpr):
        """A_w[i, kw] = T_w[i, qw_i + 13 - kw] for the [64, 16] layout aw_l (each thread: 2 rows, 4 kw) from T_w
        [64, 32] in the N = 32 wgmma accumulator layout, one shuffle a value: the quad's lanes c and c' = (h - c) % 4
        (h = (qw % 8 + 13 - kw % 2) // 2) read each other, and each first picks among its own 8 registers of the
        row the one the other needs."""
        # this thread's registers of each row: T_w[i, 2 c + e + 8 j] as [64, 16] tensors in aw_l (the same value for
        # kw bits 0 and 3, which are registers there)
        f00 = _ga_cand(t_w, 0, 0, aw_l)
        f01 = _ga_cand(t_w, 0, 1, aw_l)
        f02 = _ga_cand(t_w, 0, 2, aw_l)
        f03 = _ga_cand(t_w, 0, 3, aw_l)
        f10 = _ga_cand(t_w, 1, 0, aw_l)
        f11 = _ga_cand(t_w, 1, 1, aw_l)
        f12 = _ga_cand(t_w, 1, 2, aw_l)
        f13 = _ga_cand(t_w, 1, 3, aw_l)
        b0 = kw % 2
        c_me = (kw // 2) % 4
        a = qw % 8
        c_o = ((a + 13 - b0) // 2 - c_me) & 3  # the other lane of the pair
        # the column the other lane needs, from this lane's (its own) row
        col = qw + 13 - (2 * c_o + b0 + 8 * (kw // 8))
        e = col & 1
        j = (col >> 3) & 3
        v0 = gl.where(j == 0, f00, gl.where(j == 1, f01, gl.where(j == 2, f02, f03)))
        v1 = gl.where(j == 0, f10, gl.where(j == 1, f11, gl.where(j == 2, f12, f13)))
        v = gl.where(e == 0, v0, v1)
        src = a * 4 + c_o
        out = gl.inline_asm_elementwise(
            "shfl.sync.idx.b32 $0, $1, $2, 0x1f, 0xffffffff;", "=r,r,r",
            [v.to(gl.int32, bitcast=True), src], dtype=gl.int32, is_pure=True, pack=1,
        )  # fmt: skip
        return out.to(gl.float32, bitcast=True)

    @gluon.jit
    def _ga_consumer(
        o_smem, q_smem, k_smem, v_smem, rt_smem, rw_smem, q_ready, q_free, kv_ready, kv_free, o_ready, o_free,
        turn, n_items, H, n_wh, n_ww, band0, WG: gl.constexpr, PINGPONG: gl.constexpr, LSUM_MMA: gl.constexpr,
        BIAS_SHUFFLE: gl.constexpr, SKIP_PAD: gl.constexpr,
    ):  # fmt: skip
        """One warpgroup: query tiles WG and WG + 2 (64 slots each) of every item of this program, against the
        item's 256 key slots in one block (no online softmax); o goes to shared memory, the loader warps store it.
        PINGPONG: the two consumers' products in turns (GLUON_ATTENTION_PINGPONG); LSUM_MMA: the row sums l by
        mma.sync of the fp16 p with ones (GLUON_ATTENTION_LSUM_MMA), else in fp32 registers; BIAS_SHUFFLE: the bias
        columns by GLUON_ATTENTION_BIAS_SHUFFLE's shuffles (rt_smem: the three [64, 64] tables of tiles 0-2, rw_smem:
        tile 3's and Rw's), else by one gather (rt_smem: [Rh^T | Rw^T]). SKIP_PAD (GLUON_ATTENTION_SKIP_PAD): a tile
        whose window rows are all below the image (H, the item's band from n_wh, n_ww, band0) only passes its
        barriers and turns."""
        NEG: gl.constexpr = -30000.0  # exact in fp16; far below any logit
        C: gl.constexpr = 0.18033688011112042  # log2(e) / 8
        s_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, 16]
        )
        t_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16]
        )
        a_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 32, 16]
        )
        # s_l seen as [64 query rows, 16 kh, 16 kw] (key slot 16 kh + kw): the wgmma accumulator's registers hold
        # column bits 0, 3 and kh, its lanes column bits 1, 2 and the row (the reshape to s_l is checked trivial)
        s3_l: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 0, 1], [8, 0, 0], [0, 0, 8], [0, 1, 0], [0, 2, 0], [0, 4, 0], [0, 8, 0]],
            lane_bases=[[0, 0, 2], [0, 0, 4], [1, 0, 0], [2, 0, 0], [4, 0, 0]],
            warp_bases=[[16, 0, 0], [32, 0, 0]],
            block_bases=[],
            shape=[64, 16, 16],
        )
        ah_l: gl.constexpr = gl.SliceLayout(2, s3_l)  # [64, 16 kh]: each thread all 16 kh of its rows
        aw_l: gl.constexpr = gl.SliceLayout(1, s3_l)  # [64, 16 kw]: each thread its 4 kw
        p_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=t_l, k_width=2)
        # LSUM_MMA: l = p16 @ ones by mma.sync (m16n8k16), whose A fragments are the wgmma A operand's registers
        l_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8]
        )
        ones = gl.full([256, 8], 1.0, gl.float16, gl.DotOperandLayout(operand_index=1, parent=l_l, k_width=2))
        ones2 = gl.full(
            [128, 8], 1.0, gl.float16, gl.DotOperandLayout(operand_index=1, parent=l_l, k_width=2)
        )
        pl_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=l_l, k_width=2)
        li = 0
        g = 0  # turns taken (PINGPONG)
        for item in range(gl.program_id(0), n_items, gl.num_programs(0)):
            s = li % 2
            _gl_bar.wait(kv_ready.index(s), (li // 2) & 1)
            if SKIP_PAD:  # the item's window rows that are rows of the image
                rows_in = H - _ga_band(item, n_wh, n_ww, band0)[1]
            for tt in gl.static_range(2):
                t = WG + 2 * tt
                q_t = q_smem.index(t)
                _gl_bar.wait(q_ready.index(t), li & 1)
                live = True
                if SKIP_PAD:
                    live = 4 * t < rows_in
                if live:
                    if BIAS_SHUFFLE:
                        # T_h' = q RH_t^T (tile 3: 32 columns) and T_w = q Rw^T; A_h[i, kh] = T_h'[i, (w, m = 15 - kh)]
                        # for the rows of warp w (the table layouts: _window_attention_gluon_kernel), one shuffle a
                        # value; A_w by _ga_aw_shuffle; columns of kh or kw 14, 15 (not window slots) get NEG
                        if WG + 2 * tt == 3:
                            t_h = _gl_mma(q_t, rw_smem.slice(0, 32).permute((1, 0)), gl.zeros([64, 32], gl.float32, a_l),
                                          use_acc=False, is_async=True)  # fmt: skip
                        else:
                            t_h = _gl_mma(q_t, rt_smem.index(WG + 2 * tt).permute((1, 0)),
                                          gl.zeros([64, 64], gl.float32, t_l), use_acc=False, is_async=True)  # fmt: skip
                        t_w = _gl_mma(q_t, rw_smem.slice(32, 32).permute((1, 0)), gl.zeros([64, 32], gl.float32, a_l),
                                      use_acc=False, is_async=True)  # fmt: skip
                        t_h, t_w = _gl_mma_wait(num_outstanding=0, deps=(t_h, t_w))
                        kh = gl.arange(0, 16, layout=gl.SliceLayout(0, ah_l))[None, :]
                        w4 = gl.arange(0, 64, layout=gl.SliceLayout(1, ah_l))[:, None] // 16
                        m = 15 - kh
                        if WG + 2 * tt == 3:  # qh 12, 13 (warps 2, 3: padded query slots, never stored)
                            a_h = gl.gather(t_h, m % 2 + 2 * gl.minimum(w4, 1) + 4 * (m // 2), 1)
                        else:
                            a_h = gl.gather(t_h, m % 2 + 2 * w4 + 8 * (m // 2), 1)
                        a_h = gl.where(kh >= 14, NEG, a_h * 8.0)
                        qw = (t * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, aw_l))) % 16
                        kw = gl.arange(0, 16, layout=gl.SliceLayout(0, aw_l))[None, :]
                        a_w = _ga_aw_shuffle(t_w, qw[:, None], kw, aw_l) * 8.0
                        a_w = gl.where(kw >= 14, NEG, a_w)
                    else:
                        # 8 x the bias columns [A_h | A_w] of the tile's queries from T = q [Rh^T | Rw^T]:
                        # c < 16: A_h[i, c] = T[i, qh + 13 - c]; c >= 16: A_w[i, c - 16] = T[i, 32 + qw + 13 - (c - 16)];
                        # columns of kh or kw 14, 15 (not window slots) get NEG
                        tab = _gl_mma(
                            q_t, rt_smem, gl.zeros([64, 64], gl.float32, t_l), use_acc=False, is_async=True
                        )
                        tab = _gl_mma_wait(num_outstanding=0, deps=(tab,))
                        qs = t * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, a_l))
                        c = gl.arange(0, 32, layout=gl.SliceLayout(0, a_l))[None, :]
                        idx = gl.where(c < 16, gl.maximum((qs // 16)[:, None] + 13 - c % 16, 0),
                                       32 + gl.maximum((qs % 16)[:, None] + 13 - c % 16, 0))  # fmt: skip
                        a = gl.gather(gl.convert_layout(tab, a_l), idx, 1) * 8.0
                        a = gl.where(c % 16 >= 14, NEG, a)
                        a_h, a_w = gl.split(gl.permute(gl.reshape(a, [64, 2, 16]), (0, 2, 1)))
                        a_h = gl.convert_layout(a_h, ah_l)
                        a_w = gl.convert_layout(a_w, aw_l)
                    # s' = q.k + 8 bias: the wgmma accumulator starts at the bias (fp32), A_h[i, kh] + A_w[i, kw]
                    b3 = gl.expand_dims(a_h, 2) + gl.expand_dims(a_w, 1)
                    acc = gl.convert_layout(gl.reshape(b3, [64, 256]), s_l, assert_trivial=True)
                    _ga_turn(turn, g, WG, PINGPONG)
                    acc = _gl_mma(q_t, k_smem.index(s).permute((1, 0)), acc, use_acc=True, is_async=True)
                    _ga_pass(turn, WG, PINGPONG)
                    g += 1
                    acc = _gl_mma_wait(num_outstanding=0, deps=(acc,))
                    _gl_bar.arrive(q_free.index(t))  # q is read for the last time
                    # key slot rows 14, 15 are outside every window, and kh is a register index of the accumulator:
                    # the selects below fold at compile time, so the max skips those registers and their weights
                    # are 0 without an exp2 (1/8 of the exp2s; columns 14, 15 depend on the lane and keep NEG)
                    acc3 = gl.convert_layout(gl.reshape(acc, [64, 16, 16]), s3_l, assert_trivial=True)
                    khv = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(2, s3_l)))
                    in3 = gl.expand_dims(gl.expand_dims(khv < 14, 0), 2)
                    # kh first (within registers), then kw (across the quad's lanes)
                    m = gl.max(gl.max(gl.where(in3, acc3, float("-inf")), axis=1), axis=1)
                    mc = gl.expand_dims(gl.expand_dims(m * C, 1), 1)
                    p3 = gl.where(in3, gl.exp2(acc3 * C - mc), 0.0)
                    if not LSUM_MMA:
                        l_i = gl.sum(gl.sum(p3, axis=1), axis=1)
                    p = gl.convert_layout(gl.reshape(p3, [64, 256]), s_l, assert_trivial=True)
                    p16 = gl.convert_layout(p.to(gl.float16), p_op)
                    if PINGPONG > 1:
                        _ga_turn(turn, g, WG, PINGPONG)
                    o = _gl_mma(p16, v_smem.index(s), gl.zeros([64, 64], gl.float32, t_l),
                                use_acc=False, is_async=True)  # fmt: skip
                    if PINGPONG > 1:
                        _ga_pass(turn, WG, PINGPONG)
                        g += 1
                    if LSUM_MMA:  # every column of the [64, 8] product is its row's sum of the fp16 p
                        p16l = gl.convert_layout(p16, pl_op, assert_trivial=True)
                        if LSUM_MMA == 1:
                            l_i = gl.max(_gl_mma2(p16l, ones, gl.zeros([64, 8], gl.float32, l_l)), axis=1)
                        else:  # two independent chains of 8 mma.sync, over the key halves
                            pa, pb = gl.split(gl.permute(gl.reshape(p16l, [64, 2, 128]), (0, 2, 1)))
                            la = _gl_mma2(gl.convert_layout(pa, pl_op, assert_trivial=True), ones2,
                                          gl.zeros([64, 8], gl.float32, l_l))  # fmt: skip
                            lb = _gl_mma2(gl.convert_layout(pb, pl_op, assert_trivial=True), ones2,
                                          gl.zeros([64, 8], gl.float32, l_l))  # fmt: skip
                            l_i = gl.max(la + lb, axis=1)
                    o = _gl_mma_wait(num_outstanding=0, deps=(o,))
                    o = o * gl.expand_dims(gl.convert_layout(1.0 / l_i, gl.SliceLayout(1, t_l)), 1)
                    # o goes to shared memory (one buffer per consumer and tile); the loader warps store it
                    buf = WG * 2 + tt
                    _gl_bar.wait(o_free.index(buf), (li & 1) ^ 1)
                    o_smem.index(buf).store(o.to(gl.float16))
                    _gl_sync()  # every thread's part of o is written
                    _gl_bar.arrive(o_ready.index(buf))
                else:  # no row of the tile is stored: only its barriers and turns, as the products take them
                    _ga_turn(turn, g, WG, PINGPONG)
                    _ga_pass(turn, WG, PINGPONG)
                    g += 1
                    _gl_bar.arrive(q_free.index(t))
                    if PINGPONG > 1:
                        _ga_turn(turn, g, WG, PINGPONG)
                        _ga_pass(turn, WG, PINGPONG)
                        g += 1
                    buf = WG * 2 + tt
                    _gl_bar.wait(o_free.index(buf), (li & 1) ^ 1)
                    _gl_sync()
                    _gl_bar.arrive(o_ready.index(buf))
            _gl_bar.arrive(kv_free.index(s))
            li += 1

    @gluon.jit(do_not_specialize=["tok0", "pad_row", "H", "W", "n_wh", "n_ww", "band0", "n_items"])
    def _window_attention_gluon_kernel(
        qkv_ptr,  # [pad_row + 1, 2304] fp16, as the persistent tl kernel's
        o_ptr,  # [pad_row, 768] fp16, row stride O_STRIDE (o in place of q)
        rel_h_ptr,  # [27, 64] fp32
        rel_w_ptr,  # [27, 64] fp32
        tok0, pad_row, H, W, n_wh, n_ww, band0,
        n_items,  # windows x 12 heads
        O_STRIDE: gl.constexpr = 768,
        CONSUMER_REGS: gl.constexpr = 232,
        LOADER_REGS: gl.constexpr = 40,
        PDL: gl.constexpr = 0,
        PINGPONG: gl.constexpr = 0,
        LSUM_MMA: gl.constexpr = 0,
        BIAS_SHUFFLE: gl.constexpr = 0,
        SKIP_PAD: gl.constexpr = 0,
    ):  # fmt: skip
        """Window attention on sm_90: per program one cp.async loader warpgroup and two consumer warpgroups,
        persistent over (window, head) items; each consumer takes two of an item's four 64-slot query tiles and
        puts its o tiles in shared memory, from where the loader warps store them (16-byte stores, off the
        consumers' serial chain).

        The maths is the persistent tl kernel's with one 256-slot key block: s' = q.k + 8 bias, p = exp2(log2(e)
        / 8 (s' - max)), o = (P V) / l; the bias in fp32 as the start of the q.k accumulator (A_h[i, kh] +
        A_w[i, kw] broadcast in the accumulator's own layout) instead of the tl kernel's one-hot product (session
        21). The rel-pos tables are loaded before the PDL wait."""
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        lay64: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16)
        if BIAS_SHUFFLE:
            # RH_t [64, 64] for tiles t = 0-2: row n = (b, w, M) (bit 0, bits 1-2, bits 3-5) holds Rh[4 t - 2 + w + 2 M
            # + b] (zero outside 0..26), so that A_h[i, kh] = (q_i RH_t^T)[(w, m = 15 - kh)] for the query rows of
            # warp w (qh = 4 t + w): the gather index of a value is the same in every lane of a warp. Second
            # buffer: rows 0-31 tile 3's table (w 1 bit, M bits 2-4: qh 12, 13), rows 32-58 Rw (fp16, like q)
            n = gl.arange(0, 64, layout=gl.SliceLayout(1, blk))[:, None]
            d = gl.arange(0, 64, layout=gl.SliceLayout(0, blk))[None, :]
            rt_smem = gl.allocate_shared_memory(gl.float16, [3, 64, 64], lay64)
            for tb in gl.static_range(3):
                ih = 4 * tb - 2 + (n // 2) % 4 + 2 * (n // 8) + n % 2
                rh = gl.load(rel_h_ptr + ih * 64 + d, mask=(ih >= 0) & (ih < 27), other=0.0)
                rt_smem.index(tb).store(rh.to(gl.float16))
            ih3 = 10 + (n // 2) % 2 + 2 * (n // 4) + n % 2
            rh3 = gl.load(rel_h_ptr + ih3 * 64 + d, mask=(n < 32) & (ih3 < 27), other=0.0)
            rw = gl.load(rel_w_ptr + (n - 32) * 64 + d, mask=(n >= 32) & (n < 59), other=0.0)
            rw_smem = gl.allocate_shared_memory(gl.float16, [64, 64], lay64, (rh3 + rw).to(gl.float16))
        else:
            # RT [64, 64]: column r < 27: Rh[r, :]; 32 + r: Rw[r, :]; the rest zero (fp16, like q)
            rd = gl.arange(0, 64, layout=gl.SliceLayout(1, blk))[:, None]
            rc = gl.arange(0, 64, layout=gl.SliceLayout(0, blk))[None, :]
            rr = rc % 32
            rh = gl.load(rel_h_ptr + rr * 64 + rd, mask=(rc < 32) & (rr < 27), other=0.0)
            rw = gl.load(rel_w_ptr + rr * 64 + rd, mask=(rc >= 32) & (rr < 27), other=0.0)
            rt_smem = gl.allocate_shared_memory(gl.float16, [64, 64], lay64, (rh + rw).to(gl.float16))
            rw_smem = rt_smem
        lay256: gl.constexpr = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16)
        q_smem = gl.allocate_shared_memory(gl.float16, [4, 64, 64], lay64)
        k_smem = gl.allocate_shared_memory(gl.float16, [2, 256, 64], lay256)
        v_smem = gl.allocate_shared_memory(gl.float16, [2, 256, 64], lay256)
        q_ready = gl.allocate_shared_memory(gl.int64, [4, 1], _gl_bar.MBarrierLayout())
        q_free = gl.allocate_shared_memory(gl.int64, [4, 1], _gl_bar.MBarrierLayout())
        kv_ready = gl.allocate_shared_memory(gl.int64, [2, 1], _gl_bar.MBarrierLayout())
        kv_free = gl.allocate_shared_memory(gl.int64, [2, 1], _gl_bar.MBarrierLayout())
        o_smem = gl.allocate_shared_memory(gl.float16, [4, 64, 64], lay64)  # per consumer and tile
        o_ready = gl.allocate_shared_memory(gl.int64, [4, 1], _gl_bar.MBarrierLayout())
        o_free = gl.allocate_shared_memory(gl.int64, [4, 1], _gl_bar.MBarrierLayout())
        for i in gl.static_range(4):
            _gl_bar.init(q_ready.index(i), count=1)
            _gl_bar.init(q_free.index(i), count=1)
        for i in gl.static_range(4):
            _gl_bar.init(o_ready.index(i), count=1)
            _gl_bar.init(o_free.index(i), count=1)
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], _gl_bar.MBarrierLayout())  # PINGPONG
        for i in gl.static_range(2):
            _gl_bar.init(kv_ready.index(i), count=1)
            _gl_bar.init(kv_free.index(i), count=2)  # both consumers
            _gl_bar.init(turn.index(i), count=1)
        _gl_fence()
        # the argument tuples are written out in the call: a tuple held in a variable turns its constexprs into
        # tensors (Triton 3.6), and the partitions need O_STRIDE and WG as constexprs
        gl.warp_specialize(
            [
                (
                    _ga_consumer,
                    (o_smem, q_smem, k_smem, v_smem, rt_smem, rw_smem, q_ready, q_free, kv_ready, kv_free,
                     o_ready, o_free, turn, n_items, H, n_wh, n_ww, band0, 0, PINGPONG, LSUM_MMA, BIAS_SHUFFLE,
                     SKIP_PAD),
                ),
                (
                    _ga_consumer,
                    (o_smem, q_smem, k_smem, v_smem, rt_smem, rw_smem, q_ready, q_free, kv_ready, kv_free,
                     o_ready, o_free, turn, n_items, H, n_wh, n_ww, band0, 1, PINGPONG, LSUM_MMA, BIAS_SHUFFLE,
                     SKIP_PAD),
                ),
                (
                    _ga_loader,
                    (qkv_ptr, o_ptr, q_smem, k_smem, v_smem, o_smem, q_ready, q_free, kv_ready, kv_free, o_ready,
                     o_free, tok0, pad_row, H, W, n_wh, n_ww, band0, n_items, PDL, O_STRIDE),
                ),
            ],
            [4, 4],
            [CONSUMER_REGS, LOADER_REGS],
        )  # fmt: skip

    # ----------------------------------------------------------------------- warp-specialized GEMM in Gluon
    # c = act(a @ w^T + bias), fp16 operands and output, fp32 accumulation (qkv: act = identity; mlp1: GELU in
    # packed fp16, GELU_F16X2). Per program (persistent over 128 x 256 tiles, GROUP_M order as _tile_coords):
    # a loader warp streams [128, 64] A and [256, 64] W tiles into a ring by TMA; two consumer warpgroups take
    # the tile's rows 0-63 and 64-127 (their accumulators start at the bias) and hand fp16 halves to an
    # epilogue warp pair through shared memory, which applies the GELU and stores them (from its registers with
    # GLUON_GEMM_DIRECT_STORE, else by TMA) while the consumers run the next tile's products (session 25).

    @gluon.jit
    def _gg_coords(tile, M, N: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr):
        """_tile_coords in Gluon: GROUP_M row tiles share each weight column tile while it is in L2."""
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n: gl.constexpr = N // BN
        in_group = GROUP_M * num_pid_n
        first_m = (tile // in_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        return (first_m + (tile % in_group) % group_m) * BM, ((tile % in_group) // group_m) * BN

    @gluon.jit
    def _gg_loader(
        a_desc, w_desc, a_s, b_s, ready, empty, M, N: gl.constexpr, K: gl.constexpr, GROUP_M: gl.constexpr,
        STAGES: gl.constexpr, PDL: gl.constexpr,
    ):  # fmt: skip
        """One warp: every (tile, k step) of the program into the STAGES-deep ring, once its stage is free."""
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = w_desc.block_type.shape[0]
        _gl_pdl_enter(PDL)  # the previous kernel's writes (a; c's space) are visible after this
        c = 0
        for tile in range(gl.program_id(0), gl.cdiv(M, BM) * (N // BN), gl.num_programs(0)):
            off_m, off_n = _gg_coords(tile, M, N, BM, BN, GROUP_M)
            for kk in range(K // BK):
                s = c % STAGES
                _gl_bar.wait(empty.index(s), ((c // STAGES) & 1) ^ 1)
                _gl_bar.expect(ready.index(s), a_desc.block_type.nbytes + w_desc.block_type.nbytes)
                _gl_tma_load(a_desc, [off_m, kk * BK], ready.index(s), a_s.index(s))
                _gl_tma_load(w_desc, [off_n, kk * BK], ready.index(s), b_s.index(s))
                c += 1

    @gluon.jit
    def _gg_consumer(
        a_s, b_s, e_s, ready, empty, e_ready, e_free, bias_ptr, M, N: gl.constexpr, K: gl.constexpr,
        GROUP_M: gl.constexpr, STAGES: gl.constexpr, WG: gl.constexpr,
    ):  # fmt: skip
        """One warpgroup: rows WG * 64 .. + 63 of every tile; bias + a w^T into its epilogue buffer, in the
        buffer's dtype."""
        BM: gl.constexpr = a_s.shape[1]
        BN: gl.constexpr = b_s.shape[1]
        BK: gl.constexpr = a_s.shape[2]
        HM: gl.constexpr = BM // 2
        acc_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
        )
        c = 0
        t = 0
        for tile in range(gl.program_id(0), gl.cdiv(M, BM) * (N // BN), gl.num_programs(0)):
            off_m, off_n = _gg_coords(tile, M, N, BM, BN, GROUP_M)
            cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_l))
            bias = gl.load(bias_ptr + cols)
            acc = gl.zeros([HM, BN], gl.float32, acc_l) + gl.expand_dims(bias, 0)
            for kk in range(K // BK):
                s = c % STAGES
                _gl_bar.wait(ready.index(s), (c // STAGES) & 1)
                acc = _gl_mma(a_s.index(s).slice(WG * HM, HM), b_s.index(s).permute((1, 0)), acc,
                              use_acc=True, is_async=True)  # fmt: skip
                acc = _gl_mma_wait(num_outstanding=1, deps=(acc,))
                # the previous step's products are done: its stage is free (from this warpgroup)
                _gl_bar.arrive(empty.index((c + STAGES - 1) % STAGES), pred=kk > 0)
                c += 1
            acc = _gl_mma_wait(num_outstanding=0, deps=(acc,))
            _gl_bar.arrive(empty.index((c + STAGES - 1) % STAGES))
            _gl_bar.wait(e_free.index(WG), (t & 1) ^ 1)
            e_s.index(WG).store(acc.to(e_s.dtype))
            _gl_fence()  # for the TMA store (async proxy)
            _gl_sync()  # every thread's part is written
            _gl_bar.arrive(e_ready.index(WG))
            t += 1

    @gluon.jit
    def _gg_epilogue(
        c_desc, c_ptr, e_s, e_ready, e_free, M, N: gl.constexpr, GROUP_M: gl.constexpr, GELU: gl.constexpr,
        ROWS: gl.constexpr, WARPS: gl.constexpr, DIRECT: gl.constexpr,
    ):  # fmt: skip
        """WARPS warps: each tile's two fp16 halves, GELU in place (ROWS rows at a time) and a TMA store; a
        buffer is free again once its store has read it. DIRECT: the rows go to c by 16-byte stores from the
        registers instead (no write back to shared memory, no TMA store), and the buffer is free once read."""
        HM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
        t = 0
        for tile in range(gl.program_id(0), gl.cdiv(M, 2 * HM) * (N // BN), gl.num_programs(0)):
            off_m, off_n = _gg_coords(tile, M, N, 2 * HM, BN, GROUP_M)
            for h in gl.static_range(2):
                buf = e_s.index(h)
                _gl_bar.wait(e_ready.index(h), t & 1)
                if DIRECT:
                    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, blk))
                    for r in gl.static_range(HM // ROWS):
                        v = buf.slice(ROWS * r, ROWS).load(blk)
                        if GELU:
                            v = gl.inline_asm_elementwise(
                                _GELU_F16X2_PTX, "=r,r", [v], dtype=gl.float16, is_pure=True, pack=2
                            )
                        rows = off_m + h * HM + ROWS * r + gl.arange(0, ROWS, layout=gl.SliceLayout(1, blk))
                        gl.store(c_ptr + rows[:, None] * N + cols[None, :], v, mask=(rows < M)[:, None])
                    _gl_sync()  # every thread has read the buffer
                    _gl_bar.arrive(e_free.index(h))
                else:
                    if GELU:
                        for r in gl.static_range(HM // ROWS):
                            v = buf.slice(ROWS * r, ROWS).load(blk)
                            v = gl.inline_asm_elementwise(
                                _GELU_F16X2_PTX, "=r,r", [v], dtype=gl.float16, is_pure=True, pack=2
                            )
                            buf.slice(ROWS * r, ROWS).store(v)
                        _gl_fence()
                        _gl_sync()
                    _gl_tma_store(c_desc, [off_m + h * HM, off_n], buf)  # rows past M are clipped
            if not DIRECT:
                _gl_tma.store_wait(1)
                _gl_bar.arrive(e_free.index(0))
                _gl_tma.store_wait(0)
                _gl_bar.arrive(e_free.index(1))
            t += 1

    @gluon.jit
    def _gg_ln_pieces(x_s, q, NR: gl.constexpr, lay: gl.constexpr):
        """Row q's three 256-column pieces from the LayerNorm warp's ring (slots 3 q .. 3 q + 2, modulo NR)."""
        return (
            x_s.index((3 * q) % NR).load(lay),
            x_s.index((3 * q + 1) % NR).load(lay),
            x_s.index((3 * q + 2) % NR).load(lay),
        )

    @gluon.jit
    def _gg_ln_issue(x_s, x_ptr, q, first, step, r1, cols, NR: gl.constexpr, C: gl.constexpr):
        """cp.async of row q of this program (row first + q step, clamped to the last row) into the ring."""
        row = gl.minimum(first + q * step, r1 - 1).to(gl.int64) * C
        for j in gl.static_range(3):
            _gl_cp_load(x_s.index((3 * q + j) % NR), x_ptr + row + j * 256 + cols)

    @gluon.jit
    def _gg_ln_row(
        x_s, w, b_ptr, y_ptr, q, first, step, n_mine, eps, cols, NR: gl.constexpr, PARAMS: gl.constexpr,
        lay: gl.constexpr, C: gl.constexpr,
    ):  # fmt: skip
        """Normalise row q of this program from the ring (two passes over shared memory) and store it (fp16). The
        LayerNorm weight and bias (PARAMS, see _gg_layernorm_rows): w the weight's three pieces in registers
        (PARAMS 0, 1), else from slots NR .. NR + 2 of x_s; the bias from b_ptr (0) or slots NR .. NR + 2 (1) or
        NR + 3 .. NR + 5 (2)."""
        if PARAMS == 0:
            b = (gl.load(b_ptr + cols), gl.load(b_ptr + 256 + cols), gl.load(b_ptr + 512 + cols))
        else:
            PB: gl.constexpr = NR if PARAMS == 1 else NR + 3
            b = (x_s.index(PB).load(lay), x_s.index(PB + 1).load(lay), x_s.index(PB + 2).load(lay))
        if PARAMS == 2:
            w = (x_s.index(NR).load(lay), x_s.index(NR + 1).load(lay), x_s.index(NR + 2).load(lay))
        x0, x1, x2 = _gg_ln_pieces(x_s, q, NR, lay)
        mean = gl.sum(x0 + x1 + x2, axis=1)[:, None] / C
        x0, x1, x2 = _gg_ln_pieces(x_s, q, NR, lay)
        x0 -= mean
        x1 -= mean
        x2 -= mean
        rstd = (1.0 / gl.sqrt(gl.sum(x0 * x0 + x1 * x1 + x2 * x2, axis=1) / C + eps))[:, None]
        row = (first + q * step).to(gl.int64) * C
        for j in gl.static_range(3):
            xj = x0 if j == 0 else (x1 if j == 1 else x2)
            yj = xj * rstd * w[j] + b[j]
            gl.store(y_ptr + row + j * 256 + cols, yj.to(gl.float16), mask=q < n_mine)

    @gluon.jit
    def _gg_layernorm_rows(
        x_ptr, w_ptr, b_ptr, y_ptr, x_s, r0, r1, pad, eps, C: gl.constexpr, PDL: gl.constexpr, LN: gl.constexpr,
        PARAMS: gl.constexpr,
    ):  # fmt: skip
        """One warp per program, beside the GEMM's partitions (GLUON_GEMM_LN_NEXT): LayerNorm of rows r0 .. r1 - 1
        of x (fp32, C = 768 columns) into y (fp16), program p taking rows r0 + p, r0 + p + programs, ..., as
        _prologue_kernel computes them (fp32 statistics, two-pass variance); the first program also writes row
        `pad` of y as zeros when pad >= 0 (the padded token's row). These are the next chunk's rows: nothing else
        of the launch reads or writes them. One row a step, the next rows in flight by cp.async in x_s, a ring of
        256-column pieces (a row is three; 16 pieces: four rows ahead and a spare piece, as shapes are powers of
        two); each lane reads back only what it copied itself, so the ring needs no barrier. PARAMS
        (GLUON_GEMM_LN_PARAMS): 0 the weight in registers and the bias loaded per row, 1 (the default) the bias in
        three of the ring's pieces (three rows ahead), 2 the weight too (two rows ahead). LN False: nothing to do
        (a launch without LayerNorm rows; the warp is the CTA's twelfth, there anyway)."""
        if LN:
            gl.static_assert(C == 768)
            gl.static_assert(x_s.shape[0] == 16)
            NR: gl.constexpr = 16 if PARAMS == 0 else (12 if PARAMS == 1 else 9)  # the rows' pieces
            # [1, 256] pieces (a 2-d layout stays legal for the ring's slots in Triton 3.6): 8 fp32 a lane
            lay: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, 1], [1, 0])
            cols = gl.arange(0, 256, layout=gl.SliceLayout(0, lay))[None, :]
            _gl_pdl_enter(PDL)
            if gl.program_id(0) == 0:
                if pad >= 0:
                    zero = gl.zeros([1, 256], gl.float16, lay)
                    for j in gl.static_range(3):
                        gl.store(y_ptr + pad.to(gl.int64) * C + j * 256 + cols, zero)
            first = r0 + gl.program_id(0)
            step = gl.num_programs(0)
            if first < r1:
                n_mine = (r1 - first + step - 1) // step
                # the weight in registers (loaded per row with the bias, their L2 round trips were half the warp's
                # time; both in registers spill at 80), or in the ring's spare pieces with the bias (PARAMS)
                w = None
                if PARAMS < 2:
                    w = (gl.load(w_ptr + cols), gl.load(w_ptr + 256 + cols), gl.load(w_ptr + 512 + cols))
                if PARAMS > 0:  # their own copy group, older than every row's
                    for j in gl.static_range(3):
                        _gl_cp_load(x_s.index(NR + j + (3 if PARAMS == 2 else 0)), b_ptr + j * 256 + cols)
                        if PARAMS == 2:
                            _gl_cp_load(x_s.index(NR + j), w_ptr + j * 256 + cols)
                    _gl_cp.commit_group()
                # rows in flight beside the one being normalised
                AHEAD: gl.constexpr = (NR - 3) // 3
                for k in gl.static_range(AHEAD):
                    _gg_ln_issue(x_s, x_ptr, k, first, step, r1, cols, NR, C)
                    _gl_cp.commit_group()
                for i in range(n_mine):  # rows past the last are loaded (copies of it), never stored
                    _gg_ln_issue(x_s, x_ptr, i + AHEAD, first, step, r1, cols, NR, C)
                    _gl_cp.commit_group()
                    _gl_cp.wait_group(AHEAD)  # row i (and the weight / bias pieces) have landed
                    _gg_ln_row(x_s, w, b_ptr, y_ptr, i, first, step, n_mine, eps, cols, NR, PARAMS, lay, C)
                _gl_cp.wait_group(0)

    @gluon.jit
    def _gg_barriers(N: gl.constexpr, COUNT: gl.constexpr):
        """N mbarriers, each completing a phase after COUNT arrivals."""
        bars = gl.allocate_shared_memory(gl.int64, [N, 1], _gl_bar.MBarrierLayout())
        for i in gl.static_range(N):
            _gl_bar.init(bars.index(i), count=COUNT)
        return bars

    @gluon.jit
    def _gg_ring(a_desc, w_desc, STAGES: gl.constexpr, CONSUMERS: gl.constexpr = 2):
        """The loader's ring: STAGES A and W tiles; per stage a `ready` barrier (the TMA's bytes) and an `empty`
        one (CONSUMERS warpgroups: both, or the one whose tile the stage holds in the ping-pong projection)."""
        a_s = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_s = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
        return a_s, b_s, _gg_barriers(STAGES, 1), _gg_barriers(STAGES, CONSUMERS)

    @gluon.jit(do_not_specialize=["M", "ln_r0", "ln_r1", "ln_pad"])
    def _linear_gluon_kernel(
        a_desc,  # [M, K] fp16, block [128, 64]
        w_desc,  # [N, K] fp16, block [256, 64]
        c_desc,  # [M, N] fp16, block [64, 256]
        c_ptr,  # the same c (DIRECT stores)
        bias_ptr,  # [N] fp32
        M,
        ln_x_ptr,  # LN: the next chunk's x rows [.., 768] fp32, LayerNorm weight and bias [768] fp32
        ln_w_ptr,
        ln_b_ptr,
        ln_y_ptr,  # LN: [.., 768] fp16, the next chunk's LayerNorm1 output
        ln_r0,  # LN: rows ln_r0 .. ln_r1 - 1 of ln_x into ln_y, and row ln_pad of ln_y as zeros (if >= 0)
        ln_r1,
        ln_pad,
        ln_eps,
        N: gl.constexpr,
        K: gl.constexpr,
        GELU: gl.constexpr = False,
        DIRECT: gl.constexpr = False,
        LN: gl.constexpr = False,
        LN_REGS: gl.constexpr = 80,
        LN_PIECES: gl.constexpr = 1,
        LN_PARAMS: gl.constexpr = 0,
        GROUP_M: gl.constexpr = 8,
        STAGES: gl.constexpr = 3,
        CONSUMER_REGS: gl.constexpr = 216,
        EPILOGUE_REGS: gl.constexpr = 80,
        LOADER_REGS: gl.constexpr = 80,
        ROWS: gl.constexpr = 16,
        PDL: gl.constexpr = 0,
    ):  # fmt: skip
        """c = act(a w^T + bias) on sm_90 (see above): 4 + 4 consumer warps, 2 epilogue warps, 1 loader warp;
        shared memory: the ring (STAGES x 48 KB) and the two [64, 256] epilogue buffers (64 KB)."""
        a_s, b_s, ready, empty = _gg_ring(a_desc, w_desc, STAGES)
        e_s = gl.allocate_shared_memory(gl.float16, [2] + c_desc.block_type.shape, c_desc.layout)
        e_ready = _gg_barriers(2, 1)
        e_free = _gg_barriers(2, 1)
        _gl_fence()
        # the LayerNorm warp (LN) is the CTA's twelfth, which the three other workers leave unused (Triton pads the
        # 11 warps to 12; LN_REGS: its registers); without LN it returns at once and its ring is one piece
        ln_s = gl.allocate_shared_memory(
            gl.float32, [LN_PIECES, 1, 256], gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        )
        # the argument tuples are written out in the call (a tuple held in a variable turns its constexprs into
        # tensors in Triton 3.6)
        gl.warp_specialize(
            [
                (
                    _gg_consumer,
                    (a_s, b_s, e_s, ready, empty, e_ready, e_free, bias_ptr, M, N, K, GROUP_M, STAGES, 0),
                ),
                (
                    _gg_consumer,
                    (a_s, b_s, e_s, ready, empty, e_ready, e_free, bias_ptr, M, N, K, GROUP_M, STAGES, 1),
                ),
                (_gg_epilogue, (c_desc, c_ptr, e_s, e_ready, e_free, M, N, GROUP_M, GELU, ROWS, 2, DIRECT)),
                (_gg_loader, (a_desc, w_desc, a_s, b_s, ready, empty, M, N, K, GROUP_M, STAGES, PDL)),
                (_gg_layernorm_rows, (ln_x_ptr, ln_w_ptr, ln_b_ptr, ln_y_ptr, ln_s, ln_r0, ln_r1, ln_pad, ln_eps,
                                      K, PDL, LN, LN_PARAMS)),
            ],
            [4, 2, 1, 1],
            [CONSUMER_REGS, EPILOGUE_REGS, LOADER_REGS, LN_REGS],
        )  # fmt: skip

    @gluon.jit
    def _gg_consumer_pp(
        a_s, b_s, e_s, ready, empty, x_ready, e_ready, turn, bias_ptr, bias2_ptr, M, N: gl.constexpr,
        K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, WG: gl.constexpr, BIAS2: gl.constexpr,
    ):  # fmt: skip
        """One warpgroup of the ping-pong projection (GLUON_GEMM["proj"]): every other 128 x 128 tile of the
        program (local tile index t with t % 2 == WG), all 128 rows as two [64, 128] accumulators. The K loops
        take turns (turn[WG]: the other warpgroup has waited for its tile's last stage), so neither waits on a
        ring stage more than one phase ahead, and one's epilogue runs beside the other's products. Then the bias
        (+ bias2) and the residual rows that the epilogue warp brought into this warpgroup's buffers
        (e_s[2 WG + h], x_ready) are added and the sum written back there."""
        BM: gl.constexpr = a_s.shape[1]
        BN: gl.constexpr = b_s.shape[1]
        BK: gl.constexpr = a_s.shape[2]
        KSTEPS: gl.constexpr = K // BK
        acc_l: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
        )
        c = 0  # the ring's stage counter over all of the program's tiles (both warpgroups')
        t = 0
        j = 0  # this warpgroup's tiles
        for tile in range(gl.program_id(0), gl.cdiv(M, BM) * (N // BN), gl.num_programs(0)):
            if t % 2 == WG:
                off_m, off_n = _gg_coords(tile, M, N, BM, BN, GROUP_M)
                cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_l))
                bias = gl.load(bias_ptr + cols)
                if BIAS2:
                    bias += gl.load(bias2_ptr + cols)
                acc0 = gl.zeros([64, BN], gl.float32, acc_l)
                acc1 = gl.zeros([64, BN], gl.float32, acc_l)
                if WG == 1 or j > 0:  # warpgroup 0 starts; then each waits for the other's K loop
                    _gl_bar.wait(turn.index(WG), (j + WG + 1) & 1)
                for kk in range(KSTEPS):
                    s = c % STAGES
                    _gl_bar.wait(ready.index(s), (c // STAGES) & 1)
                    w_t = b_s.index(s).permute((1, 0))
                    acc0 = _gl_mma(a_s.index(s).slice(0, 64), w_t, acc0, use_acc=True, is_async=True)
                    acc1 = _gl_mma(a_s.index(s).slice(64, 64), w_t, acc1, use_acc=True, is_async=True)
                    acc0, acc1 = _gl_mma_wait(num_outstanding=2, deps=(acc0, acc1))
                    # the previous step's products are done: its stage is free
                    _gl_bar.arrive(empty.index((c + STAGES - 1) % STAGES), pred=kk > 0)
                    c += 1
                _gl_bar.arrive(turn.index(1 - WG))  # every stage of this tile is waited for: the other's turn
                acc0, acc1 = _gl_mma_wait(num_outstanding=0, deps=(acc0, acc1))
                _gl_bar.arrive(empty.index((c + STAGES - 1) % STAGES))
                bias_row = gl.expand_dims(bias, 0)
                _gl_bar.wait(x_ready.index(2 * WG), j & 1)
                buf0 = e_s.index(2 * WG)
                buf0.store(acc0 + bias_row + buf0.load(acc_l))
                _gl_bar.wait(x_ready.index(2 * WG + 1), j & 1)
                buf1 = e_s.index(2 * WG + 1)
                buf1.store(acc1 + bias_row + buf1.load(acc_l))
                _gl_fence()  # for the TMA store (async proxy)
                _gl_sync()  # every thread's part is written
                _gl_bar.arrive(e_ready.index(2 * WG))
                _gl_bar.arrive(e_ready.index(2 * WG + 1))
                j += 1
            else:
                c += KSTEPS
            t += 1

    @gluon.jit
    def _gg_x_load(x_desc, bar, buf, row, col):
        """One [64, 128] piece of the residual x at (row, col) into buf by TMA, counted on bar."""
        _gl_bar.expect(bar, x_desc.block_type.nbytes)
        _gl_tma_load(x_desc, [row, col], bar, buf)

    @gluon.jit
    def _gg_epilogue_pp(c_desc, x_desc, e_s, x_ready, e_ready, M, N: gl.constexpr, GROUP_M: gl.constexpr):
        """One warp of the ping-pong projection: each tile's residual rows ([64, 128] pieces 2 w, 2 w + 1 for the
        warpgroup w = t % 2 that computes it) into e_s by TMA two tiles ahead (the first two before the PDL wait: x
        is an input), the sums out by TMA stores, each buffer refilled once its store has read it."""
        HM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        first = gl.program_id(0)
        step = gl.num_programs(0)
        n_tiles = gl.cdiv(M, 2 * HM) * (N // BN)
        for u in gl.static_range(2):
            if first + u * step < n_tiles:
                off_m, off_n = _gg_coords(first + u * step, M, N, 2 * HM, BN, GROUP_M)
                for h in gl.static_range(2):
                    _gg_x_load(x_desc, x_ready.index(2 * u + h), e_s.index(2 * u + h), off_m + h * HM, off_n)
        t = 0
        for tile in range(first, n_tiles, step):
            w = t % 2
            off_m, off_n = _gg_coords(tile, M, N, 2 * HM, BN, GROUP_M)
            nxt = tile + 2 * step
            nxt_m, nxt_n = _gg_coords(nxt, M, N, 2 * HM, BN, GROUP_M)
            for h in gl.static_range(2):
                _gl_bar.wait(e_ready.index(2 * w + h), (t // 2) & 1)
                _gl_tma_store(
                    c_desc, [off_m + h * HM, off_n], e_s.index(2 * w + h)
                )  # rows past M are clipped
            for h in gl.static_range(2):
                _gl_tma.store_wait(1 - h)  # piece h's store has read its buffer
                if nxt < n_tiles:
                    _gg_x_load(x_desc, x_ready.index(2 * w + h), e_s.index(2 * w + h), nxt_m + h * HM, nxt_n)
            t += 1

    @gluon.jit(do_not_specialize=["M"])
    def _linear_gluon_residual_pp_kernel(
        a_desc,  # [M, K] fp16, block [128, BK]
        w_desc,  # [N, K] fp16, block [128, BK]
        c_desc,  # [M, N] fp32, block [64, 128]: the output
        x_desc,  # [M, N] fp32, block [64, 128]: the residual
        bias_ptr,  # [N] fp32
        bias2_ptr,  # [N] fp32 (BIAS2)
        M,
        N: gl.constexpr,
        K: gl.constexpr,
        BIAS2: gl.constexpr = False,
        GROUP_M: gl.constexpr = 8,
        STAGES: gl.constexpr = 3,
        CONSUMER_REGS: gl.constexpr = 216,
        EPILOGUE_REGS: gl.constexpr = 80,
        LOADER_REGS: gl.constexpr = 80,
        PDL: gl.constexpr = 0,
    ):  # fmt: skip
        """c = x + bias (+ bias2) + a w^T, fp32 c and x, on sm_90, over 128 x 128 tiles in ping-pong (session 30,
        GLUON_GEMM["proj"]): `_gg_loader`'s ring (STAGES x 256 x BK fp16: 96 KB), each stage used by the one
        consumer warpgroup whose tile it holds, the warpgroups on alternate tiles, and four [64, 128] fp32 buffers
        (128 KB, two per warpgroup) that hold the residual rows (TMA, two tiles ahead) and then the sum in place
        until the TMA store has read it."""
        a_s, b_s, ready, empty = _gg_ring(a_desc, w_desc, STAGES, 1)
        e_s = gl.allocate_shared_memory(gl.float32, [4] + c_desc.block_type.shape, c_desc.layout)
        x_ready = _gg_barriers(4, 1)
        e_ready = _gg_barriers(4, 1)
        turn = _gg_barriers(2, 1)
        _gl_fence()
        gl.warp_specialize(
            [
                (
                    _gg_consumer_pp,
                    (a_s, b_s, e_s, ready, empty, x_ready, e_ready, turn, bias_ptr, bias2_ptr, M, N, K, GROUP_M,
                     STAGES, 0, BIAS2),
                ),
                (
                    _gg_consumer_pp,
                    (a_s, b_s, e_s, ready, empty, x_ready, e_ready, turn, bias_ptr, bias2_ptr, M, N, K, GROUP_M,
                     STAGES, 1, BIAS2),
                ),
                (_gg_epilogue_pp, (c_desc, x_desc, e_s, x_ready, e_ready, M, N, GROUP_M)),
                (_gg_loader, (a_desc, w_desc, a_s, b_s, ready, empty, M, N, K, GROUP_M, STAGES, PDL)),
            ],
            [4, 1, 1],
            [CONSUMER_REGS, EPILOGUE_REGS, LOADER_REGS],
        )  # fmt: skip


# --------------------------------------------------------------------------------------------- wrappers
# Each *_launch function returns (kernel, grid, args, kwargs) without launching: forward() prepares every
# launch of the call (views, TMA descriptors) first and then issues them back to back, so the GPU is not
# left waiting on Python between kernels.

Launch = tuple  # (triton.JITFunction, grid, args, kwargs), or (function, None, args, kwargs): a torch step

#: Issue a call's launches through the compiled kernels' own launchers (see _direct_launchers); False: the
#: plain `fn[grid](...)` path for every launch.
DIRECT_LAUNCH = True
#: Triton versions whose launch protocol (`CompiledKernel[grid](*all parameters, stream=)`) was checked: these
#: exactly (3.6 on the H200, 3.9 here), not the versions between them.
_DIRECT_LAUNCH_TRITON = frozenset({(3, 6), (3, 9)})
_TRITON_VERSION = tuple(int(v) for v in triton.__version__.split(".")[:2])
_SIGNATURES: dict = {}  # kernel -> [(parameter name, default)]
_EMPTY = inspect.Parameter.empty
_RUNNERS: dict = {}  # launch key -> the compiled kernel's runner (see _direct_launchers)
#: Direct launches pass tensors as their addresses: Triton's launcher takes an int as it is, where it calls a
#: tensor's data_ptr() while it issues the launch (075, H200, session 10: a launch of ~55 tensors 18-20 us
#: after the previous one instead of 45-66 under the profiler). TMA descriptors are passed as they are.
INT_ADDRESSES = True


def _direct_launch_ok(plan: list[Launch]) -> bool:
    """Direct launches need real GPU kernels and a Triton version whose launch protocol was checked (the
    compiled kernel's runner calls the launch hooks, e.g. a profiler's, as Triton's own launch does)."""
    from triton.runtime.jit import JITFunction

    if not DIRECT_LAUNCH or not plan or not isinstance(plan[0][0], JITFunction):
        return False  # the interpreter's functions (InterpretedFunction) compile nothing
    tensors = (getattr(a, "base", a) for a in plan[0][2])  # (a TMA descriptor's tensor)
    if next((t.device.type for t in tensors if isinstance(t, torch.Tensor)), "cuda") != "cuda":
        return False  # a recording on meta tensors (Gluon kernels stay JIT functions under the interpreter)
    return _checked_triton(_TRITON_VERSION)


def _checked_triton(version: tuple) -> bool:
    """A (major, minor) Triton version whose launch protocol was checked: exactly those listed."""
    return version in _DIRECT_LAUNCH_TRITON


def _parameters(fn, args: tuple, kwargs: dict) -> list:
    """Every parameter of the kernel in signature order (constexprs and defaults included), as Triton's own
    launch passes them to the compiled kernel's launcher; launch options (num_warps, ...) are not parameters."""
    layout = _SIGNATURES.get(fn)
    if layout is None:
        params = inspect.signature(fn.fn).parameters.values()
        layout = _SIGNATURES[fn] = [(p.name, p.default) for p in params]
    if len(args) > len(layout):
        raise TypeError(f"{fn.fn.__name__}: {len(args)} positional arguments for {len(layout)} parameters")
    out = list(args)
    for name, default in layout[len(args) :]:
        value = kwargs.get(name, default)
        if value is _EMPTY:
            raise TypeError(f"{fn.fn.__name__}: missing argument {name!r}")
        out.append(value)
    return out


def _arg_key(value) -> tuple:
    """What of an argument can decide Triton's specialisation, or finer: tensors by dtype and 16-byte
    alignment, TMA descriptors by dtype, alignment, shape, strides and block, everything else by value."""
    if isinstance(value, torch.Tensor):
        return ("t", value.dtype, value.data_ptr() % 16 == 0)
    if isinstance(value, TensorDescriptor) or (gluon is not None and isinstance(value, _GlDescriptor)):
        base = value.base
        return (
            "d", type(value), base.dtype, base.data_ptr() % 16 == 0, tuple(value.shape), tuple(value.strides),
            tuple(value.block_shape), repr(getattr(value, "layout", None)),
        )  # fmt: skip
    return ("v", type(value), value)


def _direct_launchers(plan: list[Launch]) -> list[tuple]:
    """(runner, parameters) per launch. The runner is the compiled kernel that Triton's own launch would
    pick: `fn.warmup` runs Triton's specialisation and cache lookup (and compiles on a miss) for these
    arguments without launching; it is cached under a key at least as fine as that specialisation
    (`_arg_key`), so a repeated launch shape costs a dictionary lookup. Preparing the whole plan before the
    first launch keeps this Python work out of the GPU span, and each launch then costs only the launcher
    call (H200 probe at 4x64x64, 27 launches: 704 -> 396 us of CPU from the first launch to the last)."""
    device = torch.cuda.current_device()
    out = []
    for fn, grid, args, kwargs in plan:
        if grid is None:  # a torch step: called as it is, in order
            out.append((None, functools.partial(fn, *args, **kwargs), None))
            continue
        key = (
            fn,
            device,
            tuple(grid),
            tuple(map(_arg_key, args)),
            tuple((k, _arg_key(v)) for k, v in kwargs.items()),
        )
        found = _RUNNERS.get(key)
        if found is None:
            if len(_RUNNERS) >= 4096:
                _RUNNERS.clear()
            compiled = fn.warmup(*args, grid=grid, **kwargs)
            grid3 = (*grid, 1, 1)[:3]
            runner = compiled[grid3]  # the runner indexes three grid dimensions (and loads the kernel)
            found = _RUNNERS[key] = (runner, _raw_launcher(compiled, grid3))
        runner, raw = found
        params = _parameters(fn, args, kwargs)
        if INT_ADDRESSES:
            params = [p.data_ptr() if isinstance(p, torch.Tensor) else p for p in params]
        out.append((runner, params, None if raw is None else _raw_parts(raw, params)))
    return out


#: Raw launches (session 26): the C launch function of the compiled kernel's launcher called with the arguments
#: Triton's Python layers would hand it (TMA descriptors encoded, `make_tensordesc_arg`), all prepared before the
#: call's first launch: about 3.5 us of CPU per launch instead of 6-14 (H200, #16's 18 launches: 112 against 208 us
#: from the first to the last). Only for the Triton versions whose launcher was read (3.6: `CudaLauncher`, its
#: descriptor wrapper `wrap_handle_tensordesc`), and only where no launch hook is set.
RAW_LAUNCH = True
_RAW_LAUNCH_TRITON = frozenset({(3, 6)})


def _raw_launch_ok() -> bool:
    if not RAW_LAUNCH or _TRITON_VERSION not in _RAW_LAUNCH_TRITON:
        return False
    hooks = triton.knobs.runtime
    # Triton 3.6's hooks are HookChains (a list of callables, empty unless a tool such as proton added one)
    return all(
        h is None or not getattr(h, "calls", True) for h in (hooks.launch_enter_hook, hooks.launch_exit_hook)
    )


def _raw_launcher(compiled, grid3: tuple) -> tuple | None:
    """(C launch, grid, the arguments between the stream and the kernel's own, descriptor positions, their
    metadata) of a compiled kernel, as Triton 3.6's `CudaLauncher.__call__` passes them; None where that launcher
    would do more than call it (scratch buffers) or is not laid out as read."""
    if _TRITON_VERSION not in _RAW_LAUNCH_TRITON:
        return None
    try:
        from triton.backends.nvidia.driver import CudaLauncher
    except ImportError:
        return None
    launcher = getattr(compiled, "run", None)
    if type(launcher) is not CudaLauncher or launcher.global_scratch_size or launcher.profile_scratch_size:
        return None
    launch = launcher.launch
    closure = getattr(launch, "__closure__", None)
    if closure:
        # wrap_handle_tensordesc's inner: it holds the C launch, which parameters are descriptors, their metadata
        cells = dict(zip(launch.__code__.co_freevars, (c.cell_contents for c in closure), strict=True))
        launch, indices, metas = (cells.get(k) for k in ("launcher", "tensordesc_indices", "tensordesc_meta"))
        if launch is None or indices is None or metas is None or len(metas) != len(indices):
            return None
    else:
        indices, metas = frozenset(), ()
    head = (
        compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
        compiled.packed_metadata, None, None, None,
    )  # fmt: skip
    return launch, grid3, head, frozenset(indices), list(metas)


def _raw_parts(raw: tuple, params: list) -> tuple:
    """(C launch, grid, arguments after the stream) of one launch: its descriptors encoded now."""
    from triton.backends.nvidia.driver import make_tensordesc_arg

    launch, grid3, head, indices, metas = raw
    args = list(head)
    k = 0
    for i, p in enumerate(params):
        if i in indices:
            expanded = make_tensordesc_arg(p, metas[k])
            k += 1
            args.extend(v.data_ptr() if isinstance(v, torch.Tensor) else v for v in expanded)
        else:
            args.append(p)
    return launch, grid3, tuple(args)


def _launch(plan: list[Launch]) -> None:
    if _direct_launch_ok(plan):
        launches = _direct_launchers(plan)
        stream = torch.cuda.current_stream().cuda_stream  # Triton's choice too: the current device's
        raw = _raw_launch_ok()
        for runner, params, parts in launches:
            if runner is None:  # a torch step
                params()
            elif raw and parts is not None:
                launch, grid, tail = parts
                launch(*grid, stream, *tail)
            else:
                runner(*params, stream=stream)
        return
    for fn, grid, args, kwargs in plan:
        if grid is None:
            fn(*args, **kwargs)
        else:
            fn[grid](*args, **kwargs)


_ADDMM_FP32_OUT: dict[int, bool] = {}  # CUDA device -> torch.addmm takes out_dtype fp32 with fp16 operands


def _addmm_fp32_out_ok(device: torch.device) -> bool:
    """Whether torch on this GPU computes fp16 x fp16 -> fp32 products in place (`torch.addmm(..., out_dtype=)`,
    PyTorch 2.8+); checked once per device on a 16 x 16 product."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    ok = _ADDMM_FP32_OUT.get(index)
    if ok is None:
        c = torch.zeros(16, 16, device=device)
        a = torch.ones(16, 16, device=device, dtype=torch.float16)
        try:
            torch.addmm(c, a, a.t(), out_dtype=torch.float32, out=c)
            ok = bool((c == 16).all())
        except (TypeError, RuntimeError):
            ok = False
        _ADDMM_FP32_OUT[index] = ok
    return ok


def _addmm_step(c: torch.Tensor, a: torch.Tensor, wt: torch.Tensor) -> None:
    """c += a @ wt: fp32 c, fp16 a [M, K] and wt [K, N] (a weight's transposed view); cuBLAS with fp32
    accumulation on a GPU. Elsewhere (the interpreter's CPU tensors, the build's meta tensors) the same
    products in fp32, where they are exact."""
    if c.is_cuda:
        torch.addmm(c, a, wt, out_dtype=torch.float32, out=c)
    else:
        c.addmm_(a.float(), wt.float())


def _pdl_meta(device: torch.device) -> dict:
    """The PDL constexpr and launch option of a launch (PDL on a GPU; the interpreter has no such launch)."""
    return {"PDL": int(PDL), "launch_pdl": True} if PDL and device.type == "cuda" else {"PDL": 0}


def _layernorm_launch(
    x: torch.Tensor,  # [n, 768] fp32
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
    y: torch.Tensor,  # [n (+ 1 with pad_row), 768]
    pad_row: bool = False,
    convert: tuple[tuple[torch.Tensor, ...], torch.Tensor] | None = None,  # (4 fp32 weights, fp16 dst)
    shift: torch.Tensor | None = None,  # [768] fp32: normalise x - shift
) -> Launch:
    rows, warps = LN_CONFIG
    n = x.shape[0]
    n_ln = triton.cdiv(n + int(pad_row), rows)
    if convert is None:
        srcs, dst, blocks = (x, x, x, x), y, (0, 0, 0, 0)
    else:
        srcs, dst = convert
        blocks = tuple(w.numel() // CVT_BLOCK for w in srcs)
    meta = dict(
        C=HIDDEN, BLOCK_C=1024, ROWS=rows, PAD_ROW=pad_row, CONVERT=convert is not None,
        CVT_BLOCK=CVT_BLOCK, NB0=blocks[0], NB1=blocks[1], NB2=blocks[2], num_warps=warps,
        SHIFT=shift is not None,
    )  # fmt: skip
    meta.update(_pdl_meta(x.device))
    args = (x, weight, bias, y, n, eps, n_ln, *srcs, dst, bias if shift is None else shift)
    return _prologue_kernel, (n_ln + sum(blocks),), args, meta


def _layernorm(x, weight, bias, eps, y, pad_row=False, convert=None, shift=None) -> None:
    _launch([_layernorm_launch(x, weight, bias, eps, y, pad_row, convert, shift)])


def ln_capacity(rows: int, n: int, sms: int) -> int:
    """LayerNorm rows a Gluon GEMM launch of rows x n (K = 768) takes beside its tiles (GLUON_GEMM_LN_NEXT): its
    programs' LayerNorm warps busy for GLUON_GEMM_LN_LOAD of the GEMM's time estimated at GLUON_GEMM_LN_TFLOPS,
    at GLUON_GEMM_LN_ROW_US a row."""
    programs = min(sms, triton.cdiv(rows, 128) * (n // 256))
    gemm_us = 2 * rows * n * HIDDEN / (GLUON_GEMM_LN_TFLOPS * 1e6)
    return int(programs * gemm_us * GLUON_GEMM_LN_LOAD / GLUON_GEMM_LN_ROW_US)


def _row_shares(rows: int, weights: list[int]) -> list[tuple[int, int]]:
    """Consecutive ranges covering rows 0 .. rows - 1, each of a size in proportion to its weight."""
    total, acc, bounds = sum(weights), 0, [0]
    for w in weights:
        acc += w
        bounds.append(rows * acc // total)
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def split_k_for(tiles: int, k_steps: int, slots: int, policy: str | int = "auto") -> int:
    """K splits of a GEMM with `tiles` output tiles of `k_steps` K steps on `slots` concurrent programs:
    the policy's count, or ("auto") the divisor s <= SPLIT_K_MAX of k_steps with the fewest waves x (k_steps /
    s + SPLIT_K_OVERHEAD), the smallest s on ties."""
    if policy != "auto":
        s = int(policy)
        if s < 1 or k_steps % s:
            raise ValueError(f"split_k: expected a divisor of {k_steps} K steps, got {policy!r}")
        return s
    best, best_cost = 1, None
    for s in range(1, SPLIT_K_MAX + 1):
        if k_steps % s:
            continue
        cost = -(-tiles * s // slots) * (k_steps / s + SPLIT_K_OVERHEAD)
        if best_cost is None or cost < best_cost - 1e-9:
            best, best_cost = s, cost
    return best


def _linear_launch(
    a: torch.Tensor,  # [M, K]
    w: torch.Tensor,  # [N, K]
    bias: torch.Tensor,  # [N]
    c: torch.Tensor,  # [M, N]
    epilogue: int,
    cfg: tuple,
    residual: torch.Tensor | None = None,
    split_k: str | int = 1,  # EPILOGUE_RESIDUAL in place (residual is c), "tma" kind: K splits (split_k_for)
    bias2: torch.Tensor | None = None,  # [N] fp32, EPILOGUE_RESIDUAL: added with bias
    ln: tuple | None = None,  # LayerNorm rows beside a Gluon GEMM (see _gluon_linear_launch)
) -> Launch:
    if cfg[0] in ("gluon", "gluon_pp"):
        return _gluon_linear_launch(a, w, bias, c, epilogue, cfg, residual, bias2, ln)
    if ln is not None:
        raise ValueError("linear: LayerNorm rows only beside a Gluon GEMM")
    kind, block_m, block_n, block_k, group_m, warps, stages = cfg[:7]
    m, k = a.shape
    n = w.shape[0]
    if n % block_n or k % block_k:
        raise ValueError(f"linear {m}x{n}x{k}: N must be a multiple of {block_n}, K of {block_k}")
    tiles = triton.cdiv(m, block_m) * (n // block_n)
    splits = 1
    in_place = residual is not None and (residual.data_ptr(), residual.shape, residual.stride()) == (
        c.data_ptr(),
        c.shape,
        c.stride(),
    )
    if split_k != 1 and kind == "tma" and epilogue == EPILOGUE_RESIDUAL and in_place:
        splits = split_k_for(tiles, k // block_k, _num_sms(a.device), split_k)
    if splits > 1:
        epilogue = EPILOGUE_ACCUMULATE
    if kind == "ptr" and a.stride() != (k, 1):
        raise ValueError("linear: the pointer GEMM takes a contiguous A (a strided A needs a TMA kind)")
    if bias2 is not None and epilogue != EPILOGUE_RESIDUAL:
        raise ValueError("linear: a second bias only with the residual epilogue")
    res = c if residual is None else residual
    meta = dict(
        N=n, K=k, EPILOGUE=epilogue, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        num_warps=warps, num_stages=stages, BIAS2=bias2 is not None,
    )  # fmt: skip
    if GELU_F16X2 and epilogue == EPILOGUE_GELU and c.dtype == torch.float16 and a.device.type != "cpu":
        meta["GELU16"] = True  # a GPU's launch or its recording (meta tensors); the interpreter keeps _gelu
    b2 = bias if bias2 is None else bias2
    if kind == "ptr":
        return _linear_kernel, (tiles,), (a, w, bias, res, c, m, b2), {**meta, **_pdl_meta(a.device)}
    if kind not in ("tma", "tma_persistent"):
        raise ValueError(f"GEMM config kind: expected 'ptr', 'tma' or 'tma_persistent', got {kind!r}")
    programs = tiles * splits
    if kind == "tma_persistent":
        programs = min(tiles, cfg[7] * _num_sms(a.device))
    a_desc = TensorDescriptor.from_tensor(a, [block_m, block_k])
    w_desc = TensorDescriptor.from_tensor(w, [block_n, block_k])
    meta["FLATTEN"] = kind == "tma_persistent"
    meta["SPLIT_K"] = splits
    meta.update(_pdl_meta(a.device))
    if TMA_STORE not in (0, 1, 2):
        raise ValueError(f"TMA_STORE: expected 0, 1 or 2, got {TMA_STORE!r}")
    if TMA_STORE and epilogue in (EPILOGUE_BIAS, EPILOGUE_GELU) and c.stride() == (n, 1):
        meta["C_SPLIT"] = TMA_STORE
        meta["c_desc"] = TensorDescriptor.from_tensor(c, [block_m, block_n // TMA_STORE])
    return _linear_tma_kernel, (programs,), (a_desc, w_desc, bias, res, c, m, programs, b2), meta


def _gluon_linear_launch(
    a: torch.Tensor,  # [M, K] fp16
    w: torch.Tensor,  # [N, K] fp16
    bias: torch.Tensor,  # [N] fp32
    c: torch.Tensor,  # [M, N] fp16 (EPILOGUE_BIAS, EPILOGUE_GELU) or fp32 (EPILOGUE_RESIDUAL)
    epilogue: int,
    cfg: tuple,  # GLUON_GEMM[stage]
    residual: torch.Tensor | None = None,  # [M, N] fp32, EPILOGUE_RESIDUAL (not c itself)
    bias2: torch.Tensor | None = None,  # [N] fp32, EPILOGUE_RESIDUAL: added with bias
    ln: tuple | None = None,  # (x, weight, bias, eps, y, r0, r1, pad): LayerNorm rows beside an fp16 GEMM
) -> Launch:
    """A Gluon GEMM's launch (sm_90): EPILOGUE_BIAS, EPILOGUE_GELU as GELU_F16X2 computes it (fp16 c, 128 x 256
    tiles, a "gluon" cfg), or EPILOGUE_RESIDUAL (fp32 c, 128 x 128 tiles in ping-pong, a "gluon_pp" cfg). `ln`:
    the fp16 GEMM's extra warp also computes LayerNorm rows r0 .. r1 - 1 of x into y (fp16) and zeros row pad of
    y (pad < 0: none); GLUON_GEMM_LN_NEXT."""
    kind, consumer_regs, epilogue_regs, loader_regs, rows = cfg
    if (kind == "gluon_pp") != (epilogue == EPILOGUE_RESIDUAL) or (
        kind == "gluon_pp" and rows not in (16, 32, 64)
    ):
        raise ValueError(
            "Gluon GEMM: EPILOGUE_RESIDUAL runs the ping-pong form (a 'gluon_pp' cfg, BK 16, 32 or 64), the fp16 "
            f"epilogues a 'gluon' cfg; got {cfg!r} for epilogue {epilogue}"
        )
    if ln is not None and epilogue == EPILOGUE_RESIDUAL:
        raise ValueError("Gluon GEMM: LayerNorm rows only beside the fp16 GEMM (qkv, mlp1)")
    m, k = a.shape
    n = w.shape[0]
    residual_ok = (
        residual is not None
        and residual.dtype == c.dtype == torch.float32
        and residual.shape == c.shape
        and residual is not c
        and (residual.device.type == "meta" or residual.data_ptr() != c.data_ptr())  # (meta: address 0)
    )
    fp16_ok = residual is None and bias2 is None and c.dtype == torch.float16
    if a.dtype != torch.float16 or not (
        (epilogue in (EPILOGUE_BIAS, EPILOGUE_GELU) and fp16_ok)
        or (epilogue == EPILOGUE_RESIDUAL and residual_ok)
    ):
        raise ValueError(
            "the Gluon GEMM takes fp16 operands and EPILOGUE_BIAS / EPILOGUE_GELU with an fp16 output or "
            "EPILOGUE_RESIDUAL with an fp32 output and a separate fp32 residual"
        )
    block_n = 128 if epilogue == EPILOGUE_RESIDUAL else 256
    if n % block_n or k % 64:
        raise ValueError(f"Gluon GEMM {m}x{n}x{k}: N must be a multiple of {block_n}, K of 64")

    def desc(t: torch.Tensor, block: list[int]):
        dtype = gl.float16 if t.dtype == torch.float16 else gl.float32
        return _GlDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))

    tiles = triton.cdiv(m, 128) * (n // block_n)
    grid = (min(tiles, _num_sms(a.device)),)
    meta = dict(
        CONSUMER_REGS=consumer_regs, EPILOGUE_REGS=epilogue_regs, LOADER_REGS=loader_regs, ROWS=rows, num_warps=4,
        **_pdl_meta(a.device),
    )  # fmt: skip
    if kind == "gluon_pp":  # 128 x 128 tiles in ping-pong, a 96 KB ring of BK-wide stages (rows: BK)
        del meta["ROWS"]
        operands = (desc(a, [128, rows]), desc(w, [128, rows]), desc(c, [64, 128]), desc(residual, [64, 128]))
        args = (*operands, bias, bias if bias2 is None else bias2, m, n, k)
        stages = 96 * 1024 // ((128 + 128) * rows * 2)
        return (
            _linear_gluon_residual_pp_kernel,
            grid,
            args,
            {**meta, "BIAS2": bias2 is not None, "STAGES": stages},
        )
    operands = (desc(a, [128, 64]), desc(w, [block_n, 64]), desc(c, [64, block_n]))
    if c.stride() != (n, 1):
        raise ValueError("the Gluon GEMM writes a contiguous fp16 c")
    meta.update(GELU=epilogue == EPILOGUE_GELU, DIRECT=GLUON_GEMM_DIRECT_STORE, LN=ln is not None)
    if ln is not None:
        meta.update(LN_PIECES=GLUON_GEMM_LN_PIECES, LN_PARAMS=GLUON_GEMM_LN_PARAMS)
    return _linear_gluon_kernel, grid, (*operands, c, bias, m, *_ln_host_args(ln, c), n, k), meta


def _ln_host_args(ln: tuple | None, c: torch.Tensor) -> tuple:
    """The LayerNorm arguments of `_linear_gluon_kernel` (see `_gluon_linear_launch`); without LayerNorm rows
    the kernel never reads them (c stands in for the pointers, an empty range for the rows)."""
    if ln is None:
        return (c, c, c, c, 0, 0, -1, 0.0)
    x, weight, bias, eps, y, r0, r1, pad = ln
    if not (
        x.dtype == weight.dtype == bias.dtype == torch.float32
        and y.dtype == torch.float16
        and x.shape[1:] == y.shape[1:] == weight.shape == bias.shape == (HIDDEN,)
        and x.is_contiguous() and y.is_contiguous() and weight.is_contiguous() and bias.is_contiguous()
        and 0 <= r0 <= r1 <= min(x.shape[0], y.shape[0])
        and -1 <= pad < y.shape[0]
    ):  # fmt: skip
        raise ValueError(
            "Gluon GEMM LayerNorm rows: expected contiguous fp32 x [n, 768], weight and bias [768], fp16 y "
            f"[>= n, 768] and rows within both (got x {tuple(x.shape)}, y {tuple(y.shape)}, rows {r0}..{r1}, "
            f"pad {pad})"
        )
    return (x, weight, bias, y, int(r0), int(r1), int(pad), float(eps))


def _linear(a, w, bias, c, epilogue, cfg, residual=None, split_k=1) -> None:
    _launch([_linear_launch(a, w, bias, c, epilogue, cfg, residual, split_k)])


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: a few programs, so that the tile loop is exercised
    if device.index not in _NUM_SMS:
        _NUM_SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _NUM_SMS[device.index]


_NUM_SMS: dict[int | None, int] = {}


def _window_attention_launch(
    qkv: torch.Tensor,  # [n_tok + 1, 2304]: the chunk's tokens, then the padded token's q, k, v (the bias)
    o: torch.Tensor,  # [>= n_tok, 768], unit column stride (may be qkv[:, :768]: o in place of q)
    qkv_bias: torch.Tensor,
    rel_pos_h: torch.Tensor,
    rel_pos_w: torch.Tensor,
    tok0: int,
    n_tok: int,
    height: int,
    width: int,
    band0: int,
    n_bands: int,
    cfg: tuple,
) -> Launch:
    n_wh, n_ww = triton.cdiv(height, WINDOW), triton.cdiv(width, WINDOW)
    if o.stride(1) != 1:
        raise ValueError("attention output: expected unit column stride")
    if cfg[0] == "gluon":
        _, consumer_regs, loader_regs = cfg  # a configuration of another length raises ValueError here
        if qkv.dtype != torch.float16:
            raise ValueError("the Gluon window attention takes fp16 q, k, v")
        n_items = n_bands * n_ww * HEADS
        args = (qkv, o, rel_pos_h, rel_pos_w, tok0, n_tok, height, width, n_wh, n_ww, band0, n_items)
        pdl = _pdl_meta(qkv.device)
        meta = dict(
            O_STRIDE=o.stride(0), CONSUMER_REGS=consumer_regs, LOADER_REGS=loader_regs,
            PINGPONG=GLUON_ATTENTION_PINGPONG, LSUM_MMA=GLUON_ATTENTION_LSUM_MMA,
            BIAS_SHUFFLE=GLUON_ATTENTION_BIAS_SHUFFLE, SKIP_PAD=GLUON_ATTENTION_SKIP_PAD, num_warps=4, **pdl,
        )  # fmt: skip
        return _window_attention_gluon_kernel, (min(n_items, _num_sms(qkv.device)),), args, meta
    if cfg[0] == "persistent":
        _, block_m, block_n, bias_mode, warps, stages, ctas_per_sm = cfg
        if qkv.dtype != torch.float16:
            raise ValueError("the persistent window attention takes fp16 q, k, v")
        n_items = n_bands * n_ww * HEADS * (SLOTS // block_m)
        programs = min(n_items, ctas_per_sm * _num_sms(qkv.device))
        args = (
            qkv, o, rel_pos_h, rel_pos_w, tok0, n_tok, height, width, n_wh, n_ww, band0, n_items, programs
        )  # fmt: skip
        meta = dict(
            BLOCK_M=block_m, BLOCK_N=block_n, BIAS_MODE=bias_mode, STAGES=stages, num_warps=warps,
            num_stages=stages, O_STRIDE=o.stride(0),
        )  # fmt: skip
        return _window_attention_persistent_kernel, (programs,), args, {**meta, **_pdl_meta(qkv.device)}
    block_m, block_n, bias_mode, warps, stages = cfg
    grid = (n_bands * n_ww * HEADS * (SLOTS // block_m),)
    args = (
        qkv, o, qkv_bias, rel_pos_h, rel_pos_w, tok0, height, width, n_wh, n_ww, band0, HEAD_DIM**-0.5 * _LOG2E
    )  # fmt: skip
    meta = dict(
        BLOCK_M=block_m, BLOCK_N=block_n, BIAS_MODE=bias_mode, num_warps=warps, num_stages=stages,
        O_STRIDE=o.stride(0),
    )  # fmt: skip
    return _window_attention_kernel, grid, args, {**meta, **_pdl_meta(qkv.device)}


def gluon_sm90_ok(device: torch.device) -> bool:
    """Whether the Gluon kernels (the attention, the GEMM) run for this device: an sm_90 GPU (compute capability
    9.0) with Gluon in Triton; on meta tensors (a build's recording) when the targeted architecture is sm_90a."""
    if gluon is None:
        return False
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) == (9, 0)
    return device.type == "meta" and os.environ.get(TARGET_ARCH_ENV) == "sm_90a"


def _window_attention(*args) -> None:
    _launch([_window_attention_launch(*args)])


def plan_chunks(batch: int, height: int, width: int, max_tokens: int) -> list[tuple[int, int, int, int]]:
    """Split the image rows into chunks of whole 14-row bands: [(band0, band1, tok0, tok1)].

    Band g = b * n_wh + window row; bands are contiguous in image layout, and so is any run of them.
    The fewest chunks with at most max(max_tokens, one band) tokens each, cut near equal token counts.
    """
    n_wh = triton.cdiv(height, WINDOW)
    n_bands = batch * n_wh
    tokens = batch * height * width
    starts = [(g // n_wh) * height * width + (g % n_wh) * WINDOW * width for g in range(n_bands + 1)]
    n_chunks = min(n_bands, triton.cdiv(tokens, max(1, max_tokens)))
    while True:
        cuts = [0]
        for k in range(1, n_chunks):
            g = bisect.bisect_left(starts, k * tokens / n_chunks)  # nearest band boundary to the ideal cut
            if g > 0 and k * tokens / n_chunks - starts[g - 1] < starts[g] - k * tokens / n_chunks:
                g -= 1
            if cuts[-1] < g < n_bands:
                cuts.append(g)
        cuts.append(n_bands)
        chunks = [(g0, g1, starts[g0], starts[g1]) for g0, g1 in zip(cuts[:-1], cuts[1:], strict=True)]
        if n_chunks >= n_bands or all(t1 - t0 <= max_tokens or g1 == g0 + 1 for g0, g1, t0, t1 in chunks):
            return chunks
        n_chunks += 1


@dataclass(frozen=True)
class ScratchPlan:
    """What forward() allocates and how it splits the work (a pure function of the sizes: plan_scratch)."""

    chunks: tuple  # ((band0, band1, tok0, tok1), ...): runs of whole 14-row bands
    mlp_subs: tuple  # per chunk: ((row0, row1), ...) MLP sub-chunks, rows relative to the chunk
    a_elems: int  # a / o / LN2 buffer: [t_max + 1, 768] (0 in the compact layout)
    big_elems: int  # qkv [t_max + 1, 2304] / h [sub-chunk rows, 3072] (compact: / LN2 [T, 768] + h)
    weight_elems: int  # fp16 weight copies (0 in tf32)
    elem: int  # bytes per element of the operand dtype
    input_bytes: int  # bytes of x

    @property
    def compact(self) -> bool:
        """COMPACT_LAYOUT: no `a` buffer (LN1 in the output's rows, o over q, LN2's rows + h in qkv's space)."""
        return self.a_elems == 0

    @property
    def scratch_bytes(self) -> int:
        return (self.a_elems + self.big_elems) * self.elem + self.weight_elems * 2

    @property
    def launches(self) -> int:
        return sum(5 + 2 * len(subs) for subs in self.mlp_subs)

    @property
    def ratio(self) -> float:
        return self.scratch_bytes / self.input_bytes


def _even_split(n: int, parts: int) -> tuple:
    cuts = [round(i * n / parts) for i in range(parts + 1)]
    return tuple((r0, r1) for r0, r1 in zip(cuts[:-1], cuts[1:], strict=True) if r1 > r0)


def _compact_layout(precision: str) -> bool:
    """COMPACT_LAYOUT applies to fp16 with a TMA projection (its A, o over q, has the qkv row stride)."""
    return COMPACT_LAYOUT and precision == "fp16" and GEMM_CONFIGS["fp16"]["proj"][0] != "ptr"


def plan_scratch(
    batch: int,
    height: int,
    width: int,
    precision: str = "fp16",
    *,
    workspace_bytes: int | None = None,
    mlp_split: str | None = None,
    ratio: float | None = None,
    compact: bool | None = None,
) -> ScratchPlan:
    """Chunks, MLP sub-chunks and buffer sizes of one forward() call; exact bytes in .scratch_bytes.

    workspace_bytes: budget of the chunk buffers (weight copies excluded); default max(ratio x input bytes,
    MIN_WORKSPACE_BYTES) minus the weight copies. Per chunk token the buffers take 768 + 3072 elements (h of
    the whole chunk) or 768 + 2304 (the MLP in sub-chunks that fit in qkv's space); in the compact layout
    (default: `_compact_layout`) 768 + 3072 or 2304 (LN2's rows and h of half the chunk in qkv's space).
    "auto" takes the plan with fewer launches (then fewer chunks). A chunk is at least one band (14 image
    rows), so a budget below one band's buffers is exceeded (images with few, wide rows).
    """
    ratio = WORKSPACE_RATIO if ratio is None else ratio
    mlp_split = MLP_SPLIT if mlp_split is None else mlp_split
    if mlp_split not in ("auto", "never", "always"):
        raise ValueError(f"mlp_split: expected 'auto', 'never' or 'always', got {mlp_split!r}")
    if precision not in ("fp16", "tf32"):
        raise ValueError(f"precision: expected 'fp16' or 'tf32', got {precision!r}")
    compact = _compact_layout(precision) if compact is None else compact
    if compact and precision != "fp16":
        raise ValueError("the compact layout is fp16 only (LN1's rows must fit in the output's rows)")
    elem = 4 if precision == "tf32" else 2
    weight_elems = WEIGHT_ELEMENTS if precision == "fp16" else 0  # tf32: the fp32 weights as they are
    input_bytes = batch * height * width * HIDDEN * 4
    if workspace_bytes is None:
        total = max(int(ratio * input_bytes), MIN_WORKSPACE_BYTES)
        workspace_bytes = total - weight_elems * 2
    budget = max(0, workspace_bytes // elem)  # elements
    int32_cap = (2**31 - 1) // MLP_DIM - 1  # int32 offsets: (T + 1) * 3072 < 2**31
    a_tok = 0 if compact else HIDDEN  # elements per token of the separate `a` buffer
    h_base = HIDDEN - a_tok  # elements per chunk token before h in qkv's space (compact: LN2's rows)
    plans = []
    for split in {"never": (False,), "always": (True,), "auto": (False, True)}[mlp_split]:
        per_token = a_tok + (QKV_DIM if split else h_base + MLP_DIM)
        fixed = a_tok + QKV_DIM  # the padded token's row
        max_tokens = max(1, min((budget - fixed) // per_token, int32_cap))
        chunks = tuple(plan_chunks(batch, height, width, max_tokens))
        sizes = [t1 - t0 for *_, t0, t1 in chunks]
        t_max = max(sizes)
        big_elems = (t_max + 1) * QKV_DIM
        if not split:
            big_elems = max(big_elems, t_max * (h_base + MLP_DIM))
        subs = tuple(_even_split(t, -(-t * MLP_DIM // (big_elems - t * h_base))) for t in sizes)
        plans.append(
            ScratchPlan(chunks, subs, (t_max + 1) * a_tok, big_elems, weight_elems, elem, input_bytes)
        )
    return min(plans, key=lambda p: (p.launches, len(p.chunks), p.scratch_bytes))


def forward(
    hidden_states: torch.Tensor,  # [B, H, W, 768] fp32
    qkv_weight: torch.Tensor,  # [2304, 768]
    qkv_bias: torch.Tensor,  # [2304]
    proj_weight: torch.Tensor,  # [768, 768]
    proj_bias: torch.Tensor,  # [768]
    rel_pos_h: torch.Tensor,  # [27, 64]
    rel_pos_w: torch.Tensor,  # [27, 64]
    layer_norm1_weight: torch.Tensor,  # [768]
    layer_norm1_bias: torch.Tensor,  # [768]
    layer_norm2_weight: torch.Tensor,  # [768]
    layer_norm2_bias: torch.Tensor,  # [768]
    mlp_lin1_weight: torch.Tensor,  # [3072, 768]
    mlp_lin1_bias: torch.Tensor,  # [3072]
    mlp_lin2_weight: torch.Tensor,  # [768, 3072]
    mlp_lin2_bias: torch.Tensor,  # [768]
    layer_norm_eps: float,
    output: torch.Tensor,  # [B, H, W, 768] fp32, written
    *,
    precision: str | None = None,
    workspace_bytes: int | None = None,
    mlp_split: str | None = None,
    split_k: str | int | None = None,
    mlp2_gemm: str | None = None,
) -> None:
    """The block; workspace_bytes / mlp_split override the scratch plan (plan_scratch), mlp2_gemm the MLP
    down-projection's GEMM in fp16 (MLP2_GEMM) and split_k its K splits on the Triton one (SPLIT_K), for tests
    and tune.py."""
    split_k = SPLIT_K if split_k is None else split_k
    mlp2_gemm = MLP2_GEMM if mlp2_gemm is None else mlp2_gemm
    if mlp2_gemm not in ("cublas", "triton"):
        raise ValueError(f"mlp2_gemm: expected 'cublas' or 'triton', got {mlp2_gemm!r}")
    precision = precision or OPERAND_PRECISION
    if precision not in ("fp16", "tf32"):
        raise ValueError(f"precision: expected 'fp16' or 'tf32', got {precision!r}")
    if not output.is_contiguous():
        raise ValueError("output: expected a contiguous tensor")
    op_dtype = torch.float32 if precision == "tf32" else torch.float16
    gemm, attn_cfg = GEMM_CONFIGS[precision], ATTN_CONFIGS[precision]
    if precision == "fp16" and GLUON_ATTENTION is not None and gluon_sm90_ok(hidden_states.device):
        attn_cfg = GLUON_ATTENTION
    gluon_gemm = precision == "fp16" and GLUON_GEMM is not None and gluon_sm90_ok(hidden_states.device)

    def gemm_cfg(stage: str, rows: int) -> tuple:
        """The stage's GEMM configuration for a launch of this many rows (GLUON_GEMM where it applies)."""
        gelu_ok = stage != "mlp1" or (GELU_EPILOGUE == EPILOGUE_GELU and GELU_F16X2)
        if gluon_gemm and gelu_ok and stage in GLUON_GEMM and rows >= GLUON_GEMM_MIN_ROWS[stage]:
            return GLUON_GEMM[stage]
        return gemm[stage]

    batch, height, width, channels = hidden_states.shape
    if channels != HIDDEN:
        raise ValueError(f"hidden_states: expected {HIDDEN} channels, got {channels}")
    tokens = batch * height * width
    if tokens == 0:
        return
    eps = float(layer_norm_eps)
    weights = tuple(w.contiguous() for w in (qkv_weight, proj_weight, mlp_lin1_weight, mlp_lin2_weight))
    qkv_bias, proj_bias = qkv_bias.contiguous(), proj_bias.contiguous()
    ln1_weight, ln1_bias = layer_norm1_weight.contiguous(), layer_norm1_bias.contiguous()
    rel_pos_h, rel_pos_w = rel_pos_h.contiguous(), rel_pos_w.contiguous()
    x = hidden_states.contiguous().view(tokens, HIDDEN)
    out = output.view(tokens, HIDDEN)

    # scratch (plan_scratch): qkv [T + 1, 2304] / LN2 + h, and in tf32 a [T + 1, 768], T tokens per chunk
    sp = plan_scratch(batch, height, width, precision, workspace_bytes=workspace_bytes, mlp_split=mlp_split)
    ws_a = torch.empty((sp.a_elems,), dtype=op_dtype, device=x.device) if sp.a_elems else None
    ws_big = torch.empty((sp.big_elems,), dtype=op_dtype, device=x.device)
    convert = None
    if op_dtype == torch.float16 and FUSED_WEIGHT_CONVERSION:
        # weights converted on every call (no caching), by extra programs of the first LayerNorm launch
        w16 = torch.empty((sum(w.numel() for w in weights),), dtype=op_dtype, device=x.device)
        ends = [0]
        for w in weights:
            ends.append(ends[-1] + w.numel())
        w_qkv, w_proj, w_mlp1, w_mlp2 = (
            w16[e0:e1].view(w.shape) for e0, e1, w in zip(ends[:-1], ends[1:], weights, strict=True)
        )
        convert = (weights, w16)
    else:
        w_qkv, w_proj, w_mlp1, w_mlp2 = (w.to(op_dtype) for w in weights)

    # the MLP down-projection by cuBLAS (MLP2_GEMM): b2 goes into x1 with the projection's bias, LN2 takes it out
    cublas = (
        op_dtype == torch.float16
        and mlp2_gemm == "cublas"
        and (x.device.type != "cuda" or _addmm_fp32_out_ok(x.device))
    )
    b2 = mlp_lin2_bias.contiguous() if cublas else None
    plan: list[Launch] = []
    out_h = out.view(torch.float16) if sp.compact else None  # [tokens, 1536]: a chunk's rows hold LN1's

    def ln1_rows(chunk: int) -> torch.Tensor:
        """The chunk's LayerNorm1 output [n + 1, 768] (row n: zeros, so row n of qkv is the padded token's)."""
        t0, t1 = sp.chunks[chunk][2:]
        if sp.compact:  # in the chunk's own output rows, free until its projection
            return out_h[t0:t1].reshape(-1)[: (t1 - t0 + 1) * HIDDEN].view(t1 - t0 + 1, HIDDEN)
        return ws_a[: (t1 - t0 + 1) * HIDDEN].view(t1 - t0 + 1, HIDDEN)

    sms = _num_sms(x.device)  # ln_capacity's programs
    ln1_from = 0  # this chunk's LayerNorm1 rows below this were computed beside the previous chunk's GEMMs
    for ci, ((band0, band1, t0, t1), subs) in enumerate(zip(sp.chunks, sp.mlp_subs, strict=True)):
        n = t1 - t0
        qkv = ws_big[: (n + 1) * QKV_DIM].view(n + 1, QKV_DIM)
        x_c, out_c = x[t0:t1], out[t0:t1]
        a = ln1_rows(ci)
        if sp.compact:
            o = qkv[:n, :HIDDEN]  # over q
            a2, h_base = ws_big[: n * HIDDEN].view(n, HIDDEN), n * HIDDEN  # after the projection
        else:
            o = a2 = a[:n]
            h_base = 0
        # the next chunk's LayerNorm1 beside this chunk's Gluon GEMMs (GLUON_GEMM_LN_NEXT; its rows are the next
        # chunk's own output rows, which nothing of this chunk touches), as many rows as their LayerNorm warps
        # have time for (ln_capacity), in shares by that; the rest keeps a LayerNorm launch
        cfgs = [gemm_cfg("qkv", n + 1)] + [gemm_cfg("mlp1", r1 - r0) for r0, r1 in subs]
        shapes = [(n + 1, QKV_DIM)] + [(r1 - r0, MLP_DIM) for r0, r1 in subs]
        hosts = [i for i, cfg in enumerate(cfgs) if cfg[0] == "gluon"]
        ln_next: dict[int, tuple] = {}
        next_from = 0
        if GLUON_GEMM_LN_NEXT and sp.compact and hosts and ci + 1 < len(sp.chunks):
            nt0, nt1 = sp.chunks[ci + 1][2:]
            caps = [ln_capacity(*shapes[i], sms) for i in hosts]
            next_from = min(nt1 - nt0, sum(caps))  # 0 for small chunks (no row fits beside their tiles)
            rows = (x[nt0:nt1], ln1_weight, ln1_bias, eps, ln1_rows(ci + 1))
            pad = nt1 - nt0 if next_from == nt1 - nt0 else -1  # the pad row with the first, if all rows go
            for i, (r0, r1) in zip(hosts, _row_shares(next_from, caps) if next_from else [], strict=False):
                ln_next[i] = (*rows, r0, r1, pad if i == hosts[0] else -1)
        if ln1_from < n:
            plan.append(
                _layernorm_launch(
                    x_c[ln1_from:], ln1_weight, ln1_bias, eps, a[ln1_from:], pad_row=True, convert=convert
                )
            )
        plan += [
            _linear_launch(a, w_qkv, qkv_bias, qkv, EPILOGUE_BIAS, cfgs[0], ln=ln_next.get(0)),
            _window_attention_launch(
                qkv, o, qkv_bias, rel_pos_h, rel_pos_w, t0, n, height, width, band0, band1 - band0, attn_cfg
            ),
            _linear_launch(
                o, w_proj, proj_bias, out_c, EPILOGUE_RESIDUAL, gemm_cfg("proj", n), residual=x_c, bias2=b2
            ),
            _layernorm_launch(out_c, layer_norm2_weight, layer_norm2_bias, eps, a2, shift=b2),
        ]
        for si, (r0, r1) in enumerate(subs):  # the MLP over row sub-chunks: h [r1 - r0, 3072] in qkv's space
            h = ws_big[h_base : h_base + (r1 - r0) * MLP_DIM].view(r1 - r0, MLP_DIM)
            out_s = out_c[r0:r1]
            plan.append(
                _linear_launch(
                    a2[r0:r1], w_mlp1, mlp_lin1_bias, h, GELU_EPILOGUE, cfgs[1 + si], ln=ln_next.get(1 + si)
                )
            )
            if cublas:  # out_s already holds x1 + b2
                plan.append((_addmm_step, None, (out_s, h, w_mlp2.t()), {}))
            else:
                plan.append(
                    _linear_launch(
                        h, w_mlp2, mlp_lin2_bias, out_s, EPILOGUE_RESIDUAL, gemm["mlp2"], out_s, split_k
                    )
                )
        convert = None  # the weights once, in the first chunk's LayerNorm launch
        ln1_from = next_from
    _launch(plan)


def run(
    hidden_states,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    rel_pos_h,
    rel_pos_w,
    layer_norm1_weight,
    layer_norm1_bias,
    layer_norm2_weight,
    layer_norm2_bias,
    mlp_lin1_weight,
    mlp_lin1_bias,
    mlp_lin2_weight,
    mlp_lin2_bias,
    layer_norm_eps,
    output,
) -> None:
    """Entry point (destination-passing style), precision OPERAND_PRECISION."""
    forward(
        hidden_states, qkv_weight, qkv_bias, proj_weight, proj_bias, rel_pos_h, rel_pos_w,
        layer_norm1_weight, layer_norm1_bias, layer_norm2_weight, layer_norm2_bias,
        mlp_lin1_weight, mlp_lin1_bias, mlp_lin2_weight, mlp_lin2_bias, layer_norm_eps, output,
    )  # fmt: skip


def run_tf32(*args) -> None:
    """The same block with fp32 intermediates and TF32 tensor-core matmuls (the safe fallback)."""
    forward(*args, precision="tf32")
