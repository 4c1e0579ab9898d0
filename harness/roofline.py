"""Speed of light (T_SOL): per-task work and traffic, GPU peak rates, and the official SOL score.

Counts come from the definition's `roofline:` expressions over the resolved axes. Two conventions:
`leaderboard` reproduces the published SOL-ExecBench numbers (SOLAR's model), `fp32-io` is the bound for
a kernel that reads and writes fp32 and may use TF32 tensor cores. See /work/shared/docs/sol-model.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, RootModel

from harness.errors import HarnessError, SchemaError
from harness.expressions import safe_eval
from harness.schema import StrictModel, Workload, read_yaml, validate_model
from harness.tasks import Task, load_task

Convention = Literal["leaderboard", "fp32-io"]
CONVENTIONS: tuple[str, ...] = ("leaderboard", "fp32-io")
COUNT_FIELDS = ("flops", "bytes_fp32", "solar_macs", "solar_bytes")

PositiveFloat = Annotated[float, Field(gt=0)]


class GpuPeaks(StrictModel):
    """Peak rates of one GPU (dense, no sparsity) and the leaderboard convention's fixed term."""

    fp32_tflops: PositiveFloat
    """FP32 on CUDA cores (SIMT), TFLOP/s. Listed for reference; neither convention uses it."""
    tf32_tflops: PositiveFloat
    """TF32 tensor cores, TFLOP/s (the `fp32-io` compute rate)."""
    bf16_tflops: PositiveFloat
    """BF16/FP16 tensor cores, TFLOP/s (the `leaderboard` compute rate, as SOLAR costs fp32 problems)."""
    hbm_tbytes_per_s: PositiveFloat
    """DRAM bandwidth, 1e12 bytes/s."""
    leaderboard_offset_us: Annotated[float, Field(ge=0)] = 0.4
    """Added to every `leaderboard` T_SOL: published values sit 0.4 us above SOLAR's roofline."""
    source: str = ""
    """Where the numbers come from."""


class _PeaksPatch(StrictModel):
    """One entry of a `--peaks` file: the fields to change (a GPU not in the table must give all rates)."""

    fp32_tflops: PositiveFloat | None = None
    tf32_tflops: PositiveFloat | None = None
    bf16_tflops: PositiveFloat | None = None
    hbm_tbytes_per_s: PositiveFloat | None = None
    leaderboard_offset_us: Annotated[float, Field(ge=0)] | None = None
    source: str | None = None


class _PeaksFile(RootModel[dict[Annotated[str, Field(min_length=1)], _PeaksPatch]]):
    pass


# SOLAR's B200 config (configs/arch/B200.yaml, f = 1.5 GHz): 603,751 BF16 MAC/clk and 5,111.6 DRAM B/clk,
# i.e. 9.056265e14 MAC/s (1,811.253 TFLOP/s) and 7.6674e12 B/s. These exact values put all 48 published
# workloads inside their 4-decimal rounding; the rounded 9.0563e14 would push two 077 workloads 0.001 us
# outside it. TF32 is half the BF16 rate on every GPU here. H200/H100 are the SXM datasheet dense figures.
DEFAULT_PEAKS: dict[str, GpuPeaks] = {
    "H200": GpuPeaks(
        fp32_tflops=66.9,
        tf32_tflops=494.7,
        bf16_tflops=989.4,  # 4.947e14 MAC/s
        hbm_tbytes_per_s=4.8,
        source="H200 SXM datasheet (dense), 141 GB HBM3e",
    ),
    "H100": GpuPeaks(
        fp32_tflops=66.9,
        tf32_tflops=494.7,
        bf16_tflops=989.4,
        hbm_tbytes_per_s=3.35,
        source="H100 SXM datasheet (dense), 80 GB HBM3; same GH100 compute as the H200",
    ),
    "B200": GpuPeaks(
        fp32_tflops=75.0,
        tf32_tflops=905.6265,
        bf16_tflops=1811.253,  # 603,751 MAC/clk * 1.5 GHz * 2
        hbm_tbytes_per_s=7.6674,  # 5,111.6 B/clk * 1.5 GHz
        source="SOLAR configs/arch/B200.yaml (tensor rates, DRAM); FP32 SIMT from the HGX B200 datasheet",
    ),
}


# --------------------------------------------------------------------------------------------- peaks


def load_peaks(path: Path | str | None = None) -> dict[str, GpuPeaks]:
    """The default table, with the entries of the YAML file at `path` merged over it.

    The file maps GPU names to fields; a GPU already in the table may give only the fields it changes.
    Errors are one line naming the file and the field.
    """
    table = dict(DEFAULT_PEAKS)
    if path is None:
        return table
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: (top level): expected a mapping of GPU name to peaks, got {_type(data)}")
    patches = validate_model(_PeaksFile, data, path).root
    for raw_name, patch in patches.items():
        name = raw_name.upper()
        given = patch.model_dump(exclude_none=True)
        if name in table:
            table[name] = table[name].model_copy(update=given)
            continue
        missing = [
            f for f in ("fp32_tflops", "tf32_tflops", "bf16_tflops", "hbm_tbytes_per_s") if f not in given
        ]
        if missing:
            raise SchemaError(
                f"{path}: {raw_name}.{missing[0]}: required field is missing "
                f"(a GPU not in the default table {', '.join(sorted(DEFAULT_PEAKS))} must give every rate)"
            )
        table[name] = GpuPeaks(**given)
    return table


def gpu_peaks(gpu: str, peaks: Mapping[str, GpuPeaks] | None = None) -> GpuPeaks:
    table = DEFAULT_PEAKS if peaks is None else peaks
    hit = table.get(gpu.upper())
    if hit is None:
        raise HarnessError(f"--gpu: expected one of {', '.join(sorted(table))}, got {gpu!r}")
    return hit


def _type(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


_GPU_PATTERNS = (
    ("H200", re.compile(r"\bH200\b")),
    ("H100", re.compile(r"\bH100\b")),
    ("B200", re.compile(r"\bB200\b")),
)


def gpu_from_device_name(device_name: str) -> str | None:
    """'NVIDIA H200' -> 'H200'; None for a GPU outside the table (a GH200 is not taken for an H200)."""
    upper = device_name.upper()
    for gpu, pattern in _GPU_PATTERNS:
        if pattern.search(upper):
            return gpu
    return None


def detect_gpu() -> str | None:
    """The table name of cuda:0 (H200, H100 or B200), or None without CUDA or for another GPU."""
    import torch  # late: the SOL figures themselves need no torch

    if not torch.cuda.is_available():
        return None
    return gpu_from_device_name(torch.cuda.get_device_name(0))


# --------------------------------------------------------------------------------------------- counts


def _task(task: Task | str) -> Task:
    return load_task(task) if isinstance(task, str) else task


def resolve(task: Task | str, axes: Mapping[str, int] | Workload) -> dict[str, int]:
    """Resolved axes (consts, the given values, expr axes) for a workload or an axes mapping."""
    task = _task(task)
    values = axes.axes if isinstance(axes, Workload) else dict(axes)
    return task.definition.resolve_axes(values)


def counts(task: Task | str, axes: Mapping[str, int] | Workload) -> dict[str, int | float]:
    """flops, bytes_fp32, solar_macs, solar_bytes of one call, from the definition's roofline block."""
    task = _task(task)
    spec = task.file.roofline
    if spec is None:
        raise SchemaError(f"{task.path}: roofline: required for SOL figures, got none")
    values = resolve(task, axes)
    out: dict[str, int | float] = {}
    for name in COUNT_FIELDS:
        expression = getattr(spec, name)
        try:
            out[name] = safe_eval(expression, values)
        except (TypeError, SyntaxError, ZeroDivisionError, OverflowError) as exc:
            raise SchemaError(f"{task.path}: roofline.{name}: {exc}") from None
    return out


def breakdown(
    task: Task | str,
    axes: Mapping[str, int] | Workload,
    gpu: str = "H200",
    convention: str = "leaderboard",
    peaks: Mapping[str, GpuPeaks] | None = None,
) -> dict[str, Any]:
    """T_SOL of one call and its parts (ms), with the FLOPs and bytes the convention charges.

    leaderboard: offset + max(2 * solar_macs / BF16 tensor rate, solar_bytes / HBM).
    fp32-io:     max(flops / TF32 tensor rate, bytes_fp32 / HBM), no offset.
    """
    peak = gpu_peaks(gpu, peaks)
    c = counts(task, axes)
    if convention == "leaderboard":
        flops, nbytes = 2 * c["solar_macs"], c["solar_bytes"]
        rate_tflops, offset_ms = peak.bf16_tflops, peak.leaderboard_offset_us * 1e-3
    elif convention == "fp32-io":
        flops, nbytes = c["flops"], c["bytes_fp32"]
        rate_tflops, offset_ms = peak.tf32_tflops, 0.0
    else:
        raise HarnessError(f"--convention: expected one of {', '.join(CONVENTIONS)}, got {convention!r}")
    compute_ms = flops / (rate_tflops * 1e12) * 1e3
    memory_ms = nbytes / (peak.hbm_tbytes_per_s * 1e12) * 1e3
    return {
        "flops": flops,
        "bytes": nbytes,
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "offset_ms": offset_ms,
        "sol_ms": offset_ms + max(compute_ms, memory_ms),
        "bound": "compute" if compute_ms >= memory_ms else "memory",
    }


def sol_ms(
    task: Task | str,
    axes: Mapping[str, int] | Workload,
    gpu: str = "H200",
    convention: str = "leaderboard",
    peaks: Mapping[str, GpuPeaks] | None = None,
) -> float:
    """T_SOL of one call in milliseconds."""
    return breakdown(task, axes, gpu, convention, peaks)["sol_ms"]


# --------------------------------------------------------------------------------------------- scores


def pct_of_sol(t_sol: float, t: float) -> float:
    """T_SOL / T (a fraction; 1.0 = at the speed of light)."""
    return t_sol / t


def sol_score(t_k: float, t_sol: float, t_b: float) -> float:
    """The official SOL score S = 1 / (1 + (t_k - t_sol) / (t_b - t_sol)): 1 at t_sol, 0.5 at t_b.

    Not clamped (S > 1 below t_sol). If t_b - t_sol <= 0 it is 1.0 when t_k <= t_sol, else 0.0.
    """
    span = t_b - t_sol
    if span <= 0:
        return 1.0 if t_k <= t_sol else 0.0
    return 1.0 / (1.0 + (t_k - t_sol) / span)


def geomean(values: Iterable[float]) -> float:
    vals = list(values)
    if not vals:
        raise ValueError("geomean of no values")
    if any(v <= 0 for v in vals):
        raise ValueError(f"geomean needs positive values, got {min(vals)}")
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))


def aggregate_scores(
    latencies: Sequence[float], sols: Sequence[float], baselines: Sequence[float]
) -> dict[str, float]:
    """A suite's figures as the leaderboard prints them (all per-workload lists in the same order).

    latency_ms, sol_ms, baseline_ms: geomeans; score: sol_score of those geomeans;
    mean_score: arithmetic mean of the per-workload scores; pct_of_sol: geomean SOL / geomean latency.
    """
    if not (len(latencies) == len(sols) == len(baselines)) or not latencies:
        raise ValueError(
            f"expected equal, non-empty lists, got {len(latencies)} latencies, {len(sols)} sols, "
            f"{len(baselines)} baselines"
        )
    lat, sol, base = geomean(latencies), geomean(sols), geomean(baselines)
    per_workload = [sol_score(t, s, b) for t, s, b in zip(latencies, sols, baselines, strict=True)]
    return {
        "latency_ms": lat,
        "sol_ms": sol,
        "baseline_ms": base,
        "score": sol_score(lat, sol, base),
        "mean_score": math.fsum(per_workload) / len(per_workload),
        "pct_of_sol": pct_of_sol(sol, lat),
    }


# --------------------------------------------------------------------------------------------- report


def sol_report(
    task: Task | str,
    gpu: str = "H200",
    convention: str = "leaderboard",
    peaks: Mapping[str, GpuPeaks] | None = None,
) -> dict[str, Any]:
    """Per-workload T_SOL of a task and the geomean, as the JSON document `solbench sol --json` prints.

    The published B200 figures ride along only for gpu B200 under the leaderboard convention.
    """
    task = _task(task)
    peak = gpu_peaks(gpu, peaks)
    gpu = gpu.upper()
    published = gpu == "B200" and convention == "leaderboard"
    rows = []
    for entry, workload in zip(task.file.workloads, task.workloads, strict=True):
        row = {"uuid": workload.uuid, "axes": dict(workload.axes)}
        row.update(breakdown(task, workload, gpu, convention, peaks))
        row["published_sol_ms"] = entry.leaderboard.sol_ms if published and entry.leaderboard else None
        rows.append(row)
    pub = [r["published_sol_ms"] for r in rows]
    return {
        "task": task.name,
        "gpu": gpu,
        "convention": convention,
        "peaks": peak.model_dump(),
        "workloads": rows,
        "geomean_sol_ms": geomean(r["sol_ms"] for r in rows),
        "published_geomean_sol_ms": geomean(pub) if published and None not in pub else None,
        "published_sol_bound_ms": (
            task.file.leaderboard.sol_bound_ms if published and task.file.leaderboard else None
        ),
    }
