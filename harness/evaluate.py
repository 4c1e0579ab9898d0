"""The evaluation driver: one solution x one task in its own process (`python -m harness.evaluate ...`).

Mirrors the official eval_driver: sources staged in a fresh temporary folder; C++ built (a failure is a
COMPILE_ERROR trace per workload); Python imported with cpp_extension.load/load_inline replaced by a raiser;
driver-integrity snapshot before the import, checked after it and after each round-0 call; seed 200 once;
per workload 10 correctness rounds, the elapsed_time patch check, timing (CUDA only), the thread check,
reference timing. stdout carries exactly one JSON trace per workload; everything else goes to stderr.
harness.runner.evaluate_isolated runs this and turns a crash or timeout into traces.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():  # before anything imports triton: kernels run in the interpreter on CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import IO, Any  # noqa: E402

import harness.correctness  # noqa: E402
import harness.guards  # noqa: E402  (snapshots torch.cuda.Event.elapsed_time now, before any solution)
import harness.inputs  # noqa: E402
import harness.runner  # noqa: E402
import harness.timing  # noqa: E402
from harness.correctness import ErrorStats, compute_error_stats  # noqa: E402, F401
from harness.guards import (  # noqa: E402
    DRIVER_FUNCTIONS,
    RewardHackDetected,
    block_cpp_extension,
    check_eval_integrity,
    check_monkey_patch,
    check_thread_injection,
    snapshot_driver,
    thread_count,
)
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes, set_seed  # noqa: E402, F401
from harness.runner import (  # noqa: E402
    CORRECTNESS_ROUNDS,
    check_correctness,
    environment,
    make_trace,
    normalize_outputs,  # noqa: F401 - in the driver namespace for the integrity snapshot
    smoke_workload,
)
from harness.schema import (  # noqa: E402
    Evaluation,
    EvaluationStatus,
    Performance,
    Solution,
    Trace,
    Workload,
    load_solution_json,
)
from harness.timing import ITERATIONS, WARMUP, TimingStats, time_runnable  # noqa: E402

# our private handle on the checker: replacing the module attribute does not switch the check off
_check_integrity = check_eval_integrity
LOG_TAIL_LINES = 60


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class _Emitter:
    """Writes each trace as one strict-JSON line to the real stdout (and to --out when given)."""

    def __init__(self, stream: IO[str], out_path: Path | None):
        self.stream = stream
        self.out = out_path.open("a") if out_path else None

    def __call__(self, trace: Trace) -> None:
        try:
            line = trace.to_json_line()
        except ValueError as exc:  # a non-finite number (officially the driver dies here)
            ev = trace.evaluation
            failed = Evaluation(
                status=EvaluationStatus.RUNTIME_ERROR,
                environment=ev.environment,
                timestamp=ev.timestamp,
                log=f"trace is not strict JSON ({exc}); the evaluation said {ev.status.value}\n{ev.log}",
            )
            line = trace.model_copy(update={"evaluation": failed}).to_json_line()
        self.stream.write(line + "\n")
        self.stream.flush()
        if self.out is not None:
            self.out.write(line + "\n")
            self.out.flush()


def _redirect_stdout() -> IO[str]:
    """Keep the real stdout for traces and point fd 1 (prints, Triton/compiler chatter) at stderr."""
    real = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    return real


def _read_solution(path: Path) -> tuple[Solution, dict[str, Any]]:
    """The official Solution (sources inlined) and our extras (precision) from a folder or a solution.json."""
    from harness.solution import read_solution_dir, to_official

    if path.is_dir():
        spec = read_solution_dir(path)
        return to_official(path, spec), {"precision": spec.precision}
    return load_solution_json(path), {}


def _stage(solution: Solution) -> Path:
    staging = Path(tempfile.mkdtemp(prefix="solbench_"))
    for src in solution.sources:
        target = staging / src.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.content)
    return staging


def _import_python(staging: Path, entry_file: str, entry_function: str) -> Callable:
    block_cpp_extension()
    sys.path.insert(0, str(staging))
    module_name = entry_file.removesuffix(".py").replace("/", ".").replace(os.sep, ".")
    module = importlib.import_module(module_name)
    fn = getattr(module, entry_function, None)
    if not callable(fn):
        raise AttributeError(f"entry_point: {entry_file} defines no function {entry_function!r}")
    return fn


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _per_output(stats: dict[str, ErrorStats], atol: float) -> dict[str, Any]:
    """The worst round's figures per output, and its elements over the tolerance (non-finite -> null)."""
    return {
        name: {
            "matched_ratio": s.matched_ratio,
            "max_absolute_error": _finite(s.max_absolute_error),
            "max_relative_error": _finite(s.max_relative_error),
            "max_abs_error_over_atol": _finite(s.max_absolute_error / atol) if atol > 0 else None,
            "has_nan": s.has_nan,
            "has_inf": s.has_inf,
            "worst": [
                {k: _finite(v) if isinstance(v, float) else v for k, v in w.items()}
                for w in getattr(s, "worst", [])
            ],
        }
        for name, s in stats.items()
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m harness.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True, help="official task name or unique prefix")
    p.add_argument(
        "--definitions", type=Path, default=None, help="definitions folder (default: the project's)"
    )
    p.add_argument("--solution", type=Path, required=True, help="solution folder or official solution.json")
    p.add_argument("--workload", action="append", default=[], help="workload uuid or prefix (default: all)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available")
    p.add_argument("--timer", choices=["cupti", "events"], default="cupti")
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--iterations", type=int, default=ITERATIONS)
    p.add_argument("--rounds", type=int, default=CORRECTNESS_ROUNDS, help="correctness rounds (official: 10)")
    p.add_argument("--no-reference", action="store_true", help="do not time the reference")
    p.add_argument("--smoke", action="store_true", help="shrink var axes to min(v, 16) (CPU checks)")
    p.add_argument("--out", type=Path, default=None, help="also append the traces to this JSONL file")
    p.add_argument("--keep-staging", action="store_true")
    p.add_argument(
        "--inputs", choices=["generated", "stored"], default="generated", help="stored: workloads/ tensors"
    )
    args = p.parse_args(argv)
    if args.inputs == "stored" and args.smoke:
        p.error("--inputs stored: the stored tensors are full size; drop --smoke")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    emit = _Emitter(_redirect_stdout(), args.out)
    from harness.tasks import DEFINITIONS_DIR, load_task

    task = load_task(args.task, args.definitions or DEFINITIONS_DIR)
    definition = task.definition
    workloads: list[Workload] = [task.workload(p) for p in args.workload] or list(task.workloads)
    device = (
        "cuda:0" if (args.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda" else "cpu"
    )
    env = environment()
    solution, extras = _read_solution(args.solution.resolve())
    official = solution.spec
    reference = task.reference

    def fail_all(status: EvaluationStatus, log: str) -> None:
        for w in workloads:
            emit(make_trace(definition, w, solution.name, status, log=log, env=env))

    namespaces = {
        "driver": sys.modules[__name__],
        "runner": harness.runner,
        "timing": harness.timing,
        "inputs": harness.inputs,
        "correctness": harness.correctness,
        "guards": harness.guards,
    }
    snapshot = snapshot_driver(namespaces, DRIVER_FUNCTIONS)
    staging = _stage(solution)
    print(f"solbench: staging {solution.name} for {task.name} in {staging}", file=sys.stderr)
    try:
        if official.is_cpp:
            from harness.build import build_cpp_solution

            try:
                fn = build_cpp_solution(staging, official)
            except Exception as exc:  # noqa: BLE001 - the compiler output is the log
                fail_all(EvaluationStatus.COMPILE_ERROR, _tail(f"Compilation failed: {exc}"))
                return 0
        else:
            try:
                fn = _import_python(staging, official.entry_file, official.entry_function)
            except SyntaxError as exc:
                fail_all(EvaluationStatus.COMPILE_ERROR, f"Solution import failed: {exc!r}")
                return 0
            except Exception as exc:  # noqa: BLE001
                fail_all(
                    EvaluationStatus.RUNTIME_ERROR,
                    _tail(f"Solution import failed: {exc}\n{traceback.format_exc()}"),
                )
                return 0
        try:
            _check_integrity(snapshot, namespaces)
        except RewardHackDetected as exc:
            fail_all(EvaluationStatus.REWARD_HACK, str(exc))
            return 0

        common = {
            "device": device,
            "rounds": args.rounds,
            "timed": device != "cpu",
            **(
                {"timer": args.timer, "warmup": args.warmup, "iterations": args.iterations}
                if device != "cpu"
                else {}
            ),
            **extras,
        }
        run = _Run(args, task, solution, fn, reference, device, snapshot, namespaces, common, env)
        set_seed()
        for workload in workloads:
            emit(run.workload(workload))
        return 0
    finally:
        if not args.keep_staging:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass
class _Run:
    """Everything one solution's workload loop needs."""

    args: argparse.Namespace
    task: Any
    solution: Solution
    fn: Callable
    reference: Callable
    device: str
    snapshot: dict
    namespaces: dict
    common_extra: dict[str, Any]
    env: Any

    @property
    def timed(self) -> bool:
        return self.device != "cpu"

    @functools.cached_property
    def input_source(self) -> Callable | None:
        """None: generated inputs (official); with --inputs stored, the workloads/ tensors of the task."""
        if self.args.inputs != "stored":
            return None
        from harness.workloads import stored_input_source

        return stored_input_source(self.task)

    def workload(self, workload: Workload) -> Trace:
        """The official per-workload sequence: correctness rounds, patch check, timing, thread check."""
        args, definition, device = self.args, self.task.definition, self.device
        dps = self.solution.spec.destination_passing_style
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        run_workload = smoke_workload(definition, workload) if args.smoke else workload
        extra: dict[str, Any] = dict(self.common_extra)
        if args.smoke:
            extra["smoke_axes"] = run_workload.axes

        def trace(status: EvaluationStatus, log: str = "", **kw: Any) -> Trace:
            return make_trace(
                definition, workload, self.solution.name, status, log=log, extra=extra, env=self.env, **kw
            )

        threads_before: list[int] = []

        def after_first_call() -> None:
            _check_integrity(self.snapshot, self.namespaces)
            threads_before.append(thread_count())

        try:
            axes = resolve_axes(definition, run_workload)
            outcome = check_correctness(
                definition,
                self.reference,
                self.fn,
                run_workload,
                dps=dps,
                device=device,
                rounds=args.rounds,
                after_first_call=after_first_call,
                input_source=self.input_source,
            )
        except RewardHackDetected as exc:
            return trace(EvaluationStatus.REWARD_HACK, str(exc))
        except Exception as exc:  # noqa: BLE001 - input generation and the like
            return trace(
                EvaluationStatus.RUNTIME_ERROR, f"gen_inputs failed: {exc}\n{traceback.format_exc()}"
            )
        if outcome.per_output:
            extra["outputs"] = _per_output(outcome.per_output, workload.tolerance.max_atol)
        if outcome.status != EvaluationStatus.PASSED:
            return trace(outcome.status, outcome.log, stats=outcome.stats)

        try:
            check_monkey_patch()
        except RewardHackDetected as exc:
            return trace(EvaluationStatus.REWARD_HACK, str(exc))

        stats: TimingStats | None = None
        if self.timed:
            try:
                outputs = allocate_outputs(definition, axes, device) if dps else []
                stats = time_runnable(self.fn, outcome.last_inputs, outputs, **self._timing_options())
            except Exception as exc:  # noqa: BLE001
                return trace(EvaluationStatus.RUNTIME_ERROR, f"Timing failed: {exc}")
            extra["timing"] = stats.to_dict()

        try:  # the baseline was taken right after the round-0 call (JIT threads started by it are fine)
            check_thread_injection(threads_before[0], thread_count())
        except RewardHackDetected as exc:
            return trace(EvaluationStatus.REWARD_HACK, str(exc))

        reference_ms = 0.0
        if self.timed and not args.no_reference:
            try:  # any failure gives 0.0, as officially
                ref_stats = time_runnable(self.reference, outcome.last_inputs, [], **self._timing_options())
                reference_ms = ref_stats.median_ms
                extra["reference_timing"] = {k: v for k, v in ref_stats.to_dict().items() if k != "kernels"}
            except Exception as exc:  # noqa: BLE001
                extra["reference_timing_error"] = str(exc)
        latency_ms = stats.median_ms if stats is not None else 0.0
        performance = Performance(
            latency_ms=latency_ms,
            reference_latency_ms=reference_ms,
            speedup_factor=reference_ms / latency_ms if latency_ms > 0 else 0.0,
        )
        return trace(EvaluationStatus.PASSED, stats=outcome.stats, performance=performance)

    def _timing_options(self) -> dict[str, Any]:
        a = self.args
        return {"device": self.device, "warmup": a.warmup, "iterations": a.iterations, "timer": a.timer}


if __name__ == "__main__":
    sys.exit(main())
