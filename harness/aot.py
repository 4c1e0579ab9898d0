"""Ahead-of-time builds of a Triton solution's kernels for a GPU that is not here (sm_90a, sm_100a).

Two steps, two processes:
1. `capture_launches` calls the solution's entry point on CPU tensors under Triton's interpreter with every
   kernel launch replaced by a recorder (nothing runs), so the launches are exactly those the solution's own
   Python code makes: kernel, argument types, alignment, integer values and constexpr/launch options.
2. `build_launches` compiles each recorded launch with Triton for a target architecture through Triton's own
   specialization (so the signature and the divisibility attributes are what a launch on that GPU would
   produce) in a fresh process without the interpreter, and returns resource figures (shared memory,
   registers, spills) of the cubin.

Paths a solution only takes on CUDA tensors (device-specific constexprs) are recorded as the CPU path takes
them; a test can override constexprs of a recorded launch to cover them.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.schema import Workload

#: The sm_90a / sm_100a limits a launch must fit (bytes of shared memory per block, registers per thread).
SHARED_LIMIT = {90: 227 * 1024, 100: 227 * 1024}
REGISTER_LIMIT = 255


@dataclass(frozen=True)
class _Arg:
    """A recorded argument: kind "tensor" (dtype, address mod 16), "desc" (a TensorDescriptor), "gdesc" (a Gluon
    TensorDescriptor: its shared-memory layout too) or "value"."""

    kind: str
    data: tuple


@dataclass
class Launch:
    """One recorded kernel launch: where the kernel lives, its arguments (described), its keyword arguments."""

    module_file: str
    kernel: str
    args: list[_Arg]
    kwargs: dict[str, Any] = field(default_factory=dict)  # constexprs and launch options as given


def _gluon_descriptor_class() -> type | None:
    try:
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


def _describe(value: Any) -> _Arg:
    from triton.tools.tensor_descriptor import TensorDescriptor

    if isinstance(value, torch.Tensor):
        return _Arg("tensor", (value.dtype, value.data_ptr() % 16))
    gluon_descriptor = _gluon_descriptor_class()
    if isinstance(value, TensorDescriptor) or (gluon_descriptor and isinstance(value, gluon_descriptor)):
        shape = tuple(int(v) for v in value.shape)
        strides = tuple(int(v) for v in value.strides)
        data = (value.base.dtype, shape, strides, tuple(value.block_shape))
        if isinstance(value, TensorDescriptor):
            return _Arg("desc", data)
        return _Arg("gdesc", (*data, value.layout))
    if value is None or isinstance(value, bool | int | float | str):
        return _Arg("value", (value,))
    raise TypeError(f"cannot record a kernel argument of type {type(value).__name__}")


def capture_launches(entry: Callable, arguments: Sequence[Any]) -> list[Launch]:
    """Call `entry(*arguments)` (CPU tensors, TRITON_INTERPRET=1) and return the launches it makes."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("capture_launches needs TRITON_INTERPRET=1 (set before triton is imported)")
    from triton.runtime.interpreter import InterpretedFunction

    launches: list[Launch] = []

    def record(self, *args, grid, warmup, **kwargs):  # replaces InterpretedFunction.run: nothing runs
        module = sys.modules[self.fn.__module__]
        launches.append(
            Launch(
                module_file=str(Path(module.__file__).resolve()),
                kernel=self.fn.__name__,
                args=[_describe(a) for a in args],
                kwargs={k: _describe(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()},
            )
        )

    # Gluon kernels are never interpreted (gluon.jit makes a GluonJITFunction under the interpreter too): a
    # solution launches them only where it targets a GPU that runs them, and they are recorded the same way
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
    except ImportError:
        GluonJITFunction = None
    patched = [cls for cls in (InterpretedFunction, GluonJITFunction) if cls is not None]
    originals = [cls.run for cls in patched]
    for cls in patched:
        cls.run = record
    try:
        entry(*arguments)
    finally:
        for cls, original in zip(patched, originals, strict=True):
            cls.run = original
    return launches


# ------------------------------------------------------------------------------------------ build (child)


def _rebuild(arg: Any) -> Any:
    from triton.tools.tensor_descriptor import TensorDescriptor

    if not isinstance(arg, _Arg):
        return arg
    if arg.kind == "value":
        return arg.data[0]
    if arg.kind == "tensor":
        dtype, misalign = arg.data
        size = torch.empty((), dtype=dtype).element_size()
        base = torch.empty(64 + misalign // size + 1, dtype=dtype)
        return base[misalign // size :]  # the same address residue modulo 16 as the recorded tensor
    if arg.kind == "gdesc":
        dtype, shape, strides, block, layout = arg.data
        gluon_descriptor = _gluon_descriptor_class()
        return gluon_descriptor(torch.empty(64, dtype=dtype), list(shape), list(strides), list(block), layout)
    dtype, shape, strides, block = arg.data
    return TensorDescriptor(torch.empty(64, dtype=dtype), list(shape), list(strides), list(block))


def _resources(cubin: bytes) -> dict[str, int | None]:
    import re
    import tempfile

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        return {"registers": None, "stack": None}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", text)
    return (
        {"registers": int(m.group(1)), "stack": int(m.group(2))} if m else {"registers": None, "stack": None}
    )


def compile_for(
    fn: Any, args: Sequence[Any], kwargs: dict[str, Any], arch: int, seen: set[str] | None = None
):
    """Compile a Triton (or Gluon) jit function for sm_<arch> as its launch with these arguments would, without a
    GPU: the compiled kernel, or None when `seen` already holds an identical specialization (which it records)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    key = repr(
        (
            fn.fn.__code__.co_filename,
            fn.__name__,
            signature,
            constexprs,
            attrs,
            sorted(options.__dict__.items()),
        )
    )
    if seen is not None:
        if key in seen:
            return None
        seen.add(key)
    source = ASTSource
    if getattr(fn, "is_gluon", lambda: False)():  # Gluon kernels lower from their own AST source
        from triton.experimental.gluon._runtime import GluonASTSource as source
    return triton.compile(source(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


def kernel_resources(kernel: Any) -> dict[str, int | None]:
    """Shared memory (bytes), registers and stack of a compiled kernel."""
    return {"shared": kernel.metadata.shared, **_resources(kernel.asm["cubin"])}


def _build_one(launch: Launch, arch: int, seen: set[str]) -> dict[str, Any] | None:
    """Compile one launch; None when an identical specialization was built already."""
    from harness.tasks import load_module

    module = load_module(Path(launch.module_file), f"_aot_{Path(launch.module_file).parent.name}")
    fn = getattr(module, launch.kernel)
    args = [_rebuild(a) for a in launch.args]
    kwargs = {k: _rebuild(v) for k, v in launch.kwargs.items()}
    kernel = compile_for(fn, args, kwargs, arch, seen)
    if kernel is None:
        return None
    return {"kernel": launch.kernel, "arch": arch, **kernel_resources(kernel)}


def _child_main(path: str, arch: int) -> None:
    launches = pickle.loads(Path(path).read_bytes())
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    for launch in launches:
        try:
            built = _build_one(launch, arch, seen)
            if built is not None:
                results.append(built)
        except Exception as exc:  # noqa: BLE001 - reported per launch
            results.append(
                {"kernel": launch.kernel, "arch": arch, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            )
    for result in results:  # one JSON object a line, as compile_in_child reads them
        print(json.dumps(result))


def compile_in_child(
    argv: Sequence[str], *, what: str | None = None, timeout: float = 600
) -> list[dict[str, Any]]:
    """Run `python *argv` without Triton's interpreter (a script that compiles kernels for a GPU this machine need
    not have) and return the JSON objects it printed, one per line that starts with '{'. A failed child raises
    RuntimeError("<what, or argv[0]> failed: <its stderr>")."""
    from harness import child_env

    proc = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        env=child_env(TRITON_INTERPRET=None),
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{what or argv[0]} failed: {proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def build_launches(launches: Sequence[Launch], arch: int, *, timeout: float = 1800) -> list[dict[str, Any]]:
    """Compile the launches for sm_<arch> (90: sm_90a, 100: sm_100a) in a process without the interpreter.

    One dict per distinct specialization: kernel, arch, shared (bytes), registers, stack (bytes), or error.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "launches.pkl"
        path.write_bytes(pickle.dumps(list(launches)))  # the child builds each specialization once
        return compile_in_child(
            ["-c", f"from harness.aot import _child_main; _child_main({str(path)!r}, {arch})"],
            what=f"AOT build for sm_{arch}",
            timeout=timeout,
        )


# ------------------------------------------------------------------------------------------ a solution


ARCH_TAGS = {"sm_90a": 90, "sm_100a": 100}
#: Set to the arch tag while a solution's launches are recorded for that architecture: a CPU path that plans
#: for a GPU it does not have (075: SM count, pipeline depth that fits the shared memory) reads it.
TARGET_ARCH_ENV = "SOLBENCH_TARGET_ARCH"


def capture_solution(
    folder: Path, prefixes: Sequence[str] = (), workloads: Sequence[Workload] | None = None
) -> list[Launch]:
    """The launches of a Python (Triton) solution over the task's workloads (all, those prefixes name, or
    the given `workloads`, e.g. synthetic sizes).

    Inputs and outputs are meta tensors (no memory, no values), so even the largest workloads cost nothing;
    needs TRITON_INTERPRET=1 in this process.
    """
    from harness.inputs import allocate_outputs, gen_inputs, resolve_axes
    from harness.solution import load_solution, read_solution_dir
    from harness.tasks import load_task

    spec = read_solution_dir(Path(folder))
    task = load_task(spec.definition)
    if workloads is None:
        workloads = [task.workload(p) for p in prefixes] if prefixes else list(task.workloads)
    entry = load_solution(Path(folder)).fn
    launches: list[Launch] = []
    for workload in workloads:
        inputs = gen_inputs(task.definition, workload, device="meta")
        outputs = allocate_outputs(task.definition, resolve_axes(task.definition, workload), device="meta")
        launches += capture_launches(entry, [*inputs, *outputs])
    return launches


def _capture_main(folder: str, prefixes: list[str], out: str) -> None:
    Path(out).write_bytes(pickle.dumps(capture_solution(Path(folder), prefixes)))


def _capture_for(folder: Path, prefixes: Sequence[str], arch: str) -> list[Launch]:
    """The solution's launches recorded in a child process (interpreter on) that targets `arch`."""
    import tempfile

    from harness import child_env
    from harness.errors import BuildError

    env = child_env(TRITON_INTERPRET="1", **{TARGET_ARCH_ENV: arch})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "launches.pkl"
        code = f"from harness.aot import _capture_main; _capture_main({str(folder)!r}, {list(prefixes)!r}, {str(out)!r})"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise BuildError(f"{folder}: recording the launches failed: {tail[0][-300:]}")
        launches = pickle.loads(out.read_bytes())
    if not launches:
        raise BuildError(f"{folder}: the solution launched no Triton kernel")
    return launches


def check_solution_build(
    folder: Path, archs: Sequence[str], prefixes: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Build a solution for each arch tag ('sm_90a', 'sm_100a') without a GPU; one row per kernel build.

    Triton/Python solutions: their recorded launches compiled by Triton (rows: kernel, arch, shared,
    registers, stack, ok, problem). C++/CUDA solutions: each top-level .cu through nvcc -c (rows: kernel =
    the source file). `ok` is False when the build failed or a limit (SHARED_LIMIT, REGISTER_LIMIT) is
    exceeded.
    """
    import tempfile

    from harness.build import compile_only, cpp_sources
    from harness.errors import BuildError, HarnessError
    from harness.solution import read_solution_dir
    from harness.tasks import load_task

    folder = Path(folder)
    spec = read_solution_dir(folder)
    unknown = [a for a in archs if a not in ARCH_TAGS]
    if unknown:
        raise HarnessError(f"--arch: expected one of {', '.join(ARCH_TAGS)}, got {unknown[0]!r}")
    if prefixes:  # bad input here, not a failed build in the recording child
        task = load_task(spec.definition)
        for prefix in prefixes:
            task.workload(prefix)
    rows: list[dict[str, Any]] = []
    if any(lang in ("cuda_cpp", "cutlass", "cudnn", "cublas") for lang in spec.languages):
        with tempfile.TemporaryDirectory() as tmp:
            for source in cpp_sources(folder):
                if source.suffix != ".cu":
                    continue
                for arch in archs:
                    row: dict[str, Any] = {"kernel": source.name, "arch": ARCH_TAGS[arch]}
                    try:
                        compile_only(source, [arch.removeprefix("sm_")], Path(tmp))
                        rows.append({**row, "ok": True, "problem": ""})
                    except BuildError as exc:
                        rows.append({**row, "ok": False, "problem": str(exc).splitlines()[-1][-300:]})
        return rows
    for arch in archs:  # recorded per architecture: a solution may plan differently for each
        for built in build_launches(_capture_for(folder, prefixes, arch), ARCH_TAGS[arch]):
            problem = built.get("error", "")
            if not problem and built["shared"] > SHARED_LIMIT[built["arch"]]:
                problem = f"shared memory {built['shared']} B > {SHARED_LIMIT[built['arch']]} B"
            if not problem and (built.get("registers") or 0) > REGISTER_LIMIT:
                problem = f"{built['registers']} registers > {REGISTER_LIMIT}"
            rows.append({**built, "ok": not problem, "problem": problem})
    return rows
