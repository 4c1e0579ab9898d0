"""C++/CUDA solutions: built with torch.utils.cpp_extension.load the official way, cached by content hash.

Official rules: module `benchmark_kernel`; sources = the top-level .cu/.cpp/.cc/.cxx/.c files; include paths
= the solution folder and CUTLASS; compile_options null vs {} changes the flags (see `effective_flags`);
a -gencode for the local GPU (and sm_100a when B200 is targeted) is prepended unless the nvcc flags already
hold -gencode/-arch. Ours: the local arch gets its `a` suffix from sm_90 on (sm_90a on the H200), and builds
are cached under ~/.cache/solbench/build/<hash of sources + flags + torch>.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.errors import BuildError, EnvironmentProblem
from harness.schema import CompileOptions, Solution, SolutionFile, SolutionSpec

MODULE_NAME = "benchmark_kernel"
CPP_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
B200_ARCH = "100a"
CACHE_DIR = Path(os.environ.get("SOLBENCH_CACHE", Path.home() / ".cache" / "solbench")) / "build"
_SKIP_DIRS = {"__pycache__", ".git"}


@cache
def _cpp_extension_load() -> Callable[..., Any]:
    """The real cpp_extension.load, captured before a Python solution's import could see the raiser."""
    from torch.utils import cpp_extension

    return cpp_extension.load


def gencode(arch: str) -> str:
    return f"-gencode=arch=compute_{arch},code=sm_{arch}"


def arch_of(major: int, minor: int) -> str:
    """'90a' for (9, 0): architecture-specific features (wgmma, TMA multicast, tcgen05) from sm_90 on."""
    return f"{major}{minor}" + ("a" if major >= 9 else "")


def local_arch() -> str | None:
    """The first GPU's arch tag ('90a' on the H200), from torch or nvidia-smi; None without a GPU."""
    try:
        import torch

        if torch.cuda.is_available():
            return arch_of(*torch.cuda.get_device_capability(0))
    except Exception:  # noqa: BLE001 - fall back to nvidia-smi
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        major, minor = out.strip().splitlines()[0].strip().split(".")
        return arch_of(int(major), int(minor))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class BuildFlags:
    cflags: list[str]
    cuda_cflags: list[str]
    ld_flags: list[str]


def effective_flags(spec: SolutionSpec, local: str | None) -> BuildFlags:
    """The flags the official packager + build_ext.py would pass, with our local-arch rule.

    compile_options null: only the injected gencode flags reach nvcc (no -O3/--use_fast_math), ld -lcuda
    (the injected object's default); null and nothing injected: every list empty. Given options keep their
    own lists, with the gencode flags prepended to cuda_cflags.
    """
    opts = spec.compile_options
    cuda = list(opts.cuda_cflags) if opts is not None else []
    inject: list[str] = []
    if not any("-gencode" in f or "-arch" in f for f in cuda):
        if "B200" in spec.target_hardware:
            inject.append(gencode(B200_ARCH))
        if "LOCAL" in spec.target_hardware and local and gencode(local) not in inject:
            inject.append(gencode(local))
    if opts is None:
        if not inject:
            return BuildFlags([], [], [])
        opts = CompileOptions(cuda_cflags=inject)
        return BuildFlags(list(opts.cflags), list(opts.cuda_cflags), list(opts.ld_flags))
    return BuildFlags(list(opts.cflags), inject + cuda, list(opts.ld_flags))


def _official_spec(spec: SolutionFile | Solution | SolutionSpec) -> SolutionSpec:
    if isinstance(spec, SolutionSpec):
        return spec
    if isinstance(spec, SolutionFile):
        return spec.spec()
    return spec.spec


def _folder_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not _SKIP_DIRS.intersection(p.relative_to(folder).parts)
    )


def build_hash(folder: Path, flags: BuildFlags) -> str:
    """Content hash of every file under the folder, the flags and the toolchain identity."""
    import torch

    h = hashlib.sha256()
    for path in _folder_files(folder):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    h.update(json.dumps(asdict(flags), sort_keys=True).encode())
    h.update(f"{torch.__version__}|{torch.version.cuda}|{sys.version_info[:2]}|{MODULE_NAME}".encode())
    return h.hexdigest()[:24]


def cpp_sources(folder: Path) -> list[Path]:
    """Regular files directly in the folder with a compilable suffix (subfolders are not compiled)."""
    return sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix in CPP_SOURCE_SUFFIXES)


def _stage_sources(folder: Path, dest: Path) -> None:
    """Copy the folder to dest atomically (a concurrent build of the same hash finds it complete)."""
    if dest.is_dir():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".src-", dir=dest.parent))
    for path in _folder_files(folder):
        target = tmp / path.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    try:
        tmp.rename(dest)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)


def include_dirs(source_dir: Path) -> list[str]:
    cutlass = Path(os.environ.get("CUTLASS_DIR", "/usr/local/cutlass"))
    return [str(source_dir), str(cutlass / "include"), str(cutlass / "tools" / "util" / "include")]


def build_module(folder: Path, spec: SolutionFile | Solution | SolutionSpec, *, verbose: bool = False) -> Any:
    """Compile (or reuse) the solution's extension module and import it."""
    folder = Path(folder).resolve()
    official = _official_spec(spec)
    if not cpp_sources(folder):
        raise BuildError(f"{folder}: no C++/CUDA sources ({' '.join(CPP_SOURCE_SUFFIXES)}) at the top level")
    flags = effective_flags(official, local_arch())
    root = CACHE_DIR / build_hash(folder, flags)
    source_dir = root / "src"
    _stage_sources(folder, source_dir)
    build_dir = root / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _cpp_extension_load()(
            name=MODULE_NAME,
            sources=[str(p) for p in cpp_sources(source_dir)],
            extra_cflags=flags.cflags,
            extra_cuda_cflags=flags.cuda_cflags,
            extra_ldflags=flags.ld_flags,
            extra_include_paths=include_dirs(source_dir),
            build_directory=str(build_dir),
            verbose=verbose,
        )
    except Exception as exc:  # noqa: BLE001 - the compiler output is in the message
        raise BuildError(f"{folder}: build failed: {type(exc).__name__}: {exc}") from exc


def build_cpp_solution(folder: Path, spec: SolutionFile | Solution | SolutionSpec) -> Callable:
    """The entry function of a C++/CUDA solution (used by harness.solution.load_solution and the driver)."""
    official = _official_spec(spec)
    module = build_module(folder, official)
    fn = getattr(module, official.entry_function, None)
    if fn is None:
        raise BuildError(
            f"{folder}: entry_point: the built module does not export {official.entry_function!r} "
            "(PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(...); })"
        )
    return fn


# ------------------------------------------------------------------------------------------ compile only


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    return str(candidate) if candidate.is_file() else None


def torch_include_dirs() -> list[str]:
    """Torch's C++ headers and Python's (pybind11 needs Python.h); [] when torch ships no headers."""
    from torch.utils import cpp_extension

    dirs = [d for d in cpp_extension.include_paths() if Path(d).is_dir()]
    if not dirs or not (Path(dirs[0]) / "torch" / "extension.h").is_file():
        return []
    return [*dirs, sysconfig.get_paths()["include"]]


def compile_only(
    source: Path,
    archs: Sequence[str],
    out_dir: Path,
    *,
    extra_flags: Sequence[str] = ("-O3",),
    timeout_s: float = 600,
) -> Path:
    """`nvcc -c` one .cu for the given arch tags ('90a', '100a') with torch's headers; returns the object.

    A build check only (CI without a GPU): nothing is linked or loaded. A .cu that includes
    <torch/extension.h> costs minutes of CPU per arch (nvcc parses the torch headers once per arch): keep the
    pybind/torch glue in a .cpp and the kernels in a .cu that includes only CUDA headers.
    """
    import torch
    from torch.utils import cpp_extension

    nvcc = nvcc_path()
    if nvcc is None:
        raise EnvironmentProblem("nvcc not found (PATH, $CUDA_HOME/bin)")
    includes = torch_include_dirs()
    if not includes:
        raise EnvironmentProblem("torch's C++ headers are not installed")
    source = Path(source).resolve()
    out = Path(out_dir) / (source.stem + ".o")
    cmd = [
        nvcc,
        "-c",
        str(source),
        "-o",
        str(out),
        "-std=c++17",
        "-Xcompiler",
        "-fPIC",
        f"-DTORCH_EXTENSION_NAME={MODULE_NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        *cpp_extension.COMMON_NVCC_FLAGS,
        *extra_flags,
        *(gencode(a) for a in archs),
        f"--threads={max(1, len(archs))}",  # one host thread per arch: the torch headers dominate
        *(f"-I{d}" for d in [*include_dirs(source.parent), *includes]),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{source}: nvcc timed out after {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise BuildError(f"{source}: nvcc failed for {', '.join(archs)}:\n{tail}")
    return out
