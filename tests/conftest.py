"""Shared test set-up: the Triton interpreter on CPU-only machines, the `gpu` marker, the official data dir."""

from __future__ import annotations

import os
from pathlib import Path

# Must happen before anything imports triton: @triton.jit picks the interpreter at decoration time.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def official_dir() -> Path | None:
    """NVIDIA's dataset files for the three tasks (env SOLBENCH_OFFICIAL; CI sets it to ../shared/official)."""
    value = os.environ.get("SOLBENCH_OFFICIAL")
    if not value:
        return None
    path = Path(value)
    return path if path.is_dir() else None


@pytest.fixture
def official() -> Path:
    path = official_dir()
    if path is None:
        pytest.skip("SOLBENCH_OFFICIAL is not set to the official dataset folder")
    return path


def pytest_collection_modifyitems(config, items):
    if _HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def poisoned_workspaces(monkeypatch):
    """While the test runs, torch.empty / torch.empty_like fill what they allocate: floating tensors with NaN,
    integer ones with -1. A kernel that reads workspace it has not written first then fails its check; on a GPU
    the caching allocator hands back whatever lay there (on the H200, session 36: NaN-poisoned outputs of earlier
    calls, and all of 075's output_keys came out NaN)."""
    empty, empty_like = torch.empty, torch.empty_like

    def poison(t):
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.dtype != torch.bool and not t.is_complex():
            t.fill_(-1)
        return t

    monkeypatch.setattr(torch, "empty", lambda *a, **k: poison(empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: poison(empty_like(*a, **k)))
