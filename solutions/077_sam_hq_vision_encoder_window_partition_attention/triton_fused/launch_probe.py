"""077 launch probe: per timed call, CPU enqueue time against GPU busy time and the official span.

    PYTORCH_ALLOC_CONF=expandable_segments:True python solutions/077_.../triton_fused/launch_probe.py
    python solutions/077_.../triton_fused/launch_probe.py --layout-ab [--workloads 7fe6a6e0,...]

For the small official workloads (#16, #2, #5, #11) it times 30 calls under the official CUPTI timer's
profiler (L2 flushed, fresh addresses), with DIRECT_LAUNCH on and off, and prints per variant the medians
(us) of: span (what the official timer reports), busy (the sum of the kernel durations), n (kernels),
enqueue (CPU time from the first launch call to the last), pre (CPU time in the call before the first
launch) and first_lag (first launch call to first kernel start). With --layout-ab it times the kernel
with COMPACT_LAYOUT on and off instead (official timer, 5 + 30 calls, median), with the official
correctness check of each against the reference. GPU only; a device-time probe, no test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from harness.correctness import compute_error_stats  # noqa: E402
from harness.inputs import gen_inputs  # noqa: E402
from harness.tasks import load_module, load_task  # noqa: E402
from harness.timing import (  # noqa: E402
    ShiftingPool,
    profile_calls,
    records_from_kineto,
    time_runnable,
    window_records,
    windows_from_marks,
)

kernel = load_module(Path(__file__).with_name("kernel.py"), "_probe077_kernel")
WORKLOADS = ("7fe6a6e0", "e0c9d304", "de74c6c6", "9589e23a")  # #16, #2, #5, #11


def probe(fn, pool: ShiftingPool, calls: int) -> dict[str, float]:
    """Medians over `calls` calls of the official CUPTI loop (harness.timing.profile_calls)."""
    records = records_from_kineto(profile_calls(fn, pool, 5, calls, "cuda"))
    windows = windows_from_marks(records, calls)
    rows = []
    for (t0, _), (api, acts) in zip(windows, window_records(records, windows), strict=True):
        launched = {a.correlation_id for a in acts}
        launches = [r for r in api if r.correlation_id in launched]  # API calls that launched GPU work
        acts = sorted(acts, key=lambda a: a.start_ns)
        rows.append(
            dict(
                span=(acts[-1].end_ns - acts[0].start_ns) / 1e3,
                busy=sum(a.end_ns - a.start_ns for a in acts) / 1e3,
                n=len(acts),
                enqueue=(launches[-1].start_ns - launches[0].start_ns) / 1e3,
                pre=(launches[0].start_ns - t0) / 1e3,
                first_lag=(acts[0].start_ns - launches[0].start_ns) / 1e3,
            )
        )
    return {k: round(sorted(r[k] for r in rows)[len(rows) // 2], 1) for k in rows[0]}


def layout_ab(task, workload, inputs) -> dict:
    """COMPACT_LAYOUT on and off: official-timer median (ms), the plan, and the official correctness check."""
    ref = task.reference(*inputs)
    row = {}
    for compact in (True, False):
        kernel.COMPACT_LAYOUT = compact
        out = torch.full_like(inputs[0], float("nan"))
        kernel.run(*inputs, out)
        torch.cuda.synchronize()
        stats = compute_error_stats(out, ref, workload.tolerance)
        timing = time_runnable(kernel.run, inputs, [out], warmup=5, iterations=30, timer="cupti")
        plan = kernel.plan_scratch(*workload.axes.values())
        row[f"compact={compact}"] = dict(
            ms=round(timing.median_ms, 4), passed=stats.passed, matched=stats.matched_ratio,
            err_over_atol=round(stats.max_absolute_error / workload.tolerance.max_atol, 3),
            launches=plan.launches, chunks=len(plan.chunks), ratio=round(plan.ratio, 3),
        )  # fmt: skip
    kernel.COMPACT_LAYOUT = True
    return row


def launch_probe(inputs) -> dict:
    out = torch.empty_like(inputs[0])
    row = {}
    for direct in (True, False):
        kernel.DIRECT_LAUNCH = direct
        row[f"direct={direct}"] = probe(kernel.run, ShiftingPool(inputs, [out], 40), 30)
    kernel.DIRECT_LAUNCH = True
    cpu = []
    for _ in range(20):
        torch.cuda.synchronize()
        t = time.perf_counter()
        kernel.run(*inputs, out)
        cpu.append(time.perf_counter() - t)
    row["cpu_call_us"] = round(sorted(cpu)[10] * 1e6, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout-ab", action="store_true", help="COMPACT_LAYOUT on/off instead")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="uuid prefixes, comma-separated")
    args = parser.parse_args()
    task = load_task("077")
    report = {}
    for prefix in args.workloads.split(","):
        workload = task.workload(prefix)
        torch.manual_seed(200)
        inputs = gen_inputs(task.definition, workload, device="cuda")
        row = layout_ab(task, workload, inputs) if args.layout_ab else launch_probe(inputs)
        report[prefix] = row
        print(prefix, workload.axes, row, flush=True)
        del inputs
        torch.cuda.empty_cache()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
