"""What `solbench run` and `solbench report` print: one table per task and solution, SOL figures and scores.

Scores follow the leaderboard: per workload S = sol_score(T, T_SOL, T_b) with T_b the task's
`torch_compile_tf32` solution measured in the same run (blank when it was not run); per suite the score of
the geomeans (geomean T, geomean T_SOL, geomean T_b) and the arithmetic mean of the per-workload scores.
SOL figures come from harness.roofline (blank when it cannot be imported). Added to evaluation.extra:
sol_ms, pct_sol (100 * T_SOL / T), baseline_ms, score, gpu, sol_convention.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.schema import EvaluationStatus, Trace

BASELINE_SOLUTION = "torch_compile_tf32"
PASSED = EvaluationStatus.PASSED


def _roofline() -> Any | None:
    try:
        from harness import roofline

        return roofline
    except Exception:  # noqa: BLE001 - SOL columns stay blank
        return None


def detect_gpu() -> str | None:
    """H200, H100 or B200 for cuda:0; None without CUDA or for another GPU."""
    r = _roofline()
    if r is not None and hasattr(r, "detect_gpu"):
        try:
            return r.detect_gpu()
        except Exception:  # noqa: BLE001
            return None
    return None


def _gpu_of(device_name: str) -> str | None:
    r = _roofline()
    try:
        return r.gpu_from_device_name(device_name) if r is not None else None
    except Exception:  # noqa: BLE001
        return None


def _task(name: str):
    from harness.tasks import load_task

    try:
        return load_task(name)
    except Exception:  # noqa: BLE001 - traces of a task we do not have: no SOL, file order
        return None


def _workload_rank(task_name: str) -> Callable[[str], int]:
    """A sort key for workload uuids: the task's order; unknown uuids (or an unknown task) after, stably."""
    task = _task(task_name)
    order = {w.uuid: i for i, w in enumerate(task.workloads)} if task is not None else {}
    return lambda uuid: order.get(uuid, len(order))


def sol_ms_for(task, trace: Trace, gpu: str | None, convention: str) -> float | None:
    r = _roofline()
    if r is None or gpu is None or task is None:
        return None
    try:
        return float(r.sol_ms(task, trace.workload, gpu, convention))
    except Exception:  # noqa: BLE001 - e.g. a definition without roofline expressions
        return None


def _score(t_k: float, t_sol: float, t_b: float) -> float | None:
    r = _roofline()
    try:
        return float(r.sol_score(t_k, t_sol, t_b)) if r is not None else None
    except Exception:  # noqa: BLE001
        return None


def _key(t: Trace) -> tuple[str, str, str]:
    return (t.definition, t.solution, t.workload.uuid)


def merge(trace_lists: Iterable[Iterable[Trace]]) -> list[Trace]:
    """Concatenate (shards), keeping the last trace per (task, solution, workload)."""
    merged: dict[tuple[str, str, str], Trace] = {}
    for traces in trace_lists:
        for t in traces:
            merged.pop(_key(t), None)
            merged[_key(t)] = t
    return list(merged.values())


def latency_ms(t: Trace) -> float | None:
    perf = t.evaluation.performance
    if t.evaluation.status != PASSED or perf is None or perf.latency_ms <= 0:
        return None
    return perf.latency_ms


def annotate(traces: Sequence[Trace], gpu: str | None, convention: str) -> None:
    """Add sol_ms, pct_sol, baseline_ms and score to every timed PASSED trace's evaluation.extra."""
    baselines = {
        (t.definition, t.workload.uuid): latency_ms(t)
        for t in traces
        if t.solution == BASELINE_SOLUTION and latency_ms(t) is not None
    }
    tasks: dict[str, Any] = {}
    for t in traces:
        lat = latency_ms(t)
        if lat is None:
            continue
        extra = t.evaluation.extra if t.evaluation.extra is not None else {}
        t.evaluation.extra = extra
        task = tasks.setdefault(t.definition, _task(t.definition))
        use_gpu = gpu or extra.get("gpu") or _gpu_of(t.evaluation.environment.hardware)
        sol = sol_ms_for(task, t, use_gpu, convention)
        base = baselines.get((t.definition, t.workload.uuid))
        extra.update(
            {
                "gpu": use_gpu,
                "sol_convention": convention,
                "sol_ms": sol,
                "pct_sol": 100.0 * sol / lat if sol is not None else None,
                "baseline_ms": base,
                "score": _score(lat, sol, base) if sol is not None and base is not None else None,
            }
        )


# ------------------------------------------------------------------------------------------ summaries


def _geomean(values: Sequence[float]) -> float:
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


@dataclass
class Summary:
    passed: int
    total: int
    geomean_latency_ms: float | None = None
    n_scored: int = 0
    """Workloads with a latency, a T_SOL and a T_b: the set the figures below are taken over."""
    geomean_sol_ms: float | None = None
    geomean_baseline_ms: float | None = None
    score: float | None = None
    """sol_score of the three geomeans (the leaderboard's suite score)."""
    mean_score: float | None = None


def summarize(traces: Sequence[Trace]) -> Summary:
    s = Summary(sum(t.evaluation.status == PASSED for t in traces), len(traces))
    lats = [lat for t in traces if (lat := latency_ms(t)) is not None]
    if lats:
        s.geomean_latency_ms = _geomean(lats)
    sols = [
        sol for t in traces if latency_ms(t) is not None and (sol := (t.evaluation.extra or {}).get("sol_ms"))
    ]
    if lats and len(sols) == len(lats):
        s.geomean_sol_ms = _geomean(sols)
    rows = []
    for t in traces:
        extra = t.evaluation.extra or {}
        lat, sol, base = latency_ms(t), extra.get("sol_ms"), extra.get("baseline_ms")
        if lat is not None and sol and base:
            rows.append((lat, sol, base, extra.get("score")))
    if rows:
        s.n_scored = len(rows)
        lat_g = _geomean([r[0] for r in rows])
        s.geomean_sol_ms = _geomean([r[1] for r in rows])
        s.geomean_baseline_ms = _geomean([r[2] for r in rows])
        s.score = _score(lat_g, s.geomean_sol_ms, s.geomean_baseline_ms)
        scores = [r[3] for r in rows if r[3] is not None]
        s.mean_score = math.fsum(scores) / len(scores) if scores else None
        if s.n_scored < len(lats):  # the score's latency geomean is over the scored set
            s.geomean_latency_ms = lat_g
    return s


# ------------------------------------------------------------------------------------------ tables


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def group(traces: Sequence[Trace]) -> dict[tuple[str, str], list[Trace]]:
    """Traces by (task, solution), tasks sorted by name, workloads in the task's order."""
    groups: dict[tuple[str, str], list[Trace]] = {}
    for t in traces:
        groups.setdefault((t.definition, t.solution), []).append(t)
    for (task_name, _), items in groups.items():
        rank = _workload_rank(task_name)
        items.sort(key=lambda t: rank(t.workload.uuid))
    return dict(sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == BASELINE_SOLUTION, kv[0][1])))


def print_table(console: Console, task_name: str, solution: str, traces: Sequence[Trace]) -> Summary:
    timed = any((t.evaluation.extra or {}).get("timed", True) for t in traces)
    extra0 = next((t.evaluation.extra for t in traces if t.evaluation.extra), {}) or {}
    what = f"{extra0.get('timer', 'cupti')} timer" if timed else "correctness only, not timed"
    if extra0.get("smoke_axes") is not None:
        what += ", smoke shapes"
    table = Table(title=f"{task_name} · {solution} · {what}", title_justify="left")
    cols = ["workload", "axes", "status", "latency ms", "ref ms", "speedup", "T_SOL ms", "% SOL", "score"]
    for col in [*cols, "max err / atol"]:
        table.add_column(col, justify="left" if col in ("workload", "axes", "status") else "right")
    for t in traces:
        ev, extra = t.evaluation, t.evaluation.extra or {}
        status = ev.status.value
        style = "green" if status == "PASSED" else "red"
        perf, corr = ev.performance, ev.correctness
        lat = latency_ms(t)
        ref = perf.reference_latency_ms if perf is not None and perf.reference_latency_ms > 0 else None
        table.add_row(
            t.workload.uuid[:8],
            " ".join(f"{k}={v}" for k, v in (extra.get("smoke_axes") or t.workload.axes).items()),
            f"[{style}]{status}[/{style}]",
            _fmt(lat, ".4f"),
            _fmt(ref, ".4f"),
            _fmt(perf.speedup_factor if lat is not None and ref is not None else None, ".2f"),
            _fmt(extra.get("sol_ms"), ".4f"),
            _fmt(extra.get("pct_sol"), ".1f"),
            _fmt(extra.get("score"), ".3f"),
            _fmt(corr.max_absolute_error / t.workload.tolerance.max_atol if corr else None, ".2f"),
        )
    console.print(table)
    for t in traces:
        if t.evaluation.status != PASSED and t.evaluation.log:
            lines = t.evaluation.log.strip().splitlines()
            more = f" (+{len(lines) - 4} lines in the trace)" if len(lines) > 4 else ""
            text = escape("\n  ".join(lines[:4]) + more)
            console.print(f"[red]{t.workload.uuid[:8]}[/red] {text}", highlight=False)
    s = summarize(traces)
    console.print(f"{s.passed}/{s.total} workloads passed", highlight=False)
    if s.geomean_latency_ms is not None:
        line = f"geomean latency {s.geomean_latency_ms:.4f} ms"
        if s.geomean_sol_ms is not None and not s.n_scored:
            pct = 100 * s.geomean_sol_ms / s.geomean_latency_ms
            line += f" · T_SOL {s.geomean_sol_ms:.4f} ms ({pct:.1f}% of SOL; no score without the baseline in the run)"
        if s.n_scored:
            line = (
                f"geomean over {s.n_scored} workloads: latency {s.geomean_latency_ms:.4f} ms · "
                f"T_SOL {s.geomean_sol_ms:.4f} ms · T_b {s.geomean_baseline_ms:.4f} ms · "
                f"score {_fmt(s.score, '.3f')} (of the geomeans) · mean score {_fmt(s.mean_score, '.3f')}"
            )
        console.print(line, highlight=False)
    return s


#: Characters of a kernel name the --kernels table shows (cuBLAS and torch names run to hundreds).
KERNEL_NAME_CHARS = 48


def print_kernels(console: Console, task_name: str, solution: str, traces: Sequence[Trace]) -> None:
    """The timed calls' anatomy per workload (traces of the cupti timer: extra.timing.kernels): each GPU
    record's median start, duration and gap after the one before (negative: overlapping), in us."""
    table = Table(title=f"{task_name} · {solution} · kernels of a call (medians, us)", title_justify="left")
    for col in ("workload", "#", "kernel", "start", "duration", "gap"):
        table.add_column(col, justify="left" if col in ("workload", "kernel") else "right")
    rows = 0
    for t in traces:
        kernels = ((t.evaluation.extra or {}).get("timing") or {}).get("kernels") or []
        for i, k in enumerate(kernels):
            name = (
                k["name"] if len(k["name"]) <= KERNEL_NAME_CHARS else k["name"][: KERNEL_NAME_CHARS - 1] + "…"
            )
            table.add_row(
                t.workload.uuid[:8] if i == 0 else "",
                str(i),
                escape(name),
                _fmt(k["start_us"], ".1f"),
                _fmt(k["duration_us"], ".1f"),
                _fmt(k["gap_us"], ".1f"),
                end_section=i == len(kernels) - 1,
            )
            rows += 1
    if rows:
        console.print(table)
    else:
        console.print(f"{task_name} · {solution}: no kernel breakdown in these traces (cupti timer only)")


def repeat_geomeans(runs: Sequence[Sequence[Trace]]) -> dict[tuple[str, str], list[float | None]]:
    """--repeat: per (task, solution), each run's geomean latency (ms) over its workloads (None for a run
    where some workload has no latency: failed, or not timed)."""
    out: dict[tuple[str, str], list[float | None]] = {}
    for r, traces in enumerate(runs):
        for key, items in group(traces).items():
            lats = [latency_ms(t) for t in items]
            row = out.setdefault(key, [None] * len(runs))
            row[r] = _geomean(lats) if lats and None not in lats else None
    return out


def print_repeats(console: Console, runs: Sequence[Sequence[Trace]]) -> None:
    """The runs of --repeat side by side: each run's geomean latency, their median and spread."""
    table = Table(title=f"{len(runs)} runs · geomean latency ms per run", title_justify="left")
    for col in ("task", "solution", *(f"run {r + 1}" for r in range(len(runs))), "median", "spread %"):
        table.add_column(col, justify="left" if col in ("task", "solution") else "right")
    for (task_name, solution), values in repeat_geomeans(runs).items():
        timed = sorted(v for v in values if v is not None)
        median = statistics.median(timed) if len(timed) == len(values) else None
        spread = 100.0 * (timed[-1] - timed[0]) / median if median else None
        table.add_row(
            task_name[:3],
            solution,
            *(_fmt(v, ".4f") for v in values),
            _fmt(median, ".4f"),
            _fmt(spread, ".1f"),
        )
    console.print(table)


def split_runs(traces: Sequence[Trace]) -> list[list[Trace]]:
    """Traces of a --repeat file back into its runs, by extra.repeat (a trace without the tag: run 0)."""
    runs: dict[int, list[Trace]] = {}
    for t in traces:
        runs.setdefault(int((t.evaluation.extra or {}).get("repeat", 0)), []).append(t)
    return [runs[r] for r in sorted(runs)]


def run_latencies(runs: Sequence[Sequence[Trace]]) -> dict[str, dict[str, dict[str, list[float | None]]]]:
    """Per task, per solution (in order of first appearance: the --solution order), per workload (in the
    task's order): the latency (ms) in each run that has the workload, None where it failed or was not
    timed."""
    out: dict[str, dict[str, dict[str, list[float | None]]]] = {}
    for traces in runs:
        for t in traces:
            row = out.setdefault(t.definition, {}).setdefault(t.solution, {})
            row.setdefault(t.workload.uuid, []).append(latency_ms(t))
    for task_name, by_solution in out.items():
        rank = _workload_rank(task_name)
        for solution, rows in by_solution.items():
            by_solution[solution] = dict(sorted(rows.items(), key=lambda kv: rank(kv[0])))
    return out


def _median_of_runs(values: Sequence[float | None]) -> float | None:
    return statistics.median(values) if values and None not in values else None


def _compare_cells(value: float | None, spread: float | None, base: float | None, change: bool) -> list[str]:
    """A solution's cells of the comparison: median and spread in us, and (`change`) % against `base`."""
    row = [_fmt(value * 1e3 if value is not None else None, ".1f"), _fmt(spread, ".1f")]
    if change:
        row.append(_fmt(100.0 * (value / base - 1.0) if value is not None and base else None, "+.1f"))
    return row


def print_compare(console: Console, runs: Sequence[Sequence[Trace]]) -> None:
    """Per task, every workload's latency for each solution over the runs (us): the median, the spread
    (max - min, where there are several) and, after the first solution, the median's change against the
    first's; then the geomean of the medians (over the workloads that every solution has a median for)."""
    for task_name, by_solution in run_latencies(runs).items():
        solutions = list(by_solution)
        first = solutions[0]
        uuids = list(dict.fromkeys(u for rows in by_solution.values() for u in rows))
        medians = {s: {u: _median_of_runs(by_solution[s].get(u, [])) for u in uuids} for s in solutions}
        table = Table(
            title=f"{task_name} · latency over {len(runs)} run{'s' if len(runs) > 1 else ''} (us): median, "
            f"spread (max - min), change against {first}",
            title_justify="left",
        )
        table.add_column("workload", justify="left")
        for s in solutions:
            table.add_column(s, justify="right")
            table.add_column("±", justify="right")
            if s != first:
                table.add_column("vs 1st %", justify="right")
        for u in uuids:
            row = [u[:8]]
            for s in solutions:
                values = by_solution[s].get(u, [])
                timed = [v for v in values if v is not None]
                spread = (
                    1e3 * (max(timed) - min(timed)) if len(timed) > 1 and len(timed) == len(values) else None
                )
                row += _compare_cells(medians[s][u], spread, medians[first][u], s != first)
            table.add_row(*row, end_section=u == uuids[-1])
        common = [u for u in uuids if all(medians[s][u] is not None for s in solutions)]
        row = [f"geomean ({len(common)})"]
        g1 = _geomean([medians[first][u] for u in common]) if common else None
        for s in solutions:
            g = _geomean([medians[s][u] for u in common]) if common else None
            row += _compare_cells(g, None, g1, s != first)
        table.add_row(*row)
        console.print(table)


def _file_labels(paths: Sequence[Any]) -> list[str]:
    """A column label per trace file: its stem, or the path as given where two files share a stem."""
    from pathlib import Path

    stems = [Path(p).stem for p in paths]
    return [stem if stems.count(stem) == 1 else str(p) for p, stem in zip(paths, stems, strict=True)]


def compare_command(console: Console, paths: Sequence[Any], solutions: Sequence[str] = ()) -> bool:
    """`solbench compare`: trace files side by side, each (file, solution) a column group labelled by the
    file (and the solution where the file holds several of a task); a file's --repeat runs give each
    workload's median. Only the `solutions` named, when given. True when every trace shown PASSED."""
    from pathlib import Path

    from harness.errors import HarnessError
    from harness.schema import load_traces_jsonl

    runs: list[list[Trace]] = []
    for path, label in zip(paths, _file_labels(paths), strict=True):
        traces = [t for t in load_traces_jsonl(Path(path)) if not solutions or t.solution in solutions]
        if not traces:
            named = f" of solution {', '.join(solutions)}" if solutions else ""
            raise HarnessError(f"{path}: no traces{named}")
        names: dict[str, set[str]] = {}
        for t in traces:
            names.setdefault(t.definition, set()).add(t.solution)
        for r, run in enumerate(split_runs(traces)):
            if len(runs) <= r:
                runs.append([])
            runs[r] += [
                t.model_copy(
                    update={"solution": label if len(names[t.definition]) == 1 else f"{label}:{t.solution}"}
                )
                for t in run
            ]
    print_compare(console, runs)
    return all(t.evaluation.status == PASSED for run in runs for t in run)


def print_report(console: Console, traces: Sequence[Trace], *, kernels: bool = False) -> bool:
    """Every (task, solution) table (and with `kernels` its calls' anatomy); True when every trace PASSED."""
    for (task_name, solution), items in group(traces).items():
        print_table(console, task_name, solution, items)
        if kernels:
            print_kernels(console, task_name, solution, items)
    return all(t.evaluation.status == PASSED for t in traces)


def make_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def progress_callback(progress: Progress, description: str, total: int) -> Callable[[Trace], None]:
    task_id = progress.add_task(description, total=total)
    return lambda _trace: progress.advance(task_id)


# ------------------------------------------------------------------------------------------ commands


@contextmanager
def _trace_sink(output, as_json: bool) -> Iterator[Callable[[Sequence[Trace]], None]]:
    """Writes traces (official JSONL layout) to stdout (--json) and/or a file (-o)."""
    import click

    handle = open(output, "w") if output else None  # noqa: SIM115 - closed below
    try:

        def write(traces: Sequence[Trace]) -> None:
            for t in traces:
                line = t.to_json_line()
                if as_json:
                    click.echo(line)
                if handle is not None:
                    handle.write(line + "\n")
                    handle.flush()

        yield write
    finally:
        if handle is not None:
            handle.close()


def _smoke_traces(plan, folder, on_trace) -> list[Trace]:
    """The CPU fallback for one solution: correctness on smoke shapes in this process (run_checks)."""
    from pathlib import Path

    from harness.errors import BuildError, HarnessError
    from harness.runner import RunOptions, evaluate_isolated, make_trace, run_checks
    from harness.solution import load_solution, read_solution_dir

    def failed(status: EvaluationStatus, log: str) -> list[Trace]:
        traces = [
            make_trace(plan.task.definition, w, Path(folder).name, status, log=log) for w in plan.workloads
        ]
        for t in traces:
            on_trace(t)
        return traces

    if not Path(folder).is_dir():  # an official solution.json: through the driver, on the CPU
        return evaluate_isolated(plan.task, folder, plan.workloads, RunOptions(smoke=True), on_trace=on_trace)
    try:
        if read_solution_dir(Path(folder)).spec().is_cpp:
            return failed(
                EvaluationStatus.RUNTIME_ERROR, "needs CUDA: the CPU smoke check runs no C++/CUDA code"
            )
        loaded = load_solution(Path(folder))
    except HarnessError as exc:
        return failed(
            EvaluationStatus.COMPILE_ERROR if isinstance(exc, BuildError) else EvaluationStatus.RUNTIME_ERROR,
            str(exc),
        )
    return run_checks(
        plan.task,
        loaded.fn,
        loaded.name,
        plan.workloads,
        dps=loaded.spec.destination_passing_style,
        device="cpu",
        smoke=True,
        on_result=on_trace,
    )


def run_and_print(
    console: Console,
    plans: Sequence[Any],
    options: Any,
    *,
    gpu: str | None,
    convention: str,
    as_json: bool = False,
    output: Any = None,
    kernels: bool = False,
    repeat: int = 1,
) -> bool:
    """`solbench run`: each solution x task in its own process (CUDA) or the CPU smoke check; True if all passed.
    `repeat` > 1: that many runs, each evaluating every solution once (so solutions alternate), each run's
    traces tagged extra.repeat and scored against the baseline of the same run; then the runs' geomeans."""
    import os

    import torch

    from harness.runner import evaluate_isolated, solution_name_of

    cuda = torch.cuda.is_available()
    if not cuda:
        console.print(
            "CUDA is not available: running the CPU smoke check instead (correctness on shapes shrunk to "
            "min(v, 16), no timing)",
            highlight=False,
        )
        os.environ.setdefault("TRITON_INTERPRET", "1")
    gpu = gpu or detect_gpu()
    all_passed = True
    with _trace_sink(output, as_json) as write:
        for plan in plans:
            runs: list[list[Trace]] = []
            for r in range(repeat):
                if repeat > 1:
                    console.print(f"{plan.task.name[:3]}: run {r + 1} of {repeat}", highlight=False)
                traces: list[Trace] = []
                with make_progress(console) as progress:
                    for solution in plan.solutions:
                        label = f"{plan.task.name[:3]} · {solution_name_of(solution)}"
                        advance = progress_callback(progress, label, len(plan.workloads))
                        if cuda:
                            traces += evaluate_isolated(
                                plan.task, solution, plan.workloads, options, on_trace=advance
                            )
                        else:
                            traces += _smoke_traces(plan, solution, advance)
                if repeat > 1:
                    for t in traces:
                        t.evaluation.extra = {**(t.evaluation.extra or {}), "repeat": r}
                annotate(traces, gpu, convention)
                write(traces)
                all_passed &= print_report(console, traces, kernels=kernels)
                runs.append(traces)
            if repeat > 1:
                print_repeats(console, runs)
                print_compare(console, runs)
    return all_passed


def report_command(
    console: Console,
    paths: Sequence[Any],
    *,
    gpu: str | None,
    convention: str,
    as_json: bool = False,
    output: Any = None,
    kernels: bool = False,
    runs: bool = False,
) -> bool:
    """`solbench report`: merge trace files (shards; the last trace per task/solution/workload wins).
    `runs`: also the files' --repeat runs (extra.repeat) side by side, as `run --repeat` ends."""
    from pathlib import Path

    from harness.errors import HarnessError
    from harness.schema import load_traces_jsonl

    loaded = []
    for p in paths:
        traces = load_traces_jsonl(Path(p))
        if not traces:  # (a log or a mistyped file: no workload to report, not "every workload passed")
            raise HarnessError(f"{p}: no traces")
        loaded += traces
    traces = merge([loaded])
    annotate(traces, gpu, convention)
    with _trace_sink(output, as_json) as write:
        write(traces)
    passed = print_report(console, traces, kernels=kernels)
    if runs:
        by_run = split_runs(loaded)
        print_repeats(console, by_run)
        print_compare(console, by_run)
    return passed
