"""Public cases: students run these with `grader check` (and see every detail of them).

Every requirement the README states is tried here once, on small inputs of its own; the hidden
cases try the same requirements again on other inputs and in combination.
"""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, Verdict, case
from grader.checks.compare import Expected, check_values
from grader.results import Evidence
from grader.sandbox import StudentError
from grader.i18n import tr

from ._common import (MESSAGES, check_decode, check_forward, check_mha, check_on_meta, check_twice, decode_setup,
                      expected, forward_setup, guarded, len_message, load_student, make_weights)


@case("init_validation", title="MultiHeadAttention rejects d_model not divisible by h", concept="validation",
      points=1, hidden=False, uses=("MultiHeadAttention",))
def init_validation(ctx):
    return Setup(inputs=dict(bad=(10, 3), good=(12, 4)))


@init_validation.check
def _(student, s, param):
    try:
        student.MultiHeadAttention(*s.inputs["bad"])
    except StudentError as e:
        if e.exc_type == "NotImplementedError":
            raise  # a placeholder: the engine says "not implemented yet"
        if e.exc_type != "ValueError":
            return Verdict.fail("validation", tr("MultiHeadAttention(10, 3) raised {exc_type}; raise ValueError (not "
                                                 "assert, which python -O removes) with a message naming both "
                                                 "numbers.", exc_type=e.exc_type))
    else:
        return Verdict.fail("validation", tr("MultiHeadAttention(10, 3) was accepted, but 10 heads' worth of "
                                             "features cannot be split into 3 equal heads: raise ValueError when "
                                             "d_model % h != 0."))
    student.MultiHeadAttention(*s.inputs["good"])
    return Verdict.ok()


@case("layers", title="Projections W_q, W_k, W_v, W_o are Linear(d_model, d_model, bias=False)",
      concept="signature", points=1, hidden=False, uses=("MultiHeadAttention",))
def layers(ctx):
    return Setup(inputs=dict(d=12, h=3, weights=make_weights(ctx, 12)))


@layers.check
@guarded
def _(student, s, param):
    load_student(student, s.inputs["d"], s.inputs["h"], s.inputs["weights"])
    return Verdict.ok()


@case("mha_forward_small", title="Forward pass with copied weights (small)", concept="head-split",
      points=1, hidden=False, uses=("MultiHeadAttention",))
def mha_forward_small(ctx):
    d, h = 16, 4
    w = make_weights(ctx, d)
    x = ctx.randn(2, 5, d)
    return Setup(inputs=dict(d=d, h=h, weights=w, x=x), expected=expected(w, h, x),
                 extra=dict(mistakes=reference.mistakes.forward_mistakes(w, h, x)))


@mha_forward_small.check
@guarded
def _(student, s, param):
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"])
    out = m(i["x"])
    return check_mha(out, s.expected, s.extra["mistakes"], concept="head-split")


@case("kv_cache_append_basic", title="KVCache.append concatenates and __len__ counts time steps",
      concept="kv-cache-append", points=1, hidden=False, uses=("KVCache",))
def kv_cache_append_basic(ctx):
    chunks = [(ctx.randn(1, 2, 3, 4), ctx.randn(1, 2, 3, 4)), (ctx.randn(1, 2, 1, 4), ctx.randn(1, 2, 1, 4))]
    return Setup(inputs=dict(chunks=chunks))


def check_appends(student, chunks) -> Verdict:
    cache = student.KVCache()
    n0 = cache.length()
    if n0 != 0:
        return Verdict.fail("kv-cache-growth", tr("A new KVCache should have length 0; yours has {n0}.", n0=repr(n0)))
    ks, vs, lengths = [], [], []
    for k, v in chunks:
        try:
            got = cache.append(k, v)
        except StudentError as e:  # append alone raised: the evidence is about append
            if e.exc_type == "NotImplementedError":
                raise
            return Verdict.fail("kv-cache-append", tr(
                "KVCache.append raised {exc}: {detail}. Concatenate on the time axis, dim 2 of (B, h, T, d_k).",
                exc=e.exc_type, detail=" ".join(e.message.split())[:160]), Evidence(traceback=e.traceback))
        ks.append(k)
        vs.append(v)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return Verdict.fail("kv-cache-append", tr("append(k, v) must return (k_all, v_all)."))
        for name, value, parts in (("k_all", got[0], ks), ("v_all", got[1], vs)):
            want = torch.cat(parts, 2)
            v_ = check_values(value, Expected(want.double(), None, want.dtype), what=name, concept="kv-cache-append",
                              message=MESSAGES["kv-cache-append"], atol=0.0, rtol=0.0)
            if not v_.passed:
                return v_
        lengths.append(cache.length())
    want_lengths = [sum(k.shape[2] for k, _ in chunks[: i + 1]) for i in range(len(chunks))]
    if lengths != want_lengths:
        seen = Evidence(notes=[tr("len(cache) after each append: {lengths}; expected {want_lengths}", lengths=lengths,
                                  want_lengths=want_lengths)])
        if lengths[0] != want_lengths[0]:  # the later appends returned this step too, so it was kept: len is wrong
            return Verdict.fail("kv-cache-growth", len_message(lengths, want_lengths), seen)
        if len(set(lengths)) == 1:  # the right tensors came back, but the cache never kept them
            return Verdict.fail("kv-cache-append", tr("append returned the right tensors but did not keep them: "
                                                      "store the concatenated keys and values in the cache for the "
                                                      "next step."), seen)
        return Verdict.fail("kv-cache-growth", MESSAGES["kv-cache-growth"], seen)
    return Verdict.ok()


@kv_cache_append_basic.check
def _(student, s, param):
    return check_appends(student, s.inputs["chunks"])


@case("decode_small", title="Prefill then token-by-token decoding equals the full causal forward",
      concept="kv-cache-growth", points=1, hidden=False, uses=("MultiHeadAttention", "KVCache"))
def decode_small(ctx):
    return decode_setup(ctx, B=1, T=5, d=16, h=2, prefill=3, chunks=[1, 1])


@decode_small.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="kv-cache-growth")


# --- the requirements the cases above do not reach ---------------------------------------------


@case("mha_causal_small", title="causal=True: no token sees a later one", concept="causal-leak",
      points=1, hidden=False, uses=("MultiHeadAttention",))
def mha_causal_small(ctx):
    return forward_setup(ctx, B=2, T=5, d=16, h=4, causal=True)


@mha_causal_small.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="causal-leak")


@case("mha_mask_small", title="A key padding mask (B, 1, 1, T) hides padded keys", concept="padding-broadcast",
      points=1, hidden=False, uses=("MultiHeadAttention",))
def mha_mask_small(ctx):
    pad = reference.padding_mask([5, 3], 5, device=ctx.device)
    x = ctx.randn(2, 5, 16).masked_fill(~pad[:, :, None], 50.0)  # loud padding embeddings
    return forward_setup(ctx, B=2, T=5, d=16, h=2, mask=pad[:, None, None, :], rows=pad[:, :, None], x=x)


@mha_mask_small.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="padding-broadcast")


@case("mha_empty_row_small", title="A query that sees no key outputs zeros (left padding, causal=True)",
      concept="fully-masked-rows", points=1, hidden=False, uses=("MultiHeadAttention",))
def mha_empty_row_small(ctx):
    pad = reference.padding_mask([4, 2], 4, side="left", device=ctx.device)
    return forward_setup(ctx, B=2, T=4, d=16, h=2, causal=True, mask=pad[:, None, None, :])


@mha_empty_row_small.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="fully-masked-rows")


@case("mha_half_small", title="float16 and bfloat16 weights and inputs, causal=True", concept="dtype-overflow",
      points=1, hidden=False, uses=("MultiHeadAttention",), params={"float16": torch.float16,
                                                                   "bfloat16": torch.bfloat16})
def mha_half_small(ctx):
    return forward_setup(ctx, B=1, T=6, d=16, h=2, causal=True, dtype=ctx.param)


@mha_half_small.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="dtype-overflow")


@case("mha_on_device", title="The module moved to the meta device runs there (a stand-in for a GPU)",
      concept="device-placement", points=1, hidden=False, uses=("MultiHeadAttention",), meta=True)
def mha_on_device(ctx):
    return Setup(inputs=dict(x=torch.empty(1, 3, 4, device="meta")))


@mha_on_device.check
def _(student, s, param):
    return check_on_meta(student, 4, 2, s.inputs["x"])


@case("mha_twice", title="Eval mode gives the same output twice (no dropout)", concept="dropout",
      points=1, hidden=False, uses=("MultiHeadAttention",))
def mha_twice(ctx):
    return forward_setup(ctx, B=1, T=6, d=8, h=2, causal=True)


@mha_twice.check
@guarded
def _(student, s, param):
    return check_twice(student, s)


@case("decode_chunks_small", title="A cache over steps of 2, 2 and 1 tokens equals the full causal forward",
      concept="causal-alignment", points=1, hidden=False, uses=("MultiHeadAttention", "KVCache"),
      on_error={"must match the size of tensor": "causal-alignment"})
def decode_chunks_small(ctx):
    return decode_setup(ctx, B=1, T=5, d=8, h=2, prefill=2, chunks=[2, 1])


@decode_chunks_small.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="causal-alignment")


@case("decode_padded_small", title="Left-padded prompts [3, 1]: the padding mask grows with the cache",
      concept="mask-combination", points=1, hidden=False, uses=("MultiHeadAttention", "KVCache"))
def decode_padded_small(ctx):
    prompt = reference.padding_mask([3, 1], 3, side="left", device=ctx.device)
    mask = torch.cat([prompt, torch.ones(2, 2, dtype=torch.bool, device=ctx.device)], 1)  # (B, 5)
    return decode_setup(ctx, B=2, T=5, d=8, h=2, prefill=3, chunks=[1, 1], mask=mask, rows=mask[:, :, None])


@decode_padded_small.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="mask-combination")
