"""Stored workload tensors: workloads/<task>/<uuid>.safetensors, their MANIFEST.json, and loading them back.

A stored file holds exactly the inputs the harness passes in the timed round. The official driver seeds once
(`set_seed(200)`), then, per workload in file order, runs 10 correctness rounds that each call `gen_inputs`
afresh, with the reference and the solution running between rounds; timing reuses the 10th round's inputs.
Our references draw no random numbers, so `regenerate` = seed once, then per workload call `gen_inputs` 10
times and keep the last. A solution that draws random numbers shifts every later workload's inputs in a real
run; the stored files (and `--inputs stored`) do not follow it.

CPU and CUDA random streams differ: the manifest records the device the files were drawn on (default cpu, so
that regenerating needs no GPU); CUDA-drawn files are what the official driver would draw on a GPU.
Workloads whose inputs exceed --max-gb are not written (noted in the manifest); when a later workload is
written they are still drawn, unsaved, because they advance the random stream.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.errors import EnvironmentProblem, HarnessError, SchemaError
from harness.inputs import (
    OFFICIAL_SEED,
    gen_inputs,
    load_safetensors_inputs,
    resolve_axes,
    set_seed,
    torch_dtype,
)
from harness.schema import Definition, SafetensorsInput, ScalarInput, Workload

#: Bump when input generation changes in a way that changes the numbers (the manifest records it).
GENERATOR_VERSION = 1
MANIFEST_FORMAT = 1
MANIFEST_NAME = "MANIFEST.json"
ROUNDS = 10  # the official correctness rounds; the timed round reuses the last one's inputs
DEFAULT_MAX_GB = 2.0
_GB = 1e9


def workloads_dir(task) -> Path:
    """The project's workloads/ folder (beside the task's definitions/)."""
    return Path(task.root) / "workloads"


def stored_path(task, uuid: str) -> Path:
    return workloads_dir(task) / task.name / f"{uuid}.safetensors"


def _as_task(task):
    if isinstance(task, str):
        from harness.tasks import load_task

        return load_task(task)
    return task


# --------------------------------------------------------------------------------------------- manifest


def load_manifest(root: Path) -> dict[str, Any]:
    """workloads/MANIFEST.json, or an empty manifest when there is none."""
    path = Path(root) / MANIFEST_NAME
    if not path.is_file():
        return {"format": MANIFEST_FORMAT, "tasks": {}}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict):
        raise SchemaError(f"{path}: tasks: expected an object of tasks, got {type(data).__name__}")
    return data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomic(path: Path, data: bytes) -> None:
    """Write beside the target, then rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 is not what an ordinary file gets
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_lines(value: Any, indent: str = "") -> str:
    """Indented JSON whose innermost objects (axes, one tensor's entry) stay on one line."""
    flat = not isinstance(value, dict) or all(
        not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, dict | list) for x in v))
        for v in value.values()
    )
    if flat or not value:
        return json.dumps(value)
    inner = indent + "  "
    items = [f"{inner}{json.dumps(k)}: {_json_lines(v, inner)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def write_manifest(root: Path, manifest: dict[str, Any]) -> Path:
    path = Path(root) / MANIFEST_NAME
    _write_atomic(path, (_json_lines(manifest) + "\n").encode())
    return path


# --------------------------------------------------------------------------------------------- generation


def input_bytes(definition: Definition, workload: Workload) -> int:
    """Bytes of the tensors a stored file would hold (every tensor input not given as a scalar)."""
    axes = resolve_axes(definition, workload)
    total = 0
    for name, spec in definition.inputs.items():
        if isinstance(workload.inputs.get(name), ScalarInput):
            continue
        shape = definition.shape_of(spec, axes) or ()
        total += math.prod(shape) * torch_dtype(spec.dtype).itemsize
    return total


def _custom_fn(task) -> Callable | None:
    entry = task.definition.custom_inputs_entrypoint
    if entry is None:
        return None
    return getattr(sys.modules[task.reference.__module__], entry)


def _blob_roots(task) -> list[Path]:
    roots = [Path(task.root)]
    if os.environ.get("FLASHINFER_TRACE_DIR"):
        roots.append(Path(os.environ["FLASHINFER_TRACE_DIR"]))
    return roots


def _tensors_of(definition: Definition, workload: Workload, inputs: list[Any]) -> dict[str, torch.Tensor]:
    """The round's inputs keyed by name, on the CPU; scalar descriptors are left out (the workload has them)."""
    out: dict[str, torch.Tensor] = {}
    for (name, spec), value in zip(definition.inputs.items(), inputs, strict=True):
        if isinstance(workload.inputs.get(name), ScalarInput):
            continue
        if isinstance(value, torch.Tensor):
            out[name] = value.detach().to("cpu").contiguous()
        else:  # a random Python scalar (shape null): kept as a 0-D tensor of its dtype
            out[name] = torch.tensor(value, dtype=torch_dtype(spec.dtype))
    return out


@dataclass
class Drawn:
    workload: Workload
    tensors: dict[str, torch.Tensor] | None
    """The timed round's inputs; None when skipped."""
    skipped: str | None = None
    input_bytes: int = 0


def draw(
    task, *, seed: int = OFFICIAL_SEED, device: str = "cpu", max_bytes: float = math.inf
) -> Iterator[Drawn]:
    """Seed once, then per workload in file order ROUNDS calls of gen_inputs; yield the last round's inputs."""
    definition = task.definition
    workloads = list(task.workloads)
    sizes = [input_bytes(definition, w) for w in workloads]
    wanted = [i for i, size in enumerate(sizes) if size <= max_bytes]
    last_needed = wanted[-1] if wanted else -1
    custom_fn = _custom_fn(task)
    set_seed(seed)
    for i, (workload, size) in enumerate(zip(workloads, sizes, strict=True)):
        reason = (
            None if size <= max_bytes else f"inputs need {size / _GB:.2f} GB > --max-gb {max_bytes / _GB:g}"
        )
        if i > last_needed:  # nothing later is written: no need to advance the random stream
            yield Drawn(workload, None, reason, size)
            continue
        axes = resolve_axes(definition, workload)
        cache = (
            load_safetensors_inputs(definition, workload, axes, _blob_roots(task))
            if any(isinstance(d, SafetensorsInput) for d in workload.inputs.values())
            else None
        )
        inputs: list[Any] | None = None
        for _ in range(ROUNDS):
            inputs = None  # free the previous round first: one round in memory at a time
            inputs = gen_inputs(definition, workload, device, safetensors_cache=cache, custom_fn=custom_fn)
        if reason is not None:
            del inputs
            yield Drawn(workload, None, reason + " (drawn unsaved: later workloads depend on it)", size)
            continue
        yield Drawn(workload, _tensors_of(definition, workload, inputs), None, size)


def serialize(task, workload: Workload, tensors: dict[str, torch.Tensor], seed: int, device: str) -> bytes:
    """The safetensors bytes (deterministic: one metadata key, tensors ordered by the format)."""
    from safetensors.torch import save

    meta = {
        "task": task.name,
        "uuid": workload.uuid,
        "seed": seed,
        "device": device,
        "rounds": ROUNDS,
        "generator_version": GENERATOR_VERSION,
    }
    return save(tensors, metadata={"solbench": json.dumps(meta, sort_keys=True)})


def _tensor_entries(definition: Definition, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    return {
        name: {
            "shape": list(t.shape),
            "dtype": definition.inputs[name].dtype,
            "bytes": t.numel() * t.element_size(),
        }
        for name, t in tensors.items()
    }


def _check_device(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem("--device cuda: CUDA is not available on this machine")


def regenerate(
    tasks: list,
    *,
    seed: int = OFFICIAL_SEED,
    device: str = "cpu",
    max_gb: float = DEFAULT_MAX_GB,
    log: Callable[[str], None] = lambda _msg: None,
) -> dict[str, Any]:
    """Write workloads/<task>/<uuid>.safetensors for every workload within max_gb and update the manifest."""
    _check_device(device)
    tasks = [_as_task(t) for t in tasks]
    if not tasks:
        return {}
    root = workloads_dir(tasks[0])
    manifest = load_manifest(root)
    for task in tasks:
        entries: dict[str, Any] = {}
        written: set[Path] = set()
        for drawn in draw(task, seed=seed, device=device, max_bytes=max_gb * _GB):
            w = drawn.workload
            if drawn.tensors is None:
                entries[w.uuid] = {
                    "axes": dict(w.axes),
                    "input_bytes": drawn.input_bytes,
                    "skipped": drawn.skipped,
                }
                log(f"{task.name[:3]} {w.uuid[:8]} skipped: {drawn.skipped}")
                continue
            data = serialize(task, w, drawn.tensors, seed, device)
            path = stored_path(task, w.uuid)
            _write_atomic(path, data)
            written.add(path)
            entries[w.uuid] = {
                "file": path.relative_to(root).as_posix(),
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "axes": dict(w.axes),
                "tensors": _tensor_entries(task.definition, drawn.tensors),
            }
            log(f"{task.name[:3]} {w.uuid[:8]} {len(data) / _GB:.3f} GB -> {path.relative_to(root.parent)}")
        for stale in (root / task.name).glob("*.safetensors"):
            if stale not in written:
                stale.unlink()
        manifest["tasks"][task.name] = {
            "seed": seed,
            "device": device,
            "rounds": ROUNDS,
            "generator_version": GENERATOR_VERSION,
            "torch": torch.__version__,
            "max_gb": max_gb,
            "workloads": entries,
        }
    manifest["format"] = MANIFEST_FORMAT
    manifest["about"] = (
        "Inputs of the timed round (the 10th gen_inputs call after one set_seed, workloads in file order); "
        "files in workloads/<task>/ are git-ignored, `solbench workloads regenerate` rebuilds them "
        "(see harness/workloads.py)."
    )
    manifest["tasks"] = dict(sorted(manifest["tasks"].items()))
    write_manifest(root, {k: manifest[k] for k in ("about", "format", "tasks")})
    return manifest


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(tasks: list, *, log: Callable[[str], None] = lambda _msg: None) -> list[str]:
    """Redraw with each task's recorded seed and device; compare with the manifest and the files on disk.

    Returns the mismatches (one line each); files absent from disk are only logged (they are git-ignored).
    """
    tasks = [_as_task(t) for t in tasks]
    if not tasks:
        return []
    root = workloads_dir(tasks[0])
    manifest = load_manifest(root)
    problems: list[str] = []
    for task in tasks:
        record = manifest["tasks"].get(task.name)
        if record is None:
            problems.append(f"{root / MANIFEST_NAME}: tasks: expected an entry for {task.name}, got none")
            continue
        _check_device(record["device"])
        entries = record["workloads"]
        expected_uuids = [w.uuid for w in task.workloads]
        if list(entries) != expected_uuids:
            problems.append(
                f"{task.name}: the manifest's workloads differ from the definition's (regenerate)"
            )
            continue
        written = {u for u, e in entries.items() if "sha256" in e}
        last = max((i for i, u in enumerate(expected_uuids) if u in written), default=-1)
        for i, drawn in enumerate(draw(task, seed=record["seed"], device=record["device"])):
            if i > last:
                break
            w = drawn.workload
            if w.uuid not in written:  # skipped: drawn only to advance the random stream
                continue
            entry = entries[w.uuid]
            sha = hashlib.sha256(
                serialize(task, w, drawn.tensors, record["seed"], record["device"])
            ).hexdigest()
            where = f"{task.name[:3]} {w.uuid[:8]}"
            if sha != entry["sha256"]:
                problems.append(
                    f"{where}: regenerated sha256 {sha[:12]} != manifest {entry['sha256'][:12]} "
                    f"(manifest torch {record.get('torch')}, generator {record.get('generator_version')}; "
                    f"here torch {torch.__version__}, generator {GENERATOR_VERSION})"
                )
                continue
            path = root / entry["file"]
            if not path.is_file():
                log(f"{where}: ok (regenerated); {path.relative_to(root.parent)} is not on disk")
            elif _file_sha256(path) != entry["sha256"]:
                problems.append(
                    f"{where}: {path.relative_to(root.parent)} differs from the manifest (regenerate)"
                )
            else:
                log(f"{where}: ok")
    return problems


# --------------------------------------------------------------------------------------------- loading

_LOADED: dict[str, Any] = {}  # the last file loaded: {"key": (path, size, mtime, sha), "tensors": {...}}


def stored_file(task, workload: Workload) -> tuple[Path, dict[str, torch.Tensor]]:
    """The workload's stored file (checked against the manifest's sha256 once per file) and its tensors."""
    from safetensors.torch import load_file

    task = _as_task(task)
    root = workloads_dir(task)
    record = load_manifest(root)["tasks"].get(task.name)
    hint = f"run `solbench workloads regenerate {task.name[:3]}`"
    if record is None or workload.uuid not in record["workloads"]:
        raise HarnessError(
            f"{root / MANIFEST_NAME}: {task.name}: no entry for workload {workload.uuid} ({hint})"
        )
    entry = record["workloads"][workload.uuid]
    if "skipped" in entry:
        raise HarnessError(f"{task.name[:3]} {workload.uuid[:8]}: not stored: {entry['skipped']}")
    path = root / entry["file"]
    if not path.is_file():
        raise HarnessError(f"{path}: file not found ({hint})")
    stat = path.stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, entry["sha256"])
    if _LOADED.get("key") != key:
        _LOADED.clear()  # one file in memory at a time
        if _file_sha256(path) != entry["sha256"]:
            raise HarnessError(f"{path}: sha256 differs from {root / MANIFEST_NAME} ({hint})")
        _LOADED.update(key=key, tensors=load_file(str(path)))
    return path, _LOADED["tensors"]


def stored_inputs(task, workload: Workload, device: str | torch.device = "cpu") -> list[Any]:
    """The stored timed-round inputs, in definition order, as gen_inputs would return them.

    Tensors are fresh copies on `device` on every call (a solution may write into its inputs); scalar
    descriptors come from the workload. The workload's shapes must be those stored (not a --smoke workload).
    """
    task = _as_task(task)
    definition = task.definition
    path, tensors = stored_file(task, workload)
    axes = resolve_axes(definition, workload)
    out: list[Any] = []
    for name, spec in definition.inputs.items():
        desc = workload.inputs.get(name)
        if isinstance(desc, ScalarInput):
            out.append(desc.value)
            continue
        if name not in tensors:
            raise HarnessError(f"{path}: input {name!r} is not stored")
        tensor = tensors[name]
        shape = definition.shape_of(spec, axes)
        if shape is None:
            out.append(tensor.item())
            continue
        if tuple(tensor.shape) != shape:
            raise HarnessError(
                f"{path}: {name}: expected shape {list(shape)} (the workload's axes), got {list(tensor.shape)}"
            )
        out.append(tensor.to(device=device, copy=True))
    return out


def stored_input_source(task) -> Callable[[Definition, Workload, Any], list[Any]]:
    """An `input_source` for harness.runner (same call as gen_inputs) that returns the stored inputs."""
    task = _as_task(task)

    def source(_definition: Definition, workload: Workload, device) -> list[Any]:
        return stored_inputs(task, workload, device)

    return source
