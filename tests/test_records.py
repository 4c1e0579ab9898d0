"""The README's results table against the traces it cites: each row's figures are what `solbench report` computes
from that solution's `traces_h200.jsonl` (the official traces of the kernel and of the baseline)."""

import re

import pytest

from harness import PROJECT_ROOT, report
from harness.schema import load_traces_jsonl

UNITS = {"µs": 1e-3, "ms": 1.0}
ROW = re.compile(
    r"^\| (\d{3}) \| `([^`]+)` \| (\w+) \| [^|]+ \| (\d+)/(\d+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([\d.]+) % \| ([\d.]+) \|$"
)


def _rows() -> list[re.Match]:
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    return [m for line in text.splitlines() if (m := ROW.match(line))]


def _same(cell: str, value_ms: float) -> bool:
    """cell ("28.0 µs", "3.455 ms") is value_ms rounded to the cell's digits."""
    number, unit = cell.strip().split()
    digits = len(number.partition(".")[2])
    return f"{value_ms / UNITS[unit]:.{digits}f}" == number


def test_the_readme_has_a_row_per_task():
    assert sorted(m[1] for m in _rows()) == ["074", "075", "077"]


@pytest.mark.parametrize("row", _rows(), ids=lambda m: m[1])
def test_readme_row_is_what_its_traces_give(row):
    task, solution = row[1], row[2]
    (folder,) = (PROJECT_ROOT / "solutions").glob(f"{task}_*/{solution}")
    traces = load_traces_jsonl(folder / "traces_h200.jsonl")
    report.annotate(traces, "H200", "leaderboard")
    ours = [t for t in traces if t.solution == solution]
    assert len({t.workload.uuid for t in ours}) == len(ours) == int(row[5]) == 16
    s = report.summarize(ours)
    assert (s.passed, s.total) == (int(row[4]), int(row[5]))
    assert s.n_scored == s.total  # every workload has its baseline in the file
    assert _same(row[6], s.geomean_latency_ms), (row[6], s.geomean_latency_ms)
    assert _same(row[7], s.geomean_baseline_ms), (row[7], s.geomean_baseline_ms)
    assert _same(row[8], s.geomean_sol_ms), (row[8], s.geomean_sol_ms)
    assert f"{100 * s.geomean_sol_ms / s.geomean_latency_ms:.1f}" == row[9]
    assert f"{s.score:.3f}" == row[10]
