"""Helpers shared by this assignment's public and hidden cases (shipped to students: nothing secret).

Setups compute with the reference (``attention_case``); checks only compare, so that in a student
kit they run on the setups ``grader release`` stored.
"""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, SetupContext, Verdict
from grader.checks.attention import MESSAGES, AttentionCase, check_attention, check_pair
from grader.checks.compare import (HALF, Expected, check_comparable, check_structure, check_values, farthest_of,
                                   identical)
from grader.i18n import tr


def qkv(ctx: SetupContext, B: int, H: int, Lq: int, Lk: int, D: int, *, dtype=torch.float32,
        q_scale: float = 1.0, negative_scores: bool = False, d_v: int | None = None):
    """Random q, k (..., D) and v (..., d_v, default D). With negative_scores, q = +u and k = -u so
    every real score is negative (a 0 fill then beats every real score)."""
    q = ctx.randn(B, H, Lq, D, dtype=dtype, scale=q_scale)
    if negative_scores:
        u = ctx.randn(B, H, 1, D).abs() + 0.5
        q = (u.expand(B, H, Lq, D) * (1 + 0.1 * ctx.randn(B, H, Lq, D).abs())).to(dtype)
        k = (-u.expand(B, H, Lk, D) * (1 + 0.1 * ctx.randn(B, H, Lk, D).abs())).to(dtype)
    else:
        k = ctx.randn(B, H, Lk, D, dtype=dtype)
    v = ctx.randn(B, H, Lk, D if d_v is None else d_v, dtype=dtype)
    return q, k, v


def with_peak_score(q: torch.Tensor, k: torch.Tensor, keep: torch.Tensor, peak: float) -> torch.Tensor:
    """q with, in every (batch, head), the query row that holds the largest visible score scaled so
    that score is ``peak``: the property a case about large scores relies on holds by construction,
    on every seed, not only on the draws that happen to reach it. The other rows keep their scores."""
    scores = (q.double() @ k.double().transpose(-2, -1)) / q.shape[-1] ** 0.5
    visible = scores.masked_fill(~keep.expand(scores.shape), -torch.inf)
    best, col = visible.flatten(-2).max(-1)  # (..., ) the largest visible score and where it is
    row = col // scores.shape[-1]
    factor = torch.ones(scores.shape[:-1], dtype=torch.float64, device=q.device)  # (..., Lq)
    factor.scatter_(-1, row[..., None], (peak / best)[..., None])
    return (q.double() * factor[..., None]).to(q.dtype)


def make_loud(k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor):
    """Padded keys get k=30, v=100, so any weight that leaks onto them moves the output a lot."""
    hidden = ~pad[:, None, :, None]  # (B, 1, Lk, 1)
    return k.masked_fill(hidden, 30.0), v.masked_fill(hidden, 100.0)


def attention_case(q, k, v, keep=None, *, rows=None, alt_masks=None) -> AttentionCase:
    """At setup: the float64 oracle, the naive same-dtype reference (in half precision the farther
    of torch.softmax's and a softmax by hand's, per element) and what each classic mistake
    gives as weights (``reference.mistakes``), for these inputs. ``alt_masks``: concept -> the wrong
    keep mask that a classic mistake builds (padding on rows, OR instead of AND, top-left causal
    alignment). A student kit carries the result, never the reference."""
    with reference.exact_float32():
        o64, w64 = reference.oracle_attention(q, k, v, keep)
        on, wn = reference.masked_attention(q, k, v, keep)
        if q.dtype in HALF:  # a softmax by hand rounds differently from torch.softmax: allow either
            oh, wh = reference.masked_attention_by_hand(q, k, v, keep)
            on, wn = farthest_of(o64, [on, oh]), farthest_of(w64, [wn, wh])
    return AttentionCase(q, k, v, keep, Expected(o64, on, q.dtype), Expected(w64, wn, q.dtype), rows=rows,
                         mistakes=reference.mistakes.attention_mistakes(q, k, keep, alt_masks, d_v=v.shape[-1]))


def attention_setup(q, k, v, keep=None, *, rows=None, alt_masks=None) -> Setup:
    return Setup(inputs=dict(q=q, k=k, v=v, mask=keep),
                 expected=attention_case(q, k, v, keep, rows=rows, alt_masks=alt_masks))


def run_attention(student, s: Setup, *, concept: str, message: str) -> Verdict:
    i = s.inputs
    return check_attention(student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"]), s.expected,
                           concept=concept, message=message)


def valid_query_rows(keep: torch.Tensor) -> torch.Tensor:
    """(..., Lq, 1): rows that see at least one key (the others are graded only by the fully-masked case)."""
    return keep.any(-1, keepdim=True)


def padded_causal(ctx: SetupContext, lengths: list[int], T: int, side: str):
    pad = reference.padding_mask(lengths, T, side=side, device=ctx.device)
    keep = reference.combine_masks(reference.causal_mask(T, device=ctx.device), pad)  # (B, 1, T, T)
    return pad, keep


def fully_masked_setup(ctx: SetupContext, q, k, v, keep) -> Setup:
    """A case whose keep mask leaves some query rows with no visible key: the forward must give
    zeros there, and the gradients (of the output times a random cotangent) must be the oracle's."""
    g = ctx.randn(*q.shape[:-1], v.shape[-1])
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    out64, _ = reference.oracle_attention(q64, k64, v64, keep)
    (out64 * g.double()).sum().backward()
    s = attention_setup(q, k, v, keep)
    s.extra.update(cotangent=g, grads=[t.grad for t in (q64, k64, v64)])
    return s


def check_fully_masked(student, s: Setup, *, message: str = MESSAGES["fully-masked-rows"]) -> Verdict:
    forward = run_attention(student, s, concept="fully-masked-rows", message=message)
    if not forward.passed:
        return forward
    i = s.inputs
    _, grads = student.vjp("masked_attention", (i["q"], i["k"], i["v"]), {"mask": i["mask"]},
                           wrt=[0, 1, 2], cotangent=s.extra["cotangent"], output_index=0)
    for name, got, want in zip(("dQ", "dK", "dV"), grads, s.extra["grads"]):
        if got is None:
            return Verdict.fail("fully-masked-rows", tr("No gradient reached {tensor}: the output must be "
                                                        "differentiable (no .detach(), no torch.no_grad inside).",
                                                        tensor=name[1].lower()))
        # dQ is the gradient of the loss with respect to q: said where a student meets the name.
        label = tr("{name} (the gradient with respect to {tensor})", name=name, tensor=name[1].lower())
        v = check_values(got, Expected(want, None, torch.float32), what=label, concept="fully-masked-rows",
                         message=tr("{name} is wrong. ", name=label) + MESSAGES["fully-masked-rows"], atol=1e-4, rtol=1e-4)
        if not v.passed:
            if v.evidence.nan_locations:
                return Verdict.fail("fully-masked-rows", tr("The forward pass is clean but {name} contains NaN: an "
                                                            "-inf row or an additive -inf bias still poisons the "
                                                            "backward pass. Guard the scores before the softmax "
                                                            "(e.g. torch.where on mask.any(-1)).", name=label), v.evidence)
            return v
    return Verdict.ok()


def check_on_meta(student, s: Setup, shapes: dict[str, tuple[int, ...]]) -> Verdict:
    """masked_attention on meta tensors: it must run and give meta outputs of the right shapes."""
    i = s.inputs
    result = student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"])
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return Verdict.fail("signature", tr("masked_attention must return a tuple (out, weights)."))
    for value, name in zip(result, ("out", "weights")):
        bad = check_structure(value, shapes[name], torch.float32, what=name, shape_concept="device-placement")
        if bad:
            return bad
        if value.device.type != "meta":
            return Verdict.fail("device-placement", tr("{name} came back on {device}, not on the inputs' device: "
                                                       "create masks and constants with device=q.device.", name=name, device=value.device))
    return Verdict.ok()


def check_twice(student, s: Setup) -> Verdict:
    """Two identical calls must give bit-identical results that match the reference (no dropout)."""
    i = s.inputs
    first = student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"])
    shape = check_pair(first, s.expected, concept="signature")
    if shape is not None:  # not a pair of tensors of the right shapes: that, not randomness, is what is wrong
        return shape
    second = student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"])
    pairs = isinstance(second, (tuple, list)) and len(second) == 2
    if pairs:
        for b, name in zip(second, ("out", "weights")):
            bad = check_comparable(b, tr("{name} of the second call", name=name))
            if bad:
                return bad
    if not (pairs and all(identical(a, b) for a, b in zip(first, second))):
        return Verdict.fail("dropout", tr("Two identical calls gave different results: masked_attention must not use "
                                          "dropout (F.dropout defaults to training=True)."))
    return check_attention(first, s.expected, concept="dropout",
                           message=tr("The weights look randomly dropped and rescaled: remove dropout."))
