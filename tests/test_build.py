"""harness.build: the official flag rules, source discovery, the cached build (cpp_extension.load mocked),
and `nvcc -c` of CUDA sources for sm_90a and sm_100a (skipped without nvcc or torch's headers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import build
from harness.errors import BuildError
from harness.schema import CompileOptions, SolutionSpec

PROJECT = Path(__file__).resolve().parent.parent
CUDA_SOURCES = sorted(PROJECT.glob("solutions/*/*/*.cu")) + sorted(PROJECT.glob("tests/fixtures/*/*.cu"))

G100 = "-gencode=arch=compute_100a,code=sm_100a"
G90 = "-gencode=arch=compute_90a,code=sm_90a"


def _spec(targets=("B200", "LOCAL"), options=None) -> SolutionSpec:
    return SolutionSpec(
        languages=["cuda_cpp"],
        target_hardware=list(targets),
        entry_point="kernel.cu::run",
        compile_options=options,
    )


def test_arch_tags():
    assert build.arch_of(9, 0) == "90a" and build.arch_of(10, 0) == "100a" and build.arch_of(8, 6) == "86"
    assert build.gencode("90a") == G90


def test_null_compile_options_get_only_the_gencode_flags():
    flags = build.effective_flags(_spec(), "90a")
    assert flags.cuda_cflags == [G100, G90]  # no -O3 / --use_fast_math, as officially
    assert flags.cflags == [] and flags.ld_flags == ["-lcuda"]


def test_null_compile_options_without_injection_are_all_empty():
    flags = build.effective_flags(_spec(targets=("LOCAL",)), None)  # no GPU here
    assert (flags.cflags, flags.cuda_cflags, flags.ld_flags) == ([], [], [])


def test_given_options_keep_their_defaults_with_gencode_prepended():
    flags = build.effective_flags(_spec(options=CompileOptions()), "90a")
    assert flags.cuda_cflags == [G100, G90, "-O3", "--use_fast_math"]
    assert flags.ld_flags == ["-lcuda"]
    flags = build.effective_flags(_spec(targets=("LOCAL",), options=CompileOptions(cflags=["-O2"])), "90a")
    assert flags.cuda_cflags == [G90, "-O3", "--use_fast_math"] and flags.cflags == ["-O2"]


def test_explicit_arch_flags_suppress_injection():
    for own in (["-arch=sm_90a"], ["-gencode=arch=compute_90,code=sm_90"]):
        flags = build.effective_flags(_spec(options=CompileOptions(cuda_cflags=own)), "90a")
        assert flags.cuda_cflags == own


def test_b200_and_local_b200_are_not_duplicated():
    assert build.effective_flags(_spec(), "100a").cuda_cflags == [G100]


def test_only_top_level_sources_are_compiled(tmp_path):
    for name in ("a.cu", "b.cpp", "c.cc", "d.cxx", "e.c", "f.h", "g.cuh", "notes.md"):
        (tmp_path / name).write_text("//\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "h.cu").write_text("//\n")
    assert [p.name for p in build.cpp_sources(tmp_path)] == ["a.cu", "b.cpp", "c.cc", "d.cxx", "e.c"]


def test_build_hash_follows_contents_and_flags(tmp_path):
    (tmp_path / "k.cu").write_text("// v1\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "h.cuh").write_text("// h\n")
    flags = build.effective_flags(_spec(), "90a")
    h1 = build.build_hash(tmp_path, flags)
    assert build.build_hash(tmp_path, flags) == h1
    (tmp_path / "inc" / "h.cuh").write_text("// h2\n")  # headers in subfolders count
    h2 = build.build_hash(tmp_path, flags)
    assert h2 != h1
    assert build.build_hash(tmp_path, build.effective_flags(_spec(targets=("LOCAL",)), "90a")) != h2


def test_build_calls_cpp_extension_load_the_official_way(tmp_path, monkeypatch):
    folder = tmp_path / "sol"
    folder.mkdir()
    (folder / "kernel.cu").write_text("// kernel\n")
    (folder / "helpers.cuh").write_text("// helpers\n")
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(build, "local_arch", lambda: "90a")
    seen = {}

    class Module:
        @staticmethod
        def run(*args):
            return "ran"

    def fake_load(**kwargs):
        seen.update(kwargs)
        return Module

    monkeypatch.setattr(build, "_cpp_extension_load", lambda: fake_load)
    fn = build.build_cpp_solution(folder, _spec())
    assert fn() == "ran"
    src = Path(seen["sources"][0]).parent
    assert seen["name"] == "benchmark_kernel"
    assert [Path(s).name for s in seen["sources"]] == ["kernel.cu"]
    assert src.parent.parent == tmp_path / "cache" and (src / "helpers.cuh").is_file()
    assert seen["extra_include_paths"][0] == str(src)
    assert seen["extra_cuda_cflags"] == [G100, G90] and seen["extra_ldflags"] == ["-lcuda"]
    assert Path(seen["build_directory"]).parent == src.parent

    class Empty:
        pass

    monkeypatch.setattr(build, "_cpp_extension_load", lambda: lambda **kw: Empty)
    with pytest.raises(BuildError, match="does not export 'run'"):
        build.build_cpp_solution(folder, _spec())


def test_build_errors_are_build_errors(tmp_path, monkeypatch):
    with pytest.raises(BuildError, match="no C\\+\\+/CUDA sources"):
        build.build_module(tmp_path, _spec())
    (tmp_path / "kernel.cu").write_text("oops\n")
    monkeypatch.setattr(build, "CACHE_DIR", tmp_path / "cache")

    def failing_load(**kwargs):
        raise RuntimeError("Error building extension 'benchmark_kernel': kernel.cu(1): error: oops")

    monkeypatch.setattr(build, "_cpp_extension_load", lambda: failing_load)
    with pytest.raises(BuildError, match="kernel.cu\\(1\\): error"):
        build.build_module(tmp_path, _spec())


# ------------------------------------------------------------------------------------------ nvcc

_NVCC_MISSING = build.nvcc_path() is None or not build.torch_include_dirs()
needs_nvcc = pytest.mark.skipif(_NVCC_MISSING, reason="needs nvcc and torch's C++ headers")

_TINY_CU = """
#include <cuda_runtime.h>
__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


@needs_nvcc
def test_compile_only_builds_for_sm90a_and_sm100a(tmp_path):
    source = tmp_path / "tiny.cu"
    source.write_text(_TINY_CU)
    obj = build.compile_only(source, ["90a", "100a"], tmp_path)
    assert obj.is_file() and obj.stat().st_size > 0
    (tmp_path / "bad.cu").write_text("__global__ void k() { undefined_name(); }\n")
    with pytest.raises(BuildError, match="nvcc failed"):
        build.compile_only(tmp_path / "bad.cu", ["90a"], tmp_path)


@needs_nvcc
@pytest.mark.parametrize("source", CUDA_SOURCES, ids=[str(p.relative_to(PROJECT)) for p in CUDA_SOURCES])
def test_solution_cuda_sources_compile_for_h200_and_b200(source, tmp_path):
    build.compile_only(source, ["90a", "100a"], tmp_path)
