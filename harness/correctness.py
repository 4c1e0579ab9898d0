"""The official correctness rule (compute_error_stats) and the aggregation over rounds and outputs.

An element passes if |x - y| <= atol + rtol * |y| (both cast to fp32); any NaN/Inf fails (matching -inf is
exempt only with allow_negative_inf); an all-zero output against a non-zero reference fails; the workload
passes if the matched ratio reaches required_matched_ratio and, when set, max |x - y| <= max_error_cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from harness.schema import Correctness, ToleranceSpec


@dataclass
class ErrorStats:
    passed: bool
    max_absolute_error: float
    max_relative_error: float
    has_nan: bool = False
    has_inf: bool = False
    matched_ratio: float = 1.0
    reason: str = ""
    """Why it failed: "non-finite", "all-zero", "ratio" or "cap" (empty when passed)."""
    worst: list[dict] = field(default_factory=list)
    """The worst elements: index, value, reference, |error|, allowed error."""

    def to_correctness(self) -> Correctness:
        return Correctness(
            max_relative_error=self.max_relative_error,
            max_absolute_error=self.max_absolute_error,
            has_nan=self.has_nan,
            has_inf=self.has_inf,
        )

    def report(self) -> str:
        lines = [
            f"matched {self.matched_ratio:.6f}, max abs {self.max_absolute_error:.3e}, "
            f"max rel {self.max_relative_error:.3e}" + (f", failed: {self.reason}" if self.reason else "")
        ]
        for w in self.worst:
            lines.append(
                f"  at {tuple(w['index'])}: got {w['value']:.6g}, expected {w['reference']:.6g}, "
                f"|err| {w['abs_error']:.3e} > allowed {w['allowed']:.3e}"
            )
        return "\n".join(lines)


def _worst_elements(
    out: torch.Tensor, ref: torch.Tensor, excess: torch.Tensor, allowed, k: int
) -> list[dict]:
    flat = excess.reshape(-1)
    k = min(k, int((flat > 0).sum().item()))
    if k == 0:
        return []
    idx = torch.topk(flat, k).indices
    rows = []
    for i in idx.tolist():
        index = [int(v) for v in torch.unravel_index(torch.tensor(i), out.shape)] if out.dim() else []
        rows.append(
            {
                "index": index,
                "value": float(out.reshape(-1)[i]),
                "reference": float(ref.reshape(-1)[i]),
                "abs_error": float((out.reshape(-1)[i] - ref.reshape(-1)[i]).abs()),
                "allowed": float(allowed.reshape(-1)[i]),
            }
        )
    return rows


def _element_errors(
    out: torch.Tensor, ref: torch.Tensor, tolerance: ToleranceSpec
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(keep, |error|, allowed error, failed) per element of two fp32 tensors. keep drops matching -inf positions
    when allow_negative_inf; failed is |x - y| > atol + rtol |y| or a non-finite difference (NaN or inf on either
    side), among the kept positions."""
    if tolerance.allow_negative_inf:
        keep = ~((out == -math.inf) & (ref == -math.inf))
    else:
        keep = torch.ones_like(out, dtype=torch.bool)
    zero = torch.zeros((), dtype=torch.float32, device=out.device)
    abs_err = torch.where(keep, out - ref, zero).abs()
    allowed = tolerance.max_atol + tolerance.max_rtol * torch.where(keep, ref, zero).abs()
    failed = ((abs_err > allowed) | ~torch.isfinite(abs_err)) & keep
    return keep, abs_err, allowed, failed


def failed_elements(output: torch.Tensor, reference: torch.Tensor, tolerance: ToleranceSpec) -> torch.Tensor:
    """The elements that fail the official per-element rule (a bool tensor of output's shape): what
    compute_error_stats counts against the matched ratio, non-finite elements included. For diagnostics that need
    to know where an output is wrong (e.g. which items or token ranges)."""
    return _element_errors(
        output.detach().to(torch.float32), reference.detach().to(torch.float32), tolerance
    )[3]


def compute_error_stats(
    output: torch.Tensor, reference: torch.Tensor, tolerance: ToleranceSpec, *, worst: int = 5
) -> ErrorStats:
    out = output.detach().to(torch.float32)
    ref = reference.detach().to(torch.float32)
    atol = tolerance.max_atol

    # 1. non-finite anywhere fails, even where both sides agree (matching -inf only with allow_negative_inf)
    bad_out = ~torch.isfinite(out)
    bad_ref = ~torch.isfinite(ref)
    both_neg_inf = (out == -math.inf) & (ref == -math.inf)
    if tolerance.allow_negative_inf:
        bad = (bad_out | bad_ref) & ~both_neg_inf
    else:
        bad = bad_out | bad_ref
    if bool(bad.any()):
        has_nan = bool(torch.isnan(out).any() or torch.isnan(ref).any())
        return ErrorStats(
            False, 0.0, 0.0, has_nan=has_nan, has_inf=not has_nan, matched_ratio=0.0, reason="non-finite"
        )

    # 2. an all-zero output against a non-zero reference fails. The norms cover the whole tensors, as
    # officially: matching -inf positions (allowed) make both norms inf, so the check does not fire then.
    ref_norm = float(torch.linalg.vector_norm(ref)) if ref.numel() else 0.0
    out_norm = float(torch.linalg.vector_norm(out)) if out.numel() else 0.0
    if ref_norm > 0 and out_norm == 0:
        return ErrorStats(False, ref_norm, ref_norm, matched_ratio=0.0, reason="all-zero")

    # 3. drop matching -inf positions when allowed (masked, not compacted, so reported indices stay real)
    keep, abs_err, allowed, failed = _element_errors(out, ref, tolerance)
    n_kept = int(keep.sum())
    if n_kept == 0:
        return ErrorStats(True, 0.0, 0.0)

    zero = torch.zeros((), dtype=torch.float32, device=out.device)
    n_failed = int(failed.sum())
    matched = min(1.0, max(0.0, 1.0 - n_failed / n_kept))
    max_abs = float(abs_err[keep].max())
    max_rel = float((abs_err / torch.where(keep, ref, zero).abs().clamp_min(atol))[keep].max())
    reason = ""
    if matched < tolerance.required_matched_ratio:
        reason = "ratio"
    elif tolerance.max_error_cap is not None and max_abs > tolerance.max_error_cap:
        reason = "cap"
    report = _worst_elements(out, ref, abs_err - allowed, allowed, worst) if worst else []
    return ErrorStats(not reason, max_abs, max_rel, matched_ratio=matched, reason=reason, worst=report)


def aggregate(kept: ErrorStats | None, new: ErrorStats) -> ErrorStats:
    """Keep the largest max_absolute_error; NaN always replaces; Inf replaces unless the kept one has NaN."""
    if kept is None or new.has_nan:
        return new
    if new.has_inf:
        return kept if kept.has_nan else new
    return new if new.max_absolute_error > kept.max_absolute_error else kept


def check_outputs(outputs, references, names, tolerance: ToleranceSpec, prev: dict | None = None) -> dict:
    """A variant's outputs under the official rule, for tuning reports: passed, the smallest matched ratio,
    and the largest max |out - ref| / (atol + rtol |ref|) with the output it occurred in (inf when an
    output is not finite). With `prev` (an earlier round's result) the worst of both is kept."""
    res = dict(prev) if prev else {"passed": True, "min_matched": 1.0, "worst_ratio": 0.0, "worst_output": ""}
    for name, out, ref in zip(names, outputs, references, strict=True):
        stats = compute_error_stats(out, ref, tolerance, worst=0)
        allowed = tolerance.max_atol + tolerance.max_rtol * ref.abs()
        ratio = float(((out - ref).abs() / allowed).max()) if torch.isfinite(out).all() else math.inf
        res["passed"] = res["passed"] and stats.passed
        res["min_matched"] = min(res["min_matched"], stats.matched_ratio)
        if ratio > res["worst_ratio"]:
            res["worst_ratio"], res["worst_output"] = ratio, name
    return res
