"""sam-hq-solbench harness: definitions, inputs, correctness, timing and packaging for SOL-ExecBench tasks."""

from __future__ import annotations

import os
from pathlib import Path

__version__ = "0.1.0"

#: The package root (the folder holding definitions/, references/, solutions/, workloads/).
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def child_env(**changes: str | None) -> dict[str, str]:
    """This process's environment for a child Python process that imports `harness` from PROJECT_ROOT.

    `changes` set variables (a value) or remove them (None).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env
