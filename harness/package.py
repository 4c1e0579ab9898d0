"""Leaderboard packaging: a solution folder -> the official solution.json (checked), and `submit`.

`pack` writes dist/<definition>/<solution>/solution.json (every source inlined) and solution.json.sha256,
after the checks the official evaluator would otherwise fail on later: its validators, the entry function's
parameters, top-level sources (the official build ignores subfolders), no in-process compilation in Python,
files imported or included but not packed. Nothing is written unless every check passes, and files are
written beside their target then renamed, so dist/ never holds half a file.
`submit` packs, evaluates the packed JSON itself (harness.evaluate stages its inlined sources in a fresh
folder, as the official driver does) with the full `solbench run`, and writes summary.json beside it. Uploading is the user's: the leaderboard web form.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import json
import os
import platform
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import PROJECT_ROOT, __version__
from harness.build import CPP_SOURCE_SUFFIXES  # what the official build compiles (top level only)
from harness.errors import EXIT_FAILED, EnvironmentProblem, HarnessError, SchemaError
from harness.schema import (
    CPP_LANGUAGES,
    CPP_SUFFIXES,
    Solution,
    SolutionFile,
    load_solution_file,
    load_solution_json,
    validate_model,
)
from harness.solution import SOLUTION_FILE, check_entry_signature, read_solution_dir

DIST_DIR = PROJECT_ROOT / "dist"
PACKED_NAME = "solution.json"
SUMMARY_NAME = "summary.json"
_CPP_EXTENSION_CALLS = {"load", "load_inline"}
_SPEC_KEYS = (
    "languages",
    "target_hardware",
    "entry_point",
    "dependencies",
    "destination_passing_style",
    "binding",
    "compile_options",
)
LEADERBOARD_HINT = (
    "upload {path} through the SOL-ExecBench leaderboard's submission web form (task {task}); "
    "solbench makes no network call"
)


@dataclass
class Packed:
    path: Path
    sha256: str
    solution: Solution
    spec: SolutionFile
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ checks


def _check_definition(where: Path, spec: SolutionFile, definitions_dir: Path | None):
    from harness.tasks import DEFINITIONS_DIR, load_task, task_names

    definitions_dir = definitions_dir or DEFINITIONS_DIR
    names = task_names(definitions_dir)
    if spec.definition not in names:
        raise SchemaError(
            f"{where}: definition: expected a task's full name (one of {', '.join(names)}), got {spec.definition!r}"
        )
    return load_task(spec.definition, definitions_dir)


def _official_data(folder: Path, spec: SolutionFile, target: str | None) -> dict[str, Any]:
    data = spec.model_dump(include=set(_SPEC_KEYS))
    if target is not None:
        data["target_hardware"] = [target]
    return {
        "name": spec.name,
        "definition": spec.definition,
        "author": spec.author,
        "description": spec.description,
        "spec": {k: data[k] for k in _SPEC_KEYS},
        "sources": [{"path": s, "content": (folder / s).read_text()} for s in spec.sources],
    }


def _cpp_extension_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines that import or call torch.utils.cpp_extension.load / load_inline (aliases followed)."""
    aliases = {"cpp_extension"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.utils.cpp_extension" and a.asname:
                    aliases.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.utils":
            aliases.update(a.asname or a.name for a in node.names if a.name == "cpp_extension")
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            for a in node.names:
                if a.name in _CPP_EXTENSION_CALLS or a.name == "*":
                    hits.append((node.lineno, f"from torch.utils.cpp_extension import {a.name}"))
        elif isinstance(node, ast.Attribute) and node.attr in _CPP_EXTENSION_CALLS:
            base = node.value
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if base_name in aliases:
                hits.append((node.lineno, f"{base_name}.{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in _CPP_EXTENSION_CALLS
        ):
            base = node.args[0]
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
            if base_name in aliases:
                hits.append((node.lineno, f"getattr({base_name}, {node.args[1].value!r})"))
    return hits


def _local_modules(folder: Path) -> dict[str, str]:
    """Top-level module names importable from the folder -> the file or package that provides them."""
    out = {}
    for p in folder.iterdir():
        if p.suffix == ".py" and p.is_file():
            out[p.stem] = p.name
        elif p.is_dir() and (p / "__init__.py").is_file():
            out[p.name] = p.name + "/"
    return out


def _check_python(folder: Path, spec: SolutionFile, notes: list[str]) -> None:
    local = _local_modules(folder)
    for src in spec.sources:
        path = folder / src
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except SyntaxError as exc:
            raise SchemaError(f"{path}: line {exc.lineno}: invalid Python: {exc.msg}") from None
        for lineno, what in _cpp_extension_uses(tree):
            raise SchemaError(
                f"{path}: line {lineno}: expected no torch.utils.cpp_extension.load/load_inline (the official "
                f"evaluator blocks in-process compilation; ship C++ as a cuda_cpp solution), got {what}"
            )
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            else:
                continue
            for name in names:
                provider = local.get(name)
                if provider is not None and provider not in spec.sources:
                    raise SchemaError(
                        f"{folder / SOLUTION_FILE}: sources: expected {provider} (imported by {src} line "
                        f"{node.lineno}) among the packed sources, got {spec.sources}"
                    )
                if name == "harness" and "harness" not in local and not any("`harness`" in n for n in notes):
                    notes.append(
                        f"{path.name} imports `harness` (this project's package): the official server does not "
                        "have it, so this solution runs here but not on the leaderboard"
                    )


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def _check_cpp(folder: Path, spec: SolutionFile, target: list[str], notes: list[str]) -> None:
    where = folder / SOLUTION_FILE
    compiled = [s for s in spec.sources if s.endswith(CPP_SOURCE_SUFFIXES)]
    if not compiled:
        raise SchemaError(
            f"{where}: sources: expected at least one of {', '.join(CPP_SOURCE_SUFFIXES)} (the official build "
            f"compiles those), got {spec.sources}"
        )
    for src in spec.sources:
        if not src.endswith(CPP_SUFFIXES):
            continue
        text = (folder / src).read_text()
        for included in _INCLUDE.findall(text):
            if (folder / included).is_file() and included not in spec.sources:
                raise SchemaError(
                    f"{where}: sources: expected {included} (included by {src}) among the packed sources, "
                    f"got {spec.sources}"
                )
    if not any("PYBIND11_MODULE" in (folder / s).read_text() for s in compiled):
        raise SchemaError(
            f"{where}: sources: expected PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) exporting "
            f"{spec.entry_point.split('::')[-1]!r} (the official build imports that module), got none"
        )
    if spec.compile_options is None:
        gencodes = [t for t in ("B200", "LOCAL") if t in target]
        notes.append(
            "compile_options is null: the official build passes nvcc only the injected -gencode for "
            f"{' and '.join(gencodes)} (sm_100a for B200, the local GPU's for LOCAL), no -O3/--use_fast_math "
            "(ld_flags -lcuda still applies); write compile_options to choose flags"
        )


def _check_spec_fields(where: Path, spec: SolutionFile) -> None:
    """The two official spec rules people trip on, worded before the generic validators see them."""
    if spec.entry_point.count("::") != 1:
        raise SchemaError(
            f"{where}: entry_point: expected '<file>::<function>' ('::' exactly once), got {spec.entry_point!r}"
        )
    cpp = [lang for lang in spec.languages if lang in CPP_LANGUAGES]
    python = [lang for lang in spec.languages if lang not in CPP_LANGUAGES]
    if cpp and python:
        raise SchemaError(
            f"{where}: languages: expected Python languages or C++ languages, got {spec.languages} "
            "(C++ and Python cannot be mixed)"
        )


def check_folder(
    folder: Path, *, target: str | None = None, definitions_dir: Path | None = None
) -> tuple[SolutionFile, Solution, list[str]]:
    """Every check of `pack`, nothing written: the folder's spec, the official Solution, and notes."""
    folder = Path(folder)
    where = folder / SOLUTION_FILE
    if not folder.is_dir():
        raise SchemaError(f"{folder}: expected a solution folder, got no such directory")
    _check_spec_fields(where, load_solution_file(where))
    spec = read_solution_dir(folder)  # strict YAML, name = folder, top-level sources that exist
    task = _check_definition(where, spec, definitions_dir)
    solution = validate_model(Solution, _official_data(folder, spec, target), where)
    check_entry_signature(folder, spec, task.definition)
    notes: list[str] = []
    if solution.spec.is_cpp:
        _check_cpp(folder, spec, list(solution.spec.target_hardware), notes)
    else:
        _check_python(folder, spec, notes)
    return spec, solution, notes


# ------------------------------------------------------------------------------------------------ pack


def _write_files(target_dir: Path, files: dict[str, bytes]) -> None:
    """Write every file beside its target first, then rename them all; on failure remove what was made."""
    created = []
    for parent in reversed([target_dir, *target_dir.parents]):
        if not parent.exists():
            created.append(parent)
    temps: list[tuple[str, Path]] = []
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=target_dir, prefix=f".{name}.", suffix=".tmp")
            temps.append((name, Path(tmp)))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        for name, tmp in temps:
            os.replace(tmp, target_dir / name)
    except BaseException:
        for _, tmp in temps:
            tmp.unlink(missing_ok=True)
        for parent in reversed(created):
            try:
                parent.rmdir()
            except OSError:
                break
        raise


def packed_path(out_dir: Path, definition: str, solution: str) -> Path:
    return Path(out_dir) / definition / solution / PACKED_NAME


def pack(
    folder: Path,
    out_dir: Path = DIST_DIR,
    *,
    target: str | None = None,
    definitions_dir: Path | None = None,
) -> Packed:
    """Check `folder`, then write <out_dir>/<definition>/<name>/solution.json and its .sha256."""
    spec, solution, notes = check_folder(folder, target=target, definitions_dir=definitions_dir)
    text = json.dumps(solution.model_dump(mode="json"), indent=2) + "\n"
    data = text.encode()
    # What is written must read back, the official way, as the same Solution.
    reread = validate_model(Solution, json.loads(text), "packed solution.json")
    if reread != solution:
        raise HarnessError(f"{folder}: internal error: the packed JSON does not read back identically")
    sha = hashlib.sha256(data).hexdigest()
    path = packed_path(out_dir, solution.definition, solution.name)
    _write_files(
        path.parent, {PACKED_NAME: data, PACKED_NAME + ".sha256": f"{sha}  {PACKED_NAME}\n".encode()}
    )
    return Packed(path, sha, solution, spec, notes)


# ------------------------------------------------------------------------------------------------ submit


def _run_packed(task, solution_json: Path, on_result: Callable | None, definitions_dir: Path | None) -> list:
    """The full `solbench run` of the packed file.

    harness.evaluate stages the JSON's inlined sources in a fresh folder of its own subprocess, as the
    official driver does: what runs is the packed file, not the solution folder.
    """
    import torch

    try:
        from harness.runner import RunOptions, evaluate_isolated
    except ImportError:
        raise EnvironmentProblem(
            "submit: `solbench run` is not available in this checkout (harness.runner.evaluate_isolated is "
            f"missing); {solution_json} was written but not evaluated"
        ) from None
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            f"submit: timing needs a CUDA GPU and none is available; {solution_json} was written but not "
            "evaluated (`solbench check` runs the correctness rounds on the CPU)"
        )
    options = RunOptions(definitions_dir=definitions_dir)
    return evaluate_isolated(task, solution_json, list(task.workloads), options, on_trace=on_result)


def _versions() -> dict[str, str]:
    import torch

    out = {"sam-hq-solbench": __version__, "python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    out["cuda"] = str(torch.version.cuda)
    return out


def summarize(task, packed: Packed, traces: list) -> dict[str, Any]:
    """summary.json: per-workload status and latency, geomeans, the GPU, date and versions."""
    from harness.roofline import geomean

    rows = []
    for t in traces:
        ev = t.evaluation
        perf = ev.performance
        rows.append(
            {
                "uuid": t.workload.uuid,
                "axes": dict(t.workload.axes),
                "status": ev.status.value,
                "latency_ms": perf.latency_ms if perf else None,
                "reference_latency_ms": perf.reference_latency_ms if perf else None,
                "speedup_factor": perf.speedup_factor if perf else None,
                "max_absolute_error": ev.correctness.max_absolute_error if ev.correctness else None,
                "log": ev.log.splitlines()[0] if ev.log else "",
            }
        )
    passed = [r for r in rows if r["status"] == "PASSED"]
    all_passed = bool(rows) and len(passed) == len(rows)
    timed = [r for r in passed if r["latency_ms"]]
    geo: dict[str, float | None] = {"latency_ms": None, "reference_latency_ms": None, "speedup_factor": None}
    if all_passed and len(timed) == len(rows):
        geo["latency_ms"] = geomean(r["latency_ms"] for r in rows)
        if all(r["reference_latency_ms"] for r in rows):
            geo["reference_latency_ms"] = geomean(r["reference_latency_ms"] for r in rows)
            geo["speedup_factor"] = geomean(r["speedup_factor"] for r in rows)
    env = traces[0].evaluation.environment if traces else None
    return {
        "definition": task.name,
        "solution": packed.solution.name,
        "file": str(packed.path),
        "sha256": packed.sha256,
        "target_hardware": list(packed.solution.spec.target_hardware),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "gpu": env.hardware if env else None,
        "versions": {**_versions(), **({f"trace_{k}": v for k, v in env.libs.items()} if env else {})},
        "passed": len(passed),
        "workloads": len(rows),
        "all_passed": all_passed,
        "geomean": geo,
        "results": rows,
        "upload": LEADERBOARD_HINT.format(path=packed.path, task=task.name),
    }


@dataclass
class Submission:
    packed: Packed
    summary: dict[str, Any]
    summary_path: Path

    @property
    def exit_code(self) -> int:
        return 0 if self.summary["all_passed"] else EXIT_FAILED


def submit(
    folder: Path,
    out_dir: Path = DIST_DIR,
    *,
    target: str | None = None,
    on_result: Callable | None = None,
    definitions_dir: Path | None = None,
) -> Submission:
    """Pack, evaluate the packed JSON itself (not the folder), write summary.json beside it."""
    from harness.tasks import load_task

    packed = pack(folder, out_dir, target=target, definitions_dir=definitions_dir)
    solution = load_solution_json(packed.path)  # what gets evaluated is what was written
    task = (
        load_task(solution.definition, definitions_dir) if definitions_dir else load_task(solution.definition)
    )
    traces = _run_packed(task, packed.path, on_result, definitions_dir)
    summary = summarize(task, packed, traces)
    summary_path = packed.path.parent / SUMMARY_NAME
    _write_files(summary_path.parent, {SUMMARY_NAME: (json.dumps(summary, indent=2) + "\n").encode()})
    return Submission(packed, summary, summary_path)
