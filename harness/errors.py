"""The HarnessError family and the CLI exit codes it maps to."""

from __future__ import annotations

EXIT_OK = 0  # every workload passed
EXIT_FAILED = 1  # a workload failed
EXIT_USAGE = 2  # bad input or usage
EXIT_ENVIRONMENT = 3  # the environment cannot do it (e.g. CUDA asked for and absent)


class HarnessError(Exception):
    """Base of every error a user can cause; the CLI prints it on one line and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class SchemaError(HarnessError):
    """A definition, workload, solution or trace file does not validate.

    The message reads ``file: field: expected X, got Y``.
    """


class BuildError(HarnessError):
    """A solution could not be built or imported."""

    exit_code = EXIT_FAILED


class EnvironmentProblem(HarnessError):
    """The machine cannot do what was asked (no CUDA, missing tool)."""

    exit_code = EXIT_ENVIRONMENT
