"""The evaluation loop of one solution over a task's workloads: correctness rounds, then (on CUDA) timing.

Mirrors the official driver: seed 200 once before the workload loop, workloads in file order, 10 rounds of
fresh inputs, reference first then the solution on the same inputs, round-0 structural checks (lazy outputs,
shape, dtype against the reference's outputs), the first failing output ends the workload.
"""

from __future__ import annotations

import datetime
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.correctness import ErrorStats, aggregate, compute_error_stats
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes, set_seed
from harness.schema import (
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    Trace,
    Workload,
)

CORRECTNESS_ROUNDS = 10
#: --smoke: every var axis v becomes min(v, SMOKE_CAP) so a CPU check takes seconds (see smoke_workload).
SMOKE_CAP = 16


class OutputError(Exception):
    """A return value that cannot be normalised to the definition's outputs."""


def normalize_outputs(result: Any, definition: Definition, device) -> list[torch.Tensor]:
    """The official normalisation: a tensor (one output), a scalar (one output), a tuple/list, or a dict."""
    from harness.inputs import torch_dtype

    names = list(definition.outputs)
    if isinstance(result, torch.Tensor):
        if len(names) != 1:
            raise OutputError(f"got a single tensor for {len(names)} outputs")
        values = [result]
    elif isinstance(result, bool | int | float):
        if len(names) != 1:
            raise OutputError(f"got a scalar for {len(names)} outputs")
        values = [result]
    elif isinstance(result, tuple | list):
        if len(result) != len(names):
            raise OutputError(f"got {len(result)} values for {len(names)} outputs")
        values = list(result)
    elif isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise OutputError(f"missing outputs {missing}")
        values = [result[n] for n in names]
    else:
        raise OutputError(f"unsupported return type {type(result).__name__}")
    out = []
    for name, v in zip(names, values, strict=True):
        if isinstance(v, torch.Tensor):  # moved, never cast
            out.append(v.to(device) if v.device != torch.device(device) else v)
            continue
        # officially every non-tensor value (also inside a tuple or dict) becomes a tensor of the output dtype
        try:
            out.append(torch.tensor(v, dtype=torch_dtype(definition.outputs[name].dtype), device=device))
        except (TypeError, RuntimeError, ValueError) as exc:
            raise OutputError(f"output {name!r}: cannot make a tensor of {type(v).__name__}: {exc}") from None
    return out


def environment() -> Environment:
    libs = {"torch": torch.__version__}
    try:
        import triton

        libs["triton"] = triton.__version__
    except ImportError:
        pass
    libs["cuda"] = str(torch.version.cuda)
    hardware = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return Environment(hardware=hardware, libs=libs)


def make_trace(
    definition: Definition,
    workload: Workload,
    solution_name: str,
    status: EvaluationStatus,
    *,
    log: str = "",
    stats: ErrorStats | None = None,
    performance: Performance | None = None,
    extra: dict | None = None,
    env: Environment | None = None,
) -> Trace:
    correctness: Correctness | None = None
    if status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL) and stats is not None:
        correctness = stats.to_correctness()
    if status != EvaluationStatus.PASSED:
        performance = None
    evaluation = Evaluation(
        status=status,
        environment=env or environment(),
        timestamp=datetime.datetime.now().isoformat(),
        log=log,
        correctness=correctness,
        performance=performance,
        extra=extra,
    )
    return Trace(definition=definition.name, workload=workload, solution=solution_name, evaluation=evaluation)


def smoke_workload(definition: Definition, workload: Workload) -> Workload:
    """The --smoke rule: every var axis value v becomes min(v, SMOKE_CAP); const, scalars and tolerance stay."""
    var_axes = {n for n, a in definition.axes.items() if a.type == "var"}
    axes = {n: (min(v, SMOKE_CAP) if n in var_axes else v) for n, v in workload.axes.items()}
    return workload.model_copy(update={"axes": axes})


@dataclass
class CorrectnessOutcome:
    status: EvaluationStatus
    stats: ErrorStats | None = None
    log: str = ""
    last_inputs: list[Any] = field(default_factory=list)
    per_output: dict[str, ErrorStats] = field(default_factory=dict)
    """The worst round's statistics per output name (for reports)."""


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def check_correctness(
    definition: Definition,
    reference: Callable,
    fn: Callable,
    workload: Workload,
    *,
    dps: bool = True,
    device: str = "cpu",
    rounds: int = CORRECTNESS_ROUNDS,
    after_first_call: Callable[[], None] | None = None,
    input_source: Callable[[Definition, Workload, Any], list[Any]] | None = None,
) -> CorrectnessOutcome:
    """Run the official correctness rounds for one workload (the caller seeds once before the workload loop).

    `input_source(definition, workload, device)` replaces gen_inputs (e.g. harness.workloads.stored_input_source).
    """
    axes = resolve_axes(definition, workload)
    kept: ErrorStats | None = None
    per_output: dict[str, ErrorStats] = {}
    inputs: list[Any] = []
    names = list(definition.outputs)
    for rnd in range(rounds):
        inputs = (input_source or gen_inputs)(definition, workload, device)
        try:
            ref_out = normalize_outputs(reference(*inputs), definition, device)
            _sync(device)
        except Exception as exc:  # noqa: BLE001
            return CorrectnessOutcome(
                EvaluationStatus.INVALID_REFERENCE,
                log=f"Reference run() failed: {exc}\n{traceback.format_exc()}",
            )
        try:
            if dps:
                outs = allocate_outputs(definition, axes, device)
                fn(*inputs, *outs)
            else:
                outs = normalize_outputs(fn(*inputs), definition, device)
            _sync(device)
        except Exception as exc:  # noqa: BLE001
            return CorrectnessOutcome(
                EvaluationStatus.RUNTIME_ERROR, log=f"User function failed: {exc}\n{traceback.format_exc()}"
            )
        if rnd == 0:
            if after_first_call is not None:
                after_first_call()
            for out in outs:
                if type(out) is not torch.Tensor:
                    return CorrectnessOutcome(
                        EvaluationStatus.REWARD_HACK,
                        log=f"Lazy evaluation detected: output is {type(out).__name__}, not torch.Tensor",
                    )
            for name, out, ref in zip(names, outs, ref_out, strict=False):
                if tuple(out.shape) != tuple(ref.shape):
                    return CorrectnessOutcome(
                        EvaluationStatus.INCORRECT_SHAPE,
                        log=f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}",
                    )
                if out.dtype != ref.dtype:
                    return CorrectnessOutcome(
                        EvaluationStatus.INCORRECT_DTYPE, log=f"{name}: dtype {out.dtype} != {ref.dtype}"
                    )
        for name, out, ref in zip(names, outs, ref_out, strict=False):
            stats = compute_error_stats(out, ref, workload.tolerance)
            per_output[name] = aggregate(per_output.get(name), stats)
            kept = aggregate(kept, stats)
            if not stats.passed:
                log = f"round {rnd}, output {name}: {stats.report()}"
                return CorrectnessOutcome(EvaluationStatus.INCORRECT_NUMERICAL, kept, log, inputs, per_output)
    return CorrectnessOutcome(EvaluationStatus.PASSED, kept, "", inputs, per_output)


def run_checks(
    task,
    fn: Callable,
    solution_name: str,
    workloads: list[Workload],
    *,
    dps: bool = True,
    device: str = "cpu",
    rounds: int = CORRECTNESS_ROUNDS,
    smoke: bool = False,
    on_result: Callable[[Trace], None] | None = None,
    input_source: Callable[[Definition, Workload, Any], list[Any]] | None = None,
) -> list[Trace]:
    """Correctness only (no timing): one trace per workload, performance zeros marked `timed: false`.

    `input_source` replaces gen_inputs (None: generated inputs, the official way).
    """
    definition = task.definition
    env = environment()
    set_seed()
    traces = []
    for workload in workloads:
        run_workload = smoke_workload(definition, workload) if smoke else workload
        try:
            outcome = check_correctness(
                definition,
                task.reference,
                fn,
                run_workload,
                dps=dps,
                device=device,
                rounds=rounds,
                input_source=input_source,
            )
        except Exception as exc:  # noqa: BLE001 - input generation errors etc.
            outcome = CorrectnessOutcome(EvaluationStatus.RUNTIME_ERROR, log=f"{type(exc).__name__}: {exc}")
        extra = {"timed": False, "rounds": rounds, "device": device}
        if smoke:
            extra["smoke_axes"] = run_workload.axes
        if outcome.per_output:
            extra["outputs"] = {
                n: {
                    "matched_ratio": s.matched_ratio,
                    "max_abs_error_over_atol": s.max_absolute_error / workload.tolerance.max_atol,
                }
                for n, s in outcome.per_output.items()
            }
        trace = make_trace(
            definition,
            workload,
            solution_name,
            outcome.status,
            log=outcome.log,
            stats=outcome.stats,
            performance=Performance(latency_ms=0.0) if outcome.status == EvaluationStatus.PASSED else None,
            extra=extra,
            env=env,
        )
        traces.append(trace)
        if on_result is not None:
            on_result(trace)
    return traces


# ------------------------------------------------------------------------------------- isolated evaluation
# The parent side of harness.evaluate: one subprocess per solution x task, traces read from its stdout;
# a crash, a timeout or a missing trace becomes a RUNTIME_ERROR / TIMEOUT trace carrying the log's tail.

#: Lines of the subprocess's stderr attached to a trace it did not write.
LOG_TAIL_LINES = 60
#: Seconds to keep reading traces after the subprocess exited.
EXIT_GRACE_S = 2.0


@dataclass
class RunOptions:
    """What `python -m harness.evaluate` is asked to do (official defaults)."""

    device: str | None = None  # cuda when available
    timer: str = "cupti"
    warmup: int = 10
    iterations: int = 50
    rounds: int = CORRECTNESS_ROUNDS
    benchmark_reference: bool = True
    smoke: bool = False
    timeout_s: float = 600.0
    definitions_dir: Any = None  # Path of a definitions folder other than the project's
    keep_staging: bool = False
    inputs: str = "generated"  # "stored": workloads/<task>/<uuid>.safetensors (harness.workloads)

    def argv(self) -> list[str]:
        from pathlib import Path

        args = ["--timer", self.timer, "--warmup", str(self.warmup), "--iterations", str(self.iterations)]
        args += ["--rounds", str(self.rounds)]
        if self.device:
            args += ["--device", self.device]
        if not self.benchmark_reference:
            args.append("--no-reference")
        if self.smoke:
            args.append("--smoke")
        if self.definitions_dir is not None:
            args += ["--definitions", str(Path(self.definitions_dir).resolve())]
        if self.keep_staging:
            args.append("--keep-staging")
        if self.inputs != "generated":
            args += ["--inputs", self.inputs]
        return args


def evaluate_command(task_name: str, solution, workloads: list[Workload], options: RunOptions) -> list[str]:
    import sys
    from pathlib import Path

    solution = Path(solution).resolve()  # the subprocess runs elsewhere
    cmd = [sys.executable, "-m", "harness.evaluate", "--task", task_name, "--solution", str(solution)]
    for w in workloads:
        cmd += ["--workload", w.uuid]
    return cmd + options.argv()


def _declared(solution):
    """A solution folder's solution.yaml or a solution.json file, parsed (raises SchemaError when it does not)."""
    from pathlib import Path

    from harness.schema import load_solution_json
    from harness.solution import read_solution_dir

    path = Path(solution)
    return read_solution_dir(path) if path.is_dir() else load_solution_json(path)


def solution_name_of(solution) -> str:
    """The name a solution folder or solution.json declares (raises SchemaError when it does not parse)."""
    return _declared(solution).name


def _child_env() -> dict[str, str]:
    from harness import child_env

    env = child_env()
    env.setdefault("PYTORCH_ALLOC_CONF", "expandable_segments:True")  # as the official CLI sets it
    return env


def evaluate_isolated(
    task,
    solution,
    workloads: list[Workload],
    options: RunOptions | None = None,
    *,
    on_trace: Callable[[Trace], None] | None = None,
) -> list[Trace]:
    """Evaluate one solution (folder or solution.json) on a task's workloads in a fresh subprocess.

    Returns one trace per workload, in order: those the subprocess printed, then RUNTIME_ERROR (it crashed
    or exited) or TIMEOUT (killed after options.timeout_s) for the rest, with the tail of its stderr.
    """
    import json
    import os
    import queue
    import signal
    import subprocess
    import tempfile
    import threading
    import time

    from harness.errors import HarnessError
    from harness.schema import validate_model

    options = options or RunOptions()
    name = solution_name_of(solution)
    cmd = evaluate_command(task.name, solution, workloads, options)
    wanted = {w.uuid for w in workloads}
    got: dict[str, Trace] = {}
    lines: queue.Queue[str | None] = queue.Queue()
    with tempfile.TemporaryFile(mode="w+") as errfile:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=errfile,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_child_env(),
            cwd=tempfile.gettempdir(),
            start_new_session=True,  # its own process group: a timeout kills compiler workers too
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = time.monotonic() + options.timeout_s
        timed_out = False
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            # Stop at EOF, or shortly after the process exited: a grandchild (a compile worker) that
            # inherited the pipe must not keep us waiting.
            if exited_at is not None and now - exited_at > EXIT_GRACE_S:
                break
            try:
                line = lines.get(timeout=min(0.5, deadline - now))
            except queue.Empty:
                continue
            if line is None:
                break
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                trace = validate_model(Trace, json.loads(line), "harness.evaluate stdout")
            except (json.JSONDecodeError, HarnessError):
                continue
            if trace.workload.uuid in wanted and trace.workload.uuid not in got:
                got[trace.workload.uuid] = trace
                if on_trace is not None:
                    on_trace(trace)
        try:  # a timeout, or leftovers of a finished run (compile workers): the whole process group goes
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            if proc.poll() is None:
                proc.kill()
        rc = proc.wait()
        reader.join(timeout=5)
        errfile.seek(0)
        tail = "\n".join(errfile.read().rstrip().splitlines()[-LOG_TAIL_LINES:])

    traces = []
    env = None
    for w in workloads:
        if w.uuid in got:
            traces.append(got[w.uuid])
            continue
        if timed_out:
            status = EvaluationStatus.TIMEOUT
            why = f"evaluation timed out after {options.timeout_s:g} s"
        else:
            status = EvaluationStatus.RUNTIME_ERROR
            why = f"evaluation process exited with code {rc}"
        env = env or environment()
        trace = make_trace(
            task.definition,
            w,
            name,
            status,
            log=f"{why} before reporting this workload\n--- last lines of its log ---\n{tail}",
            extra={"isolated": True, "returncode": rc},
            env=env,
        )
        traces.append(trace)
        if on_trace is not None:
            on_trace(trace)
    return traces


def shard_workloads(task, workloads: list[Workload], shard: tuple[int, int] | None) -> list[Workload]:
    """--shard K/N keeps the workloads whose index i in the task's order (0-based) has i % N == K - 1."""
    if shard is None:
        return workloads
    k, n = shard
    index = {w.uuid: i for i, w in enumerate(task.workloads)}
    return [w for w in workloads if index.get(w.uuid, -1) % n == k - 1]


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'K/N' (1 <= K <= N) -> (K, N)."""
    from harness.errors import HarnessError

    if text is None:
        return None
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise HarnessError(f"--shard: expected K/N with 1 <= K <= N, got {text!r}")
    return k, n


@dataclass
class TaskPlan:
    task: Any
    solutions: list[Any]  # solution folders or solution.json paths
    workloads: list[Workload]


def plan_run(
    task_names: tuple[str, ...] | list[str],
    solutions: tuple[str, ...] | list[str],
    workload_prefixes: tuple[str, ...] | list[str] = (),
    shard: tuple[int, int] | None = None,
) -> list[TaskPlan]:
    """Which solutions run on which workloads of which tasks.

    Tasks: those named, else those of the given solutions, else all. Solutions: the given folders (or
    solution.json files) whose definition is the task, else every folder under solutions/<task>/. A workload
    prefix applies to the tasks that have it (it must match somewhere); --shard K/N then keeps the workloads
    whose index i in the task's order has i % N == K - 1.
    """
    from pathlib import Path

    from harness.errors import HarnessError
    from harness.solution import discover
    from harness.tasks import load_task
    from harness.tasks import task_names as all_task_names

    by_task: dict[str, list[Path]] = {}
    names: dict[Path, str] = {}
    for s in solutions:
        path = Path(s)
        if not path.exists():
            raise HarnessError(f"{path}: no such solution folder or solution.json")
        declared = _declared(path)
        by_task.setdefault(declared.definition, []).append(path)
        names[path] = declared.name
    if task_names:
        tasks = [load_task(n) for n in task_names]
    elif solutions:
        tasks = [load_task(n) for n in by_task]
    else:
        tasks = [load_task(n) for n in all_task_names()]
    unplaced = set(by_task) - {t.name for t in tasks}
    if unplaced:
        raise HarnessError(f"--solution: solutions for {sorted(unplaced)}, a task not being run")
    for task_name, paths in by_task.items():  # a trace names its solution only: two of one name would merge
        seen: dict[str, Path] = {}
        for path in paths:
            name = names[path]
            if name in seen and seen[name].resolve() != path.resolve():
                raise HarnessError(
                    f"--solution: {seen[name]} and {path} both declare name '{name}' for {task_name}; their "
                    "traces could not be told apart (rename one in its solution.yaml and its folder)"
                )
            seen[name] = path
    used_prefixes: set[str] = set()
    plans = []
    for task in tasks:
        dirs = by_task.get(task.name, []) if solutions else discover(task.name)
        if not dirs:
            raise HarnessError(f"solutions/{task.name}: no solution folders")
        workloads = list(task.workloads)
        if workload_prefixes:
            hits = [p for p in workload_prefixes if any(w.uuid.startswith(p) for w in workloads)]
            used_prefixes.update(hits)
            workloads = [w for w in workloads if any(w.uuid.startswith(p) for p in hits)]
        workloads = shard_workloads(task, workloads, shard)
        if workloads:
            plans.append(TaskPlan(task, dirs, workloads))
    unused = [p for p in workload_prefixes if p not in used_prefixes]
    if unused:
        raise HarnessError(f"--workload: no workload of the tasks run has a uuid starting with {unused}")
    return plans
