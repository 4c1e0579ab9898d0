"""Probe (sessions 29-30): where the projection's time goes, on the H200.

Not part of the solution (`sources` lists kernel.py only). One launch of x1 = x + b + b2 + o w^T at --rows rows
(o fp16 [rows, 768], x and x1 fp32) by the shipped Gluon residual GEMM (128 x 128 tiles in ping-pong, BK 64), by
the same with other GROUP_M and BK 16 / 32, by Triton's residual GEMM at 128 x 128, 128 x 256 and 256 x 128 tiles,
by cuBLAS in place; the same product with an fp16 output and no residual (Gluon 128 x 256 tiles, Triton's three
tiles, cuBLAS), the mlp1 Gluon GEMM (GELU, N 3072), and a copy of x (the bytes alone). Every residual variant is
checked against an fp32 product (max |diff| < 2e-3). Times: CUDA events after a 1 M-cycle GPU sleep (the launch's
CPU preparation hidden), the L2 flushed before each call (harness.timing's buffer), median of --iterations, us.

    python .../proj_probe.py --rows 65536 --out $OUT/proj.json

Session 29 (call 8, 65536 rows; the projection then shared each 128 x 128 tile between the two warpgroups): Gluon
residual 211.8, GROUP_M 4 / 16 / 32 214.0 / 213.2 / 222.1, ROWS 16 210.0, Gluon fp16 128 x 256 128.7, cuBLAS in place
189.7, cuBLAS fp16 123.4, copy 97.6. Session 30 (call 10): the ping-pong form at BK 16 / 32 / 64 311.1 / 196.8 /
190.0 against 205.9 for the shared tiles, cuBLAS in place 187.5. NOTES.md, Measurements "Session 29" and "Session
30", reads them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from harness.tasks import load_module  # noqa: E402
from harness.timing import _flush_buffer  # noqa: E402

kernel = load_module(Path(__file__).with_name("kernel.py"), "_proj_probe_077")
TRITON_TILES = {
    "128x128": ("tma", 128, 128, 64, 8, 4, 3),
    "128x256": ("tma", 128, 256, 64, 8, 8, 3),
    "256x128": ("tma", 256, 128, 64, 8, 8, 3),
}


def _time(fn, flush: torch.Tensor, iterations: int) -> float:
    for _ in range(3):
        flush.zero_()
        fn()
    times = []
    for _ in range(iterations):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--iterations", type=int, default=11)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("proj_probe: needs CUDA")
    gen = torch.Generator(device="cuda").manual_seed(1)
    m, h = args.rows, kernel.HIDDEN
    o = torch.randn(m, h, device="cuda", generator=gen).half()
    x = torch.randn(m, h, device="cuda", generator=gen)
    w = (0.03 * torch.randn(h, h, device="cuda", generator=gen)).half()
    b, b2 = torch.randn(2, h, device="cuda", generator=gen)
    ref = x + b + b2 + o.float() @ w.float().t()
    out = torch.empty(m, h, device="cuda")
    c16 = torch.empty(m, h, device="cuda", dtype=torch.float16)
    flush = _flush_buffer("cuda")
    results: dict[str, float | str] = {}

    def record(name: str, fn, check: bool = False) -> None:
        try:
            if check:
                out.fill_(float("nan"))
                fn()
                err = (out - ref).abs().max().item()
                if not err < 2e-3:
                    raise AssertionError(f"max |diff| {err}")
            results[name] = round(_time(fn, flush, args.iterations), 1)
        except Exception as exc:  # a variant that does not build or is wrong is a result too
            results[name] = f"{type(exc).__name__}: {str(exc)[:160]}"
        print(name, results[name], flush=True)
        if args.out is not None:
            args.out.write_text(json.dumps(results, indent=1))

    cfg = kernel.GLUON_GEMM["proj"]
    fn, grid, largs, meta = kernel._linear_launch(
        o, w, b, out, kernel.EPILOGUE_RESIDUAL, cfg, residual=x, bias2=b2
    )
    record("gluon_residual", lambda: kernel._launch([(fn, grid, largs, meta)]), check=True)
    for group_m in (4, 16):
        launch = (fn, grid, largs, {**meta, "GROUP_M": group_m})
        record(f"gluon_residual_GROUP_M{group_m}", lambda launch=launch: kernel._launch([launch]), check=True)
    for bk in (16, 32):
        launch = kernel._linear_launch(
            o, w, b, out, kernel.EPILOGUE_RESIDUAL, (*cfg[:4], bk), residual=x, bias2=b2
        )
        record(f"gluon_residual_BK{bk}", lambda launch=launch: kernel._launch([launch]), check=True)
    for name, tcfg in TRITON_TILES.items():
        launch = kernel._linear_launch(o, w, b, out, kernel.EPILOGUE_RESIDUAL, tcfg, residual=x, bias2=b2)
        record(f"triton_residual_{name}", lambda launch=launch: kernel._launch([launch]), check=True)

    out.copy_(
        x + b + b2
    )  # cuBLAS in place once against the reference, then timed (accumulating: only the time)
    torch.addmm(out, o, w.t(), out_dtype=torch.float32, out=out)
    results["cublas_in_place_max_diff"] = (out - ref).abs().max().item()
    record("cublas_in_place", lambda: torch.addmm(out, o, w.t(), out_dtype=torch.float32, out=out))
    glu16 = kernel._linear_launch(o, w, b, c16, kernel.EPILOGUE_BIAS, kernel.GLUON_GEMM["qkv"])
    record("gluon_fp16_128x256", lambda: kernel._launch([glu16]))
    w1 = (0.03 * torch.randn(kernel.MLP_DIM, h, device="cuda", generator=gen)).half()
    b1 = torch.randn(kernel.MLP_DIM, device="cuda", generator=gen)
    h1 = torch.empty(m, kernel.MLP_DIM, device="cuda", dtype=torch.float16)
    gelu = kernel._linear_launch(o, w1, b1, h1, kernel.EPILOGUE_GELU, kernel.GLUON_GEMM["mlp1"])
    record("gluon_mlp1_gelu", lambda: kernel._launch([gelu]))
    for name, tcfg in TRITON_TILES.items():
        launch = kernel._linear_launch(o, w, b, c16, kernel.EPILOGUE_BIAS, tcfg)
        record(f"triton_fp16_{name}", lambda launch=launch: kernel._launch([launch]))
    record("cublas_fp16", lambda: torch.mm(o, w.t(), out=c16))
    record("copy_x", lambda: out.copy_(x))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
