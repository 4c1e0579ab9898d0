"""sam-hq-solbench harness: definitions, inputs, correctness, timing and packaging for SOL-ExecBench tasks."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

#: The package root (the folder holding definitions/, references/, solutions/, workloads/).
PROJECT_ROOT = Path(__file__).resolve().parent.parent
