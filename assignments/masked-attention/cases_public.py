"""Public cases: students run these with `grader check` (and see every detail of them)."""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, case
from grader.checks.masks import check_mask

from ._common import attention_setup, qkv, run_attention


@case("causal_mask_square", title="causal_mask on a square sequence", concept="causal-diagonal",
      points=1, hidden=False, uses=("causal_mask",))
def causal_mask_square(ctx):
    return Setup(inputs=dict(q_len=6), expected=reference.causal_mask(6))


@causal_mask_square.check
def _(student, s, param):
    n = s.inputs["q_len"]
    return check_mask(student.causal_mask(n), s.expected, what="causal_mask(6)", concept="causal-diagonal",
                      message="Query i may attend to keys 0..i (itself included) and to no later key.",
                      alternatives={"causal-diagonal": torch.ones(n, n, dtype=torch.bool).tril(-1)})


@case("padding_mask_right", title="padding_mask with right padding", concept="padding-broadcast",
      points=1, hidden=False, uses=("padding_mask",))
def padding_mask_right(ctx):
    lengths = [5, 3, 1]
    return Setup(inputs=dict(lengths=lengths, max_len=5), expected=reference.padding_mask(lengths, 5))


@padding_mask_right.check
def _(student, s, param):
    i = s.inputs
    return check_mask(student.padding_mask(torch.tensor(i["lengths"]), i["max_len"]), s.expected,
                      what="padding_mask(lengths, 5)", concept="padding-broadcast",
                      message="padding_mask marks the first `length` positions of each row True (real tokens).")


@case("combine_masks_basic", title="combine_masks: causal AND padding", concept="mask-combination",
      points=1, hidden=False, uses=("combine_masks",))
def combine_masks_basic(ctx):
    causal = reference.causal_mask(4)
    pad = reference.padding_mask([4, 2], 4)
    return Setup(inputs=dict(causal=causal, padding=pad), expected=reference.combine_masks(causal, pad),
                 extra=dict(alt={"mask-combination": causal[None, None] | pad[:, None, None, :],
                                 "padding-broadcast": causal[None, None] & pad[:, None, :, None]}))


@combine_masks_basic.check
def _(student, s, param):
    return check_mask(student.combine_masks(s.inputs["causal"], s.inputs["padding"]), s.expected,
                      what="combine_masks(causal, padding)", concept="mask-combination",
                      message="The result is (B, 1, Lq, Lk): causal[None, None] & padding[:, None, None, :].",
                      alternatives=s.extra["alt"])


@case("attention_basic", title="masked_attention without a mask", concept="softmax-axis",
      points=1, hidden=False, uses=("masked_attention",))
def attention_basic(ctx):
    return attention_setup(*qkv(ctx, 2, 2, 5, 5, 8))


@attention_basic.check
def _(student, s, param):
    return run_attention(student, s, concept="softmax-axis",
                         message="Scale q @ k^T by 1/sqrt(d), take the softmax over keys (the last dim), "
                                 "then multiply by v.")


@case("attention_causal_small", title="masked_attention with a causal mask", concept="mask-fill-value",
      points=1, hidden=False, uses=("masked_attention",))
def attention_causal_small(ctx):
    q, k, v = qkv(ctx, 1, 2, 5, 5, 8, negative_scores=True)
    return attention_setup(q, k, v, reference.causal_mask(5, device=ctx.device))


@attention_causal_small.check
def _(student, s, param):
    return run_attention(student, s, concept="mask-fill-value",
                         message="Masked scores must be -inf (or finfo(dtype).min) before the softmax.")
