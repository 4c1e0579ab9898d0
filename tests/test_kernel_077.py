"""solutions/077_*/triton_fused against the reference on small images (Triton interpreter on CPU).

Shapes: 5x9 (smaller than one window) with the default launch configurations, fp16 and TF32, and with
the "new" (fused weight conversion, branch-free GELU, persistent attention) and "fallback" code paths;
2 x 15x17 (padding in both dims, a one-row second band, batch) split into 4 chunks, both paths; the
window-attention kernels alone (persistent and per item, every bias mode) against float32 attention on
the same fp16 q, k, v; each GEMM kind with each epilogue; the GELU fit; the chunk planner.
Tolerance: the tightest official one (atol 0.015, rtol 1e-5), and at least 99.9 % matched.
"""

from __future__ import annotations

import inspect
import math
import struct
import types

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from harness import PROJECT_ROOT
from harness.correctness import compute_error_stats
from harness.inputs import gen_inputs
from harness.schema import ToleranceSpec, Workload
from harness.tasks import load_module, load_task

TASK = "077_sam_hq_vision_encoder_window_partition_attention"
kernel = load_module(
    PROJECT_ROOT / "solutions" / TASK / "triton_fused" / "kernel.py", "_test_triton_fused_077"
)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOLERANCE = ToleranceSpec(max_atol=0.015, max_rtol=1e-5)  # the tightest official 077 tolerance


def _inputs(batch: int, height: int, width: int, seed: int) -> list:
    """Official-style inputs, except LayerNorm weights and biases are perturbed so they are exercised."""
    task = load_task(TASK)
    workload = Workload(
        uuid="small",
        axes={"batch_size": batch, "height": height, "width": width},
        inputs={"layer_norm_eps": {"type": "scalar", "value": 1e-6}},
    )
    torch.manual_seed(seed)
    args = gen_inputs(task.definition, workload, device=DEVICE)
    for i, name in enumerate(task.definition.inputs):
        if name.startswith("layer_norm") and name.endswith("_weight"):
            args[i] = 1 + 0.2 * torch.randn_like(args[i])
        elif name.startswith("layer_norm") and name.endswith("_bias"):
            args[i] = 0.2 * torch.randn_like(args[i])
    return args


@pytest.fixture
def fast_interpreter_configs(monkeypatch):
    """Big tiles on the CPU: the interpreter's cost grows with the number of programs, not their size."""
    if DEVICE != "cpu":
        return
    gemm = {  # every GEMM kind once, end to end
        "qkv": ("ptr", 128, 256, 256, 8, 8, 1),
        "proj": ("tma", 128, 256, 256, 8, 8, 1),
        "mlp1": ("tma_persistent", 128, 256, 256, 8, 8, 1, 1),
        "mlp2": ("ptr", 128, 256, 256, 8, 8, 1),
    }
    monkeypatch.setitem(kernel.GEMM_CONFIGS, "fp16", gemm)
    monkeypatch.setitem(kernel.ATTN_CONFIGS, "fp16", (128, 256, 2, 8, 1))
    monkeypatch.setattr(kernel, "LN_CONFIG", (16, 4))


def _check_block(
    precision,
    batch,
    height,
    width,
    workspace_tokens=None,
    mlp_split=None,
    expect=None,
    split_k=None,
    mlp2_gemm=None,
):
    """workspace_tokens: a chunk budget in tokens (forces several chunks); expect: (chunks, MLP sub-chunks)."""
    args = _inputs(batch, height, width, seed=height * 100 + width)
    expected = load_task(TASK).reference(*args)
    out = torch.full_like(expected, math.nan)  # every element must be written
    workspace = None
    if workspace_tokens is not None:
        elem = 2 if precision == "fp16" else 4
        workspace = workspace_tokens * (kernel.HIDDEN + kernel.MLP_DIM) * elem
    if expect is not None:
        sp = kernel.plan_scratch(
            batch, height, width, precision, workspace_bytes=workspace, mlp_split=mlp_split
        )
        assert (len(sp.chunks), sum(len(s) for s in sp.mlp_subs)) == expect, sp
    kernel.forward(
        *args,
        out,
        precision=precision,
        workspace_bytes=workspace,
        mlp_split=mlp_split,
        split_k=split_k,
        mlp2_gemm=mlp2_gemm,
    )
    stats = compute_error_stats(out, expected, TOLERANCE)
    assert stats.passed, stats.report()
    assert stats.matched_ratio >= 0.999, stats.report()
    if precision == "tf32" and DEVICE == "cpu":  # the interpreter computes "tf32" dots in fp32
        assert stats.max_absolute_error < 1e-3, stats.report()


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_one_window_default_configs(precision):
    _check_block(precision, 1, 5, 9)  # smaller than one window: mostly padding


@pytest.mark.parametrize(("batch", "height", "width"), [(0, 14, 14), (1, 0, 14), (2, 14, 0)])
def test_empty_image_is_a_no_op(batch, height, width):
    """No token: `forward` launches nothing and raises nothing (the output has no element)."""
    out = torch.empty(batch, height, width, 768, device=DEVICE)
    kernel.forward(*_inputs(batch, height, width, seed=3), out)
    assert out.numel() == 0


def test_one_window_fallback_path(monkeypatch):
    # what tune.py falls back to (the defaults are the "new" path): torch's weight conversion, libdevice's
    # erf and one attention program per (window, head, query tile)
    monkeypatch.setattr(kernel, "FUSED_WEIGHT_CONVERSION", False)
    monkeypatch.setattr(kernel, "GELU_EPILOGUE", kernel.EPILOGUE_GELU_LIBDEVICE)
    monkeypatch.setitem(kernel.ATTN_CONFIGS, "fp16", (64, 256, 3, 4, 1))
    _check_block("fp16", 1, 5, 9, mlp2_gemm="triton")


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.parametrize(
    ("path", "mlp_split", "expect"),
    [("new", "never", (2, 2)), ("fallback", "never", (2, 2)), ("new", "always", (4, 6))],
)
def test_batched_chunked(fast_interpreter_configs, monkeypatch, path, mlp_split, expect):
    # 2 images x 2 bands (14 rows + 1 row) x 2 windows, a budget of 300 chunk tokens: 2 chunks of 255
    # tokens (a 238-token band and a 17-token one each); 150 tokens with the MLP in sub-chunks (h in qkv's
    # space): 4 chunks of one band each, the 238-token ones with 2 MLP sub-chunks of 119 rows (6 in all).
    # On the CPU every GEMM kind takes part (fast_interpreter_configs)
    new = path == "new"
    monkeypatch.setattr(kernel, "FUSED_WEIGHT_CONVERSION", new)
    monkeypatch.setattr(
        kernel, "GELU_EPILOGUE", kernel.EPILOGUE_GELU if new else kernel.EPILOGUE_GELU_LIBDEVICE
    )
    attn = ("persistent", 128, 128, 2, 8, 3, 1) if new else (128, 256, 2, 8, 1)  # 2 key blocks per item
    monkeypatch.setitem(kernel.ATTN_CONFIGS, "fp16", attn)
    budget = 300 if mlp_split == "never" else 150
    _check_block(
        "fp16",
        2,
        15,
        17,
        workspace_tokens=budget,
        mlp_split=mlp_split,
        expect=expect,
        mlp2_gemm="cublas" if new else "triton",
    )


def test_block_with_split_k(fast_interpreter_configs, monkeypatch):
    """The MLP down-projection in K splits (fp32 atomics into the residual), over 2 chunks with MLP sub-chunks."""
    if DEVICE == "cpu":
        monkeypatch.setitem(kernel.GEMM_CONFIGS["fp16"], "mlp2", ("tma", 128, 256, 256, 8, 8, 1))
    splits, original = [], kernel._linear_launch

    def recording(*args, **kwargs):
        launch = original(*args, **kwargs)
        splits.append(launch[3].get("SPLIT_K"))
        return launch

    monkeypatch.setattr(kernel, "_linear_launch", recording)
    _check_block(
        "fp16",
        2,
        15,
        17,
        workspace_tokens=150,
        mlp_split="always",
        expect=(4, 6),
        split_k=4,
        mlp2_gemm="triton",
    )
    assert splits.count(4) == 6  # every MLP sub-chunk's down-projection, nothing else


def test_mlp2_by_cublas_moves_its_bias(monkeypatch):
    """MLP2_GEMM "cublas": the down-projection is a torch step (out += h W2^T) per MLP sub-chunk, b2 enters x1
    through the projection's epilogue (BIAS2) and LayerNorm2 subtracts it (SHIFT); "triton" has none of it.
    Both give the block (on the CPU the step is an fp32 addmm of the fp16 operands)."""
    assert kernel.MLP2_GEMM == "cublas"
    plans, original = [], kernel._launch

    def recording(plan):
        plans.append(plan)
        return original(plan)

    monkeypatch.setattr(kernel, "_launch", recording)
    for mode in ("cublas", "triton"):
        _check_block("fp16", 2, 15, 17, workspace_tokens=150, mlp_split="always", mlp2_gemm=mode)
        plan = plans[-1]
        steps = [p for p in plan if p[1] is None]
        ln2 = [p for p in plan if p[0] is kernel._prologue_kernel and not p[3]["PAD_ROW"]]
        proj = [p for p in plan if p[0] is not kernel._prologue_kernel and p[3].get("BIAS2")]
        if mode == "cublas":
            assert [p[0] for p in steps] == [kernel._addmm_step] * 6  # 4 chunks, 6 MLP sub-chunks
            assert len(ln2) == 4 and all(p[3]["SHIFT"] for p in ln2)
            assert len(proj) == 4
        else:
            assert not steps and not proj and not any(p[3]["SHIFT"] for p in ln2)
    with pytest.raises(ValueError, match="mlp2_gemm"):
        kernel.forward(*_inputs(1, 5, 9, seed=1), torch.empty(1, 5, 9, 768), mlp2_gemm="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
def test_mlp2_falls_back_without_fp32_out_addmm(monkeypatch):
    """Where torch has no fp32-output addmm for fp16 operands, MLP2_GEMM "cublas" runs the Triton GEMM."""
    device = torch.device("cuda", torch.cuda.current_device())
    assert kernel._addmm_fp32_out_ok(device)  # torch >= 2.8 on the GPU machines
    plans, original = [], kernel._launch

    def recording(plan):
        plans.append(plan)
        return original(plan)

    monkeypatch.setattr(kernel, "_launch", recording)
    _check_block("fp16", 2, 15, 17, workspace_tokens=150, mlp_split="always")
    assert sum(p[1] is None for p in plans[-1]) == 6  # cuBLAS steps where torch has them
    monkeypatch.setitem(kernel._ADDMM_FP32_OUT, device.index, False)
    _check_block("fp16", 2, 15, 17, workspace_tokens=150, mlp_split="always")
    assert not any(p[1] is None for p in plans[-1])
    residual = [
        p
        for p in plans[-1]
        if p[3].get("EPILOGUE") in (kernel.EPILOGUE_RESIDUAL, kernel.EPILOGUE_ACCUMULATE)
        or p[0].__name__ == "_linear_gluon_residual_pp_kernel"  # the projection on sm_90 (GLUON_GEMM)
    ]
    assert len(residual) == 10  # 4 projections, 6 MLP sub-chunks


@pytest.mark.parametrize(
    ("tiles", "splits"),
    [(96, 1), (192, 2), (294, 2), (663, 2), (108, 1), (768, 1), (1, 2)],
)
def test_split_k_choice(tiles, splits):
    """mlp2 at 48 K steps on 132 SMs, at most SPLIT_K_MAX = 2 splits: 192 tiles (8192 rows) take 2 waves of
    full tiles or 3 of half tiles."""
    assert kernel.split_k_for(tiles, 48, 132) == splits
    assert kernel.split_k_for(tiles, 48, 132, 3) == 3
    for bad in (0, 5, 96):
        with pytest.raises(ValueError, match="split_k"):
            kernel.split_k_for(tiles, 48, 132, bad)


@pytest.mark.parametrize("splits", [2, 3])
def test_linear_split_k(splits):
    """K splits add into c in place (c holds the residual); rows past M untouched; bias added once."""
    m, n, k = 300, 768, 768
    gen = torch.Generator().manual_seed(splits)
    a = torch.randn(m, k, generator=gen).half().to(DEVICE)
    w = (torch.randn(n, k, generator=gen) / math.sqrt(k)).half().to(DEVICE)
    bias = torch.randn(n, generator=gen).to(DEVICE)
    c = torch.randn(m + 5, n, generator=gen).to(DEVICE)  # 5 rows past M: must stay as they are
    tail = c[m:].clone()
    expected = a.float() @ w.float().T + bias + c[:m]
    block_k = 128 if DEVICE == "cpu" else 64  # 6 / 12 K steps: 2 and 3 divide both
    cfg = ("tma", 128, 256, block_k, 8, 8, 1 if DEVICE == "cpu" else 3)
    launch = kernel._linear_launch(a, w, bias, c[:m], kernel.EPILOGUE_RESIDUAL, cfg, c[:m], splits)
    assert launch[3]["SPLIT_K"] == splits and launch[3]["EPILOGUE"] == kernel.EPILOGUE_ACCUMULATE
    kernel._launch([launch])
    excess = ((c[:m] - expected).abs() - (1e-4 + 1e-5 * expected.abs())).max().item()
    assert excess <= 0, f"error exceeds the bound by {excess:.2e}"
    assert torch.equal(c[m:], tail)


@pytest.mark.parametrize(
    ("kind", "tma_store"),
    [("ptr", 0), ("tma", 0), ("tma_persistent", 0), ("tma", 1), ("tma_persistent", 2)],
    ids=["ptr", "tma", "tma_persistent", "tma-tma_store1", "tma_persistent-tma_store2"],
)
@pytest.mark.parametrize("epilogue", [0, 1, 2, 3], ids=["bias", "gelu", "residual", "gelu_libdevice"])
def test_linear_kinds(kind, tma_store, epilogue, monkeypatch):
    monkeypatch.setattr(kernel, "TMA_STORE", tma_store)  # the bias and GELU epilogues take it
    m, n, k = 300, 768, 768  # 300 rows: a partial row tile
    gen = torch.Generator().manual_seed(epilogue)
    a = torch.randn(m, k, generator=gen).half().to(DEVICE)
    w = (torch.randn(n, k, generator=gen) / math.sqrt(k)).half().to(DEVICE)
    bias = torch.randn(n, generator=gen).to(DEVICE)
    expected = a.float() @ w.float().T + bias
    residual = None
    if epilogue in (kernel.EPILOGUE_GELU, kernel.EPILOGUE_GELU_LIBDEVICE):
        expected = torch.nn.functional.gelu(expected)
    if epilogue == kernel.EPILOGUE_RESIDUAL:
        residual = torch.randn(m, n, generator=gen).to(DEVICE)
        expected = expected + residual
        c = residual  # in place, as the MLP down-projection
    else:
        c = torch.full((m, n), math.nan, dtype=torch.float16, device=DEVICE)
    cfg = (kind, 128, 256, 256, 8, 8, 1, 2) if DEVICE == "cpu" else (kind, 128, 128, 64, 8, 8, 3, 1)
    kernel._linear(a, w, bias, c, epilogue, cfg, residual=residual)
    rel = 1e-3 if c.dtype == torch.float16 else 1e-5  # fp16 outputs are rounded
    tol = 1e-4
    if DEVICE == "cuda" and epilogue == kernel.EPILOGUE_GELU:  # GELU_F16X2: the GELU on fp16(x) in fp16
        rel, tol = 2e-3, 3e-4  # (test_gelu_f16x2_program_in_numpy: 2e-3 |y| + 1.6e-4)
    excess = ((c.float() - expected).abs() - (tol + rel * expected.abs())).max().item()
    assert excess <= 0, f"error exceeds the bound by {excess:.2e}"


def test_tma_store_setting_is_checked(monkeypatch):
    monkeypatch.setattr(kernel, "TMA_STORE", 4)
    a = torch.zeros(8, 768, dtype=torch.float16, device=DEVICE)
    w = torch.zeros(768, 768, dtype=torch.float16, device=DEVICE)
    c = torch.zeros(8, 768, dtype=torch.float16, device=DEVICE)
    with pytest.raises(ValueError, match="TMA_STORE"):
        kernel._linear_launch(a, w, torch.zeros(768, device=DEVICE), c, 0, ("tma", 128, 256, 64, 8, 8, 3))


@triton.jit
def _gelu_probe(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, kernel._gelu(tl.load(x_ptr + offs)))


def test_fast_gelu():
    x = torch.linspace(-12, 12, 2**16, dtype=torch.float32)
    x = torch.cat(
        [x, torch.tensor([0.0, -0.0, 1e-30, -1e-30, 3.92 * 2**0.5, 100.0, -100.0, -1e4, 1e4] + [0.0] * 1015)]
    )
    x = x.to(DEVICE)
    y = torch.empty_like(x)
    _gelu_probe[(x.numel() // 1024,)](x, y, BLOCK=1024)
    err = (y.double() - torch.nn.functional.gelu(x.double())).abs().max().item()
    assert err < 1e-6, f"max |gelu error| {err:.2e}"


def _run_f16x2_program(program, x):
    """An f16x2 program (kernel.GELU_F16X2_PROGRAM) in numpy's fp16: every operation exact in float64, then
    rounded to nearest even, as PTX's .rn operations; ex2 exact (the GPU's ex2.approx.f16x2 is within ~2^-10)."""
    ops = {
        "abs": lambda a: np.abs(a[0]),
        "mul": lambda a: a[0] * a[1],
        "min": lambda a: np.minimum(a[0], a[1]),
        "max": lambda a: np.maximum(a[0], a[1]),
        "fma": lambda a: a[0] * a[1] + a[2],
        "sub": lambda a: a[0] - a[1],
        "ex2": lambda a: np.exp2(a[0]),
    }
    regs = {"x": np.asarray(x, dtype=np.float16)}
    for op, dst, *srcs in program:
        vals = [np.float16(v) if isinstance(v, float) else regs[v] for v in srcs]
        regs[dst] = ops[op]([v.astype(np.float64) for v in vals]).astype(np.float16)
    return regs["y"]


def test_gelu_f16x2_program_in_numpy():
    """The packed-fp16 GELU's program (what the PTX computes) against the exact GELU: within 2e-3 |y| + 2e-4
    everywhere on [-12, 12] (1.6e-4 needed), its rms error within 1.75x that of rounding the exact GELU to fp16
    (the pre-activation's rounding to fp16 is most of the difference), and far from it when a coefficient is off."""
    x = np.concatenate([np.linspace(-12, 12, 200001), np.random.default_rng(0).standard_normal(200000)])
    x = x.astype(np.float32)
    exact = torch.nn.functional.gelu(torch.from_numpy(x.astype(np.float64))).numpy()
    y = _run_f16x2_program(kernel.GELU_F16X2_PROGRAM, x).astype(np.float64)
    assert (np.abs(y - exact) - 2e-3 * np.abs(exact)).max() <= 2e-4
    normal = slice(200001, None)
    rms = np.sqrt(((y - exact)[normal] ** 2).mean())
    rounded = np.sqrt(((exact.astype(np.float16).astype(np.float64) - exact)[normal] ** 2).mean())
    assert rms <= 1.75 * rounded, (rms, rounded)  # 1.61 here; 1.53 on the H200 for mlp1 (NOTES.md)
    broken = [
        (op, d, *[-0.5 * v if v == kernel.GELU_FIT[3] else v for v in s])
        for op, d, *s in kernel.GELU_F16X2_PROGRAM
    ]
    assert np.abs(_run_f16x2_program(broken, x).astype(np.float64) - exact).max() > 0.05


def test_gelu_f16x2_ptx_is_the_program():
    """One PTX instruction per operation of the program, in order, each constant splat into both fp16 halves;
    and the program's coefficients are the fp32 fit's (_gelu, checked through the interpreter or the GPU)."""
    ptx = kernel.gelu_f16x2_ptx()
    body = [line.strip() for line in ptx.strip("{} ").split(";") if line.strip() and ".reg" not in line]
    consts, instrs = [], []
    for line in body:
        (consts if line.startswith("mov.b32 k") else instrs).append(line)
    program = kernel.GELU_F16X2_PROGRAM
    assert [i.split()[0] for i in instrs] == [
        "and.b32" if op == "abs" else kernel._F16X2_OPS[op] for op, *_ in program
    ]
    assert instrs[0].split()[2] == "$1," and instrs[-1].split()[1] == "$0,"  # x in, y out
    want = [v for _, _, *srcs in program for v in srcs if isinstance(v, float)]
    got = []
    for line in consts:
        bits = int(line.split()[-1], 16)
        assert bits >> 16 == bits & 0xFFFF, line
        got.append(struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0])
    assert got == [struct.unpack("<e", struct.pack("<e", v))[0] for v in want]
    # the fp32 fit (_gelu) against the same polynomial in float64
    x = torch.linspace(-12, 12, 2**14, dtype=torch.float32).to(DEVICE)
    y = torch.empty_like(x)
    _gelu_probe[(x.numel() // 1024,)](x, y, BLOCK=1024)
    xd = x.double().cpu()
    z = xd.abs() / math.sqrt(2)
    p = torch.zeros_like(z)
    for c in kernel.GELU_FIT:
        p = p * z.clamp(max=kernel.GELU_ZMAX) + c
    poly = torch.where(xd >= 0, xd, torch.zeros_like(xd)) - z * torch.exp2(z * p - 0.5)
    assert (y.double().cpu() - poly).abs().max().item() < 2e-6


@pytest.mark.parametrize(
    "device, dtype, on",
    [("meta", torch.float16, True), ("meta", torch.float32, False), ("cpu", torch.float16, False)],
)
def test_gelu_f16x2_is_chosen_for_gpu_fp16_outputs(monkeypatch, device, dtype, on):
    """mlp1's launch takes the packed-fp16 GELU for an fp16 output on a GPU (or its recording on meta tensors),
    never in the interpreter (no inline PTX there) or for the TF32 path's fp32 h; GELU_F16X2 False switches it off."""
    a = torch.empty(256, 768, dtype=torch.float16, device=device)
    w = torch.empty(3072, 768, dtype=torch.float16, device=device)
    b = torch.empty(3072, device=device)
    h = torch.empty(256, 3072, dtype=dtype, device=device)
    cfg = kernel.GEMM_CONFIGS["fp16"]["mlp1"]
    assert kernel._linear_launch(a, w, b, h, kernel.EPILOGUE_GELU, cfg)[3].get("GELU16", False) == on
    assert "GELU16" not in kernel._linear_launch(a, w, b, h, kernel.EPILOGUE_BIAS, cfg)[3]
    monkeypatch.setattr(kernel, "GELU_F16X2", False)
    assert "GELU16" not in kernel._linear_launch(a, w, b, h, kernel.EPILOGUE_GELU, cfg)[3]


@triton.jit
def _gelu_f16x2_probe(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, kernel._gelu_f16x2(tl.load(x_ptr + offs)))


@pytest.mark.gpu
def test_gelu_f16x2_on_the_gpu():
    """The inline PTX on the GPU against the numpy run of its program: the same up to ex2.approx.f16x2's error
    (a few fp16 ulps of the small term), and within the program's bound of the exact GELU."""
    if DEVICE != "cuda":
        pytest.skip("needs CUDA (inline PTX)")
    x = torch.cat(
        [
            torch.linspace(-12, 12, 2**16),
            torch.randn(2**16) * 2,
            torch.tensor([0.0, -0.0, 1e4, -1e4] + [0.0] * 1020),
        ]
    )
    y = torch.empty(x.numel(), dtype=torch.float16, device="cuda")
    _gelu_f16x2_probe[(x.numel() // 1024,)](x.cuda(), y, BLOCK=1024)
    y = y.double().cpu()
    emulated = torch.from_numpy(_run_f16x2_program(kernel.GELU_F16X2_PROGRAM, x.numpy()).astype(np.float64))
    exact = torch.nn.functional.gelu(x.double())
    assert ((y - emulated).abs() - 2e-3 * emulated.abs()).max().item() <= 1e-4
    assert ((y - exact).abs() - 2e-3 * exact.abs()).max().item() <= 3e-4


def _attention_expected(qkv, bias, rel_h, rel_w, height, width):
    """Float32 window attention on one image."""
    n_wh, n_ww = math.ceil(height / 14), math.ceil(width / 14)
    hp, wp, nw = n_wh * 14, n_ww * 14, n_wh * n_ww
    x = bias.float().expand(hp, wp, -1).clone()  # zero-padded tokens: q, k, v = the bias
    x[:height, :width] = qkv.float().reshape(height, width, -1)
    win = x.reshape(n_wh, 14, n_ww, 14, 3, 12, 64).permute(4, 0, 2, 5, 1, 3, 6).reshape(3, nw, 12, 196, 64)
    q, k, v = win[0], win[1], win[2]
    pos = torch.arange(14)
    rel = pos[:, None] - pos[None, :] + 13
    q5 = q.reshape(nw, 12, 14, 14, 64)
    bias_h = torch.einsum("nhijc,ikc->nhijk", q5, rel_h.float()[rel].half().float())
    bias_w = torch.einsum("nhijc,jkc->nhijk", q5, rel_w.float()[rel].half().float())
    s = q @ k.transpose(-1, -2) / 8 + (bias_h[..., :, None] + bias_w[..., None, :]).reshape(nw, 12, 196, 196)
    o = torch.softmax(s, -1) @ v  # [windows, 12, 196, 64]
    o = o.reshape(n_wh, n_ww, 12, 14, 14, 64).permute(0, 3, 1, 4, 2, 5).reshape(hp, wp, 768)
    return o[:height, :width].reshape(height * width, 768)


_ATTN_CASES = [
    ("persistent", 128, 128, 2, 8, 3, 1),
    ("persistent", 128, 256, 2, 8, 2, 1),
    ("persistent", 64, 128, 3, 4, 2, 2),
    ("persistent", 128, 256, 4, 8, 2, 1),
    ("persistent", 64, 256, 4, 4, 2, 2),
    ("persistent", 128, 128, 5, 8, 3, 1),
    (64, 256, 2, 4, 1),
    (64, 128, 3, 4, 1),
]


@pytest.mark.parametrize(
    ("cfg", "shape"),
    [(c, (11, 26)) for c in _ATTN_CASES] + [(kernel.ATTN_CONFIGS["fp16"], (17, 15))],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v[0], int) else "-".join(map(str, v)),
)
def test_window_attention_bias_modes(cfg, shape):
    height, width = shape  # padding in both dims; 17 x 15: two bands, whole window rows and columns
    n = height * width
    gen = torch.Generator().manual_seed(7)
    bias = torch.randn(2304, generator=gen).half().float()
    qkv = torch.cat([torch.randn(n, 2304, generator=gen), bias[None]]).half().to(DEVICE)  # + padded token
    rel_h, rel_w = (3 * torch.randn(2, 27, 64, generator=gen)).to(DEVICE)  # large bias: exactness matters
    o = torch.full((n, 768), math.nan, dtype=torch.float16, device=DEVICE)
    n_bands = math.ceil(height / 14)
    kernel._window_attention(qkv, o, bias.to(DEVICE), rel_h, rel_w, 0, n, height, width, 0, n_bands, cfg)
    expected = _attention_expected(qkv[:n].cpu(), bias, rel_h.cpu(), rel_w.cpu(), height, width)
    err = (o.float().cpu() - expected).abs().max().item()
    bound = 1e-1 if cfg[-4 if cfg[0] == "persistent" else 2] == 3 else 4e-3  # mode 3 rounds the bias
    assert err < bound, f"max |err| {err:.2e}"


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@pytest.mark.parametrize(
    ("batch", "height", "width"),
    [(1, 9, 1500), (1, 1500, 9), (32, 15, 15), (3, 29, 43), (2, 14, 14)],
    ids=["wide", "tall", "batch32", "odd", "whole-windows"],
)
@pytest.mark.parametrize("proj_bk", [None, 32], ids=["shipped", "proj-bk32"])
def test_odd_images_gpu(monkeypatch, batch, height, width, proj_bk):
    # the sizes beyond the official ones: one band of 108 windows (wide), 108 bands of one window
    # (tall), 32 images of 2 x 2 windows each padded on both sides, odd sizes, and exactly one window; with the
    # ping-pong projection at another BK (more ring stages) too
    if proj_bk is not None:
        monkeypatch.setitem(kernel.GLUON_GEMM, "proj", (*kernel.GLUON_GEMM["proj"][:4], proj_bk))
    _check_block("fp16", batch, height, width)


#: one chunk of the window attention: a band below one window, odd sizes, one wide band, a chunk starting at band0 > 0
#: (tok0 > 0), a chunk ending before the image does, whole windows only
CHUNKS = pytest.mark.parametrize(
    ("batch", "height", "width", "band0", "n_bands"),
    [
        (1, 5, 9, 0, 1),
        (3, 29, 43, 0, 9),
        (1, 14, 300, 0, 1),
        (2, 43, 29, 1, 4),
        (1, 70, 70, 2, 3),
        (2, 64, 64, 0, 10),
    ],
    ids=["small", "odd", "wide", "chunk-offset", "chunk-tail", "whole-windows"],
)


def _chunk_attention_outputs(monkeypatch, batch, height, width, band0, n_bands, seed, runs):
    """o of one chunk's window attention (bands band0 .. band0 + n_bands of the images; random qkv and rel-pos
    tables; o NaN-poisoned) for each run: (attention configuration, kernel.py settings for that run)."""
    n_wh = math.ceil(height / 14)
    rows = [min((b % n_wh) * 14 + 14, height) - (b % n_wh) * 14 for b in range(band0, band0 + n_bands)]
    tok0 = sum(min((b % n_wh) * 14 + 14, height) - (b % n_wh) * 14 for b in range(band0)) * width
    n_tok = sum(rows) * width
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bias = torch.randn(kernel.QKV_DIM, device="cuda", generator=gen).half()
    qkv = torch.cat([torch.randn(n_tok, kernel.QKV_DIM, device="cuda", generator=gen).half(), bias[None]])
    rel_h, rel_w = torch.randn(2, kernel.REL_SIZE, kernel.HEAD_DIM, device="cuda", generator=gen)
    outs = []
    for cfg, settings in runs:
        for name, value in settings.items():
            monkeypatch.setattr(kernel, name, value)
        o = torch.full((n_tok, kernel.HIDDEN), math.nan, device="cuda", dtype=torch.float16)
        kernel._window_attention(
            qkv, o, bias.float(), rel_h, rel_w, tok0, n_tok, height, width, band0, n_bands, cfg
        )
        outs.append(o)
    torch.cuda.synchronize()
    return outs


@pytest.mark.usefixtures("poisoned_workspaces")
@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@CHUNKS
@pytest.mark.parametrize(("pingpong", "lsum_mma"), [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (2, 2)])
def test_gluon_attention_matches_tl_gpu(
    batch, height, width, band0, n_bands, pingpong, lsum_mma, monkeypatch
):
    """The Gluon attention (sm_90) against the tl kernel on one chunk's qkv: padded keys, slots outside the
    window, image edges, a chunk starting at band0 > 0 (tok0 > 0); every real query written (NaN-poisoned o);
    with the consumers' products in turns or not (GLUON_ATTENTION_PINGPONG), the softmax's row sums in registers or
    by mma.sync (GLUON_ATTENTION_LSUM_MMA). forward() runs it with o in place of q (test_odd_images_gpu)."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon attention runs on sm_90 only")
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_PINGPONG", pingpong)
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_LSUM_MMA", lsum_mma)
    runs = [(kernel.ATTN_CONFIGS["fp16"], {}), (kernel.GLUON_ATTENTION, {})]
    outs = _chunk_attention_outputs(monkeypatch, batch, height, width, band0, n_bands, 7, runs)
    assert torch.isfinite(outs[1]).all()
    assert (outs[1].float() - outs[0].float()).abs().max().item() < 4e-3


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@CHUNKS
def test_gluon_attention_bias_shuffle_is_the_gather_bit_for_bit_gpu(
    batch, height, width, band0, n_bands, monkeypatch
):
    """GLUON_ATTENTION_BIAS_SHUFFLE 1 (per-tile Rh tables, A_w by paired-lane shuffles) gives the same o, bit for
    bit, as the one gather it replaced (0): the same products of the same fp16 operands, only moved differently;
    every real query written (NaN-poisoned o). Random rel-pos tables, so that every offset of both is used."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon attention runs on sm_90 only")
    runs = [(kernel.GLUON_ATTENTION, {"GLUON_ATTENTION_BIAS_SHUFFLE": s}) for s in (0, 1)]
    outs = _chunk_attention_outputs(monkeypatch, batch, height, width, band0, n_bands, 13, runs)
    assert torch.isfinite(outs[1]).all()
    assert torch.equal(outs[0], outs[1])


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@CHUNKS
@pytest.mark.parametrize("pingpong", [0, 1, 2])
def test_gluon_attention_skip_pad_is_bit_for_bit_gpu(
    batch, height, width, band0, n_bands, pingpong, monkeypatch
):
    """GLUON_ATTENTION_SKIP_PAD 1 (the consumers pass over the query tiles whose window rows are all below the
    image: heights 5, 29, 43 and 64 have such tiles in their last band, 14 and 70 none) gives the same o, bit for
    bit, as computing every tile; the turns of the consumers' products stay in step in each PINGPONG mode (a
    skipped tile takes its turns too), and every real query is written (NaN-poisoned o)."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon attention runs on sm_90 only")
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_PINGPONG", pingpong)
    runs = [(kernel.GLUON_ATTENTION, {"GLUON_ATTENTION_SKIP_PAD": s}) for s in (0, 1)]
    outs = _chunk_attention_outputs(monkeypatch, batch, height, width, band0, n_bands, 17, runs)
    assert torch.isfinite(outs[1]).all()
    assert torch.equal(outs[0], outs[1])


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@pytest.mark.parametrize("m", [1, 100, 4097, 33000])
@pytest.mark.parametrize("epilogue", [kernel.EPILOGUE_BIAS, kernel.EPILOGUE_GELU], ids=["bias", "gelu"])
@pytest.mark.parametrize("direct", [False, True], ids=["tma-store", "direct-store"])
def test_gluon_gemm_matches_triton_gpu(m, epilogue, direct, monkeypatch):
    """The Gluon GEMM (sm_90) against the Triton GEMM it replaces: rows below one tile, a partial last tile,
    several tiles per program; every element written (NaN-poisoned output); the GELU in packed fp16 as the
    Triton epilogue computes it; the rows stored by TMA or from registers (GLUON_GEMM_DIRECT_STORE)."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon GEMM runs on sm_90 only")
    monkeypatch.setattr(kernel, "GLUON_GEMM_DIRECT_STORE", direct)
    gen = torch.Generator(device="cuda").manual_seed(11)
    n = kernel.MLP_DIM if epilogue == kernel.EPILOGUE_GELU else kernel.QKV_DIM
    a = torch.randn(m, kernel.HIDDEN, device="cuda", generator=gen).half()
    w = (0.03 * torch.randn(n, kernel.HIDDEN, device="cuda", generator=gen)).half()
    bias = 0.3 * torch.randn(n, device="cuda", generator=gen)
    outs = []
    for cfg in (kernel.GEMM_CONFIGS["fp16"]["qkv"], kernel.GLUON_GEMM["qkv"]):
        c = torch.full((m, n), math.nan, device="cuda", dtype=torch.float16)
        kernel._linear(a, w, bias, c, epilogue, cfg)
        outs.append(c.float())
    torch.cuda.synchronize()
    assert torch.isfinite(outs[1]).all()
    ref = a.float() @ w.float().t() + bias
    if epilogue == kernel.EPILOGUE_GELU:
        ref = torch.nn.functional.gelu(ref)
    # fp16 output rounding (|c| < 8: 4e-3) apart from the accumulation order
    assert (outs[1] - outs[0]).abs().max().item() <= 8e-3
    assert (outs[1] - ref).abs().max().item() <= (outs[0] - ref).abs().max().item() + 2e-3


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@pytest.mark.parametrize("m", [1, 100, 4097, 33000])
@pytest.mark.parametrize("with_bias2", [False, True], ids=["bias", "bias2"])
@pytest.mark.parametrize("bk", [16, 32, 64])
def test_gluon_residual_gemm_matches_triton_gpu(m, with_bias2, bk):
    """The projection's Gluon GEMM (residual epilogue, fp32 output; 128 x 128 tiles in ping-pong) against the
    Triton GEMM at each BK (the ring's depth; 64 is GLUON_GEMM's): rows below one tile, a program with one tile
    (no turn for its second warpgroup), several tiles per warpgroup; A strided as o in qkv's rows, every element
    written (NaN-poisoned output)."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon GEMM runs on sm_90 only")
    gluon_cfg = (*kernel.GLUON_GEMM["proj"][:4], bk)
    gen = torch.Generator(device="cuda").manual_seed(12)
    qkv = torch.randn(m, kernel.QKV_DIM, device="cuda", generator=gen).half()
    o = qkv[:, : kernel.HIDDEN]
    w = (0.03 * torch.randn(kernel.HIDDEN, kernel.HIDDEN, device="cuda", generator=gen)).half()
    bias, bias2 = 0.3 * torch.randn(2, kernel.HIDDEN, device="cuda", generator=gen)
    x = torch.randn(m, kernel.HIDDEN, device="cuda", generator=gen)
    b2 = bias2 if with_bias2 else None
    outs = []
    for cfg in (kernel.GEMM_CONFIGS["fp16"]["proj"], gluon_cfg):
        c = torch.full((m, kernel.HIDDEN), math.nan, device="cuda")
        kernel._launch(
            [kernel._linear_launch(o, w, bias, c, kernel.EPILOGUE_RESIDUAL, cfg, residual=x, bias2=b2)]
        )
        outs.append(c)
    torch.cuda.synchronize()
    assert torch.isfinite(outs[1]).all()
    ref = x + bias + (bias2 if with_bias2 else 0) + o.float() @ w.float().t()
    assert (outs[1] - ref).abs().max().item() <= 1e-4
    assert (outs[1] - outs[0]).abs().max().item() <= 1e-4


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@pytest.mark.parametrize(("m", "n_rows", "r0", "r1", "pad"), [(100, 1, 0, 1, 1), (4097, 3000, 17, 2990, -1),
                                                             (33000, 40000, 0, 40000, 40000)])  # fmt: skip
@pytest.mark.parametrize("params", [0, 1, 2])
def test_gluon_gemm_layernorm_rows_gpu(monkeypatch, m, n_rows, r0, r1, pad, params):
    """The Gluon GEMM's LayerNorm warp (GLUON_GEMM_LN_NEXT): rows r0 .. r1 - 1 as the LayerNorm launch computes
    them, the pad row zeros, no other row touched (NaN-poisoned); the GEMM's own output unchanged, bit for bit; each
    place of the LayerNorm weight and bias (GLUON_GEMM_LN_PARAMS)."""
    if not kernel.gluon_sm90_ok(torch.device("cuda")):
        pytest.skip("the Gluon GEMM runs on sm_90 only")
    monkeypatch.setattr(kernel, "GLUON_GEMM_LN_PARAMS", params)
    gen = torch.Generator(device="cuda").manual_seed(13)
    a = torch.randn(m, kernel.HIDDEN, device="cuda", generator=gen).half()
    w = (0.03 * torch.randn(kernel.QKV_DIM, kernel.HIDDEN, device="cuda", generator=gen)).half()
    bias = 0.3 * torch.randn(kernel.QKV_DIM, device="cuda", generator=gen)
    x = 2 * torch.randn(n_rows, kernel.HIDDEN, device="cuda", generator=gen) + 0.5
    g = 1 + 0.2 * torch.randn(kernel.HIDDEN, device="cuda", generator=gen)
    b = 0.2 * torch.randn(kernel.HIDDEN, device="cuda", generator=gen)
    y = torch.full((n_rows + 1, kernel.HIDDEN), math.nan, device="cuda", dtype=torch.float16)
    y_ref = y.clone()
    kernel._layernorm(x, g, b, 1e-6, y_ref[: n_rows + 1], pad_row=True)
    cs = []
    for ln in (None, (x, g, b, 1e-6, y, r0, r1, pad)):
        c = torch.full((m, kernel.QKV_DIM), math.nan, device="cuda", dtype=torch.float16)
        kernel._launch(
            [kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_BIAS, kernel.GLUON_GEMM["qkv"], ln=ln)]
        )
        cs.append(c)
    torch.cuda.synchronize()
    assert torch.equal(cs[0], cs[1]) and torch.isfinite(cs[1]).all()
    done = torch.zeros(n_rows + 1, dtype=torch.bool, device="cuda")
    done[r0:r1] = True
    if pad >= 0:
        done[pad] = True
        assert (y[pad] == 0).all()
    assert torch.isnan(y[~done]).all()  # nothing else written
    assert (
        y[r0:r1].float() - y_ref[r0:r1].float()
    ).abs().max().item() <= 4e-3  # one fp16 rounding at |y| < 8


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
@pytest.mark.parametrize("params", [0, 2])
def test_gluon_gemm_layernorm_settings_reach_the_launch(monkeypatch, params):
    """GLUON_GEMM_LN_PIECES / _PARAMS reach a launch with LayerNorm rows (meta tensors, as a build records it);
    without rows the kernel's LN is off and keeps its one-piece ring; bad rows are refused."""
    monkeypatch.setattr(kernel, "GLUON_GEMM_LN_PARAMS", params)
    a = torch.empty(300, kernel.HIDDEN, dtype=torch.float16, device="meta")
    w = torch.empty(kernel.QKV_DIM, kernel.HIDDEN, dtype=torch.float16, device="meta")
    c = torch.empty(300, kernel.QKV_DIM, dtype=torch.float16, device="meta")
    bias = torch.empty(kernel.QKV_DIM, device="meta")
    x, g = torch.empty(50, kernel.HIDDEN, device="meta"), torch.empty(kernel.HIDDEN, device="meta")
    y = torch.empty(51, kernel.HIDDEN, dtype=torch.float16, device="meta")
    cfg = kernel.GLUON_GEMM["qkv"]
    fn, grid, args, meta = kernel._linear_launch(
        a, w, bias, c, kernel.EPILOGUE_BIAS, cfg, ln=(x, g, g, 1e-5, y, 3, 40, 50)
    )
    assert meta["LN"] is True and (meta["LN_PIECES"], meta["LN_PARAMS"]) == (
        kernel.GLUON_GEMM_LN_PIECES,
        params,
    )
    assert args[6:14] == (x, g, g, y, 3, 40, 50, 1e-5)
    assert set(meta) - {"num_warps", "launch_pdl"} <= set(inspect.signature(fn.fn).parameters)
    fn, grid, args, meta = kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_BIAS, cfg)
    assert meta["LN"] is False and "LN_PIECES" not in meta and args[10:13] == (0, 0, -1)
    for bad in ((x, g, g, 1e-5, y, 0, 51, -1), (x, g, g, 1e-5, y, 0, 10, 51), (x, g, g, 1e-5, x, 0, 10, -1)):
        with pytest.raises(ValueError):
            kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_BIAS, cfg, ln=bad)


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
@pytest.mark.parametrize(("ln_next", "tokens"), [(True, 20000), (False, 20000), (True, 3000)])
def test_block_next_chunk_layernorm_gpu(monkeypatch, ln_next, tokens):
    """The block over 3+ chunks on the GPU with each later chunk's LayerNorm1 beside the previous chunk's GEMMs
    (mlp1 in Gluon at 20000-token chunks' sub-chunks, Triton at 3000) and without."""
    monkeypatch.setattr(kernel, "GLUON_GEMM_LN_NEXT", ln_next)
    _check_block("fp16", 2, 150, 200, workspace_tokens=tokens, mlp_split="always")


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
@pytest.mark.parametrize("cfg", [("gluon", 208, 96, 96, 32), ("gluon", 224, 64, 64, 8)])
def test_gluon_gemm_launch_carries_its_configuration(cfg):
    """Every field of a Gluon GEMM configuration reaches the launch (fp16 outputs); the residual epilogue takes
    the ping-pong kind only ("gluon_pp", test_pingpong_projection_launch_carries_its_configuration), the fp16
    ones the "gluon" kind only; other shapes and epilogues are refused."""
    a = torch.empty(300, kernel.HIDDEN, dtype=torch.float16, device="meta")
    w = torch.empty(kernel.MLP_DIM, kernel.HIDDEN, dtype=torch.float16, device="meta")
    c = torch.empty(300, kernel.MLP_DIM, dtype=torch.float16, device="meta")
    bias = torch.empty(kernel.MLP_DIM, device="meta")
    fn, grid, args, meta = kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_GELU, cfg)
    assert fn is kernel._linear_gluon_kernel and grid == (min(3 * 12, kernel._num_sms(a.device)),)
    assert (meta["CONSUMER_REGS"], meta["EPILOGUE_REGS"], meta["LOADER_REGS"], meta["ROWS"]) == cfg[1:]
    assert meta["GELU"] is True and [d.block_shape for d in args[:3]] == [[128, 64], [256, 64], [64, 256]]
    assert args[3] is c and meta["DIRECT"] is kernel.GLUON_GEMM_DIRECT_STORE
    params = set(inspect.signature(fn.fn).parameters)
    assert set(meta) - {"num_warps", "launch_pdl"} <= params  # no keyword the kernel would reject
    c32, x = (torch.empty(300, kernel.HIDDEN, device="meta") for _ in range(2))
    w768 = w[: kernel.HIDDEN, :]
    with pytest.raises(ValueError, match="ping-pong"):  # the residual epilogue with a "gluon" cfg
        kernel._linear_launch(a, w768, bias, c32, kernel.EPILOGUE_RESIDUAL, cfg, residual=x, bias2=bias)
    pp = kernel.GLUON_GEMM["proj"]
    with pytest.raises(ValueError):  # the residual in place (c itself) is the split-K GEMM's, not this one's
        kernel._linear_launch(a, w768, bias, c32, kernel.EPILOGUE_RESIDUAL, pp, residual=c32)
    with pytest.raises(ValueError):  # an fp32 output without a residual
        kernel._linear_launch(a, w, bias, c.float(), kernel.EPILOGUE_BIAS, cfg)
    with pytest.raises(ValueError):  # a configuration of another shape is refused, not half-used
        kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_GELU, (*cfg, 2))


def test_gluon_gemm_takes_the_stages_it_is_meant_for(monkeypatch):
    """On sm_90 (a build's recording for sm_90a) qkv and proj run the Gluon GEMMs at any size and mlp1 from
    GLUON_GEMM_MIN_ROWS rows on; without GELU_F16X2 (the only GELU the Gluon epilogue has) mlp1 stays Triton."""
    pytest.importorskip("triton.experimental.gluon")
    for min_rows, f16x2, expect in ((0, True, 1), (10**9, True, 0), (0, False, 0)):
        monkeypatch.setitem(kernel.GLUON_GEMM_MIN_ROWS, "mlp1", min_rows)
        monkeypatch.setattr(kernel, "GELU_F16X2", f16x2)
        launched = _block_plan(monkeypatch, 1, 30, 300, kernel.GLUON_GEMM_LN_NEXT)
        kinds = [(fn.__name__, kw.get("GELU")) for fn, grid, a, kw in launched]
        chunks = len(kernel.plan_scratch(1, 30, 300).chunks)
        assert kinds.count(("_linear_gluon_kernel", False)) == chunks  # qkv
        assert kinds.count(("_linear_gluon_residual_pp_kernel", None)) == chunks  # proj
        mlp1 = kinds.count(("_linear_gluon_kernel", True))
        assert (mlp1 > 0) == bool(expect), (min_rows, f16x2, kinds)


@pytest.mark.parametrize("weights", [[1], [3, 1, 1], [2304, 0, 3072], [5, 7]])
@pytest.mark.parametrize("rows", [0, 1, 7, 1000, 65537])
def test_row_shares_cover_the_rows_once(rows, weights):
    shares = kernel._row_shares(rows, weights)
    assert len(shares) == len(weights) and shares[0][0] == 0 and shares[-1][1] == rows
    assert all(a[1] == b[0] for a, b in zip(shares, shares[1:], strict=False))
    for (r0, r1), w in zip(shares, weights, strict=True):  # in proportion, up to one row
        assert r0 <= r1 and abs((r1 - r0) - rows * w / sum(weights)) < 1 + 1e-9


def _block_plan(monkeypatch, batch, height, width, ln_next, **forward_kw):
    """The launches forward() plans for sm_90a (a build's recording on meta tensors)."""
    monkeypatch.setenv(kernel.TARGET_ARCH_ENV, "sm_90a")
    monkeypatch.setattr(kernel, "GLUON_GEMM_LN_NEXT", ln_next)
    launched = []
    monkeypatch.setattr(kernel, "_launch", lambda plan: launched.extend(plan))
    shapes = [(batch, height, width, 768), (2304, 768), (2304,), (768, 768), (768,), (27, 64), (27, 64)]
    shapes += [(768,)] * 4 + [(3072, 768), (3072,), (768, 3072), (768,)]
    args = [torch.empty(shape, device="meta") for shape in shapes]
    kernel.forward(*args, 1e-6, torch.empty(batch, height, width, 768, device="meta"), **forward_kw)
    return [launch for launch in launched if launch[1] is not None]


def _view(t: torch.Tensor) -> tuple:
    return (t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
@pytest.mark.parametrize(
    ("batch", "height", "width", "workspace"),
    [(1, 30, 300, None), (2, 150, 200, None), (1, 300, 300, None), (2, 15, 17, 150 * 3840 * 2)],
)
@pytest.mark.parametrize("sms", [4, 132])
def test_next_chunk_layernorm_beside_the_gemms(monkeypatch, batch, height, width, workspace, sms):
    """GLUON_GEMM_LN_NEXT (sm_90): each later chunk's first LayerNorm1 rows, as many as ln_capacity gives the
    previous chunk's Gluon GEMMs (qkv, and mlp1 where it runs in Gluon), go to those GEMMs in consecutive shares,
    written where that chunk's qkv GEMM reads them; the rest (and the pad row) keep a LayerNorm launch, which
    disappears when the GEMMs take every row (then the first of them writes the pad row). Only the first chunk's
    LayerNorm1 converts the weights. Off, every chunk has its own whole LayerNorm1 launch. 1 x 30 x 300: mlp1 below
    GLUON_GEMM_MIN_ROWS stays Triton; 2 x 15 x 17 in a small workspace: chunks of 238 and 17 tokens, where the
    17-token chunks' GEMMs have room for no row (capacity 0: the first version divided by it); 4 and 132
    programs a launch."""
    pytest.importorskip("triton.experimental.gluon")
    monkeypatch.setattr(kernel, "_num_sms", lambda device: sms)
    kw = {} if workspace is None else dict(workspace_bytes=workspace, mlp_split="always")
    sp = kernel.plan_scratch(batch, height, width, **kw)
    assert len(sp.chunks) >= 2
    off = _block_plan(monkeypatch, batch, height, width, False, **kw)
    on = _block_plan(monkeypatch, batch, height, width, True, **kw)
    ln1_off = [a for fn, grid, a, kw in off if fn is kernel._prologue_kernel and kw["PAD_ROW"]]
    assert [a[4] for a in ln1_off] == [t1 - t0 for _, _, t0, t1 in sp.chunks]  # whole chunks
    qkv = [
        i for i, (fn, grid, a, kw) in enumerate(on) if fn is kernel._linear_gluon_kernel and not kw["GELU"]
    ]
    fused_any, zero_caps, done = False, False, 0
    for c, (i0, i1) in enumerate(
        zip(qkv, qkv[1:] + [len(on)], strict=True)
    ):  # chunk c's launches from its qkv
        a_c = on[i0][2][0].base  # what chunk c's qkv GEMM reads: its LayerNorm1 rows
        t0, t1 = sp.chunks[c][2:]
        before = on[i0 - 1 : i0] if i0 else []  # the launch just before the chunk's qkv GEMM
        ln1 = [(a, kw) for fn, grid, a, kw in before if fn is kernel._prologue_kernel and kw["PAD_ROW"]]
        hosts = [a for fn, grid, a, kw in on[i0:i1] if fn is kernel._linear_gluon_kernel and kw["LN"]]
        if c + 1 == len(sp.chunks):
            assert not hosts
        if c + 1 < len(sp.chunks):
            nt0, nt1 = sp.chunks[c + 1][2:]
            gemms = [(a[0].base.shape[0], a[1].base.shape[0]) for fn, g, a, kw in on[i0:i1]
                     if fn is kernel._linear_gluon_kernel]  # fmt: skip
            caps = [kernel.ln_capacity(m, n, sms) for m, n in gemms]
            k = min(nt1 - nt0, sum(caps))
            assert len(hosts) == (len(gemms) if k else 0)
            zero_caps |= k == 0
        if c + 1 < len(sp.chunks) and k:
            x_rows, w, b, y, r0, r1, pad, eps = zip(*(a[6:14] for a in hosts), strict=True)
            assert {_view(t) for t in x_rows} == {(nt0 * 768, (nt1 - nt0, 768), (768, 1), torch.float32)}
            assert {_view(t) for t in y} == {_view(on[qkv[c + 1]][2][0].base)}  # the next qkv GEMM's A
            assert r0[0] == 0 and r1[-1] == k and all(a == b for a, b in zip(r1, r0[1:], strict=False))
            assert pad == ((nt1 - nt0,) if k == nt1 - nt0 else (-1,)) + (-1,) * (len(hosts) - 1)
            assert set(eps) == {1e-6}
        # chunk c's own LayerNorm1 launch: whole (chunk 0, with the conversion), the rest past the previous
        # chunk's GEMMs' rows, or none
        assert len(ln1) == (1 if done < t1 - t0 else 0)
        if ln1:
            ((a, kw),) = ln1
            assert a[4] == t1 - t0 - done and kw["CONVERT"] == (c == 0)
            assert _view(a[0]) == (t0 * 768 + done * 768, (t1 - t0 - done, 768), (768, 1), torch.float32)
            assert (
                a[3].storage_offset() == a_c.storage_offset() + done * 768
                and a[3].shape[0] == t1 - t0 - done + 1
            )
        fused_any |= done > 0
        done = k if c + 1 < len(sp.chunks) else 0  # the next chunk's rows done beside these GEMMs
    assert fused_any and zero_caps == (workspace is not None)


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
@pytest.mark.parametrize(
    ("cfg", "pingpong", "lsum_mma", "bias_shuffle", "skip_pad"),
    [(("gluon", 216, 48), 0, 1, 0, 1), (("gluon", 240, 24), 1, 0, 1, 0)],
)
def test_gluon_attention_launch_carries_its_configuration(
    cfg, pingpong, lsum_mma, bias_shuffle, skip_pad, monkeypatch
):
    """Every field of a Gluon configuration, and the module's GLUON_ATTENTION_PINGPONG / _LSUM_MMA / _BIAS_SHUFFLE /
    _SKIP_PAD, reach the launch (session 20 found a Q-set field that was unpacked and dropped: a session measured
    and shipped something other than it named). Settings other than the kernel's defaults, built on meta tensors as `solbench build`
    records them."""
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_PINGPONG", pingpong)
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_LSUM_MMA", lsum_mma)
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_BIAS_SHUFFLE", bias_shuffle)
    monkeypatch.setattr(kernel, "GLUON_ATTENTION_SKIP_PAD", skip_pad)
    qkv = torch.empty(101, kernel.QKV_DIM, dtype=torch.float16, device="meta")
    o = torch.empty(100, kernel.HIDDEN, dtype=torch.float16, device="meta")
    rel = torch.empty(kernel.REL_SIZE, kernel.HEAD_DIM, device="meta")
    fn, grid, args, meta = kernel._window_attention_launch(qkv, o, None, rel, rel, 0, 100, 10, 10, 0, 1, cfg)
    assert fn is kernel._window_attention_gluon_kernel and grid == (min(12, kernel._num_sms(qkv.device)),)
    assert (meta["CONSUMER_REGS"], meta["LOADER_REGS"]) == cfg[1:]
    assert (meta["PINGPONG"], meta["LSUM_MMA"], meta["BIAS_SHUFFLE"]) == (pingpong, lsum_mma, bias_shuffle)
    assert meta["SKIP_PAD"] == skip_pad
    params = set(inspect.signature(fn.fn).parameters)
    assert set(meta) - {"num_warps", "launch_pdl"} <= params  # no keyword the kernel would reject
    with pytest.raises(ValueError):  # a configuration of another shape is refused, not half-used
        kernel._window_attention_launch(qkv, o, None, rel, rel, 0, 100, 10, 10, 0, 1, (*cfg, 2))


@pytest.mark.parametrize(
    ("batch", "height", "width", "max_tokens"),
    [
        (1, 1024, 1024, 400_000),
        (32, 15, 15, 1000),
        (2, 15, 29, 300),
        (1, 5, 9, 10**9),
        (16, 128, 128, 90_000),
    ],
)
def test_plan_chunks(batch, height, width, max_tokens):
    chunks = kernel.plan_chunks(batch, height, width, max_tokens)
    n_wh = math.ceil(height / 14)
    assert chunks[0][0] == 0 and chunks[0][2] == 0
    assert chunks[-1][1] == batch * n_wh and chunks[-1][3] == batch * height * width
    for (_, g1, _, t1), (g0, _, t0, _) in zip(chunks[:-1], chunks[1:], strict=True):
        assert g1 == g0 and t1 == t0  # contiguous bands and tokens
    for g0, g1, t0, t1 in chunks:
        assert g1 > g0
        assert t0 == (g0 // n_wh) * height * width + (g0 % n_wh) * 14 * width
        assert t1 - t0 <= max_tokens or g1 == g0 + 1


OFFICIAL_SIZES = [  # (batch, height, width) of the 16 official workloads, in order
    (1, 613, 613), (1, 131, 131), (1, 449, 449), (1, 1024, 1024), (8, 64, 64), (2, 256, 256),
    (1, 512, 512), (2, 192, 384), (1, 293, 293), (16, 64, 64), (1, 224, 224), (16, 128, 128),
    (4, 128, 128), (8, 256, 256), (1, 336, 336), (4, 64, 64),
]  # fmt: skip
ODD_SIZES = [
    (1, 5, 9), (1, 14, 14), (1, 15, 15), (3, 17, 31), (2, 100, 7), (1, 64, 64), (1, 96, 96), (32, 15, 15),
    (1, 97, 1000), (5, 77, 129), (1, 1500, 1500), (1, 2048, 2048), (64, 64, 64), (3, 300, 500),
]  # fmt: skip


def _check_plan(sp, batch, height, width):
    n_wh = math.ceil(height / 14)
    assert sp.chunks[0][:3:2] == (0, 0) and sp.chunks[-1][1::2] == (batch * n_wh, batch * height * width)
    for (_, g1, _, t1), (g0, _, t0, _) in zip(sp.chunks[:-1], sp.chunks[1:], strict=True):
        assert g1 == g0 and t1 == t0  # contiguous bands and tokens
    t_max = max(t1 - t0 for _, _, t0, t1 in sp.chunks)
    assert sp.big_elems >= (t_max + 1) * kernel.QKV_DIM
    # compact: LN1's rows in the output, LN2's rows before h in qkv's space; else a separate `a` buffer
    assert sp.a_elems == 0 if sp.compact else sp.a_elems >= (t_max + 1) * kernel.HIDDEN
    assert (t_max + 1) * kernel.MLP_DIM < 2**31  # int32 offsets
    for (_, _, t0, t1), subs in zip(sp.chunks, sp.mlp_subs, strict=True):
        assert subs[0][0] == 0 and subs[-1][1] == t1 - t0
        h_base = (t1 - t0) * kernel.HIDDEN if sp.compact else 0
        for r0, r1 in subs:
            assert r1 > r0 and h_base + (r1 - r0) * kernel.MLP_DIM <= sp.big_elems
        for (_, r1), (r0, _) in zip(subs[:-1], subs[1:], strict=True):
            assert r1 == r0


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_scratch_within_input(precision):
    # everything one call allocates (chunk buffers + the fp16 weight copies) <= max(WORKSPACE_RATIO x the
    # bytes of x, MIN_WORKSPACE_BYTES = 2 x the fp16 weight copy, 27 MiB); "about one input": <= 1.1 x x
    assert kernel.WORKSPACE_RATIO <= 1.1
    floor = 2 * kernel.WEIGHT_ELEMENTS * 2
    assert kernel.MIN_WORKSPACE_BYTES <= floor
    for batch, height, width in OFFICIAL_SIZES + ODD_SIZES:
        sp = kernel.plan_scratch(batch, height, width, precision)
        _check_plan(sp, batch, height, width)
        bound = max(kernel.WORKSPACE_RATIO * sp.input_bytes, floor)
        assert sp.scratch_bytes <= bound, (batch, height, width, sp.ratio)
        if (batch, height, width) in OFFICIAL_SIZES:
            assert sp.ratio <= kernel.WORKSPACE_RATIO
            assert len(sp.chunks) <= (4 if precision == "fp16" else 7), (batch, height, width)
    # a chunk is at least one band: an image of one wide band can exceed the rule (documented)
    sp = kernel.plan_scratch(1, 14, 2000, precision)
    assert len(sp.chunks) == 1 and sp.ratio > 1


def test_scratch_plan_overrides():
    # the old rule (chunk buffers within max(x, 512 MiB), h of a whole chunk) gives one chunk at 4x64x64
    old = kernel.plan_scratch(4, 64, 64, workspace_bytes=512 * 2**20, mlp_split="never")
    assert len(old.chunks) == 1 and old.launches == 7 and old.ratio > 2.5
    for split in ("never", "always", "auto"):
        for budget in (None, 10**6, 1):
            sp = kernel.plan_scratch(3, 40, 50, workspace_bytes=budget, mlp_split=split)
            _check_plan(sp, 3, 40, 50)
    assert kernel.plan_scratch(3, 40, 50, workspace_bytes=1).chunks == tuple(
        kernel.plan_chunks(3, 40, 50, 1)
    )  # one band per chunk


# ------------------------------------------------------------------------------------------ direct launches


class _FakeCompiled:
    def __init__(self, calls, grid_seen):
        self.calls, self.grid_seen = calls, grid_seen

    def __getitem__(self, grid):
        self.grid_seen.append(grid)
        return lambda *params, stream=None: self.calls.append((grid, params, stream))


class _FakeJit:
    """Stands in for a triton.JITFunction: `warmup` returns a compiled kernel that records its launches."""

    def __init__(self, fn, calls, grids):
        self.fn, self.calls, self.grids, self.warmups = fn, calls, grids, 0

    def warmup(self, *args, grid, **kwargs):
        self.warmups += 1
        return _FakeCompiled(self.calls, self.grids)


def _fake_kernel(x_ptr, n, eps, BLOCK: tl.constexpr, FLAG: tl.constexpr = 3, MODE: tl.constexpr = 7):
    pass


def test_direct_launch_passes_every_parameter_in_order(monkeypatch):
    calls, grids = [], []
    fake = _FakeJit(_fake_kernel, calls, grids)
    x = torch.zeros(8)
    plan = [
        (fake, (5,), (x, 9, 0.5), dict(BLOCK=64, MODE=1, num_warps=4, num_stages=2)),
        (fake, (2, 3), (x, 1), dict(eps=2.0, BLOCK=32, FLAG=0, num_warps=8)),
    ]
    monkeypatch.setattr(kernel, "_direct_launch_ok", lambda plan: True)
    monkeypatch.setattr(kernel, "_RUNNERS", {})
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: types.SimpleNamespace(cuda_stream=1234))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    kernel._launch(plan)
    assert grids == [(5, 1, 1), (2, 3, 1)]  # the compiled runner indexes three grid dimensions
    # every signature parameter, constexprs and defaults included, launch options (num_warps...) left out;
    # tensors as their addresses (INT_ADDRESSES)
    xa = x.data_ptr()
    assert [c[1] for c in calls] == [(xa, 9, 0.5, 64, 3, 1), (xa, 1, 2.0, 32, 0, 7)]
    assert [c[2] for c in calls] == [1234, 1234]  # the current stream, as Triton's launch takes it
    assert fake.warmups == 2
    # the same launches again (new tensors of the same dtype and alignment): no new specialisation lookup
    y = torch.zeros(8)
    kernel._launch([(fake, g, (y, *a[1:]), kw) for fake, g, a, kw in plan])
    assert fake.warmups == 2 and calls[-2][1][0] == y.data_ptr() != xa
    monkeypatch.setattr(kernel, "INT_ADDRESSES", False)  # the tensors themselves
    kernel._launch(plan[:1])
    assert calls[-1][1][0] is x and fake.warmups == 2
    # another value, another alignment: Triton may specialise differently, so both are looked up again
    kernel._launch([(fake, (5,), (x, 16, 0.5), plan[0][3]), (fake, (2, 3), (x[1:], 1), plan[1][3])])
    assert fake.warmups == 4
    with pytest.raises(TypeError, match="missing argument 'BLOCK'"):
        kernel._launch([(fake, (1,), (x, 1, 0.5), {})])


def test_raw_launch_calls_the_c_launch_with_prepared_arguments(monkeypatch):
    # with a raw launcher (Triton 3.6's C launch behind the compiled kernel's launcher), each launch calls it with
    # the grid, the stream, the launcher's head arguments and the kernel's parameters: the runner is not called
    calls, grids, raw_calls = [], [], []
    fake = _FakeJit(_fake_kernel, calls, grids)
    x = torch.zeros(8)
    plan = [(fake, (5,), (x, 9, 0.5), dict(BLOCK=64, num_warps=4)), (torch.Tensor.zero_, None, (x,), {})]

    def c_launch(*args):
        raw_calls.append(args)

    head = ("function", False, True, None, None, (4, 1, 0), None, None, None)
    monkeypatch.setattr(kernel, "_direct_launch_ok", lambda plan: True)
    monkeypatch.setattr(kernel, "_RUNNERS", {})
    raw = lambda compiled, grid3: (c_launch, grid3, head, frozenset(), [])  # noqa: E731
    monkeypatch.setattr(kernel, "_raw_launcher", raw)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: types.SimpleNamespace(cuda_stream=1234))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(kernel, "_raw_launch_ok", lambda: True)
    kernel._launch(plan)
    assert calls == [] and raw_calls == [(5, 1, 1, 1234, *head, x.data_ptr(), 9, 0.5, 64, 3, 7)]
    monkeypatch.setattr(kernel, "_raw_launch_ok", lambda: False)  # a launch hook set, or another Triton
    kernel._launch(plan)
    assert len(raw_calls) == 1 and calls == [((5, 1, 1), (x.data_ptr(), 9, 0.5, 64, 3, 7), 1234)]


def test_raw_launch_expands_descriptors_before_the_call(monkeypatch):
    import triton.backends.nvidia.driver as nvdriver

    base = torch.zeros(4, 8)
    desc = kernel.TensorDescriptor.from_tensor(base, [2, 8])
    seen = []

    def expand(arg, meta):  # as Triton 3.6's make_tensordesc_arg: an encoded map or the base, shape, strides
        seen.append((arg, meta))
        return [arg.base, *arg.shape, *arg.strides]

    monkeypatch.setattr(nvdriver, "make_tensordesc_arg", expand)
    raw = ("launch", (3, 1, 1), ("head",), frozenset({1}), ["meta"])
    launch, grid, args = kernel._raw_parts(raw, [7, desc, 0.5])
    assert (launch, grid) == ("launch", (3, 1, 1))
    assert args == ("head", 7, base.data_ptr(), 4, 8, 8, 1, 0.5)  # tensors as their addresses
    assert seen == [(desc, "meta")]


def test_raw_launch_only_where_checked(monkeypatch):
    class Hooks:
        def __init__(self, calls):
            self.calls = calls

    runtime = types.SimpleNamespace(launch_enter_hook=Hooks([]), launch_exit_hook=None)
    monkeypatch.setattr(kernel.triton, "knobs", types.SimpleNamespace(runtime=runtime))
    for version, ok in (((3, 6), True), ((3, 7), False), ((3, 9), False)):
        monkeypatch.setattr(kernel, "_TRITON_VERSION", version)
        assert kernel._raw_launch_ok() == ok, version
        if not ok:
            assert kernel._raw_launcher(object(), (1, 1, 1)) is None
    monkeypatch.setattr(kernel, "_TRITON_VERSION", (3, 6))
    assert kernel._raw_launcher(object(), (1, 1, 1)) is None  # no CudaLauncher behind it
    runtime.launch_enter_hook = Hooks([print])  # a tool's hook: Triton's launch calls it, a raw one would not
    assert not kernel._raw_launch_ok()
    runtime.launch_enter_hook, runtime.launch_exit_hook = None, print  # a plain callable as a hook
    assert not kernel._raw_launch_ok()
    runtime.launch_exit_hook = None
    assert kernel._raw_launch_ok()
    monkeypatch.setattr(kernel, "RAW_LAUNCH", False)
    assert not kernel._raw_launch_ok()


def test_direct_launch_is_off_without_compiled_kernels(monkeypatch):
    # the interpreter's functions have no compiled kernels; a Triton version that was not checked also takes
    # the plain path (only the checked versions themselves, not those between them)
    plan = [(kernel._prologue_kernel, (1,), (), {})]
    if DEVICE == "cpu":
        assert not kernel._direct_launch_ok(plan)
    for version, ok in (((3, 6), True), ((3, 7), False), ((3, 8), False), ((3, 9), True), ((3, 10), False)):
        assert kernel._checked_triton(version) == ok, version
    monkeypatch.setattr(kernel, "_DIRECT_LAUNCH_TRITON", frozenset({(9, 0)}))
    assert not kernel._direct_launch_ok(plan)
    args = _inputs(1, 5, 9, seed=1)
    out = torch.empty_like(args[0])
    kernel.forward(*args, out)  # runs on either path
    assert torch.isfinite(out).all()


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
@pytest.mark.parametrize("bk", [16, 32, 64])
def test_pingpong_projection_launch_carries_its_configuration(bk):
    """The ping-pong projection (GLUON_GEMM["proj"], at each BK): 128 x 128 tiles, [128, BK] operand tiles in a 96 KB
    ring, [64, 128] fp32 pieces for the output and the residual, one program per SM at most, every keyword one
    the kernel has; other epilogues and BKs are refused."""
    a = torch.empty(1000, kernel.HIDDEN, dtype=torch.float16, device="meta")
    w = torch.empty(kernel.HIDDEN, kernel.HIDDEN, dtype=torch.float16, device="meta")
    c, x = (torch.empty(1000, kernel.HIDDEN, device="meta") for _ in range(2))
    b = torch.empty(kernel.HIDDEN, device="meta")
    cfg = (*kernel.GLUON_GEMM["proj"][:4], bk)
    fn, grid, args, meta = kernel._linear_launch(
        a, w, b, c, kernel.EPILOGUE_RESIDUAL, cfg, residual=x, bias2=b
    )
    assert fn is kernel._linear_gluon_residual_pp_kernel
    assert grid == (min(8 * 6, kernel._num_sms(a.device)),)
    assert [d.block_shape for d in args[:4]] == [[128, bk], [128, bk], [64, 128], [64, 128]]
    assert meta["STAGES"] * (128 + 128) * bk * 2 == 96 * 1024 and meta["BIAS2"] is True
    assert (meta["CONSUMER_REGS"], meta["EPILOGUE_REGS"], meta["LOADER_REGS"]) == cfg[1:4]
    assert set(meta) - {"num_warps", "launch_pdl"} <= set(inspect.signature(fn.fn).parameters)
    with pytest.raises(ValueError, match="ping-pong"):
        kernel._linear_launch(a, w, b, c, kernel.EPILOGUE_RESIDUAL, (*cfg[:4], 128), residual=x)
    with pytest.raises(ValueError, match="ping-pong"):
        kernel._linear_launch(a, w, b, c.half(), kernel.EPILOGUE_BIAS, cfg)


@pytest.mark.skipif(kernel.gluon is None, reason="this Triton has no Gluon")
def test_direct_launch_is_off_for_a_recording_on_meta_tensors(monkeypatch):
    # a Gluon kernel stays a JIT function under the interpreter, so a plan of Gluon launches on meta tensors (a
    # build's recording) would pass the JIT-function check; the first launch's tensors must be CUDA ones too
    monkeypatch.setattr(kernel, "_DIRECT_LAUNCH_TRITON", frozenset({kernel._TRITON_VERSION}))
    a = torch.empty(300, kernel.HIDDEN, dtype=torch.float16, device="meta")
    w = torch.empty(kernel.QKV_DIM, kernel.HIDDEN, dtype=torch.float16, device="meta")
    bias = torch.empty(kernel.QKV_DIM, device="meta")
    c = torch.empty(300, kernel.QKV_DIM, dtype=torch.float16, device="meta")
    launch = kernel._linear_launch(a, w, bias, c, kernel.EPILOGUE_BIAS, kernel.GLUON_GEMM["qkv"])
    assert isinstance(launch[0], triton.runtime.jit.JITFunction)  # what the first check lets through
    assert not kernel._direct_launch_ok([launch])


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA")
def test_direct_and_plain_launches_agree(monkeypatch):
    # several chunks and MLP sub-chunks (4 chunks, 6 sub-chunks): direct launches, raw or through the runners,
    # compute bit for bit what Triton's plain launch path computes (without split-K, whose atomics add in any
    # order)
    assert kernel._direct_launch_ok([(kernel._prologue_kernel, (1,), (), {})])
    monkeypatch.setattr(kernel, "SPLIT_K", 1)
    args = _inputs(2, 15, 17, seed=3)
    outs, raw_parts = [], []
    parts = kernel._raw_parts
    monkeypatch.setattr(kernel, "_raw_parts", lambda *a: raw_parts.append(1) or parts(*a))
    for direct, raw in ((True, True), (True, False), (False, False)):
        monkeypatch.setattr(kernel, "DIRECT_LAUNCH", direct)
        monkeypatch.setattr(kernel, "RAW_LAUNCH", raw)
        out = torch.full_like(args[0], math.nan)
        kernel.forward(*args, out, workspace_bytes=150 * 3840 * 2, mlp_split="always")
        outs.append(out)
    assert torch.isfinite(outs[0]).all()
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    if kernel._TRITON_VERSION in kernel._RAW_LAUNCH_TRITON:  # the raw path ran (3.6: the H200's Triton)
        assert raw_parts


@pytest.mark.skipif(DEVICE != "cpu", reason="the interpreter run of tune.py (on a GPU it would time)")
def test_tune_ab_compares_module_settings(tmp_path):
    """tune.py --ab (the same-process comparisons in NOTES.md) on the smoke shapes: every variant checked."""
    import json
    import subprocess
    import sys

    from harness import child_env

    tune = next((PROJECT_ROOT / "solutions").glob("077_*/triton_fused")) / "tune.py"
    out = tmp_path / "ab.json"
    args = [
        sys.executable,
        str(tune),
        "--smoke",
        "--ab-workloads",
        "2",
        "--ab-rounds",
        "1",
        "--out",
        str(out),
    ]
    variants = ["--ab", 'split2={"SPLIT_K": 2}', "--ab", 'nosplit={"SPLIT_K": 1}']
    proc = subprocess.run(
        [*args, *variants], capture_output=True, text=True, env=child_env(TRITON_INTERPRET="1")
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    row = report["workloads"]["2"]
    assert row["axes"] == {"batch_size": 2, "height": 15, "width": 17}
    assert row["split2"]["passed"] and row["nosplit"]["passed"]
    assert row["split2"]["err_over_atol"] < 1 and row["split2"]["ms"] == []  # no timing on the CPU
    bad = subprocess.run(
        [*args, "--ab", 'x={"NO_SUCH_SETTING": 1}'],
        capture_output=True,
        text=True,
        env=child_env(TRITON_INTERPRET="1"),
    )
    assert bad.returncode != 0 and "NO_SUCH_SETTING" in bad.stderr
