"""Checking a boolean mask a student built, and naming the mistake when it is wrong."""

from __future__ import annotations

import torch

from grader.i18n import Msg, tr
from grader.cases import Verdict
from grader.checks.compare import check_structure, is_tensor
from grader.checks.explore import mask_explorer
from grader.results import Evidence, Heatmap

MASK_MESSAGES: dict[str, Msg] = {
    "causal-diagonal": tr("Your mask hides the diagonal: a token may attend to itself, so use tril() "
                          "(diagonal=0), not tril(-1)."),
    "causal-alignment": tr("With fewer queries than keys, the queries are the last positions: query i may see "
                           "keys j <= k_len - q_len + i (bottom-right), not a top-left triangle."),
    "mask-combination": tr("Keep masks combine with AND: a key is visible only if it is real and not in the future."),
    "padding-broadcast": tr("Padding hides keys (columns): a (B, Lk) padding mask broadcasts as (B, 1, 1, Lk). "
                            "True marks real tokens; with side='left' they are the last positions."),
    "padding-mask": tr("Your mask has the real tokens at the wrong end of each row: with side='left' they are the "
                       "last `length` positions, with side='right' the first."),
    "inverted": tr("Your mask uses the opposite convention: here True means 'may attend' (or 'real token')."),
}


def additive_mask_verdict(actual: object, expected: torch.Tensor, what: Msg | str) -> Verdict | None:
    """A float mask that would be right as a bool keep-mask: an additive 0/-inf (or finfo.min)
    mask, or a 0/1 float one, perhaps with extra leading size-1 dims (tutorial code returns
    (1, T, T)). None when that is not what ``actual`` is."""
    if not is_tensor(actual) or not actual.is_floating_point() or actual.device.type == "meta":
        return None
    got = actual.detach().cpu()
    while got.dim() > expected.dim() and got.shape[0] == 1:
        got = got[0]
    if got.shape != expected.shape:
        return None
    exp = expected.cpu()
    shape = tuple(actual.shape)
    ev = Evidence(expected_shape=list(expected.shape), actual_shape=list(shape),
                  expected_dtype=str(torch.bool), actual_dtype=str(actual.dtype))
    if bool(((got == 0) | (got < -1e3)).all()) and torch.equal(got == 0, exp):
        return Verdict.fail("mask-convention", tr(
            "{what} returned an additive {dtype} mask of shape {shape} (0 = visible, -inf = hidden); masks here "
            "are bool keep-masks of shape {expected}, True = may attend: return `additive == 0`.",
            what=what, dtype=str(actual.dtype), shape=str(shape), expected=str(tuple(expected.shape))), ev)
    if bool(((got == 0) | (got == 1)).all()) and torch.equal(got == 1, exp):
        return Verdict.fail("mask-convention", tr(
            "{what} returned a 0/1 {dtype} mask of shape {shape}; masks here are bool (True = may attend) of "
            "shape {expected}: return it with dtype=torch.bool (or .bool()).",
            what=what, dtype=str(actual.dtype), shape=str(shape), expected=str(tuple(expected.shape))), ev)
    return None


Alternative = torch.Tensor | tuple[torch.Tensor, Msg | str]


def with_mask_messages(alternatives: dict[str, torch.Tensor]) -> dict[str, Alternative]:
    """``alternatives`` with this module's attention-mask sentences (`MASK_MESSAGES`) for the
    concepts it has one for: for assignments whose concepts mean what these sentences say."""
    return {c: (m, MASK_MESSAGES[c]) if c in MASK_MESSAGES else m for c, m in alternatives.items()}


def check_mask(actual: object, expected: torch.Tensor, *, what: Msg | str, concept: str, message: Msg | str,
               alternatives: dict[str, Alternative] | None = None) -> Verdict:
    """Exact comparison of a bool mask; ``alternatives`` maps a concept to the mask that mistake
    builds, or to (mask, message). A mask reproduced without a message of its own is said in the
    concept's own words (its title, filled in by the engine), never in the case's message."""
    convention = additive_mask_verdict(actual, expected, what)
    if convention:
        return convention
    bad = check_structure(actual, tuple(expected.shape), torch.bool, what=what, shape_concept=concept)
    if bad:
        if bad.concept == "output-dtype":
            return Verdict.fail(concept, tr("{what} must be a bool tensor (True = may attend); yours is {dtype}.",
                                            what=what, dtype=str(getattr(actual, "dtype", "?"))), bad.evidence)
        return bad
    assert is_tensor(actual)
    if actual.device.type == "meta":
        return Verdict.fail("device-placement", tr("{what} unexpectedly came back on the meta device.", what=what))
    got, exp = actual.cpu(), expected.cpu()
    if torch.equal(got, exp):
        return Verdict.ok()
    wrong = torch.nonzero(got != exp)
    first = [int(i) for i in wrong[0].tolist()]
    ev = Evidence(first_bad_index=first, expected_value=float(exp[tuple(first)]),
                  actual_value=float(got[tuple(first)]), heatmaps=mask_heatmaps(got, exp),
                  notes=[tr("{n} of {total} cells differ", n=len(wrong), total=exp.numel())],
                  explorer=mask_explorer(got, exp))
    if torch.equal(got, ~exp):
        return Verdict.fail("mask-convention", MASK_MESSAGES["inverted"], ev)
    for alt_concept, alt in (alternatives or {}).items():
        # a bare mask: said in its concept's words (the case's own message when it is the case's concept)
        alt_mask, alt_message = alt if isinstance(alt, tuple) else (alt, message if alt_concept == concept else "")
        if alt_mask.shape == got.shape and torch.equal(got, alt_mask.cpu()):
            return Verdict.fail(alt_concept, alt_message, ev)
    return Verdict.fail(concept, message, ev)


def mask_heatmaps(got: torch.Tensor, exp: torch.Tensor, limit: int = 3) -> list[Heatmap]:
    """One 2-D grid per leading index (batch item), at most ``limit``, where the masks differ first."""
    g2 = got.reshape(-1, *got.shape[-2:]) if got.dim() >= 2 else got.reshape(1, 1, -1)
    e2 = exp.reshape(-1, *exp.shape[-2:]) if exp.dim() >= 2 else exp.reshape(1, 1, -1)
    maps: list[Heatmap] = []
    for i in range(g2.shape[0]):
        if len(maps) >= limit:
            break
        if exp.dim() > 2 and torch.equal(g2[i], e2[i]):
            continue
        title = tr("mask") if g2.shape[0] == 1 else tr("item {i}", i=i)
        maps.append(Heatmap(title=title, expected=e2[i][:16, :16].float().tolist(),
                            actual=g2[i][:16, :16].float().tolist(), keep=e2[i][:16, :16].tolist(), kind="mask"))
    return maps
