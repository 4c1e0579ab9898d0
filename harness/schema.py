"""File formats: the official Definition / Workload / Solution / Trace models and our strict YAML files.

The official models follow NVIDIA SOL-ExecBench (pydantic v2, unknown keys ignored, same defaults and
validators). Our own files (definitions/*.yaml, solutions/*/solution.yaml) are read through strict models
that reject unknown keys, then converted to the official models.
"""

from __future__ import annotations

import ast
import enum
import json
import keyword
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import SchemaError

NonEmptyStr = Annotated[str, Field(min_length=1)]
NonNegInt = Annotated[int, Field(ge=0)]

DType = Literal[
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "float4_e2m1fn_x2",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
]
#: Official dtype strings (no unsigned types). float64 is accepted in files but cannot be drawn at random.
DTYPES: tuple[str, ...] = get_args(DType)


class OfficialModel(BaseModel):
    """Base of the official models: unknown keys are ignored, as the official evaluator does."""

    model_config = ConfigDict(extra="ignore")


class StrictModel(BaseModel):
    """Base of our own file models: unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------- definition


class ConstAxis(OfficialModel):
    type: Literal["const"]
    value: NonNegInt
    """The axis' fixed size."""
    description: str | None = None


class VarAxis(OfficialModel):
    type: Literal["var"]
    description: str | None = None


class ExprAxis(OfficialModel):
    type: Literal["expr"]
    expression: NonEmptyStr
    """An arithmetic expression of other axes, evaluated by `harness.expressions.safe_eval`."""
    description: str | None = None


Axis = Annotated[ConstAxis | VarAxis | ExprAxis, Field(discriminator="type")]


class TensorSpec(OfficialModel):
    shape: list[NonEmptyStr] | None
    """Axis names or digit literals; None means a Python scalar, [] a 0-D tensor."""
    dtype: DType
    description: str | None = None


def _run_parameters(source: str) -> list[str] | None:
    """Positional parameter names of the top-level plain `def run`, or None if there is none."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None


class Definition(OfficialModel):
    """The official `definition.json`."""

    name: NonEmptyStr
    op_type: NonEmptyStr | None = None
    axes: dict[NonEmptyStr, Axis]
    inputs: dict[NonEmptyStr, TensorSpec]
    """Insertion order is the calling order."""
    outputs: dict[NonEmptyStr, TensorSpec]
    reference: str
    """Python source defining `run(*inputs)`; it returns the outputs."""
    custom_inputs_entrypoint: NonEmptyStr | None = None
    description: str | None = None
    hf_id: NonEmptyStr | None = None

    @model_validator(mode="after")
    def _check(self) -> Definition:
        try:
            params = _run_parameters(self.reference)
        except SyntaxError as exc:
            raise ValueError(f"reference does not parse: {exc.msg} (line {exc.lineno})") from exc
        if params is None:
            raise ValueError("reference must define a top-level `def run`")
        if params != list(self.inputs):
            raise ValueError(f"run() parameters {params} must equal the inputs {list(self.inputs)}")
        if self.custom_inputs_entrypoint is not None:
            entry = self.custom_inputs_entrypoint
            if not entry.isidentifier() or keyword.iskeyword(entry):
                raise ValueError(f"custom_inputs_entrypoint {entry!r} is not a Python identifier")
            tops = {n.name for n in ast.parse(self.reference).body if isinstance(n, ast.FunctionDef)}
            if entry not in tops:
                raise ValueError(f"custom_inputs_entrypoint {entry!r} is not a top-level def in reference")
        clash = set(self.inputs) & set(self.axes)
        if clash:
            raise ValueError(f"input names equal axis names: {sorted(clash)}")
        both = set(self.inputs) & set(self.outputs)
        if both:
            raise ValueError(f"names are both inputs and outputs: {sorted(both)}")
        for group in (self.inputs, self.outputs):
            for tname, spec in group.items():
                for dim in spec.shape or []:
                    if dim not in self.axes and not dim.isdigit():
                        raise ValueError(f"{tname}: shape entry {dim!r} is not a defined axis")
        return self

    def resolve_axes(self, workload_axes: dict[str, int]) -> dict[str, int]:
        """const axes, then the workload's values (which may override a const), then expr axes in order."""
        from harness.expressions import safe_eval

        values: dict[str, int] = {n: a.value for n, a in self.axes.items() if isinstance(a, ConstAxis)}
        values.update(workload_axes)
        for name, axis in self.axes.items():
            if isinstance(axis, ExprAxis):
                values[name] = safe_eval(axis.expression, values, integral=True)
        return values

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(int(d) if d.isdigit() else axes[d] for d in spec.shape)


# --------------------------------------------------------------------------------------------- workload


class ToleranceSpec(OfficialModel):
    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = 0.99
    max_error_cap: float | None = None
    allow_negative_inf: bool = False


class RandomInput(OfficialModel):
    type: Literal["random"]


class ScalarInput(OfficialModel):
    type: Literal["scalar"]
    value: bool | int | float
    """JSON `true` stays bool, `1` int, `1.0` float."""

    @field_validator("value", mode="plain")
    @classmethod
    def _keep_python_type(cls, v: Any) -> bool | int | float:
        if isinstance(v, bool | int | float):
            return v
        raise ValueError(f"expected a bool, int or float, got {type(v).__name__}")


class SafetensorsInput(OfficialModel):
    type: Literal["safetensors"]
    path: NonEmptyStr
    tensor_key: NonEmptyStr


class CustomInput(OfficialModel):
    type: Literal["custom"]


InputDescriptor = Annotated[
    RandomInput | ScalarInput | SafetensorsInput | CustomInput, Field(discriminator="type")
]


class Workload(OfficialModel):
    """One line of the official `workload.jsonl`."""

    uuid: NonEmptyStr
    axes: dict[str, NonNegInt] = Field(default_factory=dict)
    inputs: dict[str, InputDescriptor] = Field(default_factory=dict)
    """Inputs not named here are random."""
    tolerance: ToleranceSpec = Field(default_factory=ToleranceSpec)

    @model_validator(mode="after")
    def _no_custom_mix(self) -> Workload:
        kinds = {d.type for d in self.inputs.values()}
        if "custom" in kinds and len(kinds) > 1:
            raise ValueError("a workload may not mix custom inputs with other input types")
        return self

    def scalars(self) -> dict[str, bool | int | float]:
        return {n: d.value for n, d in self.inputs.items() if isinstance(d, ScalarInput)}


# --------------------------------------------------------------------------------------------- solution

PYTHON_LANGUAGES = ("pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend")
CPP_LANGUAGES = ("cuda_cpp", "cutlass", "cudnn", "cublas")
CPP_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh")
Language = Literal[
    "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend", "cuda_cpp", "cutlass", "cudnn", "cublas"
]


class CompileOptions(OfficialModel):
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=lambda: ["-O3", "--use_fast_math"])
    ld_flags: list[str] = Field(default_factory=lambda: ["-lcuda"])


class SolutionSpec(OfficialModel):
    languages: list[Language]
    target_hardware: Annotated[list[Literal["B200", "LOCAL"]], Field(min_length=1)]
    entry_point: NonEmptyStr
    """`<file>::<function>`."""
    dependencies: list[NonEmptyStr] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Literal["torch"] | None = None
    compile_options: CompileOptions | None = None

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        if v.count("::") != 1:
            raise ValueError(f"entry_point must contain '::' exactly once (file::function), got {v!r}")
        return v

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::")[1]

    @property
    def is_cpp(self) -> bool:
        return any(lang in CPP_LANGUAGES for lang in self.languages)

    @model_validator(mode="after")
    def _languages(self) -> SolutionSpec:
        cpp = self.is_cpp
        py = any(lang in PYTHON_LANGUAGES for lang in self.languages)
        if cpp and py:
            raise ValueError("C++ and Python cannot be mixed")
        if cpp and not self.entry_file.endswith(CPP_SUFFIXES):
            raise ValueError(f"a C++ entry file must end in one of {CPP_SUFFIXES}, got {self.entry_file!r}")
        if py and not self.entry_file.endswith(".py"):
            raise ValueError(f"a Python entry file must end in .py, got {self.entry_file!r}")
        return self


class SourceFile(OfficialModel):
    path: NonEmptyStr
    content: NonEmptyStr

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        p = PurePosixPath(v)
        if p.is_absolute() or ".." in p.parts:
            raise ValueError(f"source path must be relative without '..', got {v!r}")
        return v


class Solution(OfficialModel):
    """The official `solution.json`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: NonEmptyStr
    definition: NonEmptyStr
    author: NonEmptyStr
    description: str | None = None
    spec: SolutionSpec
    sources: Annotated[list[SourceFile], Field(min_length=1)]

    @model_validator(mode="after")
    def _sources(self) -> Solution:
        paths = [s.path for s in self.sources]
        if len(paths) != len(set(paths)):
            raise ValueError("duplicate source paths")
        if self.spec.entry_file not in paths:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources {paths}")
        return self


# --------------------------------------------------------------------------------------------- trace


class EvaluationStatus(enum.StrEnum):
    PASSED = "PASSED"
    INVALID_REFERENCE = "INVALID_REFERENCE"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"


class Correctness(OfficialModel):
    max_relative_error: Annotated[float, Field(ge=0)] = 0.0
    max_absolute_error: Annotated[float, Field(ge=0)] = 0.0
    has_nan: bool = False
    has_inf: bool = False
    extra: dict[str, Any] | None = None


class Performance(OfficialModel):
    latency_ms: Annotated[float, Field(ge=0)]
    reference_latency_ms: Annotated[float, Field(ge=0)] = 0.0
    speedup_factor: Annotated[float, Field(ge=0)] = 0.0


class Environment(OfficialModel):
    hardware: str
    libs: dict[str, str] = Field(default_factory=dict)


class Evaluation(OfficialModel):
    status: EvaluationStatus
    environment: Environment
    timestamp: str
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None
    extra: dict[str, Any] | None = None
    """Ours (not official): timing statistics, SOL figures, error report."""

    @model_validator(mode="after")
    def _status_rules(self) -> Evaluation:
        needs_corr = self.status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        if needs_corr and self.correctness is None:
            raise ValueError(f"status {self.status.value} requires correctness")
        if not needs_corr and self.correctness is not None:
            raise ValueError(f"status {self.status.value} must not carry correctness")
        if self.status == EvaluationStatus.PASSED and self.performance is None:
            raise ValueError("status PASSED requires performance")
        if self.status != EvaluationStatus.PASSED and self.performance is not None:
            raise ValueError(f"status {self.status.value} must not carry performance")
        return self


class Trace(OfficialModel):
    definition: NonEmptyStr
    workload: Workload
    solution: NonEmptyStr
    evaluation: Evaluation

    def to_json_line(self) -> str:
        """One strict-JSON line in the official key order (non-finite numbers are an error)."""
        data = self.model_dump(mode="json")
        if data["evaluation"].get("extra") is None:
            data["evaluation"].pop("extra", None)
        return json.dumps(data, allow_nan=False)


# --------------------------------------------------------------------------------------------- our files


class StrictConstAxis(ConstAxis, StrictModel):
    model_config = ConfigDict(extra="forbid")


class StrictVarAxis(VarAxis, StrictModel):
    model_config = ConfigDict(extra="forbid")


class StrictExprAxis(ExprAxis, StrictModel):
    model_config = ConfigDict(extra="forbid")


StrictAxis = Annotated[StrictConstAxis | StrictVarAxis | StrictExprAxis, Field(discriminator="type")]


class StrictTensorSpec(TensorSpec):
    model_config = ConfigDict(extra="forbid")


class StrictScalarInput(ScalarInput):
    model_config = ConfigDict(extra="forbid")


class StrictSafetensorsInput(SafetensorsInput):
    model_config = ConfigDict(extra="forbid")


class StrictRandomInput(RandomInput):
    model_config = ConfigDict(extra="forbid")


class StrictCustomInput(CustomInput):
    model_config = ConfigDict(extra="forbid")


StrictInputDescriptor = Annotated[
    StrictRandomInput | StrictScalarInput | StrictSafetensorsInput | StrictCustomInput,
    Field(discriminator="type"),
]


class RooflineSpec(StrictModel):
    """Work and traffic of one call, as expressions of the resolved axes (see harness/roofline.py)."""

    flops: NonEmptyStr
    """True floating-point operations of the task's matmuls (2 per multiply-add)."""
    bytes_fp32: NonEmptyStr
    """Fewest bytes an fp32-in / fp32-out kernel must move (each input read once, each output written once)."""
    solar_macs: NonEmptyStr
    """Multiply-adds as SOLAR, the leaderboard's speed-of-light model, counts them."""
    solar_bytes: NonEmptyStr
    """Bytes the leaderboard's speed of light implies (2-byte elements; fitted terms for 074/075)."""


class TaskLeaderboard(StrictModel):
    """The task page's figures on B200 (geomeans over the 16 workloads)."""

    sol_bound_ms: float
    scoring_baseline_ms: float
    reference_ms: float
    reference_score: float


class WorkloadLeaderboard(StrictModel):
    sol_ms: float
    """Published speed of light (B200)."""
    baseline_latency_ms: float
    """The leaderboard API's per-workload baseline latency."""
    page_baseline_ms: float
    """The task page's Baseline column (the scoring baseline, B200)."""


class ToleranceEntry(StrictModel):
    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = 0.99
    """What the official evaluator applies."""
    dataset_required_match_ratio: float | None = None
    """The dataset's `required_match_ratio`, a key the evaluator does not know (kept for the record)."""
    max_error_cap: float | None = None
    allow_negative_inf: bool = False

    def to_official(self) -> ToleranceSpec:
        return ToleranceSpec(**self.model_dump(exclude={"dataset_required_match_ratio"}))


class WorkloadEntry(StrictModel):
    uuid: NonEmptyStr
    axes: dict[str, NonNegInt] = Field(default_factory=dict)
    inputs: dict[str, StrictInputDescriptor] = Field(default_factory=dict)
    """Only non-random descriptors; inputs not listed are random."""
    tolerance: ToleranceEntry = Field(default_factory=ToleranceEntry)
    leaderboard: WorkloadLeaderboard | None = None

    @property
    def has_custom_inputs(self) -> bool:
        """Whether a recorded descriptor is custom (the official model then forbids every other type)."""
        return any(d.type == "custom" for d in self.inputs.values())

    def official_inputs(self, input_names: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """The workload.jsonl `inputs` object: the recorded descriptors, and every other name of `input_names`
        (the definition's inputs, in order) as {"type": "random"}, as the dataset's lines and the official
        traces list them. A workload with custom inputs keeps only its recorded descriptors: the official model
        forbids mixing custom with other types."""
        recorded = {n: d.model_dump() for n, d in self.inputs.items()}
        if self.has_custom_inputs:
            return recorded
        return {n: recorded.get(n, {"type": "random"}) for n in (*input_names, *recorded)}

    def to_official(self, input_names: Iterable[str] = ()) -> Workload:
        return Workload(
            uuid=self.uuid,
            axes=dict(self.axes),
            inputs=self.official_inputs(input_names),
            tolerance=self.tolerance.to_official(),
        )


class DefinitionFile(StrictModel):
    """definitions/<name>.yaml: the official definition plus its workloads, roofline and leaderboard figures."""

    name: NonEmptyStr
    description: str | None = None
    hf_id: NonEmptyStr | None = None
    op_type: NonEmptyStr | None = None
    custom_inputs_entrypoint: NonEmptyStr | None = None
    reference: NonEmptyStr
    """Path of the reference module, relative to the project root."""
    axes: dict[NonEmptyStr, StrictAxis]
    inputs: dict[NonEmptyStr, StrictTensorSpec]
    outputs: dict[NonEmptyStr, StrictTensorSpec]
    roofline: RooflineSpec | None = None
    leaderboard: TaskLeaderboard | None = None
    workloads: list[WorkloadEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _workloads(self) -> DefinitionFile:
        uuids = [w.uuid for w in self.workloads]
        if len(uuids) != len(set(uuids)):
            raise ValueError("duplicate workload uuids")
        for w in self.workloads:
            unknown = set(w.inputs) - set(self.inputs)
            if unknown:
                raise ValueError(f"workload {w.uuid}: inputs {sorted(unknown)} are not definition inputs")
        return self

    def to_definition(self, reference_source: str, path: Path | str) -> Definition:
        """The official Definition, with the reference module's source inlined; errors name `path`."""
        data = self.model_dump(exclude={"roofline", "leaderboard", "workloads"})
        data["reference"] = reference_source
        return validate_model(Definition, data, path)


class SolutionFile(StrictModel):
    """solutions/<task>/<name>/solution.yaml."""

    name: NonEmptyStr
    definition: NonEmptyStr
    author: NonEmptyStr
    description: str | None = None
    languages: list[Language]
    target_hardware: Annotated[list[Literal["B200", "LOCAL"]], Field(min_length=1)]
    entry_point: NonEmptyStr
    destination_passing_style: bool = True
    dependencies: list[NonEmptyStr] = Field(default_factory=list)
    binding: Literal["torch"] | None = None
    compile_options: CompileOptions | None = None
    precision: Literal["fp32", "tf32", "fp16-operands", "reference"] = "fp32"
    """Ours: the arithmetic the solution uses, reported with its numbers."""
    sources: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Files inlined in the packed solution.json, relative to the folder."""

    def spec(self) -> SolutionSpec:
        return SolutionSpec(
            languages=self.languages,
            target_hardware=self.target_hardware,
            entry_point=self.entry_point,
            dependencies=self.dependencies,
            destination_passing_style=self.destination_passing_style,
            binding=self.binding,
            compile_options=self.compile_options,
        )


# --------------------------------------------------------------------------------------------- loading


def format_validation_error(path: Path | str, exc: ValidationError) -> str:
    """`file: field: expected X, got Y` on one line (the first error; the count of others)."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key (not allowed here)"
    elif first["type"] == "missing":
        msg = "required field is missing"
    got = first.get("input")
    got_text = "" if first["type"] in ("missing", "extra_forbidden") else f", got {_short(got)}"
    more = f" (+{len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{path}: {loc}: {msg}{got_text}{more}"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_model(model: type[BaseModel], data: Any, path: Path | str) -> Any:
    """Validate `data` with `model`; a failure becomes a one-line SchemaError naming the file and field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SchemaError(format_validation_error(path, exc)) from None


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SchemaError(f"{path}: {where}invalid YAML: {problem}") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None


def load_definition_file(path: Path) -> DefinitionFile:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: (top level): expected a mapping, got {type(data).__name__}")
    return validate_model(DefinitionFile, data, path)


def load_solution_file(path: Path) -> SolutionFile:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: (top level): expected a mapping, got {type(data).__name__}")
    return validate_model(SolutionFile, data, path)


def load_definition_json(path: Path) -> Definition:
    return validate_model(Definition, read_json(path), path)


def load_solution_json(path: Path) -> Solution:
    """Official `solution.json`; an empty source `content` is filled from the file beside it, as the CLI does."""
    data = read_json(path)
    if isinstance(data, dict):
        for src in data.get("sources") or []:
            if isinstance(src, dict) and not src.get("content") and src.get("path"):
                candidate = path.parent / src["path"]
                if candidate.is_file():
                    src["content"] = candidate.read_text()
    return validate_model(Solution, data, path)


def _load_jsonl(path: Path, model: type[BaseModel], keep: Callable[[str], bool]) -> list[Any]:
    """One `model` per stripped line for which `keep` holds; errors name the file and the line."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    items = []
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not keep(line):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{path}: line {lineno}: invalid JSON: {exc.msg}") from None
        items.append(validate_model(model, data, f"{path}:{lineno}"))
    return items


def load_workloads_jsonl(path: Path) -> list[Workload]:
    return _load_jsonl(path, Workload, bool)  # blank lines skipped


def load_traces_jsonl(path: Path) -> list[Trace]:
    return _load_jsonl(path, Trace, lambda line: line.startswith("{"))  # non-JSON lines (logs) skipped
