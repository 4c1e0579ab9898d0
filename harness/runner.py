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
    names = list(definition.outputs)
    if isinstance(result, torch.Tensor):
        if len(names) != 1:
            raise OutputError(f"got a single tensor for {len(names)} outputs")
        values = [result]
    elif isinstance(result, bool | int | float):
        if len(names) != 1:
            raise OutputError(f"got a scalar for {len(names)} outputs")
        from harness.inputs import torch_dtype

        values = [torch.tensor(result, dtype=torch_dtype(definition.outputs[names[0]].dtype))]
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
    return [
        v.to(device) if isinstance(v, torch.Tensor) and v.device != torch.device(device) else v
        for v in values
    ]


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
) -> CorrectnessOutcome:
    """Run the official correctness rounds for one workload (the caller seeds once before the workload loop)."""
    axes = resolve_axes(definition, workload)
    kept: ErrorStats | None = None
    per_output: dict[str, ErrorStats] = {}
    inputs: list[Any] = []
    names = list(definition.outputs)
    for rnd in range(rounds):
        inputs = gen_inputs(definition, workload, device)
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
) -> list[Trace]:
    """Correctness only (no timing): one trace per workload, performance zeros marked `timed: false`."""
    definition = task.definition
    env = environment()
    set_seed()
    traces = []
    for workload in workloads:
        run_workload = smoke_workload(definition, workload) if smoke else workload
        try:
            outcome = check_correctness(
                definition, task.reference, fn, run_workload, dps=dps, device=device, rounds=rounds
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
