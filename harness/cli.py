"""The `solbench` command line: validate, check (and the evaluator / packaging commands registered below).

Tables and progress go to stderr; stdout carries JSON only when asked (--json). Exit codes: 0 all passed,
1 a workload failed, 2 bad input or usage, 3 environment (e.g. CUDA asked for and absent).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EnvironmentProblem, HarnessError

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class _Group(click.Group):
    """Maps HarnessError to its one-line message and exit code; usage errors exit 2 (click's default)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except HarnessError as exc:
            click.echo(f"solbench: {exc}", err=True)
            sys.exit(exc.exit_code)


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
@click.option("--workload", "workload_prefixes", multiple=True, help="Workload uuid prefix (repeatable).")
@click.option("--rounds", type=click.IntRange(1), default=10, show_default=True)
@click.option(
    "--smoke", is_flag=True, help="Shrink every var axis to min(v, 16) so a CPU check takes seconds."
)
@click.option("--json", "as_json", is_flag=True, help="One official-layout trace per workload on stdout.")
def check(task_name, solutions, device, workload_prefixes, rounds, smoke, as_json) -> None:
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


if __name__ == "__main__":  # pragma: no cover
    main()
