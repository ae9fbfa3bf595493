"""The comparison rule: is a student's tensor close enough to the reference?

Pure functions on plain tensors. Everything is computed in float64 on the CPU.
``actual`` comes from student code, so it is treated as hostile: anything but an
exact ``torch.Tensor`` with a dense (strided) layout and real values gives a failed
``Comparison`` without any of its methods being called. NaN never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

try:
    from grader.i18n import Msg, tr
except ImportError:  # copied beside the reference as reference/compare.py (grader.grading.reference_run),
    # where the grader package is out of reach: the reasons stay English text.
    Msg = str  # type: ignore[misc,assignment]

    def tr(msgid: str, **args: object) -> str:  # type: ignore[misc]
        return msgid.format(**args)


@dataclass(frozen=True)
class Comparison:
    """Outcome of one tensor comparison."""

    ok: bool
    """True when every compared element is within the allowed error."""
    max_abs_error: float
    """max |actual - expected| over the compared elements (inf/NaN when those occur)."""
    allowed_error: float
    """The allowed error: at ``first_bad_index`` (fixed rule) or the bound (flash rule)."""
    first_bad_index: tuple[int, ...] | None
    """Index of the worst failing element (largest error); None when ok or not comparable."""
    expected_value: float | None
    """Reference value at ``first_bad_index``."""
    actual_value: float | None
    """Student value at ``first_bad_index``."""
    reason: Msg | str
    """"" when ok; else one line, e.g. "shape (2, 3) != (2, 4)" or "error 0.31 > allowed 0.02": a `Msg`
    where the words translate, plain text for code-like ones (and everywhere in the copy beside the
    reference, which has no grader to translate with)."""


_TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


def tolerance_for(dtype: torch.dtype) -> tuple[float, float]:
    """Fixed fallback (atol, rtol) for a floating dtype.

    Raises:
        ValueError: for a dtype without a tolerance.
    """
    if dtype not in _TOLERANCES:
        raise ValueError(f"no tolerance for dtype {dtype}; known: {list(_TOLERANCES)}")
    return _TOLERANCES[dtype]


def _fail(reason: Msg | str, *, err: float = float("nan"), allowed: float = float("nan")) -> Comparison:
    return Comparison(False, err, allowed, None, None, None, reason)


def _type_name(obj) -> str:
    # Read the name through type's own slot: a hostile metaclass cannot override it.
    return type.__dict__["__qualname__"].__get__(type(obj))


def _plain_problem(t, what: Msg | str) -> Msg | str:
    """Why ``t`` cannot be compared, or "" when it is a plain dense real tensor."""
    if type(t) is not torch.Tensor:  # exact type: a subclass could override any method
        return tr("{what} is a {type}, not a plain torch.Tensor", what=what, type=_type_name(t))
    if t.layout != torch.strided:
        return tr("{what} has layout {layout}, expected a dense (strided) tensor", what=what, layout=str(t.layout))
    if t.is_meta:
        return tr("{what} is on the meta device and has no values", what=what)
    if t.dtype.is_complex or t.is_quantized:
        return tr("{what} has dtype {dtype}, expected a real dtype", what=what, dtype=str(t.dtype))
    return ""


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(device="cpu", dtype=torch.float64)


def _check_reference(t, what: Msg | str) -> torch.Tensor:
    problem = _plain_problem(t, what)
    if problem:  # the grader passed a bad reference: an operator error, not a student's
        raise TypeError(str(problem))
    return _as_float64(t)


def _selection(where, shape: torch.Size) -> torch.Tensor:
    if where is None:
        return torch.ones(shape, dtype=torch.bool)
    if type(where) is not torch.Tensor or where.dtype != torch.bool:
        raise TypeError("where must be a plain bool tensor (True = compare this element)")
    try:
        return torch.broadcast_to(where.detach().cpu(), shape)
    except RuntimeError as exc:
        raise ValueError(f"where {tuple(where.shape)} does not broadcast to {tuple(shape)}") from exc


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _preflight(actual, expected_shape: torch.Size, dtype: torch.dtype | None):
    """Return (actual as float64, "") or (None, reason) for a tensor that cannot pass."""
    problem = _plain_problem(actual, "actual")
    if problem:
        return None, problem
    if actual.shape != expected_shape:  # no broadcasting: the shape is part of the answer
        return None, f"shape {_shape(actual)} != {tuple(expected_shape)}"
    if dtype is not None and actual.dtype != dtype:
        return None, f"dtype {str(actual.dtype).removeprefix('torch.')} != {str(dtype).removeprefix('torch.')}"
    return _as_float64(actual), ""


def unravel_index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    """The index of element `flat` of a C-contiguous tensor of `shape`. Plain arithmetic on purpose:
    `torch.unravel_index` imports torch.fx's symbolic shapes (and sympy) on first use (docs/performance.md)."""
    idx = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        idx.append(i)
    return tuple(reversed(idx))


def _nonfinite(a: torch.Tensor, e: torch.Tensor, sel: torch.Tensor, allowed) -> Comparison | None:
    """A failed Comparison for NaN anywhere, or inf in actual that expected does not share."""
    bad = sel & (torch.isnan(a) | torch.isnan(e) | (torch.isinf(a) & (a != e)))
    if not bool(bad.any()):
        return None
    flat = int(torch.nonzero(bad.reshape(-1))[0, 0])
    idx = unravel_index(flat, a.shape)
    kind = "NaN" if bool(torch.isnan(a[idx])) else ("inf" if bool(torch.isinf(a[idx])) else "")
    allowed_at = float(allowed[idx]) if isinstance(allowed, torch.Tensor) else float(allowed)
    return Comparison(False, float("nan") if kind != "inf" else float("inf"), allowed_at, idx,
                      float(e[idx]), float(a[idx]), tr("{kind} at {index}", kind=kind, index=str(idx)) if kind
                      else tr("NaN in expected at {index}", index=str(idx)))


def _errors(a: torch.Tensor, e: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    err = torch.where(a == e, 0.0, (a - e).abs())  # equal infs count as error 0
    return torch.where(sel, err, 0.0)


def _quick_pass(a: torch.Tensor, e: torch.Tensor, sel: torch.Tensor | None, atol: float,
                rtol: float) -> Comparison | None:
    """The passing Comparison in a dozen tensor ops, or None to take the full path.

    Most comparisons pass, and the full path (which locates NaN, inf and the worst element)
    costs twice the ops. Anything unusual falls through: NaN in either tensor or an infinite
    reference makes the error NaN or inf, which fails ``err <= allowed`` or the finite check."""
    err = (a - e).abs()
    allowed = atol + rtol * e.abs()
    ok = err <= allowed
    if sel is not None:
        ok |= ~sel
        err = err.masked_fill(~sel, 0.0)
    if not err.numel() or not bool(ok.all()):
        return None
    at = int(err.reshape(-1).argmax())
    max_err = float(err.reshape(-1)[at])
    if not math.isfinite(max_err):
        return None
    return Comparison(True, max_err, float(allowed.reshape(-1)[at]), None, None, None, "")


def compare_tensors(actual, expected, *, atol: float, rtol: float, where=None,
                    dtype: torch.dtype | None = None, quick: bool = True) -> Comparison:
    """Fixed tolerance, per element: |actual - expected| <= atol + rtol * |expected|.

    Args:
        actual: the student's tensor (untrusted).
        expected: the reference tensor, same shape (no broadcasting), any real dtype.
        atol, rtol: the tolerances (see ``tolerance_for``).
        where: optional bool tensor broadcastable to the shape, True = compare this element
            (e.g. only valid query rows).
        dtype: when given, actual must have exactly this dtype.
        quick: let a passing comparison take the quick path (same verdict, fewer tensor ops);
            False always takes the full one.

    Raises:
        TypeError / ValueError: for a bad ``expected`` or ``where`` (grader errors).
    """
    e = _check_reference(expected, "expected")
    sel = _selection(where, e.shape) if where is not None else None
    a, reason = _preflight(actual, e.shape, dtype)
    if a is None:
        return _fail(reason)
    passed = _quick_pass(a, e, sel, atol, rtol) if quick else None
    if passed is not None:
        return passed
    if sel is None:
        sel = _selection(None, e.shape)
    allowed = atol + rtol * torch.where(torch.isinf(e), 0.0, e.abs())
    bad_value = _nonfinite(a, e, sel, allowed)
    if bad_value is not None:
        return bad_value
    err = _errors(a, e, sel)
    max_err = float(err.max()) if err.numel() else 0.0
    excess = torch.where(err > allowed, err, -1.0)  # failing elements keep their error
    if not excess.numel() or float(excess.max()) < 0:
        at = int(err.reshape(-1).argmax()) if err.numel() else None
        allowed_at = float(allowed.reshape(-1)[at]) if at is not None else atol
        return Comparison(True, max_err, allowed_at, None, None, None, "")
    idx = unravel_index(int(excess.reshape(-1).argmax()), e.shape)
    return Comparison(False, max_err, float(allowed[idx]), idx, float(e[idx]), float(a[idx]),
                      tr("error {error} > allowed {allowed} at {index}", error=format(float(err[idx]), ".3g"),
                         allowed=format(float(allowed[idx]), ".3g"), index=str(idx)))


def _rounding_step(dtype: torch.dtype, oracle: torch.Tensor, sel: torch.Tensor) -> float:
    """eps(dtype) x the largest finite |oracle| compared: one rounding step at the top of the range."""
    top = torch.where(sel & torch.isfinite(oracle), oracle.abs(), 0.0)
    return torch.finfo(dtype).eps * (float(top.max()) if top.numel() else 0.0)


def flash_terms(oracle: torch.Tensor, naive: torch.Tensor, where=None) -> tuple[float, float]:
    """The reference's part of ``compare_flash``'s allowance: (max |naive - oracle|, one rounding
    step of naive's dtype at the largest |oracle|) over ``where``. It depends on the case only, so
    a caller grading many submissions on one case computes it once (``grader.checks.compare``).

    Raises:
        TypeError / ValueError: for a bad ``oracle``, ``naive`` or ``where`` (grader errors).
    """
    o = _check_reference(oracle, "oracle")
    n = _check_reference(naive, "naive")
    if n.shape != o.shape:
        raise ValueError(f"naive {_shape(n)} and oracle {_shape(o)} must have the same shape")
    sel = _selection(where, o.shape)
    naive_err = _errors(n, o, sel)
    return (float(naive_err.max()) if naive_err.numel() else 0.0), _rounding_step(naive.dtype, o, sel)


def compare_flash(actual, oracle, naive, *, factor: float = 2.0, abs_term: float = 1e-5,
                  where=None, terms: tuple[float, float] | None = None) -> Comparison:
    """FlashAttention's rule, with one rounding step of the dtype added:
    max|actual - oracle| <= factor * max|naive - oracle| + eps(dtype) * max|oracle| + abs_term.

    ``naive`` is the plain same-dtype reference (``reference.attention.masked_attention``
    on the same rounded inputs; in the attention assignments the farther, per element, of it and
    a softmax written by hand), ``oracle`` the float64 result; so a student is allowed ``factor``
    times the rounding error that straightforward code in that dtype makes. The eps term is one
    unit of the dtype's rounding at the largest value compared: a result in that dtype can
    carry it whichever order it computes in, even where the naive code happened to round luckily.
    ``actual`` must have naive's dtype and oracle's shape. ``where`` as in
    ``compare_tensors`` restricts all maxima. ``terms``: ``flash_terms(oracle, naive, where)``
    when the caller has it already.

    Raises:
        TypeError / ValueError: for a bad ``oracle``, ``naive`` or ``where`` (grader errors).
    """
    if terms is None:
        terms = flash_terms(oracle, naive, where)
    o = _check_reference(oracle, "oracle")
    sel = _selection(where, o.shape)
    a, reason = _preflight(actual, o.shape, naive.dtype)
    if a is None:
        return _fail(reason)
    naive_max, rounding = terms
    allowed = factor * naive_max + rounding + abs_term
    err = _errors(a, o, sel)
    max_err = float(err.max()) if err.numel() else 0.0
    if max_err <= allowed and math.isfinite(allowed):
        # Passing: then no compared cell is NaN or an inf the oracle does not share (either
        # would make max_err NaN or inf), which is all the full check below would look for.
        return Comparison(True, max_err, allowed, None, None, None, "")
    bad_value = _nonfinite(a, o, sel, allowed)
    if bad_value is not None:
        return bad_value
    if max_err <= allowed:
        return Comparison(True, max_err, allowed, None, None, None, "")
    idx = unravel_index(int(err.reshape(-1).argmax()), o.shape)
    return Comparison(False, max_err, allowed, idx, float(o[idx]), float(a[idx]),
                      tr("error {error} > allowed {allowed} ({factor} x naive error + {rounding} rounding + "
                         "{abs_term}) at {index}",
                         error=format(max_err, ".3g"), allowed=format(allowed, ".3g"), factor=format(factor, "g"),
                         rounding=format(rounding, ".3g"), abs_term=format(abs_term, "g"), index=str(idx)))
