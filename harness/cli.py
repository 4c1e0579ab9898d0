"""The `solbench` command line: validate, check (and the evaluator / packaging commands registered below).

Tables and progress go to stderr; stdout carries JSON only when asked (--json). Exit codes: 0 all passed,
1 a workload failed, 2 bad input or usage, 3 environment (e.g. CUDA asked for and absent).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    EnvironmentProblem,
    HarnessError,
)

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class _Group(click.Group):
    """Maps HarnessError to its one-line message and exit code; usage errors exit 2 (click's default). An
    OSError on a named path (an output folder under a file, a read-only place) is bad input too, unless the
    machine ran out of room or failed to write (exit 3)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except HarnessError as exc:
            click.echo(f"solbench: {exc}", err=True)
            sys.exit(exc.exit_code)
        except OSError as exc:
            if exc.filename is None:
                raise
            click.echo(f"solbench: {exc.filename}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_ENVIRONMENT if exc.errno in _ENVIRONMENT_ERRNOS else EXIT_USAGE)


_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


# options shared by several commands
_workload_option = click.option(
    "--workload",
    "workload_prefixes",
    multiple=True,
    help="Workload uuid prefix (repeatable; default: all 16).",
)
_traces_json_option = click.option(
    "--json", "as_json", is_flag=True, help="One official-layout trace per workload on stdout."
)
_inputs_option = click.option(
    "--inputs",
    "input_kind",
    type=click.Choice(["generated", "stored"]),
    default="generated",
    show_default=True,
    help="stored: every round uses workloads/<task>/<uuid>.safetensors (see `solbench workloads`).",
)
_kernels_option = click.option(
    "--kernels",
    is_flag=True,
    help="Also print each workload's call anatomy: every kernel's median start, duration and gap (cupti).",
)
_sol_option = click.option(
    "--sol",
    "sol_convention",
    type=click.Choice(["leaderboard", "fp32-io"]),
    default="leaderboard",
    show_default=True,
    help="Speed-of-light convention of the T_SOL, % SOL and score columns.",
)


def _out_option(default: str, help_text: str):
    """-o/--out DIRECTORY, shared by pack, submit, export and import."""
    return click.option(
        "-o",
        "--out",
        "out_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(default),
        show_default=True,
        help=help_text,
    )


_target_option = click.option(
    "--target",
    type=click.Choice(["B200", "LOCAL"]),
    default=None,
    help="Replace the target_hardware list (default: solution.yaml's).",
)


@click.group(cls=_Group)
@click.version_option(package_name="sam-hq-solbench")
def main() -> None:
    """sam-hq-solbench: SAM-HQ kernels for SOL-ExecBench and the harness that checks and times them."""


def _solution_dirs(task_name: str, solutions: tuple[str, ...]) -> list[Path]:
    from harness.solution import SOLUTION_FILE, discover

    if not solutions:
        found = discover(task_name)
        if not found:
            raise HarnessError(f"solutions/{task_name}: no solution folders")
        return found
    dirs = []
    for s in solutions:
        p = Path(s)
        if not (p / SOLUTION_FILE).is_file():
            raise HarnessError(f"{p}: not a solution folder (no {SOLUTION_FILE})")
        dirs.append(p)
    return dirs


def _select_workloads(task, prefixes: tuple[str, ...]):
    return [task.workload(p) for p in prefixes] if prefixes else list(task.workloads)


@main.command()
def validate() -> None:
    """Check every definition and every solution folder (no kernels are run)."""
    from harness.solution import check_entry_signature, discover, read_solution_dir, to_official
    from harness.tasks import load_task, task_names

    problems: list[str] = []
    checked = 0
    for name in task_names():
        try:
            task = load_task(name)
            _ = task.definition
            if len(task.workloads) == 0:
                problems.append(f"{task.path}: workloads: expected at least one workload, got none")
            for w in task.workloads:
                task.definition.resolve_axes(w.axes)
        except HarnessError as exc:
            problems.append(str(exc))
            continue
        checked += 1
        for folder in discover(name):
            try:
                spec = read_solution_dir(folder)
                if spec.definition != name:
                    raise HarnessError(
                        f"{folder}/solution.yaml: definition: expected {name!r} (its task folder), got {spec.definition!r}"
                    )
                to_official(folder, spec)
                check_entry_signature(folder, spec, task.definition)
                checked += 1
            except HarnessError as exc:
                problems.append(str(exc))
    for p in problems:
        click.echo(f"solbench: {p}", err=True)
    console.print(f"{checked} files valid, {len(problems)} problem(s)")
    sys.exit(EXIT_USAGE if problems else EXIT_OK)


def _check_device(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("--device cuda: CUDA is not available on this machine")


@main.command()
@click.argument("task_name", metavar="TASK")
@click.option(
    "--solution", "solutions", multiple=True, help="Solution folder (repeatable; default: all of the task's)."
)
@click.option(
    "--device", type=click.Choice(["cpu", "cuda"]), default=None, help="Default: cuda if available, else cpu."
)
@_workload_option
@click.option("--rounds", type=click.IntRange(1), default=10, show_default=True)
@click.option(
    "--smoke", is_flag=True, help="Shrink every var axis to min(v, 16) so a CPU check takes seconds."
)
@_traces_json_option
@_inputs_option
def check(task_name, solutions, device, workload_prefixes, rounds, smoke, as_json, input_kind) -> None:
    """Run the official correctness procedure for TASK (no timing) and print a table."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    _check_device(device)
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run in the interpreter on the CPU
    from harness.runner import run_checks
    from harness.solution import load_solution
    from harness.tasks import load_task

    task = load_task(task_name)
    workloads = _select_workloads(task, workload_prefixes)
    input_source = None
    if input_kind == "stored":
        if smoke:
            raise HarnessError("--inputs stored: the stored tensors are full size; drop --smoke")
        from harness.workloads import stored_input_source

        input_source = stored_input_source(task)
    all_passed = True
    for folder in _solution_dirs(task.name, solutions):
        loaded = load_solution(folder)
        traces = run_checks(
            task,
            loaded.fn,
            loaded.name,
            workloads,
            dps=loaded.spec.destination_passing_style,
            device=device,
            rounds=rounds,
            smoke=smoke,
            on_result=(lambda t: click.echo(t.to_json_line())) if as_json else None,
            input_source=input_source,
        )
        _print_check_table(task.name, loaded.name, traces, smoke)
        all_passed &= all(t.evaluation.status.value == "PASSED" for t in traces)
    sys.exit(EXIT_OK if all_passed else EXIT_FAILED)


def _print_check_table(task_name: str, solution: str, traces, smoke: bool) -> None:
    table = Table(title=f"{task_name} · {solution} · correctness{' (smoke)' if smoke else ''}")
    for col in ("workload", "axes", "status", "matched", "max abs err", "/ atol", "max rel err"):
        table.add_column(col, justify="right" if col not in ("workload", "axes", "status") else "left")
    passed = 0
    for t in traces:
        ev = t.evaluation
        extra = ev.extra or {}
        axes = extra.get("smoke_axes", t.workload.axes)
        ratios = [o["matched_ratio"] for o in extra.get("outputs", {}).values()]
        c = ev.correctness
        status = ev.status.value
        passed += status == "PASSED"
        style = "green" if status == "PASSED" else "red"
        table.add_row(
            t.workload.uuid[:8],
            " ".join(f"{k}={v}" for k, v in axes.items()),
            f"[{style}]{status}[/{style}]",
            f"{min(ratios):.4%}" if ratios else "-",
            f"{c.max_absolute_error:.3e}" if c else "-",
            f"{c.max_absolute_error / t.workload.tolerance.max_atol:.2f}" if c else "-",
            f"{c.max_relative_error:.3e}" if c else "-",
        )
    console.print(table)
    for t in traces:
        if t.evaluation.log:
            console.print(
                f"[red]{t.workload.uuid[:8]}[/red] {t.evaluation.log.splitlines()[0]}", highlight=False
            )
    console.print(f"{passed}/{len(traces)} workloads passed")


@main.command()
@click.argument("task_name", metavar="TASK")
@click.option(
    "--gpu", default=None, help="H200, H100, B200 or a GPU of --peaks (default: this GPU, else H200)."
)
@click.option(
    "--convention",
    type=click.Choice(["leaderboard", "fp32-io"]),
    default="leaderboard",
    show_default=True,
    help="leaderboard: SOLAR's model (BF16 rate, 2-byte elements, +0.4 us); fp32-io: TF32 rate, fp32 bytes.",
)
@click.option(
    "--peaks", "peaks_file", type=click.Path(dir_okay=False), help="YAML file overriding GPU peaks."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON document on stdout.")
def sol(task_name, gpu, convention, peaks_file, as_json) -> None:
    """Print TASK's speed of light per workload and its geomean (computed, nothing is run)."""
    import json

    from harness.roofline import detect_gpu, load_peaks, sol_report

    peaks = load_peaks(peaks_file)
    report = sol_report(task_name, gpu or detect_gpu() or "H200", convention, peaks)
    if as_json:
        click.echo(json.dumps(report, allow_nan=False))
    _print_sol_table(report)


def _print_sol_table(report: dict) -> None:
    p = report["peaks"]
    leaderboard = report["convention"] == "leaderboard"
    rate = f"BF16 {p['bf16_tflops']:g} TFLOP/s" if leaderboard else f"TF32 {p['tf32_tflops']:g} TFLOP/s"
    offset = f", +{p['leaderboard_offset_us']:g} us" if leaderboard else ""
    table = Table(
        title=f"{report['task']} · T_SOL on {report['gpu']} ({report['convention']}: {rate}, "
        f"HBM {p['hbm_tbytes_per_s']:g} TB/s{offset})"
    )
    published = report["published_geomean_sol_ms"] is not None
    cols = ["workload", "axes", "GFLOP", "MB", "bound", "T_SOL ms"] + (["published ms"] if published else [])
    for col in cols:
        table.add_column(col, justify="left" if col in ("workload", "axes", "bound") else "right")
    for w in report["workloads"]:
        row = [
            w["uuid"][:8],
            " ".join(f"{k}={v}" for k, v in w["axes"].items()),
            f"{w['flops'] / 1e9:,.3f}",
            f"{w['bytes'] / 1e6:,.3f}",
            w["bound"],
            f"{w['sol_ms']:.6f}",
        ]
        if published:
            row.append(f"{w['published_sol_ms']:.4f}")
        table.add_row(*row)
    console.print(table)
    line = f"geomean T_SOL {report['geomean_sol_ms']:.6f} ms"
    if published:
        line += (
            f" (published: geomean {report['published_geomean_sol_ms']:.6f} ms, "
            f"task page SOL bound {report['published_sol_bound_ms']} ms)"
        )
    console.print(line, highlight=False)


# --------------------------------------------------------------- packaging, official exchange, workload tensors


def _notes(notes) -> None:
    for note in notes:
        console.print(f"[yellow]note[/yellow] {note}", highlight=False)


@main.command(name="pack")
@click.argument("solution_dir", type=click.Path(file_okay=False, path_type=Path))
@_out_option("dist", "Writes <out>/<definition>/<solution>/solution.json (+ .sha256).")
@_target_option
def pack_cmd(solution_dir, out_dir, target) -> None:
    """Check SOLUTION_DIR and write the official solution.json with every source inlined."""
    from harness.package import pack as pack_solution

    packed = pack_solution(solution_dir, out_dir, target=target)
    _notes(packed.notes)
    console.print(f"packed {packed.path} (sha256 {packed.sha256[:16]}…)", highlight=False)


@main.command(name="submit")
@click.argument("solution_dir", type=click.Path(file_okay=False, path_type=Path))
@_out_option("dist", "Where the packed solution.json and summary.json go.")
@_target_option
@_traces_json_option
def submit_cmd(solution_dir, out_dir, target, as_json) -> None:
    """Pack SOLUTION_DIR, run the full evaluation of the packed JSON, write summary.json beside it."""
    from harness.package import submit as submit_solution

    result = submit_solution(
        solution_dir,
        out_dir,
        target=target,
        on_result=(lambda t: click.echo(t.to_json_line())) if as_json else None,
    )
    _notes(result.packed.notes)
    _print_submission(result.summary)
    console.print(f"summary: {result.summary_path}", highlight=False)
    if result.summary["all_passed"]:
        console.print(f"next: {result.summary['upload']}", highlight=False)
    else:
        console.print("[red]not ready for the leaderboard: a workload failed[/red]")
    sys.exit(result.exit_code)


def _print_submission(summary: dict) -> None:
    table = Table(
        title=f"{summary['definition']} · {summary['solution']} · {summary['gpu']} · {summary['date']}"
    )
    for col in ("workload", "axes", "status", "latency ms", "ref ms", "speedup"):
        table.add_column(col, justify="left" if col in ("workload", "axes", "status") else "right")

    def ms(v):
        return f"{v:.4f}" if v else "-"

    for r in summary["results"]:
        style = "green" if r["status"] == "PASSED" else "red"
        table.add_row(
            r["uuid"][:8],
            " ".join(f"{k}={v}" for k, v in r["axes"].items()),
            f"[{style}]{r['status']}[/{style}]",
            ms(r["latency_ms"]),
            ms(r["reference_latency_ms"]),
            f"{r['speedup_factor']:.2f}x" if r["speedup_factor"] else "-",
        )
    g = summary["geomean"]
    table.add_row(
        "geomean",
        "",
        f"{summary['passed']}/{summary['workloads']} passed",
        ms(g["latency_ms"]),
        ms(g["reference_latency_ms"]),
        f"{g['speedup_factor']:.2f}x" if g["speedup_factor"] else "-",
    )
    console.print(table)
    console.print(" ".join(f"{k} {v}" for k, v in summary["versions"].items()), highlight=False)


@main.command(name="export")
@click.argument("task_name", metavar="TASK")
@_out_option("dist/official", "Writes <out>/<task name>/ (definition.json, reference.py, workload.jsonl).")
@click.option(
    "--with-tensors",
    is_flag=True,
    help="Point random inputs at the stored workloads/ tensors (linked into <out>/<task>/blobs/).",
)
def export_cmd(task_name, out_dir, with_tensors) -> None:
    """Write TASK as an official SOL-ExecBench problem folder."""
    from harness.exchange import export_task
    from harness.tasks import load_task

    result = export_task(load_task(task_name), out_dir, with_tensors=with_tensors)
    _notes(result.notes)
    console.print(f"exported {result.folder}: {', '.join(p.name for p in result.files)}", highlight=False)


@main.command(name="import")
@click.argument("official_dir", type=click.Path(file_okay=False, path_type=Path))
@_out_option("definitions", "Definitions folder; the reference goes to its sibling references/.")
@click.option("--force", is_flag=True, help="Overwrite an existing definition YAML or reference module.")
def import_cmd(official_dir, out_dir, force) -> None:
    """Read an official problem folder into definitions/<name>.yaml + references/<name>.py."""
    from harness.exchange import import_problem

    result = import_problem(official_dir, out_dir, force=force)
    _notes(result.notes)
    console.print(
        f"imported {result.file.name}: {result.yaml_path}, {result.reference_path} "
        f"({len(result.file.workloads)} workloads)",
        highlight=False,
    )


@main.group(name="workloads", cls=_Group)
def workloads_group() -> None:
    """Stored workload tensors (workloads/<task>/<uuid>.safetensors + workloads/MANIFEST.json)."""


def _task_list(task_names_given: tuple[str, ...]):
    from harness.tasks import load_task, task_names

    return [load_task(t) for t in (task_names_given or task_names())]


@workloads_group.command(name="regenerate")
@click.argument("task_names_given", metavar="[TASK]...", nargs=-1)
@click.option("--seed", type=int, default=200, show_default=True, help="Seeded once per task, as officially.")
@click.option(
    "--max-gb", type=click.FloatRange(0), default=2.0, show_default=True, help="Skip larger workloads."
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="CPU and CUDA random streams differ; the manifest records which was used.",
)
def workloads_regenerate(task_names_given, seed, max_gb, device) -> None:
    """Draw the timed round's inputs of every workload and store them (default: all tasks)."""
    from harness.workloads import regenerate as regenerate_workloads

    tasks = _task_list(task_names_given)
    regenerate_workloads(
        tasks, seed=seed, device=device, max_gb=max_gb, log=lambda m: console.print(m, highlight=False)
    )
    console.print("wrote workloads/MANIFEST.json")


@workloads_group.command(name="verify")
@click.argument("task_names_given", metavar="[TASK]...", nargs=-1)
def workloads_verify(task_names_given) -> None:
    """Redraw the stored workloads and compare checksums with the manifest and the files (exit 1 on mismatch)."""
    from harness.workloads import verify as verify_workloads

    problems = verify_workloads(_task_list(task_names_given), log=lambda m: console.print(m, highlight=False))
    for p in problems:
        click.echo(f"solbench: {p}", err=True)
    console.print(f"{len(problems)} mismatch(es)")
    sys.exit(EXIT_FAILED if problems else EXIT_OK)


@main.command(name="run")
@click.argument("task_names", nargs=-1, metavar="[TASK]...")
@click.option(
    "--solution",
    "solutions",
    multiple=True,
    help="Solution folder or official solution.json (repeatable; default: every solution of each task).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Write the traces (JSONL) to this file."
)
@_traces_json_option
@click.option(
    "--timer",
    type=click.Choice(["cupti", "events"]),
    default="cupti",
    show_default=True,
    help="cupti: GPU span of the kernels each call launches (official); events: CUDA events around it.",
)
@click.option("--warmup", type=click.IntRange(0), default=10, show_default=True)
@click.option("--iterations", type=click.IntRange(1), default=50, show_default=True)
@_workload_option
@click.option("--no-reference", is_flag=True, help="Do not time the reference (reference latency 0).")
@_sol_option
@click.option(
    "--gpu",
    type=click.Choice(["H200", "H100", "B200"]),
    default=None,
    help="SOL figures for (default: detected).",
)
@click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="Only workloads whose index i in the task's order (0-based) has i % N == K-1; merge with `report`. "
    "Shards run at the same time on one machine share its CPU: launch-bound workloads (077's small ones) "
    "then time slower than alone.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds for one solution x task subprocess.",
)
@_inputs_option
@_kernels_option
@click.option(
    "--repeat",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Runs: each evaluates every solution once (so solutions alternate on the same GPU); traces carry "
    "extra.repeat, and a table gives each run's geomean, their median and spread. `report` keeps the "
    "last run's trace per workload.",
)
def run_cmd(
    task_names,
    solutions,
    output,
    as_json,
    timer,
    warmup,
    iterations,
    workload_prefixes,
    no_reference,
    sol_convention,
    gpu,
    shard,
    timeout_s,
    input_kind,
    kernels,
    repeat,
) -> None:
    """Evaluate solutions the official way (one subprocess each, CUPTI timing) and score them.

    T_b of the score is each task's torch_compile_tf32 solution measured in the same run. Without CUDA,
    runs the CPU smoke check instead. Exit 0 only when every workload passed.
    """
    from harness.report import run_and_print
    from harness.runner import RunOptions, parse_shard, plan_run

    plans = plan_run(task_names, solutions, workload_prefixes, parse_shard(shard))
    options = RunOptions(
        timer=timer,
        warmup=warmup,
        iterations=iterations,
        benchmark_reference=not no_reference,
        timeout_s=timeout_s,
        inputs=input_kind,
    )
    passed = run_and_print(
        console,
        plans,
        options,
        gpu=gpu,
        convention=sol_convention,
        as_json=as_json,
        output=output,
        kernels=kernels,
        repeat=repeat,
    )
    sys.exit(EXIT_OK if passed else EXIT_FAILED)


@main.command(name="report")
@click.argument("trace_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@_sol_option
@click.option(
    "--gpu",
    type=click.Choice(["H200", "H100", "B200"]),
    default=None,
    help="SOL figures for (default: the GPU the traces name).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the merged traces to this file.")
@click.option("--json", "as_json", is_flag=True, help="The merged traces on stdout.")
@_kernels_option
@click.option(
    "--runs",
    is_flag=True,
    help="Also the --repeat runs in the files side by side: each run's geomean, and per workload each "
    "solution's median latency over the runs, its spread and its change against the first solution.",
)
def report_cmd(trace_files, sol_convention, gpu, output, as_json, kernels, runs) -> None:
    """Merge trace files (e.g. --shard runs; the last trace per task, solution and workload wins) and
    print the tables again. Exit 0 only when every workload passed."""
    from harness.report import report_command

    passed = report_command(
        console,
        trace_files,
        gpu=gpu,
        convention=sol_convention,
        as_json=as_json,
        output=output,
        kernels=kernels,
        runs=runs,
    )
    sys.exit(EXIT_OK if passed else EXIT_FAILED)


@main.command(name="compare")
@click.argument("trace_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--solution", "solutions", multiple=True, help="Only this solution's traces (repeatable; default: all)."
)
def compare_cmd(trace_files, solutions) -> None:
    """Trace files side by side (e.g. a new run against a solution's traces_h200.jsonl): per workload each
    file's latency (the median over a --repeat file's runs), its spread and its change against the first
    file, then the geomeans. Exit 0 only when every trace shown passed."""
    from harness.report import compare_command

    passed = compare_command(console, trace_files, solutions)
    sys.exit(EXIT_OK if passed else EXIT_FAILED)


@main.command(name="build")
@click.argument("solution_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--arch",
    "archs",
    multiple=True,
    type=click.Choice(["sm_90a", "sm_100a"]),
    default=("sm_90a", "sm_100a"),
    show_default=True,
    help="Target (repeatable): sm_90a = H100/H200, sm_100a = B200 (the leaderboard).",
)
@_workload_option
def build_cmd(solution_dir, archs, workload_prefixes) -> None:
    """Build SOLUTION_DIR for each target without a GPU: Triton kernels as the solution launches them on
    the task's workloads (recorded, nothing runs), CUDA sources through nvcc; shared memory and registers
    checked against the limits. Exit 0 only when every build fits."""
    from rich.table import Table

    from harness.aot import check_solution_build
    from harness.errors import BuildError

    rows = check_solution_build(solution_dir, archs, workload_prefixes)
    table = Table(title=f"{solution_dir} · builds", title_justify="left")
    for column in ("kernel", "arch", "shared KiB", "registers", "stack B", "status"):
        table.add_column(column, justify="left" if column in ("kernel", "status") else "right")
    for r in rows:
        shared = f"{r['shared'] / 1024:.1f}" if r.get("shared") is not None else "-"
        table.add_row(
            r["kernel"],
            f"sm_{r['arch']}a",
            shared,
            str(r.get("registers") if r.get("registers") is not None else "-"),
            str(r.get("stack") if r.get("stack") is not None else "-"),
            "ok" if r["ok"] else f"FAILED: {r['problem']}",
        )
    console.print(table)
    failed = [r for r in rows if not r["ok"]]
    if failed:
        raise BuildError(f"{solution_dir}: {len(failed)} of {len(rows)} builds failed or exceed a limit")
    console.print(f"{len(rows)} builds fit ({', '.join(archs)})", highlight=False)


if __name__ == "__main__":  # pragma: no cover
    main()
