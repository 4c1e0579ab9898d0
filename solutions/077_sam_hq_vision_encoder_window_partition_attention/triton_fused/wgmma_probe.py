"""Probe session 18's CUDA GEMMs (wgmma_probe.cu: ping-pong and cooperative) against cuBLAS and 077's Triton GEMMs.

Builds the .cu with nvcc (sm_90a) into a temporary shared library, checks every variant against an fp32 product
of the fp16 operands (M = 1 .. 65537, bias and erf-GELU epilogues), then times them (CUDA events, 512 MB
written between calls to flush L2, median of 20) with the Triton GEMMs' shipped configurations and a plain
cuBLAS product. Run from the repository root: `python <this folder>/wgmma_probe.py`; writes
$OUT/probe.json."""

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp")
res = {"log": []}


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    res["log"].append(s)


def build():
    so = os.path.join(tempfile.mkdtemp(), "libwgmma_probe.so")
    cmd = [
        "nvcc",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-O3",
        "-std=c++17",
        "-gencode=arch=compute_90a,code=sm_90a",
        os.path.join(HERE, "wgmma_probe.cu"),
        "-o",
        so,
    ]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    log("nvcc rc", r.returncode, f"{time.time() - t:.1f}s", r.stderr[-2000:])
    return ctypes.CDLL(so)


lib = build()
lib.pingpong_gemm.restype = ctypes.c_int
lib.pingpong_gemm.argtypes = (
    [ctypes.c_int] * 6 + [ctypes.c_void_p] * 4 + [ctypes.c_int] * 7 + [ctypes.c_void_p]
)
dev = torch.device("cuda")
SMS = torch.cuda.get_device_properties(0).multi_processor_count

spec = importlib.util.spec_from_file_location("k077", os.path.join(HERE, "kernel.py"))
k077 = importlib.util.module_from_spec(spec)
sys.modules["k077"] = k077
spec.loader.exec_module(k077)


def cuda_gemm(a, w, bias, c, epi, stages=4, cl=1, mc=1, ts=1, pp=1, grid=None):
    M, K = a.shape
    N = w.shape[0]
    rc = lib.pingpong_gemm(
        stages,
        epi,
        cl,
        mc,
        ts,
        pp,
        a.data_ptr(),
        w.data_ptr(),
        bias.data_ptr(),
        c.data_ptr(),
        M,
        N,
        K,
        a.stride(0),
        w.stride(0),
        c.stride(0),
        grid or SMS,
        torch.cuda.current_stream().cuda_stream,
    )
    if rc:
        raise RuntimeError(f"pingpong_gemm rc {rc}")


def triton_gemm(a, w, bias, c, epi):
    """The shipped Triton GEMM's launch, prepared once (TMA descriptors: host work kept out of the timed call)."""
    cfg = k077.GEMM_CONFIGS["fp16"]["mlp1" if epi else "qkv"]  # (its GELU is the fit: epilogue 2's)
    plan = [k077._linear_launch(a, w, bias, c, k077.EPILOGUE_GELU if epi else k077.EPILOGUE_BIAS, cfg)]
    return lambda: k077._launch(plan)


def cublas_gemm(a, w, bias, c, epi):
    torch.mm(a, w.t(), out=c)


def ref(a, w, bias, epi):
    y = a.float() @ w.float().t() + bias
    return torch.nn.functional.gelu(y) if epi else y


flush = torch.empty(512 * 1024 * 1024 // 4, device=dev)


def bench(fn, iters=20):
    ts = []
    for _ in range(3):
        fn()
    for _ in range(iters):
        flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    return ts[len(ts) // 2]


torch.manual_seed(0)
# (stages, cluster, multicast, TMA store, ping-pong) per epilogue: the variants wgmma_probe.cu instantiates
CFGS = [(4, 1, 1, 0, 1), (4, 2, 1, 0, 1), (4, 1, 1, 1, 1), (4, 2, 1, 1, 1), (4, 2, 0, 1, 1)]
# ping-pong 2: the cooperative kernel (128 x 256 tiles, 3 or 4 stages)
CFGS_BY_EPI = {
    0: CFGS + [(4, 1, 1, 1, 0), (3, 1, 1, 1, 2), (4, 1, 1, 1, 2)],
    1: CFGS,
    2: [(4, 1, 1, 1, 1), (4, 2, 0, 1, 1), (4, 1, 1, 1, 0), (3, 1, 1, 1, 2), (4, 1, 1, 1, 2)],
}
ok = True
for epi, N in ((1, 3072), (2, 3072), (0, 2304)):
    for M in (1, 77, 129, 300, 1000, 4097, 65537):
        a = torch.randn(M, 768, device=dev).half()
        w = (torch.randn(N, 768, device=dev) * 0.03).half()
        b = torch.randn(N, device=dev) * 0.1
        for stages, cl, mc, ts, pp in CFGS_BY_EPI[epi]:
            c = torch.full((M, N), float("nan"), device=dev, dtype=torch.float16)
            try:
                cuda_gemm(a, w, b, c, epi, stages, cl, mc, ts, pp)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                log("FAIL launch", epi, M, stages, e)
                ok = False
                continue
            r = ref(a, w, b, epi)
            err = (c.float() - r).abs()
            tol = 2e-3 + 2e-3 * r.abs()
            bad = int((err > tol).sum().item()) + int(torch.isnan(c).sum().item())
            if bad or M == 65537:
                log(
                    f"check epi {epi} M {M} stages {stages} cl {cl} mc {mc} ts {ts} pp {pp}: max err {err.max().item():.3e} bad {bad}"
                )
            ok &= bad == 0
res["ok"] = ok
log("correct:", ok)


def variants(a, w, b, c, epi):
    out = [
        ("triton", triton_gemm(a, w, b, c, epi)),
        ("cublas_plain", lambda: cublas_gemm(a, w, b, c, epi)),
    ]
    for cfg in CFGS_BY_EPI[epi]:
        out.append(("s{}c{}m{}t{}p{}".format(*cfg), lambda cfg=cfg: cuda_gemm(a, w, b, c, epi, *cfg)))
    return out


if ok:
    for epi, N in ((1, 3072), (2, 3072), (0, 2304)):
        for M in (131073, 16385, 4097):
            a = torch.randn(M, 768, device=dev).half()
            w = (torch.randn(N, 768, device=dev) * 0.03).half()
            b = torch.randn(N, device=dev) * 0.1
            c = torch.empty(M, N, device=dev, dtype=torch.float16)
            flops = 2 * M * N * 768
            row = {}
            for name, fn in variants(a, w, b, c, epi):
                t = bench(fn)
                row[name] = (round(t * 1e3, 1), round(flops / t / 1e9, 0))
            log(
                f"time epi {epi} M {M}: "
                + "  ".join(f"{k} {v[0]} us {v[1]:.0f} TF/s" for k, v in row.items())
            )
            res[f"{epi}_{M}"] = row

json.dump(res, open(os.path.join(OUT, "probe.json"), "w"), indent=1)
