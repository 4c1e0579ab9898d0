"""Solution folders: solution.yaml + sources, loaded as a callable or turned into the official Solution."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import PROJECT_ROOT
from harness.errors import BuildError, SchemaError
from harness.schema import Solution, SolutionFile, SourceFile, load_solution_file, validate_model

SOLUTIONS_DIR = PROJECT_ROOT / "solutions"
SOLUTION_FILE = "solution.yaml"


@dataclass
class LoadedSolution:
    dir: Path
    spec: SolutionFile
    fn: Callable

    @property
    def name(self) -> str:
        return self.spec.name


def read_solution_dir(folder: Path) -> SolutionFile:
    """Parse and check a solution folder without importing it."""
    folder = Path(folder)
    spec = load_solution_file(folder / SOLUTION_FILE)
    where = folder / SOLUTION_FILE
    if spec.name != folder.name:
        raise SchemaError(f"{where}: name: expected {folder.name!r} (the folder name), got {spec.name!r}")
    for src in spec.sources:
        if "/" in src or "\\" in src:
            raise SchemaError(f"{where}: sources: expected files at the top level of the folder, got {src!r}")
        if not (folder / src).is_file():
            raise SchemaError(f"{where}: sources: file {src!r} not found in {folder}")
    entry_file = spec.entry_point.split("::")[0] if "::" in spec.entry_point else spec.entry_point
    if entry_file not in spec.sources:
        raise SchemaError(
            f"{where}: entry_point: expected a file among sources {spec.sources}, got {entry_file!r}"
        )
    return spec


def to_official(folder: Path, spec: SolutionFile | None = None) -> Solution:
    """The official Solution with every source inlined."""
    folder = Path(folder)
    spec = spec or read_solution_dir(folder)
    data = {
        "name": spec.name,
        "definition": spec.definition,
        "author": spec.author,
        "description": spec.description,
        "spec": spec.spec().model_dump(),
        "sources": [SourceFile(path=s, content=(folder / s).read_text()).model_dump() for s in spec.sources],
    }
    return validate_model(Solution, data, folder / SOLUTION_FILE)


def check_entry_signature(folder: Path, spec: SolutionFile, definition) -> None:
    """The entry function exists and takes the inputs (then the outputs, for DPS) in definition order.

    Python entries are read with `ast` (no import); C++ entries must at least name the function in the file.
    """
    import ast

    folder = Path(folder)
    official = spec.spec()
    path = folder / official.entry_file
    where = folder / SOLUTION_FILE
    source = path.read_text()
    if official.is_cpp:
        if official.entry_function not in source:
            raise SchemaError(
                f"{where}: entry_point: function {official.entry_function!r} not found in {path.name}"
            )
        return
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SchemaError(f"{path}: line {exc.lineno}: invalid Python: {exc.msg}") from None
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    node = funcs.get(official.entry_function)
    if node is None:
        raise SchemaError(
            f"{where}: entry_point: function {official.entry_function!r} not found in {path.name}"
        )
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    expected = list(definition.inputs) + (list(definition.outputs) if spec.destination_passing_style else [])
    if params != expected:
        raise SchemaError(
            f"{where}: entry_point: expected parameters {expected} (inputs then outputs), got {params}"
        )


def discover(task_name: str, root: Path = SOLUTIONS_DIR) -> list[Path]:
    """The solution folders of a task, sorted by name."""
    base = root / task_name
    return sorted(p for p in base.iterdir() if (p / SOLUTION_FILE).is_file()) if base.is_dir() else []


def load_solution(folder: Path) -> LoadedSolution:
    """Import a Python solution's entry function (C++ solutions are built by harness.build)."""
    from harness.tasks import load_module

    folder = Path(folder).resolve()
    spec = read_solution_dir(folder)
    official = spec.spec()
    if official.is_cpp:
        from harness.build import build_cpp_solution

        fn = build_cpp_solution(folder, spec)
        return LoadedSolution(folder, spec, fn)
    module_name = f"_solbench_solution_{spec.definition[:3]}_{spec.name}"
    if str(folder) not in sys.path:  # sibling modules import as in the official staging dir
        sys.path.insert(0, str(folder))
    try:
        module = load_module(folder / official.entry_file, module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the solution's
        raise BuildError(
            f"{folder / official.entry_file}: import failed: {type(exc).__name__}: {exc}"
        ) from exc
    fn = getattr(module, official.entry_function, None)
    if not callable(fn):
        raise SchemaError(
            f"{folder / SOLUTION_FILE}: entry_point: function {official.entry_function!r} "
            f"not found in {official.entry_file}"
        )
    return LoadedSolution(folder, spec, fn)


def entry_parameters(fn: Callable) -> list[str]:
    return [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
