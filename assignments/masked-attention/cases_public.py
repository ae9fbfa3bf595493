"""Public cases: students run these with `grader check` (and see every detail of them).

Every requirement the README states is tried here once, on small inputs of its own; the hidden
cases try the same requirements again on other inputs and in combination.
"""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, Verdict, case
from grader.checks.attention import MESSAGES, check_attention
from grader.checks.compare import check_structure
from grader.checks.masks import check_mask, with_mask_messages
from grader.i18n import tr

from ._common import (attention_setup, check_fully_masked, check_on_meta, check_twice, fully_masked_setup, make_loud,
                      padded_causal, qkv, run_attention, valid_query_rows, with_peak_score)


@case("causal_mask_square", title="causal_mask on a square sequence", concept="causal-diagonal",
      points=1, hidden=False, uses=("causal_mask",))
def causal_mask_square(ctx):
    return Setup(inputs=dict(q_len=6), expected=reference.causal_mask(6))


@causal_mask_square.check
def _(student, s, param):
    n = s.inputs["q_len"]
    return check_mask(student.causal_mask(n), s.expected, what="causal_mask(6)", concept="causal-diagonal",
                      message=tr("Query i may attend to keys 0..i (itself included) and to no later key."),
                      alternatives=with_mask_messages({"causal-diagonal": torch.ones(n, n, dtype=torch.bool).tril(-1)}))


@case("padding_mask_right", title="padding_mask with right padding", concept="padding-mask",
      points=1, hidden=False, uses=("padding_mask",))
def padding_mask_right(ctx):
    lengths = [5, 3, 1]
    return Setup(inputs=dict(lengths=lengths, max_len=5), expected=reference.padding_mask(lengths, 5))


@padding_mask_right.check
def _(student, s, param):
    i = s.inputs
    return check_mask(student.padding_mask(torch.tensor(i["lengths"]), i["max_len"]), s.expected,
                      what="padding_mask(lengths, 5)", concept="padding-mask",
                      message=tr("padding_mask marks the first `length` positions of each row True (real tokens)."))


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
                      message=tr("The result is (B, 1, Lq, Lk): causal[None, None] & padding[:, None, None, :]."),
                      alternatives=with_mask_messages(s.extra["alt"]))


@case("attention_basic", title="masked_attention without a mask", concept="softmax-axis",
      points=1, hidden=False, uses=("masked_attention",))
def attention_basic(ctx):
    return attention_setup(*qkv(ctx, 2, 2, 5, 5, 8))


@attention_basic.check
def _(student, s, param):
    return run_attention(student, s, concept="softmax-axis",
                         message=tr("Scale q @ k^T by 1/sqrt(d), take the softmax over keys (the last dim), then "
                                    "multiply by v."))


@case("attention_causal_small", title="masked_attention with a causal mask", concept="mask-fill-value",
      points=1, hidden=False, uses=("masked_attention",))
def attention_causal_small(ctx):
    q, k, v = qkv(ctx, 1, 2, 5, 5, 8, negative_scores=True)
    return attention_setup(q, k, v, reference.causal_mask(5, device=ctx.device))


@attention_causal_small.check
def _(student, s, param):
    return run_attention(student, s, concept="mask-fill-value",
                         message=tr("Masked scores must be -inf (or finfo(dtype).min) before the softmax."))


# --- the requirements the cases above do not reach ---------------------------------------------


@case("causal_mask_offset", title="causal_mask with fewer queries than keys (a chunk, a decode step)",
      concept="causal-alignment", points=1, hidden=False, uses=("causal_mask",),
      params={"2 of 5": (2, 5), "1 of 4": (1, 4)})
def causal_mask_offset(ctx):
    lq, lk = ctx.param
    return Setup(inputs=dict(q_len=lq, k_len=lk), expected=reference.causal_mask(lq, lk),
                 extra=dict(alt={"causal-alignment": torch.ones(lq, lk, dtype=torch.bool).tril(),
                                 "causal-diagonal": torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq - 1)}))


@causal_mask_offset.check
def _(student, s, param):
    lq, lk = param
    return check_mask(student.causal_mask(lq, lk), s.expected, what=f"causal_mask({lq}, {lk})",
                      concept="causal-alignment", message=MESSAGES["causal-alignment"], alternatives=with_mask_messages(s.extra["alt"]))


@case("causal_mask_on_device", title="causal_mask(2, 3, device='meta') is made on that device",
      concept="device-placement", points=1, hidden=False, uses=("causal_mask",), meta=True)
def causal_mask_on_device(ctx):
    return Setup(inputs=dict(q_len=2, k_len=3, device="meta"))


@causal_mask_on_device.check
def _(student, s, param):
    got = student.causal_mask(2, 3, device="meta")
    bad = check_structure(got, (2, 3), torch.bool, what="causal_mask(2, 3, device='meta')",
                          shape_concept="causal-alignment")
    if bad:
        return bad
    if got.device.type != "meta":
        return Verdict.fail("device-placement", tr("causal_mask ignored its device argument (the mask came back on "
                                                   "{device}): pass device=device to torch.ones/torch.arange.", device=got.device))
    return Verdict.ok()


@case("padding_mask_left_side", title="padding_mask with side='left'", concept="padding-mask",
      points=1, hidden=False, uses=("padding_mask",))
def padding_mask_left_side(ctx):
    lengths = [4, 1, 0]
    return Setup(inputs=dict(lengths=lengths, max_len=4), expected=reference.padding_mask(lengths, 4, side="left"),
                 extra=dict(other=reference.padding_mask(lengths, 4, side="right")))


@padding_mask_left_side.check
def _(student, s, param):
    i = s.inputs
    return check_mask(student.padding_mask(torch.tensor(i["lengths"]), i["max_len"], side="left"), s.expected,
                      what="padding_mask(lengths, 4, side='left')", concept="padding-mask",
                      message=tr("With side='left' the real tokens are the last `length` positions of the row."),
                      alternatives=with_mask_messages({"padding-mask": s.extra["other"]}))


@case("attention_empty_row", title="masked_attention when a query may see no key: zeros, finite gradients",
      concept="fully-masked-rows", points=1, hidden=False, uses=("masked_attention",))
def attention_empty_row(ctx):
    q, k, v = qkv(ctx, 1, 2, 4, 5, 8)
    keep = reference.causal_mask(4, 5, device=ctx.device).clone()
    keep[1] = False  # query 1 may see nothing
    return fully_masked_setup(ctx, q, k, v, keep)


@attention_empty_row.check
def _(student, s, param):
    return check_fully_masked(student, s)


@case("attention_half", title="masked_attention in float16 and bfloat16 (padding and a causal mask)",
      concept="dtype-overflow", points=1, hidden=False, uses=("masked_attention",),
      params={"float16": torch.float16, "bfloat16": torch.bfloat16})
def attention_half(ctx):
    q, k, v = qkv(ctx, 2, 2, 6, 6, 16, dtype=ctx.param)
    pad, keep = padded_causal(ctx, [6, 4], 6, "right")
    k, v = make_loud(k, v, pad)
    return attention_setup(q, k, v, keep, rows=valid_query_rows(keep) & pad[:, None, :, None])


@attention_half.check
def _(student, s, param):
    return run_attention(student, s, concept="dtype-overflow", message=MESSAGES["dtype-overflow"])


@case("attention_on_device", title="masked_attention on meta tensors (a stand-in for a GPU) returns meta tensors",
      concept="device-placement", points=1, hidden=False, uses=("masked_attention",), meta=True)
def attention_on_device(ctx):
    q, k, v = (torch.empty(1, 2, 3, 4, device="meta") for _ in range(3))
    return Setup(inputs=dict(q=q, k=k, v=v, mask=torch.empty(3, 3, dtype=torch.bool, device="meta")))


@attention_on_device.check
def _(student, s, param):
    return check_on_meta(student, s, {"out": (1, 2, 3, 4), "weights": (1, 2, 3, 3)})


@case("attention_large_scores", title="masked_attention with large scores (no overflow in the softmax)",
      concept="numerical-stability", points=1, hidden=False, uses=("masked_attention",))
def attention_large_scores(ctx):
    q, k, v = qkv(ctx, 1, 2, 5, 5, 64)
    keep = reference.causal_mask(5, device=ctx.device)
    # One score of 200 per head (exp overflows float32 past 88.7); the other rows keep ordinary
    # scores, so a 0 fill or a missing scale shows there whatever the draw.
    return attention_setup(with_peak_score(q, k, keep, 200.0), k, v, keep)


@attention_large_scores.check
def _(student, s, param):
    i = s.inputs
    return check_attention(student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"]), s.expected,
                           concept="numerical-stability", message=MESSAGES["numerical-stability"], atol=1e-4)


@case("attention_twice", title="masked_attention gives the same result twice (no dropout)",
      concept="dropout", points=1, hidden=False, uses=("masked_attention",))
def attention_twice(ctx):
    q, k, v = qkv(ctx, 1, 2, 12, 12, 8)
    return attention_setup(q, k, v, reference.causal_mask(12, device=ctx.device))


@attention_twice.check
def _(student, s, param):
    return check_twice(student, s)


@case("attention_value_size", title="masked_attention in float64 with v's size d_v != d (scale by sqrt(d))",
      concept="scaling", points=1, hidden=False, uses=("masked_attention",))
def attention_value_size(ctx):
    q, k, v = qkv(ctx, 1, 2, 4, 6, 16, d_v=4, dtype=torch.float64)  # 1/sqrt(16) vs a wrong 1/sqrt(4)
    return attention_setup(q, k, v, reference.causal_mask(4, 6, device=ctx.device))


@attention_value_size.check
def _(student, s, param):
    i = s.inputs
    # float64 is held to float32's tolerance: what is graded is the scale, not the last digits.
    return check_attention(student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"]), s.expected,
                           concept="scaling", atol=1e-5,
                           message=tr("Scale by 1/sqrt(d) with d = q.shape[-1]; out has v's last size d_v and the "
                                      "inputs' dtype."))


@case("padding_mask_list", title="padding_mask given a Python list of lengths", concept="padding-mask",
      points=1, hidden=False, uses=("padding_mask",), on_error={"'list' object has no attribute": "padding-mask"})
def padding_mask_list(ctx):
    lengths = [3, 0, 2]
    return Setup(inputs=dict(lengths=lengths, max_len=4), expected=reference.padding_mask(lengths, 4))


@padding_mask_list.check
def _(student, s, param):
    i = s.inputs
    return check_mask(student.padding_mask(list(i["lengths"]), i["max_len"]), s.expected,
                      what="padding_mask([3, 0, 2], 4)", concept="padding-mask",
                      message=tr("lengths may be a list of ints or a 1-D tensor: torch.as_tensor(lengths) accepts both."))
