"""Official problem folders: export a task as the dataset lays it out, and import one as our YAML + reference.

An official folder (`<category>/<name>/` in nvidia/SOL-ExecBench) holds `definition.json` (keys name, hf_id,
description, axes, custom_inputs_entrypoint, inputs, outputs, reference; indent 4 + newline), `reference.py`
(the same source) and `workload.jsonl` (one `json.dumps` per line, every definition input listed).
Tolerances: the dataset spells the ratio `required_match_ratio`, a key the official evaluator ignores (it
applies its default `required_matched_ratio`, 0.99). An export writes the ratio the evaluator applies under
its own key and, when our YAML records the dataset's value, the dataset's key too (inert there, and it lets
an import give back the same YAML).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError, SchemaError
from harness.schema import (
    ConstAxis,
    CustomInput,
    DefinitionFile,
    ExprAxis,
    SafetensorsInput,
    ScalarInput,
    TensorSpec,
    ToleranceEntry,
    ToleranceSpec,
    WorkloadEntry,
    read_json,
    validate_model,
)

DEFINITION_JSON = "definition.json"
WORKLOAD_JSONL = "workload.jsonl"
REFERENCE_PY = "reference.py"
BLOBS_DIR = "blobs"
#: Keys of the dataset's definition.json, in its order (op_type is ours to add when set: the download drops it).
DEFINITION_KEYS = (
    "name",
    "hf_id",
    "description",
    "axes",
    "custom_inputs_entrypoint",
    "inputs",
    "outputs",
    "reference",
)
_DATASET_RATIO_KEY = "required_match_ratio"


# ------------------------------------------------------------------------------------------------ export


def _axis_json(axis) -> dict[str, Any]:
    out: dict[str, Any] = {"type": axis.type}
    if isinstance(axis, ConstAxis):
        out["value"] = axis.value
    elif isinstance(axis, ExprAxis):
        out["expression"] = axis.expression
    if axis.description is not None:
        out["description"] = axis.description
    return out


def _spec_json(spec: TensorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": None if spec.shape is None else list(spec.shape), "dtype": spec.dtype}
    if spec.description is not None:
        out["description"] = spec.description
    return out


def definition_json(file: DefinitionFile, reference_source: str) -> dict[str, Any]:
    """The dataset's definition.json for our YAML, with `reference_source` inlined."""
    out: dict[str, Any] = {"name": file.name, "hf_id": file.hf_id, "description": file.description}
    if file.op_type is not None:
        out["op_type"] = file.op_type
    out["axes"] = {n: _axis_json(a) for n, a in file.axes.items()}
    out["custom_inputs_entrypoint"] = file.custom_inputs_entrypoint
    out["inputs"] = {n: _spec_json(s) for n, s in file.inputs.items()}
    out["outputs"] = {n: _spec_json(s) for n, s in file.outputs.items()}
    out["reference"] = reference_source
    return out


def tolerance_json(tol: ToleranceEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"max_atol": tol.max_atol, "max_rtol": tol.max_rtol}
    if tol.dataset_required_match_ratio is not None:
        out[_DATASET_RATIO_KEY] = tol.dataset_required_match_ratio
    out["required_matched_ratio"] = tol.required_matched_ratio
    if tol.max_error_cap is not None:
        out["max_error_cap"] = tol.max_error_cap
    if tol.allow_negative_inf:
        out["allow_negative_inf"] = True
    return out


def workload_json(
    file: DefinitionFile, entry: WorkloadEntry, blobs: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One workload.jsonl object: every definition input listed, random ones as {"type": "random"}.

    `blobs` replaces descriptors (input name -> safetensors or scalar descriptor). A workload with custom
    inputs lists only its recorded descriptors: the official model forbids mixing custom with other types.
    """
    inputs = entry.official_inputs(file.inputs)
    if not entry.has_custom_inputs:
        inputs.update(blobs or {})
    return {
        "uuid": entry.uuid,
        "axes": dict(entry.axes),
        "inputs": inputs,
        "tolerance": tolerance_json(entry.tolerance),
    }


def definition_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=4) + "\n"


def workloads_text(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


@dataclass
class ExportResult:
    folder: Path
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _blob_descriptors(task, entry: WorkloadEntry, folder: Path, notes: list[str]) -> dict | None:
    """Link (or copy) a workload's stored tensors into `folder/blobs/` and describe them as safetensors inputs."""
    from harness.workloads import stored_file

    definition = task.definition
    workload = definition_workload(task, entry.uuid)
    try:
        source, tensors = stored_file(task, workload)
    except HarnessError as exc:
        notes.append(f"{entry.uuid}: inputs stay random: {exc}")
        return None
    axes = definition.resolve_axes(workload.axes)
    for input_name, tensor in tensors.items():  # the file must still fit the definition
        spec = definition.inputs.get(input_name)
        want = definition.shape_of(spec, axes) if spec is not None else None
        if spec is None or (want is not None and tuple(tensor.shape) != want):
            raise HarnessError(
                f"{source}: {input_name}: expected shape {want} of the current definition, got "
                f"{list(tensor.shape)} (run `solbench workloads regenerate {task.name[:3]}`)"
            )
    name = f"{entry.uuid}.safetensors"
    target = folder / BLOBS_DIR / name
    target.parent.mkdir(exist_ok=True)
    _link_or_copy(source, target)
    # Relative to the export dir and found by the official loader through FLASHINFER_TRACE_DIR set to the
    # export dir or to the problem folder (it strips leading path components one at a time).
    rel = f"{task.name}/{BLOBS_DIR}/{name}"
    out: dict[str, dict[str, Any]] = {}
    for input_name, spec in definition.inputs.items():
        if input_name not in tensors or input_name in entry.inputs:
            continue
        if spec.shape is None:  # a random scalar: its stored value, as a scalar descriptor
            out[input_name] = {"type": "scalar", "value": tensors[input_name].item()}
        else:
            out[input_name] = {"type": "safetensors", "path": rel, "tensor_key": input_name}
    return out


def definition_workload(task, uuid: str):
    return next(w for w in task.workloads if w.uuid == uuid)


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def export_task(task, out_dir: Path, *, with_tensors: bool = False) -> ExportResult:
    """Write `<out_dir>/<task name>/` with definition.json, reference.py, workload.jsonl (+ blobs/)."""
    folder = Path(out_dir) / task.name
    result = ExportResult(folder)
    source = task.reference_source
    _ = task.definition  # the official validators, before anything is written
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for entry in task.file.workloads:
        blobs = _blob_descriptors(task, entry, folder, result.notes) if with_tensors else None
        lines.append(workload_json(task.file, entry, blobs))
    linked = {d["path"].rsplit("/", 1)[-1] for line in lines for d in line["inputs"].values() if "path" in d}
    if (folder / BLOBS_DIR).is_dir():  # blobs of an earlier export that this one no longer names
        for old in (folder / BLOBS_DIR).glob("*.safetensors"):
            if old.name not in linked:
                old.unlink()
        if not any((folder / BLOBS_DIR).iterdir()):
            (folder / BLOBS_DIR).rmdir()
    for name, text in (
        (DEFINITION_JSON, definition_text(definition_json(task.file, source))),
        (REFERENCE_PY, source),
        (WORKLOAD_JSONL, workloads_text(lines)),
    ):
        _write_atomic(folder / name, text)
        result.files.append(folder / name)
    if with_tensors:
        result.notes.append(
            f"safetensors paths are relative: run the official CLI with FLASHINFER_TRACE_DIR={Path(out_dir)}"
            f" (or {folder})"
        )
    return result


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------------------------ import


@dataclass
class ImportResult:
    yaml_path: Path
    reference_path: Path
    file: DefinitionFile
    notes: list[str] = field(default_factory=list)


def _read_workloads(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise SchemaError(f"{path}: file not found") from None
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{path}: line {lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: line {lineno}: expected an object, got {type(data).__name__}")
        out.append((lineno, data))
    return out


def definition_file_from_official(
    definition: dict[str, Any],
    workloads: list[tuple[int, dict[str, Any]]],
    reference_rel: str,
    *,
    where: Path,
    notes: list[str] | None = None,
) -> DefinitionFile:
    """Our strict DefinitionFile from the official dicts (read the official way first: unknown keys ignored)."""
    from harness.schema import Definition, Workload

    notes = notes if notes is not None else []
    official = validate_model(Definition, definition, where / DEFINITION_JSON)
    ignored = sorted(set(definition) - set(Definition.model_fields))
    if ignored:
        notes.append(
            f"{where / DEFINITION_JSON}: ignored keys {ignored} (the official evaluator ignores them)"
        )
    data = official.model_dump(exclude={"reference"})
    data["reference"] = reference_rel
    data["workloads"] = []
    for lineno, raw in workloads:
        w = validate_model(Workload, raw, f"{where / WORKLOAD_JSONL}:{lineno}")
        inputs = {}
        for name, desc in w.inputs.items():
            if name not in official.inputs:
                notes.append(
                    f"{where / WORKLOAD_JSONL}:{lineno}: input {name!r} is not a definition input (dropped)"
                )
            elif isinstance(desc, ScalarInput | SafetensorsInput | CustomInput):
                inputs[name] = desc.model_dump()
        raw_tol = raw.get("tolerance") if isinstance(raw.get("tolerance"), dict) else {}
        tol = ToleranceSpec.model_validate(raw_tol).model_dump()
        dataset_ratio = raw_tol.get(_DATASET_RATIO_KEY)
        tol["dataset_required_match_ratio"] = dataset_ratio
        data["workloads"].append({"uuid": w.uuid, "axes": dict(w.axes), "inputs": inputs, "tolerance": tol})
    for axis in data["axes"].values():
        if axis.get("description") is None:
            axis.pop("description", None)
    for group in ("inputs", "outputs"):
        for spec in data[group].values():
            if spec.get("description") is None:
                spec.pop("description", None)
    for key in ("description", "hf_id", "op_type", "custom_inputs_entrypoint"):
        if data.get(key) is None:
            data.pop(key, None)
    return validate_model(DefinitionFile, data, where)


def _flow(value: Any) -> str:
    """`value` as one YAML flow-style line (strings quoted only where YAML needs it)."""
    return yaml.safe_dump([value], default_flow_style=True, sort_keys=False, width=10**9).strip()[1:-1]


def _drop_none_descriptions(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not (k == "description" and v is None)}


def definition_yaml(file: DefinitionFile, header: str) -> str:
    """Our YAML layout: block keys, one flow line per axis, tensor and workload field."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for key in ("name", "description", "hf_id", "op_type", "custom_inputs_entrypoint", "reference"):
        value = getattr(file, key)
        if value is not None:
            lines.append(yaml.safe_dump({key: value}, sort_keys=False, width=100).rstrip())
    for group in ("axes", "inputs", "outputs"):
        lines += ["", f"{group}:"]
        for name, item in getattr(file, group).items():
            lines.append(f"  {_flow({name: _drop_none_descriptions(item.model_dump())})[1:-1]}")
    for key in ("roofline", "leaderboard"):
        value = getattr(file, key)
        if value is not None:
            lines += ["", yaml.safe_dump({key: value.model_dump()}, sort_keys=False).rstrip()]
    lines += ["", "workloads:"]
    for w in file.workloads:
        lines.append(f"  - uuid: {_flow(w.uuid)}")
        lines.append(f"    axes: {_flow(dict(w.axes))}")
        lines.append(f"    inputs: {_flow({n: d.model_dump() for n, d in w.inputs.items()})}")
        tolerance = w.tolerance.model_dump(exclude_none=True)
        if not tolerance["allow_negative_inf"]:
            del tolerance["allow_negative_inf"]
        lines.append(f"    tolerance: {_flow(tolerance)}")
        if w.leaderboard is not None:
            lines.append(f"    leaderboard: {_flow(w.leaderboard.model_dump())}")
    return "\n".join(lines) + "\n"


def import_problem(official_dir: Path, definitions_dir: Path, *, force: bool = False) -> ImportResult:
    """definition.json + workload.jsonl (+ reference.py) -> definitions/<name>.yaml + references/<name>.py."""
    official_dir = Path(official_dir)
    definitions_dir = Path(definitions_dir)
    if not (official_dir / DEFINITION_JSON).is_file():
        raise SchemaError(f"{official_dir}: expected an official problem folder, got no {DEFINITION_JSON}")
    raw = read_json(official_dir / DEFINITION_JSON)
    if not isinstance(raw, dict):
        raise SchemaError(
            f"{official_dir / DEFINITION_JSON}: (top level): expected an object, got {type(raw).__name__}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise SchemaError(f"{official_dir / DEFINITION_JSON}: name: expected a file-safe name, got {name!r}")
    notes: list[str] = []
    reference_rel = f"references/{name}.py"
    file = definition_file_from_official(
        raw, _read_workloads(official_dir / WORKLOAD_JSONL), reference_rel, where=official_dir, notes=notes
    )
    source = raw["reference"]
    loose = official_dir / REFERENCE_PY
    if loose.is_file() and loose.read_text() != source:
        notes.append(
            f"{loose}: differs from definition.json's reference; the evaluator uses the latter (kept)"
        )
    yaml_path = definitions_dir / f"{name}.yaml"
    reference_path = definitions_dir.parent / reference_rel
    existing = [p for p in (yaml_path, reference_path) if p.exists()]
    if existing and not force:
        raise HarnessError(f"{existing[0]}: already exists (use --force to overwrite)")
    header = (
        f"SOL-ExecBench task {name}\n"
        f"imported by `solbench import` from {official_dir.name}/ (definition.json + workload.jsonl).\n"
        "Random inputs are not listed; the dataset's tolerance key\n"
        "`required_match_ratio` is kept as dataset_required_match_ratio (the evaluator applies\n"
        "required_matched_ratio, default 0.99). Add roofline and leaderboard figures by hand."
    )
    text = definition_yaml(file, header)
    # The written file must read back as the same model (strict) before anything lands on disk.
    reread = validate_model(DefinitionFile, yaml.safe_load(text), yaml_path)
    if reread != file:
        raise HarnessError(f"{yaml_path}: internal error: the YAML written does not read back identically")
    definitions_dir.mkdir(parents=True, exist_ok=True)
    reference_path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(reference_path, source)
    _write_atomic(yaml_path, text)
    return ImportResult(yaml_path, reference_path, file, notes)
