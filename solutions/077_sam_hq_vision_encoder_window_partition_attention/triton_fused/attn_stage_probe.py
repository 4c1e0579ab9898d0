"""Probe (session 27): the window-attention stage alone, per kernel.py module setting, on the H200.

Not part of the solution (`sources` lists kernel.py only). Builds one chunk's qkv (random fp16, the padded token's
row = the bias) for a whole image batch, runs `kernel._window_attention` with the tl kernel once as the reference,
then for every variant (NAME=JSON of kernel.py module settings, as tune.py's --ab) checks the Gluon attention
against it (max |diff| < 4e-3, every real query written) and times it: CUDA events, the L2 flushed before each call
(harness.timing's buffer of twice the L2), median of --iterations calls, --rounds interleaved rounds. `--ncu` runs
one call per variant and nothing else (for `ncu -k regex:window_attention_gluon`).

    python .../attn_stage_probe.py --shape 2,256,256 --variant 'l0={"GLUON_ATTENTION_LSUM_MMA": 0}' \\
        --variant 'l2={"GLUON_ATTENTION_LSUM_MMA": 2}' \\
        --variant 'r240={"GLUON_ATTENTION": ["gluon", 240, 24]}' --out $OUT/attn.json

At 2x256x256 the stage times of one call moved by up to 10 % between rounds (session 27); 4x64x64 was steadier, and
tune.py --ab (the whole block, official timer) is the comparison to trust.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from harness.tasks import load_module  # noqa: E402
from harness.timing import _flush_buffer  # noqa: E402

kernel = load_module(Path(__file__).with_name("kernel.py"), "_attn_stage_probe_077")


def _chunk(batch: int, height: int, width: int, seed: int):
    n_tok = batch * height * width
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bias = torch.randn(kernel.QKV_DIM, device="cuda", generator=gen).half()
    qkv = torch.cat([torch.randn(n_tok, kernel.QKV_DIM, device="cuda", generator=gen).half(), bias[None]])
    rel_h, rel_w = torch.randn(2, kernel.REL_SIZE, kernel.HEAD_DIM, device="cuda", generator=gen)
    n_bands = batch * math.ceil(height / kernel.WINDOW)
    return qkv, bias.float(), rel_h, rel_w, n_tok, n_bands


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="2,256,256", help="batch,height,width")
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON kernel.py settings")
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ncu", action="store_true", help="one call per variant, no reference, no timing")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    batch, height, width = (int(v) for v in args.shape.split(","))
    variants = {}
    for spec in args.variant or ["base={}"]:
        name, _, settings = spec.partition("=")
        variants[name] = json.loads(settings or "{}")
    qkv, bias, rel_h, rel_w, n_tok, n_bands = _chunk(batch, height, width, 5)
    call = (bias, rel_h, rel_w, 0, n_tok, height, width, 0, n_bands)
    defaults = {key: getattr(kernel, key) for settings in variants.values() for key in settings}

    def run(settings: dict, o: torch.Tensor, cfg: tuple | None = None) -> None:
        """One launch with these module settings; cfg None: kernel.GLUON_ATTENTION as the settings leave it."""
        for key, value in {**defaults, **settings}.items():
            setattr(kernel, key, tuple(value) if isinstance(value, list) else value)
        kernel._window_attention(qkv, o, *call, kernel.GLUON_ATTENTION if cfg is None else cfg)

    o = torch.empty(n_tok, kernel.HIDDEN, device="cuda", dtype=torch.float16)
    if args.ncu:
        for settings in variants.values():
            run(settings, o)
        torch.cuda.synchronize()
        return
    ref = torch.full_like(o, math.nan)
    run({}, ref, kernel.ATTN_CONFIGS["fp16"])
    report: dict = {"shape": [batch, height, width], "variants": {}}
    for name, settings in variants.items():
        o.fill_(math.nan)
        run(settings, o)
        torch.cuda.synchronize()
        diff = (o.float() - ref.float()).abs().max().item()
        ok = bool(torch.isfinite(o).all().item()) and diff < 4e-3
        report["variants"][name] = {"settings": settings, "max_diff": diff, "ok": ok, "ms": []}
        print(f"[check] {name}: max |diff| {diff:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    flush = _flush_buffer(qkv.device)  # the official timer's: twice the L2, zeroed before each call
    for r in range(args.rounds):
        for name, settings in variants.items():
            times = []
            for _ in range(args.iterations):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run(settings, o)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            report["variants"][name]["ms"].append(statistics.median(times))
            print(f"[time] round {r} {name}: {statistics.median(times):.4f} ms", flush=True)
    for name, entry in report["variants"].items():
        print(f"{name}: {'ok' if entry['ok'] else 'FAILED'} " + " ".join(f"{t:.4f}" for t in entry["ms"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
