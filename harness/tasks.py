"""Tasks: a definition YAML with its workloads and reference, looked up by official name or unique prefix."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from harness import PROJECT_ROOT
from harness.errors import HarnessError, SchemaError
from harness.schema import Definition, DefinitionFile, Workload, load_definition_file

DEFINITIONS_DIR = PROJECT_ROOT / "definitions"


@dataclass
class Task:
    """One task: `file` is the parsed YAML, `definition`/`workloads` the official models built from it."""

    path: Path
    file: DefinitionFile
    root: Path = field(default=PROJECT_ROOT)

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def reference_path(self) -> Path:
        return self.root / self.file.reference

    @cached_property
    def reference_source(self) -> str:
        try:
            return self.reference_path.read_text()
        except FileNotFoundError:
            raise SchemaError(f"{self.path}: reference: file {self.file.reference} not found") from None

    @cached_property
    def definition(self) -> Definition:
        return self.file.to_definition(self.reference_source, self.path)

    @cached_property
    def workloads(self) -> list[Workload]:
        return [w.to_official(self.file.inputs) for w in self.file.workloads]

    @cached_property
    def reference(self) -> Callable:
        _ = self.definition  # validates the source first: `run` exists with the right parameters
        return load_module(self.reference_path, f"_solbench_reference_{self.name}").run

    def workload(self, uuid_prefix: str) -> Workload:
        hits = [w for w in self.workloads if w.uuid.startswith(uuid_prefix)]
        if len(hits) != 1:
            what = "no workload" if not hits else f"{len(hits)} workloads"
            raise HarnessError(f"{self.name}: {what} with uuid prefix {uuid_prefix!r}")
        return hits[0]


def load_module(path: Path, module_name: str):
    """Import a Python file as a module (a real file, so @triton.jit can read its source)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def task_names(definitions_dir: Path = DEFINITIONS_DIR) -> list[str]:
    return sorted(p.stem for p in definitions_dir.glob("*.yaml"))


def resolve_task_name(name_or_prefix: str, definitions_dir: Path = DEFINITIONS_DIR) -> str:
    names = task_names(definitions_dir)
    if name_or_prefix in names:
        return name_or_prefix
    hits = [n for n in names if n.startswith(name_or_prefix)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise HarnessError(
            f"{definitions_dir}: no task named or starting with {name_or_prefix!r} (have: {', '.join(names)})"
        )
    raise HarnessError(f"{definitions_dir}: task prefix {name_or_prefix!r} is ambiguous: {', '.join(hits)}")


_CACHE: dict[Path, Task] = {}


def load_task(name_or_prefix: str, definitions_dir: Path = DEFINITIONS_DIR) -> Task:
    name = resolve_task_name(name_or_prefix, definitions_dir)
    path = definitions_dir / f"{name}.yaml"
    if path not in _CACHE:
        file = load_definition_file(path)
        if file.name != name:
            raise SchemaError(f"{path}: name: expected {name!r} (the file name), got {file.name!r}")
        _CACHE[path] = Task(path=path, file=file, root=definitions_dir.parent)
    return _CACHE[path]
