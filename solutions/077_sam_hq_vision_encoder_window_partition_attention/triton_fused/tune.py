"""Check and tune triton_fused (077) on one GPU: correctness of both precisions on the 16 official workloads,
launch-configuration search per stage, end-to-end timings and their geomean.

    python solutions/077_sam_hq_vision_encoder_window_partition_attention/triton_fused/tune.py --out DIR

Phases (the whole run is meant to fit in about 4 minutes on an H200, Triton compilation included):
  0. compile every candidate configuration in parallel worker processes (fills Triton's disk cache);
  1. per stage, on the token count of workload 6 (2 x 256 x 256 = 131072 tokens): time the candidate
     configurations of LN, the four GEMMs and the window attention; keep the fastest of each;
  2. per workload (seed 200 before each, inputs the official way): reference, then the default fp16, the
     tuned fp16 and the tf32 variants: matched ratio and worst |err| / atol (compute_error_stats);
     median time of each (L2-sized flush before every iteration, 10 warm-ups, 50 timed iterations with
     CUDA events; 20 when a call takes longer than 20 ms);
  3. print the table and the geomeans, write DIR/tune_077.json (winners printed as Python literals).
A failing configuration (compile error, out of shared memory) is reported and skipped.
`TRITON_INTERPRET=1 python tune.py --smoke --out DIR` runs the same code on the CPU on tiny shapes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.correctness import compute_error_stats  # noqa: E402
from harness.inputs import gen_inputs  # noqa: E402
from harness.schema import Workload  # noqa: E402
from harness.tasks import load_module, load_task  # noqa: E402

kernel = load_module(HERE / "kernel.py", "_triton_fused_077")

DEVICE = "cuda"
SEARCH_SHAPE = (2, 256, 256)  # workload 6 (131072 tokens): the shape of the per-stage search
SMOKE_WORKLOADS = [(1, 5, 9), (2, 15, 17)]  # --smoke: instead of the 16 official workloads
GEMMS = {  # name -> (N, K, epilogue)
    "qkv": (kernel.QKV_DIM, kernel.HIDDEN, kernel.EPILOGUE_BIAS),
    "proj": (kernel.HIDDEN, kernel.HIDDEN, kernel.EPILOGUE_RESIDUAL),
    "mlp1": (kernel.MLP_DIM, kernel.HIDDEN, kernel.EPILOGUE_GELU),
    "mlp2": (kernel.HIDDEN, kernel.MLP_DIM, kernel.EPILOGUE_RESIDUAL),
}
GEMM_CANDIDATES = [  # (kind, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages[, CTAs per SM])
    ("ptr", 128, 256, 64, 8, 8, 3),
    ("ptr", 128, 128, 64, 8, 8, 3),  # ~100 KB smem, <= 160 registers: 2 CTAs per SM overlap epilogues
    ("tma", 128, 256, 64, 8, 8, 3),
    ("tma", 128, 256, 64, 8, 8, 4),
    ("tma", 128, 128, 64, 8, 8, 3),
    ("tma", 256, 128, 64, 8, 8, 3),
    ("tma_persistent", 128, 256, 64, 8, 8, 3, 1),  # residual epilogue: over the smem limit (skipped)
    ("tma_persistent", 128, 256, 64, 8, 8, 2, 1),
    ("tma_persistent", 128, 128, 64, 8, 8, 3, 1),
    ("tma_persistent", 128, 128, 64, 8, 8, 2, 2),
]
ATTN_CANDIDATES = [  # (BLOCK_M, BLOCK_N, BIAS_MODE, num_warps, num_stages)
    (64, 256, 2, 4, 1),
    (64, 128, 2, 4, 1),
    (128, 128, 2, 8, 1),
    (128, 256, 2, 8, 1),
    (128, 128, 0, 8, 1),
    (64, 128, 1, 4, 1),
    (128, 128, 1, 8, 1),
    (64, 256, 3, 4, 1),
    (64, 128, 3, 4, 1),
    (128, 128, 3, 8, 1),
]
LN_CANDIDATES = [(4, 4), (1, 4), (8, 8)]  # (rows per program, num_warps)


# ------------------------------------------------------------------------------------------- timing


class Timer:
    """Median GPU time of a callable: L2 flushed (int8 buffer of 2 x L2 zeroed) before every iteration."""

    def __init__(self) -> None:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size if DEVICE == "cuda" else 2**20
        self.flush = torch.empty(2 * l2, dtype=torch.int8, device=DEVICE)

    def median_ms(self, fn, iters: int = 50, warmup: int = 10) -> float:
        if DEVICE != "cuda":  # --smoke: one call, wall time
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        for _ in range(warmup):
            self.flush.zero_()
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            self.flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


# ------------------------------------------------------------------------------- stage set-ups (search)


def _gemm_case(name: str, m: int, precision: str):
    n, k, epilogue = GEMMS[name]
    dtype = torch.float16 if precision == "fp16" else torch.float32
    a = torch.randn(m, k, device=DEVICE).to(dtype)
    w = (torch.randn(n, k, device=DEVICE) / math.sqrt(k)).to(dtype)
    bias = torch.randn(n, device=DEVICE)
    residual = torch.randn(m, n, device=DEVICE) if epilogue == kernel.EPILOGUE_RESIDUAL else None
    c = torch.empty(m, n, device=DEVICE, dtype=torch.float32 if residual is not None else dtype)
    return lambda cfg: kernel._linear(a, w, bias, c, epilogue, cfg, residual=residual), 2 * m * n * k


def _attn_case(batch: int, height: int, width: int, precision: str):
    dtype = torch.float16 if precision == "fp16" else torch.float32
    tokens = batch * height * width
    qkv = torch.randn(tokens, kernel.QKV_DIM, device=DEVICE).to(dtype)
    o = torch.empty(tokens, kernel.HIDDEN, device=DEVICE, dtype=dtype)
    bias = torch.randn(kernel.QKV_DIM, device=DEVICE)
    rel_h, rel_w = torch.randn(2, kernel.REL_SIZE, kernel.HEAD_DIM, device=DEVICE)
    n_bands = batch * triton_cdiv(height, kernel.WINDOW)
    flops = 2 * 2 * tokens * kernel.HEADS * 196 * kernel.HEAD_DIM  # useful QK^T and PV
    return (
        lambda cfg: kernel._window_attention(qkv, o, bias, rel_h, rel_w, 0, height, width, 0, n_bands, cfg),
        flops,
    )


def _ln_case(m: int, precision: str):
    dtype = torch.float16 if precision == "fp16" else torch.float32
    x = torch.randn(m, kernel.HIDDEN, device=DEVICE)
    y = torch.empty(m, kernel.HIDDEN, device=DEVICE, dtype=dtype)
    w, b = torch.randn(2, kernel.HIDDEN, device=DEVICE)

    def call(cfg):
        saved = kernel.LN_CONFIG
        kernel.LN_CONFIG = cfg
        try:
            kernel._layernorm(x, w, b, 1e-6, y)
        finally:
            kernel.LN_CONFIG = saved

    return call, m * kernel.HIDDEN * (4 + y.element_size())  # bytes moved


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------ parallel precompile


def _compile_job(job: tuple) -> tuple[tuple, str]:
    """Worker: run one configuration once on a tiny problem, so that its binary lands in the disk cache."""
    kind, name, precision, cfg = job
    try:
        if kind == "gemm":
            fn, _ = _gemm_case(name, 256, precision)
        elif kind == "attn":
            fn, _ = _attn_case(1, 20, 20, precision)
        else:
            fn, _ = _ln_case(64, precision)
        fn(cfg)
        _sync()
        return job, ""
    except Exception as exc:  # noqa: BLE001 - reported, the configuration is skipped
        return job, _short(exc)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:300]


def precompile(jobs: list[tuple], workers: int) -> dict[tuple, str]:
    if workers <= 1:
        return dict(_compile_job(j) for j in jobs)
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        return dict(pool.map(_compile_job, jobs))


# ------------------------------------------------------------------------------------------- phases


def search(
    timer: Timer, precision: str, errors: dict, deadline: float, candidates: dict
) -> tuple[dict, dict]:
    """Time every candidate of every stage on the search shape; return (winners, all timings)."""
    batch, height, width = SEARCH_SHAPE
    m = batch * height * width
    best: dict = {}
    table: dict = {}
    stages = [(f"gemm:{g}", ("gemm", g), candidates["gemm"]) for g in GEMMS]
    stages += [("attn", ("attn", "attn"), candidates["attn"]), ("ln", ("ln", "ln"), candidates["ln"])]
    for stage, (kind, name), cands in stages:
        if kind == "gemm":
            fn, work = _gemm_case(name, m, precision)
        elif kind == "attn":
            fn, work = _attn_case(batch, height, width, precision)
        else:
            fn, work = _ln_case(m, precision)
        rows = []
        for cfg in cands:
            err = errors.get((kind, name, precision, cfg), "")
            if err or time.time() > deadline:
                rows.append({"config": list(cfg), "error": err or "skipped (time budget)"})
                continue
            try:
                ms = timer.median_ms(lambda cfg=cfg, fn=fn: fn(cfg), iters=20, warmup=3)
            except Exception as exc:  # noqa: BLE001
                rows.append({"config": list(cfg), "error": _short(exc)})
                continue
            rows.append({"config": list(cfg), "ms": ms, "rate": work / ms / 1e9})
        ok = [r for r in rows if "ms" in r]
        table[stage] = rows
        if ok:
            best[stage] = min(ok, key=lambda r: r["ms"])
        unit = "TB/s" if stage == "ln" else "TFLOP/s"
        print(f"[search {precision}] {stage} ({'bytes' if stage == 'ln' else 'useful FLOPs'} / time)")
        for r in rows:
            tag = " <- best" if ok and r is best[stage] else ""
            if "ms" in r:
                print(f"    {tuple(r['config'])!s:48} {r['ms']:9.4f} ms {r['rate']:8.2f} {unit}{tag}")
            else:
                print(f"    {tuple(r['config'])!s:48} {r['error']}")
    return best, table


def apply_configs(precision: str, gemm: dict, attn: tuple, ln: tuple) -> None:
    kernel.GEMM_CONFIGS[precision] = dict(gemm)
    kernel.ATTN_CONFIGS[precision] = attn
    kernel.LN_CONFIG = ln


def _workloads(task, smoke: bool) -> list:
    if not smoke:
        return list(task.workloads)
    return [
        Workload(
            uuid=f"smoke-{b}x{h}x{w}",
            axes={"batch_size": b, "height": h, "width": w},
            inputs={"layer_norm_eps": {"type": "scalar", "value": 1e-6}},
            tolerance={"max_atol": 0.015, "max_rtol": 1e-5},
        )
        for b, h, w in SMOKE_WORKLOADS
    ]


def run_workloads(task, workloads: list, timer: Timer, variants: dict, deadline: float) -> list[dict]:
    """variants: label -> (precision, gemm configs, attn config, ln config)."""
    rows = []
    for index, workload in enumerate(workloads, 1):
        axes = {k: workload.axes[k] for k in ("batch_size", "height", "width")}
        torch.manual_seed(200)
        inputs = gen_inputs(task.definition, workload, device=DEVICE)
        ref = task.reference(*inputs)
        _sync()
        row = {"index": index, "uuid": workload.uuid, "axes": axes, "atol": workload.tolerance.max_atol}
        for label, (precision, gemm, attn, ln) in variants.items():
            apply_configs(precision, gemm, attn, ln)
            row[label] = _run_variant(inputs, ref, workload.tolerance, timer, precision, deadline)
        ref = inputs = None  # free before the next workload's inputs
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        print(_row_line(row, list(variants)), flush=True)
        rows.append(row)
    return rows


def _run_variant(inputs: list, ref: torch.Tensor, tolerance, timer: Timer, precision: str, deadline: float):
    out = torch.full_like(ref, float("nan"))

    def call():
        kernel.forward(*inputs, out, precision=precision)

    try:
        extra = _call_measuring_memory(call)
        stats = compute_error_stats(out, ref, tolerance, worst=1)
    except Exception as exc:  # noqa: BLE001 - a broken variant must not stop the others
        return {"error": _short(exc)}
    entry = {
        "passed": stats.passed,
        "matched_ratio": stats.matched_ratio,
        "max_abs_error": stats.max_absolute_error,
        "worst_err_over_atol": stats.max_absolute_error / tolerance.max_atol,
        "extra_bytes": extra,
        "extra_over_input": extra / (inputs[0].numel() * 4),
    }
    if time.time() < deadline:
        first = timer.median_ms(call, iters=3, warmup=1)
        entry["iters"] = 50 if first < 20 else 20  # fewer for the largest workloads
        entry["ms"] = timer.median_ms(call, iters=entry["iters"], warmup=10)
    return entry


def _call_measuring_memory(fn) -> int:
    """Peak device memory the call allocates beyond what was allocated before it (0 on the CPU)."""
    if DEVICE != "cuda":
        fn()
        return 0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def _row_line(row: dict, labels: list[str]) -> str:
    a = row["axes"]
    parts = [f"#{row['index']:<2} {a['batch_size']:>2}x{a['height']:>4}x{a['width']:<4}"]
    for label in labels:
        e = row[label]
        if "error" in e:
            parts.append(f"{label}: ERROR {e['error']}")
            continue
        t = f"{e['ms']:8.3f} ms" if "ms" in e else "   (untimed)"
        parts.append(
            f"{label}: {t} match {e['matched_ratio'] * 100:8.4f}% err/atol {e['worst_err_over_atol']:5.2f}"
            f" mem x{e['extra_over_input']:.2f}"
        )
    return " | ".join(parts)


def _summary(rows: list[dict], label: str) -> dict:
    entries = [r[label] for r in rows]
    ok = [e for e in entries if "error" not in e]
    times = [e["ms"] for e in ok if "ms" in e]
    return {
        "geomean_ms": geomean(times) if len(times) == len(rows) else None,
        "timed": len(times),
        "errors": len(entries) - len(ok),
        "all_passed": len(ok) == len(rows) and all(e["passed"] for e in ok),
        "min_matched_ratio": min((e["matched_ratio"] for e in ok), default=None),
        "max_err_over_atol": max((e["worst_err_over_atol"] for e in ok), default=None),
        "max_extra_over_input": max((e["extra_over_input"] for e in ok), default=None),
    }


def main() -> int:
    global DEVICE, SEARCH_SHAPE
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for tune_077.json")
    parser.add_argument("--budget-s", type=float, default=230.0, help="stop searching/timing after this")
    parser.add_argument("--skip-search", action="store_true", help="defaults only")
    parser.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1))
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter dry run on tiny shapes")
    args = parser.parse_args()
    candidates = {"gemm": GEMM_CANDIDATES, "attn": ATTN_CANDIDATES, "ln": LN_CANDIDATES}
    if args.smoke:
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("--smoke needs TRITON_INTERPRET=1 in the environment", file=sys.stderr)
            return 2
        DEVICE, SEARCH_SHAPE = "cpu", (1, 15, 17)
        args.workers = 1
        big = ("ptr", 128, 256, 256, 8, 8, 1)
        candidates = {
            "gemm": [big, ("tma", 128, 256, 256, 8, 8, 1), ("tma_persistent", 128, 256, 256, 8, 8, 1, 1)],
            "attn": [(128, 256, 2, 8, 1), (128, 256, 3, 8, 1)],
            "ln": LN_CANDIDATES[:1],
        }
        apply_configs("fp16", dict.fromkeys(GEMMS, big), (128, 256, 2, 8, 1), (16, 4))
    elif not torch.cuda.is_available():
        print("tune.py needs a CUDA GPU (or --smoke with TRITON_INTERPRET=1)", file=sys.stderr)
        return 3
    t_start = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    task = load_task("077")
    default = {
        p: (dict(kernel.GEMM_CONFIGS[p]), kernel.ATTN_CONFIGS[p], kernel.LN_CONFIG) for p in ("fp16", "tf32")
    }

    jobs = [("gemm", g, p, cfg) for p in ("fp16", "tf32") for g, cfg in default[p][0].items()]
    jobs += [("attn", "attn", p, default[p][1]) for p in ("fp16", "tf32")]
    jobs += [("ln", "ln", p, default[p][2]) for p in ("fp16", "tf32")]
    if not args.skip_search:
        jobs += [("gemm", g, "fp16", cfg) for g in GEMMS for cfg in candidates["gemm"]]
        jobs += [("attn", "attn", "fp16", cfg) for cfg in candidates["attn"]]
        jobs += [("ln", "ln", "fp16", cfg) for cfg in candidates["ln"]]
    jobs = list(dict.fromkeys(jobs))
    errors = {job: err for job, err in precompile(jobs, args.workers).items() if err}
    print(f"[compile] {len(jobs)} kernels in {time.time() - t_start:.1f} s, {len(errors)} failed")
    for job, err in errors.items():
        print(f"    {job}: {err}")

    timer = Timer()
    deadline = t_start + args.budget_s
    result: dict = {
        "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu (interpreter smoke run)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "defaults": {p: {"gemm": v[0], "attn": v[1], "ln": v[2]} for p, v in default.items()},
        "compile_errors": {repr(k): v for k, v in errors.items()},
    }

    variants = {"fp16": ("fp16", *default["fp16"]), "tf32": ("tf32", *default["tf32"])}
    if not args.skip_search:
        best, table = search(timer, "fp16", errors, t_start + 0.45 * args.budget_s, candidates)
        result["search_fp16"] = table
        gemm = {
            g: tuple(best[f"gemm:{g}"]["config"]) if f"gemm:{g}" in best else default["fp16"][0][g]
            for g in GEMMS
        }
        attn = tuple(best["attn"]["config"]) if "attn" in best else default["fp16"][1]
        ln = tuple(best["ln"]["config"]) if "ln" in best else default["fp16"][2]
        result["tuned_fp16"] = {"gemm": gemm, "attn": attn, "ln": ln}
        stage_ms = {k: v["ms"] for k, v in best.items()}
        if "ln" in stage_ms:
            stage_ms["ln"] *= 2  # LN1 and LN2
        result["stage_breakdown_ms_at_search_shape"] = stage_ms
        print(f"[search] best stages at {SEARCH_SHAPE}: sum {sum(stage_ms.values()):.3f} ms  {stage_ms}")
        if (gemm, attn, ln) != default["fp16"]:
            variants = {
                "fp16": variants["fp16"],
                "fp16_tuned": ("fp16", gemm, attn, ln),
                "tf32": variants["tf32"],
            }

    rows = run_workloads(task, _workloads(task, args.smoke), timer, variants, deadline)
    result["workloads"] = rows
    summary = {label: _summary(rows, label) for label in variants}
    result["summary"] = summary
    result["elapsed_s"] = time.time() - t_start
    for label, sm in summary.items():
        g = f"{sm['geomean_ms']:.3f} ms" if sm["geomean_ms"] else f"n/a ({sm['timed']}/{len(rows)} timed)"
        print(
            f"[summary] {label:10} geomean {g}  errors {sm['errors']}  all passed {sm['all_passed']}  "
            f"min matched {sm['min_matched_ratio']}  max err/atol {sm['max_err_over_atol']}  "
            f"max extra memory / input {sm['max_extra_over_input']}"
        )
    if "tuned_fp16" in result:
        t = result["tuned_fp16"]
        print(f"[tuned] GEMM_CONFIGS['fp16'] = {t['gemm']}")
        print(f"[tuned] ATTN_CONFIGS['fp16'] = {t['attn']}  LN_CONFIG = {t['ln']}")
    path = args.out / "tune_077.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"[done] {result['elapsed_s']:.0f} s, wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
