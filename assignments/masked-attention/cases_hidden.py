"""Hidden cases: run at grading time only; never shipped to students.

Case numbers (C1...) refer to the course's case design table. Shapes avoid the blind spots that
hide bugs: H > 1, B > 1, B == H where a wrong broadcast must not line up by accident, Lq != Lk.
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

# --- masks -----------------------------------------------------------------------------------


@case("causal_mask_rect", title="causal_mask with fewer (or more) queries than keys",
      concept="causal-alignment", points=3, hidden=True, uses=("causal_mask",),
      params={"chunk": (3, 10), "decode": (1, 9), "tall": (5, 2)})
def causal_mask_rect(ctx):
    lq, lk = ctx.param
    return Setup(inputs=dict(q_len=lq, k_len=lk), expected=reference.causal_mask(lq, lk),
                 extra=dict(alt={"causal-alignment": torch.ones(lq, lk, dtype=torch.bool).tril(),
                                 "causal-diagonal": torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq - 1)}))


@causal_mask_rect.check
def _(student, s, param):
    lq, lk = param
    return check_mask(student.causal_mask(lq, lk), s.expected, what=f"causal_mask({lq}, {lk})",
                      concept="causal-alignment", message=MESSAGES["causal-alignment"],
                      alternatives=with_mask_messages(s.extra["alt"]))


@case("causal_mask_device", title="causal_mask creates the mask on the requested device",
      concept="device-placement", points=1, hidden=True, uses=("causal_mask",), meta=True)
def causal_mask_device(ctx):
    return Setup(inputs=dict(q_len=4, k_len=7, device="meta"), expected=None)


@causal_mask_device.check
def _(student, s, param):
    got = student.causal_mask(4, 7, device="meta")
    bad = check_structure(got, (4, 7), torch.bool, what="causal_mask(4, 7, device='meta')",
                          shape_concept="causal-alignment")
    if bad:
        return bad
    if got.device.type != "meta":
        return Verdict.fail("device-placement", tr("causal_mask ignored its device argument: pass device=device to "
                                                   "torch.ones/torch.tril so the mask lives where the scores live."))
    return Verdict.ok()


@case("padding_mask_left", title="padding_mask with left and right padding", concept="padding-mask",
      points=2, hidden=True, uses=("padding_mask",), params={"left": "left", "right": "right"},
      on_error={"'list' object has no attribute": "padding-mask"})
def padding_mask_left(ctx):
    lengths = [6, 2, 4, 0]
    return Setup(inputs=dict(lengths=lengths, max_len=6), expected=reference.padding_mask(lengths, 6, side=ctx.param),
                 extra=dict(other=reference.padding_mask(lengths, 6, side="right" if ctx.param == "left" else "left")))


@padding_mask_left.check
def _(student, s, param):
    i = s.inputs
    lengths = list(i["lengths"]) if param == "left" else torch.tensor(i["lengths"])  # lengths: a list or a tensor
    return check_mask(student.padding_mask(lengths, i["max_len"], side=param), s.expected,
                      what=f"padding_mask(lengths, 6, side={param!r})", concept="padding-mask",
                      message=tr("With side='left' the real tokens are the last `length` positions of the row."),
                      alternatives=with_mask_messages({"padding-mask": s.extra["other"]}))


@case("combine_masks_padded", title="combine_masks with a rectangular causal mask and padding",
      concept="mask-combination", points=2, hidden=True, uses=("combine_masks",),
      params={"left": "left", "right": "right"},
      on_error={"must match the size of tensor": "padding-broadcast"})
def combine_masks_padded(ctx):
    causal = reference.causal_mask(3, 6)
    pad = reference.padding_mask([6, 4, 2], 6, side=ctx.param)
    return Setup(inputs=dict(causal=causal, padding=pad), expected=reference.combine_masks(causal, pad),
                 extra=dict(alt={"mask-combination": causal[None, None] | pad[:, None, None, :],
                                 "padding-broadcast": causal[None, None] & pad[:, None, :3, None]}))


@combine_masks_padded.check
def _(student, s, param):
    return check_mask(student.combine_masks(s.inputs["causal"], s.inputs["padding"]), s.expected,
                      what="combine_masks(causal, padding)", concept="mask-combination",
                      message=tr("combine_masks returns causal[None, None] & padding[:, None, None, :], shape (B, 1, "
                                 "Lq, Lk)."),
                      alternatives=with_mask_messages(s.extra["alt"]))


# --- attention: float32 ------------------------------------------------------------------------


# C1 in the case design table
@case("basic_nomask", title="Attention without a mask (B2 H4 L37 D64)", concept="softmax-axis",
      points=2, hidden=True, uses=("masked_attention",))
def basic_nomask(ctx):
    return attention_setup(*qkv(ctx, 2, 4, 37, 37, 64))


@basic_nomask.check
def _(student, s, param):
    return run_attention(student, s, concept="softmax-axis",
                         message=tr("Scale by 1/sqrt(d_k) and take the softmax over keys; every weight row sums to 1."))


# C2 in the case design table
@case("causal_square", title="Causal mask on a square sequence", concept="mask-fill-value",
      points=2, hidden=True, uses=("masked_attention",))
def causal_square(ctx):
    q, k, v = qkv(ctx, 2, 4, 33, 33, 16)
    return attention_setup(q, k, v, reference.causal_mask(33, device=ctx.device))


@causal_square.check
def _(student, s, param):
    return run_attention(student, s, concept="mask-fill-value", message=MESSAGES["mask-fill-value"])


# C3 in the case design table
@case("causal_negative_scores", title="Causal mask when every real score is negative",
      concept="mask-fill-value", points=2, hidden=True, uses=("masked_attention",))
def causal_negative_scores(ctx):
    q, k, v = qkv(ctx, 2, 3, 9, 9, 16, negative_scores=True)
    return attention_setup(q, k, v, reference.causal_mask(9, device=ctx.device))


@causal_negative_scores.check
def _(student, s, param):
    return run_attention(student, s, concept="mask-fill-value",
                         message=tr("A masked score of 0 beats negative real scores: fill with -inf or "
                                    "finfo(dtype).min."))


# C4 in the case design table
@case("padding_right", title="Key padding mask (B, 1, 1, T) with B == H", concept="padding-broadcast",
      points=2, hidden=True, uses=("masked_attention",))
def padding_right(ctx):
    q, k, v = qkv(ctx, 3, 3, 12, 12, 16)
    pad = reference.padding_mask([12, 7, 3], 12, device=ctx.device)
    k, v = make_loud(k, v, pad)
    keep = pad[:, None, None, :]  # (B, 1, 1, T)
    rows = pad[:, None, :, None]  # compare real query rows only
    return attention_setup(q, k, v, keep, rows=rows,
                           alt_masks={"padding-broadcast": pad[None, :, None, :]})


@padding_right.check
def _(student, s, param):
    return run_attention(student, s, concept="padding-broadcast", message=MESSAGES["padding-broadcast"])


# C5 in the case design table
@case("padding_left_causal", title="Left padding combined with a causal mask", concept="mask-combination",
      points=2, hidden=True, uses=("masked_attention",))
def padding_left_causal(ctx):
    q, k, v = qkv(ctx, 2, 4, 10, 10, 16)
    pad, keep = padded_causal(ctx, [10, 6], 10, "left")
    k, v = make_loud(k, v, pad)
    return attention_setup(q, k, v, keep, rows=valid_query_rows(keep) & pad[:, None, :, None])


@padding_left_causal.check
def _(student, s, param):
    return run_attention(student, s, concept="mask-combination", message=MESSAGES["mask-combination"])


# C6 in the case design table
@case("fully_masked_rows", title="Rows with no visible key: zeros and finite gradients",
      concept="fully-masked-rows", points=3, hidden=True, uses=("masked_attention",))
def fully_masked_rows_case(ctx):
    q, k, v = qkv(ctx, 2, 2, 8, 8, 8)
    pad, keep = padded_causal(ctx, [8, 5], 8, "left")  # batch 1's first 3 query rows see nothing
    return fully_masked_setup(ctx, q, k, v, keep)


@fully_masked_rows_case.check
def _(student, s, param):
    return check_fully_masked(student, s)


# --- attention: half precision -----------------------------------------------------------------


def _half_pad_causal(ctx, dtype):
    q, k, v = qkv(ctx, 2, 4, 64, 64, 64, dtype=dtype)
    pad, keep = padded_causal(ctx, [64, 40], 64, "right")
    return attention_setup(q, k, v, keep, rows=valid_query_rows(keep) & pad[:, None, :, None])


# C7 in the case design table
@case("fp16_pad_causal", title="Float16 with padding and a causal mask", concept="dtype-overflow",
      points=2, hidden=True, uses=("masked_attention",))
def fp16_pad_causal(ctx):
    return _half_pad_causal(ctx, torch.float16)


@fp16_pad_causal.check
def _(student, s, param):
    return run_attention(student, s, concept="dtype-overflow", message=MESSAGES["dtype-overflow"])


# C8 in the case design table
@case("bf16_pad_causal", title="Bfloat16 with padding and a causal mask", concept="dtype-overflow",
      points=2, hidden=True, uses=("masked_attention",))
def bf16_pad_causal(ctx):
    return _half_pad_causal(ctx, torch.bfloat16)


@bf16_pad_causal.check
def _(student, s, param):
    return run_attention(student, s, concept="dtype-overflow",
                         message=tr("bfloat16 cannot hold float32's min: use torch.finfo(scores.dtype).min or -inf."))


# C9 in the case design table
@case("fp16_fully_masked", title="Float16 with a fully masked row", concept="fully-masked-rows",
      points=2, hidden=True, uses=("masked_attention",))
def fp16_fully_masked(ctx):
    q, k, v = qkv(ctx, 1, 2, 6, 6, 16, dtype=torch.float16)
    keep = reference.causal_mask(6, device=ctx.device).clone()
    keep[2] = False
    return attention_setup(q, k, v, keep)


@fp16_fully_masked.check
def _(student, s, param):
    return run_attention(student, s, concept="fully-masked-rows",
                         message=tr("In float16, -1e9 becomes -inf and a fully masked row turns into NaN (or, with "
                                    "-1e4, into the mean of v): guard rows with no visible key so they output 0."))


# C10 in the case design table
@case("large_logits", title="Large scores (softmax stability)", concept="numerical-stability",
      points=2, hidden=True, uses=("masked_attention",),
      params={"fp32": (torch.float32, 30.0, 115.0), "fp16": (torch.float16, 4.0, None)})
def large_logits(ctx):
    dtype, scale, peak = ctx.param
    q, k, v = qkv(ctx, 2, 2, 16, 16, 64, dtype=dtype, q_scale=scale)
    keep = reference.causal_mask(16, device=ctx.device)
    if peak is not None:  # in float32, one score of 115 per head: exp overflows past 88.7 on every draw
        q = with_peak_score(q, k, keep, peak)
    return attention_setup(q, k, v, keep)


@large_logits.check
def _(student, s, param):
    i = s.inputs
    result = student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"])
    # fp32 gets a fixed 1e-4 tolerance (large scores amplify rounding); fp16 the FlashAttention rule.
    return check_attention(result, s.expected, concept="numerical-stability", message=MESSAGES["numerical-stability"],
                           atol=1e-4 if param[0] is torch.float32 else None)


# --- attention: shapes, devices, determinism --------------------------------------------------


# C11 in the case design table
@case("cross_attn_pad", title="Cross-attention: 5 queries over 11 padded keys", concept="padding-broadcast",
      points=2, hidden=True, uses=("masked_attention",))
def cross_attn_pad(ctx):
    q, k, v = qkv(ctx, 2, 3, 5, 11, 16)
    pad = reference.padding_mask([11, 6], 11, device=ctx.device)
    k, v = make_loud(k, v, pad)
    return attention_setup(q, k, v, pad[:, None, None, :])


@cross_attn_pad.check
def _(student, s, param):
    return run_attention(student, s, concept="padding-broadcast",
                         message=tr("Scores are (Lq, Lk): masks index keys on the last dimension, and Lq may differ "
                                    "from Lk."))


def _mask_layout(ctx):
    B, H, L, S = 2, 3, 6, 6
    q, k, v = qkv(ctx, B, H, L, S, 8)
    full = reference.combine_masks(reference.causal_mask(L), reference.padding_mask([6, 4], S))
    full = full.expand(B, H, L, S)  # (B, H, L, S)
    layouts = {
        "B11S": full[:, :1, -1:, :],
        "B1LS": full[:, :1],
        "11LS": full[:1, :1],
        "BHLS": full.clone(),
        "LS": full[0, 0],
    }
    keep = layouts[ctx.param].to(ctx.device).contiguous()
    return attention_setup(q, k, v, keep, rows=valid_query_rows(keep.expand(B, H, L, S)))


# C14 in the case design table
@case("mask_shapes", title="Masks of every broadcastable shape", concept="padding-broadcast",
      points=3, hidden=True, uses=("masked_attention",),
      params={"(B,1,1,S)": "B11S", "(B,1,L,S)": "B1LS", "(1,1,L,S)": "11LS", "(B,H,L,S)": "BHLS", "(L,S)": "LS"})
def mask_shapes(ctx):
    return _mask_layout(ctx)


@mask_shapes.check
def _(student, s, param):
    return run_attention(student, s, concept="padding-broadcast",
                         message=tr("Any mask broadcastable to (B, H, Lq, Lk) must work: do not assume its rank."))


# C15 in the case design table
@case("attention_device", title="Runs on another device (meta tensors stand in for a GPU)",
      concept="device-placement", points=1, hidden=True, uses=("masked_attention",), meta=True)
def attention_device(ctx):
    q, k, v = (torch.empty(2, 2, 5, 8, device="meta") for _ in range(3))
    keep = torch.empty(2, 1, 5, 5, dtype=torch.bool, device="meta")
    return Setup(inputs=dict(q=q, k=k, v=v, mask=keep))


@attention_device.check
def _(student, s, param):
    return check_on_meta(student, s, {"out": (2, 2, 5, 8), "weights": (2, 2, 5, 5)})


# C16 in the case design table
@case("eval_determinism", title="No randomness: no dropout at evaluation time", concept="dropout",
      points=1, hidden=True, uses=("masked_attention",))
def eval_determinism(ctx):
    q, k, v = qkv(ctx, 2, 2, 16, 16, 16)
    return attention_setup(q, k, v, reference.causal_mask(16, device=ctx.device))


@eval_determinism.check
def _(student, s, param):
    return check_twice(student, s)


# --- options combined: every dtype with every kind of mask, rectangular masks with padding -----


def _pairs(ctx):
    """One dtype x mask pairing per parameter, none of them tried by another case."""
    dtype, kind, side = ctx.param
    if kind == "none":
        return attention_setup(*qkv(ctx, 2, 3, 7, 7, 16, dtype=dtype))
    if kind == "empty-rows":  # causal with left padding: the padded queries see no key
        q, k, v = qkv(ctx, 2, 2, 7, 7, 16, dtype=dtype)
        _, keep = padded_causal(ctx, [7, 4], 7, "left")
        return attention_setup(q, k, v, keep)
    lq, lk = (3, 9) if kind == "chunk" else (1, 8)  # new queries are the last lq of lk positions
    q, k, v = qkv(ctx, 3, 2, lq, lk, 16, dtype=dtype)
    pad = reference.padding_mask([lk, lk - 2, lk - 4], lk, side=side, device=ctx.device)
    keep = reference.combine_masks(reference.causal_mask(lq, lk, device=ctx.device), pad)  # (B, 1, lq, lk)
    k, v = make_loud(k, v, pad)
    return attention_setup(q, k, v, keep, rows=pad[:, None, lk - lq:, None])


@case("option_pairs", title="Every dtype with every kind of mask (pairs no other case tries)",
      concept="padding-broadcast", points=4, hidden=True, uses=("masked_attention",),
      params={"fp16,none": (torch.float16, "none", None), "bf16,empty-rows": (torch.bfloat16, "empty-rows", None),
              "fp64,chunk,left": (torch.float64, "chunk", "left"), "fp16,chunk,right": (torch.float16, "chunk", "right"),
              "bf16,decode,left": (torch.bfloat16, "decode", "left"), "fp32,decode,right": (torch.float32, "decode", "right"),
              "fp64,empty-rows": (torch.float64, "empty-rows", None), "fp32,chunk,left": (torch.float32, "chunk", "left")})
def option_pairs(ctx):
    return _pairs(ctx)


@option_pairs.check
def _(student, s, param):
    dtype, kind, _ = param
    concept = ("fully-masked-rows" if kind == "empty-rows" else "softmax-axis" if kind == "none"
               else "dtype-overflow" if dtype in (torch.float16, torch.bfloat16) else "padding-broadcast")
    i = s.inputs
    # float64 is held to float32's tolerance: what is graded is the masking, not the last digits.
    return check_attention(student.masked_attention(i["q"], i["k"], i["v"], mask=i["mask"]), s.expected,
                           concept=concept, message=MESSAGES[concept],
                           atol=1e-5 if dtype is torch.float64 else None)


@case("value_size_padded", title="Cross-attention in bfloat16 with d_v != d and left padding", concept="scaling",
      points=1, hidden=True, uses=("masked_attention",))
def value_size_padded(ctx):
    q, k, v = qkv(ctx, 2, 3, 5, 9, 32, d_v=12, dtype=torch.bfloat16)
    pad = reference.padding_mask([9, 5], 9, side="left", device=ctx.device)
    k, v = make_loud(k, v, pad)
    return attention_setup(q, k, v, pad[:, None, None, :])


@value_size_padded.check
def _(student, s, param):
    return run_attention(student, s, concept="scaling",
                         message=tr("Scale by 1/sqrt(d) with d = q.shape[-1], whatever v's size d_v."))

