"""Tensors -> Verdict: type, shape, dtype, NaN and value checks with the right tolerance rule.

All comparisons run here, in the grader, on plain tensors the worker sent back. The numeric rule
lives in ``grader.checks.tolerance`` (fixed tolerance for fp32/fp64, FlashAttention's "at most twice
a naive same-dtype implementation's error" for fp16/bf16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

import torch

from grader.i18n import Msg, tr
from grader.cases import Verdict
from grader.results import Evidence
from grader.checks.tolerance import Comparison, compare_flash, compare_tensors, flash_terms, tolerance_for

HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Expected:
    """The reference result of one tensor.

    oracle: float64, computed from the same rounded inputs the student got.
    naive:  the same computation in the input dtype (for the fp16/bf16 rule), else None. Where
            plain code can be written in more than one way that rounds differently (torch.softmax
            vs a softmax by hand), ``farthest_of`` their results: the rule then allows twice the
            error of whichever rounds worst on the cells compared.
    dtype:  the dtype the student's tensor must have.
    """

    oracle: torch.Tensor
    naive: torch.Tensor | None
    dtype: torch.dtype


def farthest_of(oracle: torch.Tensor, results: list[torch.Tensor]) -> torch.Tensor:
    """Per element, the one of ``results`` (same shape and dtype) farthest from ``oracle``. Over any
    selection of cells, max |farthest - oracle| is then the largest of the results' own errors."""
    o = oracle.detach().to("cpu", torch.float64)
    worst = results[0]
    for r in results[1:]:
        further = (r.detach().to("cpu", torch.float64) - o).abs() > (worst.detach().to("cpu", torch.float64) - o).abs()
        worst = torch.where(further.to(worst.device), r, worst)
    return worst


def type_name(value: object) -> str:
    t = type(value)
    return t.__name__ if t.__module__ in ("builtins", None) else f"{t.__module__}.{t.__name__}"


def is_tensor(value: object) -> TypeGuard[torch.Tensor]:
    """A plain tensor (no subclass: a student's subclass could override any method we call)."""
    return type(value) is torch.Tensor


def not_a_tensor(value: object, what: Msg | str) -> Verdict:
    got = getattr(value, "type_name", None) or type_name(value)
    return Verdict.fail("signature", tr("{what} should be a torch.Tensor, but your code returned {got}.",
                                        what=what, got=got),
                        Evidence(notes=[tr("{what}: got {got}", what=what, got=got)]))


def nan_locations(t: torch.Tensor, limit: int = 5) -> list[list[int]]:
    idx = torch.nonzero(torch.isnan(t.detach().to("cpu", torch.float64)))[:limit]
    return [list(map(int, row)) for row in idx.tolist()]


def check_structure(actual: object, shape: tuple[int, ...], dtype: torch.dtype, *, what: Msg | str,
                    shape_concept: str, dtype_concept: str = "output-dtype") -> Verdict | None:
    """Type, shape and dtype; None when all three are right. The messages state the facts only:
    what the rule is, and how to meet it, is the concept's (the assignment's spec.toml)."""
    if not is_tensor(actual):
        return not_a_tensor(actual, what)
    assert isinstance(actual, torch.Tensor)
    ev = Evidence(expected_shape=list(shape), actual_shape=list(actual.shape),
                  expected_dtype=str(dtype), actual_dtype=str(actual.dtype))
    if tuple(actual.shape) != tuple(shape):
        return Verdict.fail(shape_concept, tr("{what} has shape {actual}, expected {expected}.", what=what,
                                              actual=str(tuple(actual.shape)), expected=str(tuple(shape))), ev)
    if actual.dtype != dtype:
        return Verdict.fail(dtype_concept, tr("{what} is {actual}, expected {expected}.", what=what,
                                              actual=str(actual.dtype), expected=str(dtype)), ev)
    return None


def check_comparable(actual: object, what: Msg | str, *, concept: str = "device-placement") -> Verdict | None:
    """A plain tensor with values (a meta tensor has none to compare); None when it is one. Run
    before anything that reads a student's values: torch.equal, .cpu() or .tolist() raise on a
    meta tensor. `concept`: the one a meta tensor fails with (the assignment must declare it)."""
    if not is_tensor(actual):
        return not_a_tensor(actual, what)
    assert isinstance(actual, torch.Tensor)
    if actual.device.type == "meta":
        return Verdict.fail(concept, tr("{what} is on the meta device; it cannot be checked.", what=what))
    return None


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical: the same dtype and shape, and equal values wherever each one lives (on the
    CPU when their devices differ). For tensors `check_comparable` accepted."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.device != b.device:
        a, b = a.detach().cpu(), b.detach().cpu()
    return torch.equal(a, b)


def _where_key(where: torch.Tensor | None) -> tuple | None:
    """What identifies a selection tensor's cells: its storage, offset, shape and strides. Views of
    one setup tensor (``rows.expand(shape)``, made anew on every call) share it."""
    if where is None:
        return None
    return (where.untyped_storage().data_ptr(), where.storage_offset(), tuple(where.shape), where.stride(),
            where.device.type)


def _flash_terms(exp: Expected, oracle: torch.Tensor, naive: torch.Tensor,
                 where: torch.Tensor | None) -> tuple[float, float]:
    """``flash_terms`` of `exp` over `where`, computed once per case and selection: they depend on the
    reference alone, and a batch compares every submission with the same setups. Kept on the
    Expected (outside its fields: not stored in kits, not compared), a few selections each, with
    the selection tensor itself, so its storage cannot be freed and reused by another tensor."""
    cache: dict = exp.__dict__.setdefault("_flash_terms", {})
    key = _where_key(where)
    hit = cache.get(key)
    if hit is None:
        if len(cache) >= 8:
            cache.clear()
        hit = cache[key] = (where, flash_terms(oracle, naive, where))
    return hit[1]


def compare(actual: torch.Tensor, exp: Expected, *, where: torch.Tensor | None = None,
            atol: float | None = None, rtol: float | None = None, factor: float = 2.0) -> Comparison:
    """Pick the rule by dtype: FlashAttention's rule for fp16/bf16 when a naive result exists."""
    actual = actual.detach().to("cpu")
    if exp.dtype in HALF and exp.naive is not None and atol is None:
        oracle, naive = exp.oracle.to("cpu"), exp.naive.detach().to("cpu")
        return compare_flash(actual, oracle, naive, factor=factor, where=where,
                             terms=_flash_terms(exp, oracle, naive, where))
    default_atol, default_rtol = tolerance_for(exp.dtype)
    return compare_tensors(actual, exp.oracle.to("cpu"), atol=default_atol if atol is None else atol,
                           rtol=default_rtol if rtol is None else rtol, where=where)


def evidence_of(c: Comparison, **extra) -> Evidence:
    return Evidence(
        max_abs_error=c.max_abs_error, allowed_error=c.allowed_error,
        first_bad_index=list(c.first_bad_index) if c.first_bad_index is not None else None,
        expected_value=c.expected_value, actual_value=c.actual_value, **extra)


def check_values(actual: object, exp: Expected, *, what: Msg | str, concept: str, message: Msg | str,
                 where: torch.Tensor | None = None, nan_concept: str | None = None,
                 atol: float | None = None, rtol: float | None = None) -> Verdict:
    """Full check of one tensor against the reference; ``message`` explains a value mismatch."""
    bad = check_structure(actual, tuple(exp.oracle.shape), exp.dtype, what=what, shape_concept=concept)
    if bad:
        return bad
    bad = check_comparable(actual, what)
    if bad:
        return bad
    assert isinstance(actual, torch.Tensor)
    selected = actual if where is None else actual.detach().to("cpu")[where.expand_as(actual.cpu())]
    if torch.isnan(selected.detach().to("cpu")).any():
        nans = nan_locations(actual.detach().to("cpu").masked_fill(~where.expand_as(actual.cpu()), 0)
                             if where is not None else actual)
        return Verdict.fail(nan_concept or concept, tr("{what} contains NaN. ", what=what) + message,
                            Evidence(nan_locations=nans, actual_shape=list(actual.shape)))
    c = compare(actual, exp, where=where, atol=atol, rtol=rtol)
    if c.ok:
        return Verdict.ok()
    return Verdict.fail(concept, message, evidence_of(c, notes=[tr("{what}: {reason}", what=what, reason=c.reason)]))
