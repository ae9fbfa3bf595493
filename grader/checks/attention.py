"""Checking an attention result (out, weights) and diagnosing what went wrong.

An ``AttentionCase`` holds what the case's setup computed with the reference (the assignment's
``_common.attention_case``): the float64 oracle, the naive same-dtype results and, for diagnosis,
what each classic mistake would have produced as weights (``AttentionCase.mistakes``). A student
kit carries them precomputed; nothing here computes attention. When the student's weights match
one mistake and not the reference, its concept is named (``grader.checks.hypotheses``); otherwise
the evidence (leaking cells, row sums) decides between the generic concepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from grader.i18n import Msg, tr
from grader.cases import Verdict
from grader.checks.compare import (Expected, check_comparable, check_structure, compare, evidence_of, is_tensor,
                                   nan_locations)
from grader.checks.explore import attention_explorer
from grader.checks.hypotheses import concept_of, matching_mistake
from grader.results import Evidence, Heatmap

WINDOW = 12  # at most this many rows/columns of a matrix go into a heatmap

MESSAGES: dict[str, Msg] = {
    "mask-fill-value": tr("Masked positions received attention weight: fill masked scores with -inf "
                          "(or torch.finfo(scores.dtype).min) before the softmax; a fill of 0 still beats negative scores."),
    "mask-after-softmax": tr("Some rows of weights no longer sum to 1: apply the mask to the scores before the "
                             "softmax instead of zeroing weights after it."),
    "softmax-axis": tr("The weights are normalised over the wrong axis: take the softmax over keys (dim=-1), "
                       "so that each query's row sums to 1."),
    "scaling": tr("The scores are scaled wrongly: divide q @ k^T by sqrt(d_k), the size of one head's vectors."),
    "scaling/d": tr("The scores are divided by d, not by sqrt(d): divide q @ k^T by math.sqrt(d), d = q.shape[-1]."),
    "scaling/d_v": tr("The scores are divided by sqrt(d_v), the size of v's vectors: divide by sqrt(d), d = "
                      "q.shape[-1], the size of the queries and keys the scores are made of."),
    "padding-broadcast": tr("Padding must hide keys (columns), not queries: a (B, T) padding mask broadcasts "
                            "as (B, 1, 1, T) against (B, H, Lq, Lk) scores."),
    "mask-combination": tr("A key may be attended only if it is real AND not in the future: combine keep masks "
                           "with &, not |."),
    "causal-alignment": tr("With fewer queries than keys, the queries are the last positions: query i may see "
                           "keys j <= Lk - Lq + i (bottom-right alignment), not a top-left triangle."),
    "causal-diagonal": tr("A token may attend to itself: keep the diagonal visible (tril, not tril(-1))."),
    "fully-masked-rows": tr("A query that may see no key must output zeros (never NaN) and have finite gradients: "
                            "before the softmax, give rows with no visible key finite scores "
                            "(torch.where(mask.any(-1, keepdim=True), scores, 0)), and zero their weights after it."),
    "fully-masked-rows/uniform": tr("Rows with no visible key came out uniform (1/Lk per key: the mean of v), "
                                    "not zeros. A finite fill such as finfo(dtype).min does that: equal scores give "
                                    "exp(0)/Lk each. Zero those rows: torch.where(mask.any(-1, keepdim=True), weights, 0)."),
    "mask-convention": tr("The bool keep-mask (True = may attend) was added to the scores as if it were additive: "
                          "that adds 1 to the visible scores and hides nothing. Use scores.masked_fill(~mask, "
                          "float('-inf'))."),
    "numerical-stability": tr("The softmax overflowed: subtract each row's max before exp, or use torch.softmax."),
    "dtype-overflow": tr("Mask fill values must fit the dtype: use torch.finfo(scores.dtype).min or -inf, "
                         "never -1e9 or float32's min in float16/bfloat16."),
    "dropout": tr("Some weights were randomly zeroed and the rest scaled up: that is dropout, which must be off "
                  "here (F.dropout defaults to training=True)."),
}


@dataclass
class AttentionCase:
    """Inputs and reference results of one attention call, computed once per batch (at setup)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    keep: torch.Tensor | None
    out: Expected
    weights: Expected
    rows: torch.Tensor | None = None
    """Bool (..., Lq, 1): which query rows are compared (None = all)."""
    mistakes: dict[str, torch.Tensor] = field(default_factory=dict)
    """Mistake ("concept" or "concept/variant") -> the float64 weights it gives on these inputs,
    in the order diagnosis tries them (computed at setup, like the reference's results)."""


def rows_without_keys(keep: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor:
    """Bool (..., Lq, 1): rows with no visible key."""
    if keep is None:
        return torch.zeros(*shape[:-1], 1, dtype=torch.bool)
    return ~keep.expand(shape).any(-1, keepdim=True)


def _rows_where(a: AttentionCase, shape) -> torch.Tensor | None:
    return None if a.rows is None else a.rows.cpu().expand(shape)


def looks_like_dropout(actual_w: torch.Tensor, a: AttentionCase) -> bool:
    """Dropout zeroes a fraction of visible weights and scales the rest by one constant 1/(1-p)."""
    w = actual_w.detach().cpu().double()
    ref = a.weights.oracle.cpu()
    visible = ref > 1e-6
    rows = _rows_where(a, w.shape)
    if rows is not None:
        visible &= rows
    if w.shape != ref.shape or visible.sum() < 20:
        return False
    zeroed = (w.abs() < 1e-12) & visible
    frac = float(zeroed.sum()) / float(visible.sum())
    kept = visible & ~zeroed
    ratio = w[kept] / ref[kept]
    return 0.01 < frac < 0.6 and bool(ratio.numel()) and float(ratio.std()) < 0.05 * float(ratio.mean()) \
        and float(ratio.mean()) > 1.01


def uniform_empty_rows(actual_w: torch.Tensor, a: AttentionCase) -> bool:
    """The weights are right except that rows with no visible key are uniform (1/Lk each): what a
    finite fill such as finfo(dtype).min gives without a guard."""
    w = actual_w.detach().cpu().double()
    ref = a.weights.oracle.cpu()
    if a.keep is None or w.shape != ref.shape or w.dim() < 2:
        return False
    empty = rows_without_keys(a.keep.cpu(), tuple(ref.shape)).expand(ref.shape)
    rows = _rows_where(a, ref.shape)
    if rows is not None:
        empty = empty & rows
    if not bool(empty.any()) or not bool(torch.isfinite(w[empty]).all()):
        return False
    tol = 2e-3 if a.q.dtype in (torch.float32, torch.float64) else 3e-2
    want = torch.where(empty, torch.full_like(ref, 1.0 / ref.shape[-1]), ref)
    where = torch.isfinite(w) if rows is None else (torch.isfinite(w) & rows)
    diff = (w - want).abs()[where]
    return bool(diff.numel()) and float(diff.max()) < tol


def row_sum_slack(dtype: torch.dtype) -> float:
    """How far from 1 a correct row of weights in ``dtype`` may sum: each weight carries a few
    roundings of the dtype (exp, the sum, the division), so 4 eps, and never less than 1e-3."""
    return max(1e-3, 4 * torch.finfo(dtype).eps) if dtype.is_floating_point else 1e-3


def rows_short_of_one(sums: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool per row: a row that has weight (sum > 0) and sums to less than 1 by more than the
    dtype's rounding explains (``row_sum_slack``). A bfloat16 row of a softmax by hand sums to
    0.996: that is rounding, not weights zeroed after the softmax."""
    return (sums > 1e-9) & (sums < 1 - row_sum_slack(dtype))


def diagnose_weights(actual_w: torch.Tensor, a: AttentionCase) -> str | None:
    """The mistake (a concept, or "concept/variant" for a MESSAGES key) that the student's weights
    reproduce, if any (NaN cells are skipped)."""
    w = actual_w.detach().cpu().double()
    if looks_like_dropout(w, a):
        return "dropout"
    if uniform_empty_rows(w, a):
        return "fully-masked-rows/uniform"
    tol = 2e-3 if a.q.dtype in (torch.float32, torch.float64) else 3e-2
    return matching_mistake(w, a.weights.oracle, a.mistakes, tol=tol, where=_rows_where(a, w.shape),
                            finite_only=True)


def message_of(diagnosis: str, default: Msg | str) -> Msg | str:
    """The message for a diagnosis: its variant's own, else its concept's, else ``default``."""
    return MESSAGES.get(diagnosis) or MESSAGES.get(concept_of(diagnosis)) or default


def _heat_window(bad: list[int] | None, lq: int, lk: int) -> tuple[int, int]:
    def start(i: int, n: int) -> int:
        return max(0, min(i - WINDOW // 2, n - WINDOW)) if n > WINDOW else 0

    if bad is None or len(bad) < 2:
        return 0, 0
    return start(bad[-2], lq), start(bad[-1], lk)


def weight_evidence(actual_w: torch.Tensor, a: AttentionCase, bad: list[int] | None) -> dict:
    """Heatmaps, leaking cells and row sums for the batch item and head where things went wrong."""
    w = actual_w.detach().cpu().double()
    ref = a.weights.oracle.cpu()
    lead = list(bad[:-2]) if bad and len(bad) == w.dim() else [0] * (w.dim() - 2)
    w2, ref2 = w[tuple(lead)], ref[tuple(lead)]
    keep2 = a.keep.cpu().expand(ref.shape)[tuple(lead)] if a.keep is not None else torch.ones_like(ref2, dtype=torch.bool)
    rows = _rows_where(a, ref.shape)
    rows2 = rows[tuple(lead)][:, 0] if rows is not None else torch.ones(ref2.shape[0], dtype=torch.bool)
    leak = (~keep2) & (w2.abs() > 1e-4) & rows2[:, None]
    leaking = [list(map(int, ij)) for ij in torch.nonzero(leak)[:40].tolist()]
    r0, c0 = _heat_window(bad, *ref2.shape)
    sl = (slice(r0, r0 + WINDOW), slice(c0, c0 + WINDOW))
    if len(lead) >= 2:
        where_txt = tr("batch {batch}, head {head}", batch=lead[0], head=lead[1])
    elif lead:
        where_txt = tr("batch {batch}", batch=lead[0])
    else:
        where_txt = tr("weights")
    heat = Heatmap(title=where_txt, expected=ref2[sl].tolist(), actual=w2[sl].tolist(),
                   keep=keep2[sl].tolist(), row_offset=r0, col_offset=c0)
    sums = w2.sum(-1)
    return dict(heatmaps=[heat], leaking_cells=leaking or None,
                row_sums=[round(float(s), 6) for s in sums[:64]])


def check_pair(result: object, a: AttentionCase, *, concept: str, what: Msg | str = "masked_attention") -> Verdict | None:
    """None when ``result`` is a pair (out, weights) of tensors of the reference's shapes and
    dtypes; else the verdict that says which part is not."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = getattr(result, "type_name", None) or type(result).__name__
        if isinstance(result, (tuple, list)):
            return Verdict.fail("signature", tr("{what} must return a tuple (out, weights); it returned {type} of {n}.",
                                                what=what, type=got, n=len(result)))
        return Verdict.fail("signature", tr("{what} must return a tuple (out, weights); it returned {type}.",
                                            what=what, type=got))
    for value, exp, name in ((result[0], a.out, "out"), (result[1], a.weights, "weights")):
        part = tr("{what}'s {name}", what=what, name=name)
        bad = (check_structure(value, tuple(exp.oracle.shape), exp.dtype, what=part, shape_concept=concept)
               or check_comparable(value, part))
        if bad:
            return bad
    return None


def check_attention(result: object, a: AttentionCase, *, concept: str, message: Msg | str,
                    what: Msg | str = "masked_attention", atol: float | None = None) -> Verdict:
    """Check (out, weights) against the reference and name the mistake when they differ."""
    bad = check_pair(result, a, concept=concept, what=what)
    if bad:
        return bad
    assert isinstance(result, (tuple, list))
    out, w = result
    assert is_tensor(out) and is_tensor(w)
    rows_out = _rows_where(a, out.shape)
    rows_w = _rows_where(a, w.shape)
    nan_rows = torch.isnan(out.detach().cpu())
    if rows_out is not None:
        nan_rows &= rows_out
    if nan_rows.any():
        empty = rows_without_keys(a.keep.cpu() if a.keep is not None else None, tuple(a.weights.oracle.shape))
        in_empty = bool((nan_rows & empty.expand(out.shape)).any())
        d = diagnose_weights(w, a) or ("fully-masked-rows" if in_empty else "numerical-stability")
        where = nan_locations(out.detach().cpu().masked_fill(~nan_rows, 0))
        return Verdict.fail(concept_of(d), tr("Your output contains NaN. ") + message_of(d, message),
                            Evidence(nan_locations=where, explorer=attention_explorer(
                                a.q, a.k, a.keep, w, a.q.dtype, where[0] if where else None)))
    cw = compare(w, a.weights, where=rows_w, atol=atol, rtol=atol)
    co = compare(out, a.out, where=rows_out, atol=atol, rtol=atol)
    if cw.ok and co.ok:
        return Verdict.ok()
    if not cw.ok:
        specific = diagnose_weights(w, a)
        first_bad = list(cw.first_bad_index) if cw.first_bad_index is not None else None
        extra = weight_evidence(w, a, first_bad)
        extra["explorer"] = attention_explorer(a.q, a.k, a.keep, w, a.q.dtype, first_bad)
        if specific is None:
            sums = torch.tensor(extra["row_sums"])
            if extra["leaking_cells"]:
                specific = "mask-fill-value" if concept not in ("causal-alignment", "padding-broadcast",
                                                                 "mask-combination") else concept
            elif a.keep is not None and bool(rows_short_of_one(sums, a.q.dtype).any()):
                specific = "mask-after-softmax"
        msg = message_of(specific, message) if specific else tr(
            "Your weights differ from the reference, and no mistake this case knows reproduces them (the evidence "
            "shows where). What this case checks: ") + message
        return Verdict.fail(concept_of(specific) if specific else concept, msg,
                            evidence_of(cw, notes=[tr("{what}: {reason}", what="weights", reason=cw.reason)], **extra))
    return Verdict.fail(concept, tr("Your attention weights are right, but the output is not weights @ v. ") + message,
                        evidence_of(co, notes=[tr("{what}: {reason}", what="out", reason=co.reason)]))
