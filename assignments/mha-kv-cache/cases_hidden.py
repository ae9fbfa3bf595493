"""Hidden cases: run at grading time only; never shipped to students.

Shapes avoid blind spots: H > 1 (else head and scale bugs hide), B == H for padding (else a wrong
broadcast shows as an error or lines up by accident), multi-token steps with a cache (else
`mask[:T, :T]` bugs hide).
"""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, Verdict, case
from grader.checks.hypotheses import Hypotheses
from grader.checks.compare import Expected, check_comparable, check_structure, check_values
from grader.results import Evidence
from grader.sandbox import StudentError
from grader.checks.hypotheses import concept_of
from grader.i18n import tr

from ._common import (
    check_decode, check_forward, check_on_meta, check_twice, decode_setup, forward_setup, guarded, load_student,
    make_weights, message_for, mistaken, probe, root_cause,
)
from .cases_public import check_appends

# A mask that does not fit (T_new, T_total) while decoding was built for another step's length.
MASK_SIZE = {"must match the size of tensor": "causal-alignment"}


# C17 in the case design table
@case("mha_weights", title="Forward with copied weights (E32 H4 B2 T10)", concept="head-split",
      points=3, hidden=True, uses=("MultiHeadAttention",))
def mha_weights(ctx):
    return forward_setup(ctx, B=2, T=10, d=32, h=4)


@mha_weights.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="head-split")


@case("mha_causal", title="causal=True hides future tokens", concept="causal-leak",
      points=2, hidden=True, uses=("MultiHeadAttention",))
def mha_causal(ctx):
    return forward_setup(ctx, B=2, T=9, d=32, h=4, causal=True)


@mha_causal.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="causal-leak")


@case("mha_padding", title="key padding mask (B, 1, 1, T) with B == h", concept="padding-broadcast",
      points=2, hidden=True, uses=("MultiHeadAttention",))
def mha_padding(ctx):
    pad = reference.padding_mask([8, 5, 3, 6], 8, device=ctx.device)
    x = ctx.randn(4, 8, 32).masked_fill(~pad[:, :, None], 50.0)  # loud padding embeddings
    return forward_setup(ctx, B=4, T=8, d=32, h=4, mask=pad[:, None, None, :], rows=pad[:, :, None], x=x)


@mha_padding.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="padding-broadcast")


# C18 in the case design table
@case("causality_grad", title="The output at t has zero gradient w.r.t. inputs after t",
      concept="causal-leak", points=2, hidden=True, uses=("MultiHeadAttention",))
def causality_grad(ctx):
    d, h, T = 16, 4, 12
    w = make_weights(ctx, d)
    x = ctx.randn(2, T, d, dtype=torch.float64)
    cots = {}
    for t in (0, T // 2, T - 2):
        g = ctx.randn(2, T, d, dtype=torch.float64)
        g[:, t + 1:] = 0  # only outputs up to t matter
        cots[t] = g
    return Setup(inputs=dict(d=d, h=h, weights=w, x=x, cotangents=cots), extra=dict(probe=probe(w, h, x)))


@causality_grad.check
@guarded
def _(student, s, param):
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"])
    x = i["x"]
    try:
        m = m.double()
        student.vjp((m, "__call__"), (x,), {"causal": True}, wrt=[0], cotangent=i["cotangents"][0])
    except StudentError:  # code that hard-codes float32: check in float32 instead
        m, x = m.float(), x.float()
    for t, g in i["cotangents"].items():
        _, (grad,) = student.vjp((m, "__call__"), (x,), {"causal": True}, wrt=[0], cotangent=g.to(x.dtype))
        bad = check_structure(grad, tuple(x.shape), x.dtype, what="dL/dx", shape_concept="causal-leak")
        if bad:
            return bad
        past, future = grad[:, : t + 1].abs().max(), grad[:, t + 1:].abs().max()
        if not bool(future <= 1e-12 * max(float(past), 1.0)):
            leak = torch.nonzero(grad[0, t + 1:].abs().sum(-1) > 0).flatten()[:5] + t + 1
            cause = root_cause(student, m.float(), s.extra["probe"], i["x"])
            if cause:
                return cause
            return Verdict.fail("causal-leak", tr("The output at position {t} changes when later tokens change: "
                                                  "apply the causal mask to the scores of every head.", t=t),
                                Evidence(notes=[tr("gradient of outputs 0..{t} reaches inputs {inputs}", t=t, inputs=leak.tolist()),
                                                tr("max |grad| on later inputs: {future}", future=f"{float(future):.3g}")]))
    return Verdict.ok()


# C19 in the case design table
@case("pad_invariance", title="Padding a batch does not change real tokens' outputs",
      concept="padding-broadcast", points=2, hidden=True, uses=("MultiHeadAttention",),
      params={"right": "right", "left": "left"})
def pad_invariance(ctx):
    d, h, T, lengths = 16, 2, 7, [7, 4, 2]
    w = make_weights(ctx, d)
    seqs = [ctx.randn(1, n, d) for n in lengths]
    pad = reference.padding_mask(lengths, T, side=ctx.param, device=ctx.device)
    x = torch.full((len(lengths), T, d), 50.0, device=ctx.device)
    for b, sq in enumerate(seqs):
        if ctx.param == "right":
            x[b, : lengths[b]] = sq[0]
        else:
            x[b, T - lengths[b]:] = sq[0]
    keep = pad[:, None, None, :]
    no_causal = Hypotheses(reference.mistakes.forward(w, h, x, mask=keep, causal=True)[0],
                           reference.mistakes.forward_mistakes(w, h, x, mask=keep, causal=True, names=("causal-leak", "mask-combination/dropped-when-causal")))
    return Setup(inputs=dict(d=d, h=h, weights=w, seqs=seqs, x=x, pad=pad, side=ctx.param),
                 extra=dict(probe=probe(w, h, x), no_causal=no_causal))


@pad_invariance.check
@guarded
def _(student, s, param):
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"])
    batched = m(i["x"], i["pad"][:, None, None, :], causal=True)
    bad = check_structure(batched, tuple(i["x"].shape), torch.float32, what="forward(batch)",
                          shape_concept="padding-broadcast") or check_comparable(batched, "forward(batch)")
    if bad:
        return bad
    for b, sq in enumerate(i["seqs"]):
        alone = m(sq, causal=True)
        n = sq.shape[1]
        rows = batched[b, :n] if i["side"] == "right" else batched[b, -n:]
        if type(alone) is not torch.Tensor or alone.shape != (1, n, i["d"]) or alone.device.type == "meta":
            return (check_structure(alone, (1, n, i["d"]), torch.float32, what=tr("forward(sequence {b})", b=b),
                                    shape_concept="padding-broadcast")
                    or check_comparable(alone, tr("forward(sequence {b})", b=b)) or Verdict.fail("signature", tr("bad output")))
        v = check_values(rows, Expected(alone[0].detach().double(), None, torch.float32), what=tr("sequence {b}", b=b),
                         concept="padding-broadcast", atol=1e-5, rtol=1e-4,
                         message=tr("Sequence {b} gives different outputs alone and inside a {side}-padded batch: "
                                    "padding must hide keys, never change real tokens.", b=b, side=i['side']))
        if not v.passed:
            return root_cause(student, m, s.extra["probe"], i["x"]) or _causal_dropped(batched, s) or v
    return Verdict.ok()


def _causal_dropped(batched, s: Setup) -> Verdict | None:
    """The padded batch (mask and causal=True) came out as if one of the two were dropped when both are given."""
    leak = mistaken(batched, s.extra["no_causal"], where=s.inputs["pad"][:, :, None])
    return Verdict.fail(concept_of(leak), message_for(leak)) if leak else None


# C20 in the case design table
@case("kv_decode", title="Prefill 5 then 6 single-token steps", concept="kv-cache-growth",
      points=3, hidden=True, uses=("MultiHeadAttention", "KVCache"),
      on_error=MASK_SIZE)
def kv_decode(ctx):
    return decode_setup(ctx, B=2, T=11, d=32, h=4, prefill=5, chunks=[1] * 6)


@kv_decode.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="kv-cache-growth")


# C21 in the case design table
@case("kv_chunked", title="Prefill 4, a chunk of 3, then single tokens", concept="causal-alignment",
      points=2, hidden=True, uses=("MultiHeadAttention", "KVCache"),
      on_error=MASK_SIZE)
def kv_chunked(ctx):
    return decode_setup(ctx, B=2, T=10, d=32, h=4, prefill=4, chunks=[3, 1, 1, 1])


@kv_chunked.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="causal-alignment")


# C22 in the case design table
@case("kv_from_empty", title="Single-token steps from an empty cache", concept="kv-cache-growth",
      points=1, hidden=True, uses=("MultiHeadAttention", "KVCache"),
      on_error=MASK_SIZE)
def kv_from_empty(ctx):
    return decode_setup(ctx, B=2, T=6, d=16, h=2, prefill=0, chunks=[1] * 6)


@kv_from_empty.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="kv-cache-growth")


# C23 in the case design table
@case("kv_left_padded_batch", title="Left-padded prompts [5, 3], mask grown while decoding",
      concept="mask-combination", points=2, hidden=True, uses=("MultiHeadAttention", "KVCache"))
def kv_left_padded_batch(ctx):
    prompt = reference.padding_mask([5, 3], 5, side="left", device=ctx.device)
    mask = torch.cat([prompt, torch.ones(2, 3, dtype=torch.bool, device=ctx.device)], 1)  # (B, 8)
    rows = mask[:, :, None]  # real query positions only
    return decode_setup(ctx, B=2, T=8, d=32, h=4, prefill=5, chunks=[1, 1, 1], mask=mask, rows=rows)


@kv_left_padded_batch.check
@guarded
def _(student, s, param):
    return check_decode(student, s, concept="mask-combination")


# C15 in the case design table
@case("mha_device", title="Runs on another device (meta tensors stand in for a GPU)",
      concept="device-placement", points=1, hidden=True, uses=("MultiHeadAttention",), meta=True)
def mha_device(ctx):
    return Setup(inputs=dict(x=torch.empty(2, 5, 8, device="meta")))


@mha_device.check
def _(student, s, param):
    return check_on_meta(student, 8, 2, s.inputs["x"])


# C16 in the case design table
@case("mha_eval_determinism", title="Eval mode is deterministic (no dropout)", concept="dropout",
      points=1, hidden=True, uses=("MultiHeadAttention",))
def mha_eval_determinism(ctx):
    return forward_setup(ctx, B=2, T=8, d=16, h=2, causal=True)


@mha_eval_determinism.check
@guarded
def _(student, s, param):
    return check_twice(student, s)


@case("mha_fp16_causal", title="float16 weights and inputs with causal=True", concept="dtype-overflow",
      points=2, hidden=True, uses=("MultiHeadAttention",))
def mha_fp16_causal(ctx):
    return forward_setup(ctx, B=2, T=16, d=32, h=4, causal=True, dtype=torch.float16)


@mha_fp16_causal.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="dtype-overflow")


@case("kv_cache_append_shapes", title="KVCache with B=2, h=3 and appends of 4, 1 and 2 steps",
      concept="kv-cache-append", points=1, hidden=True, uses=("KVCache",))
def kv_cache_append_shapes(ctx):
    chunks = [(ctx.randn(2, 3, n, 5), ctx.randn(2, 3, n, 5)) for n in (4, 1, 2)]
    return Setup(inputs=dict(chunks=chunks))


@kv_cache_append_shapes.check
def _(student, s, param):
    return check_appends(student, s.inputs["chunks"])


# --- the API's options combined ------------------------------------------------------------------
# mask (key padding, right or left) / causal / both / neither, each without and with a cache that
# grows by steps of different sizes: a bug that lives in one combination ("causal is ignored when a
# mask is given", "the mask is dropped once there is a cache") fails the pairs that reach it.

# label -> (mask side or None, causal, steps: None = one forward call, else (prefill, chunks)).
# Neither and causal alone without a cache are mha_weights and mha_causal; mask alone (right) is mha_padding.
FORWARD_OPTIONS = {
    "mask-left": ("left", False, None),
    "causal+mask-right": ("right", True, None),
    "causal+mask-left": ("left", True, None),
}
CACHE_OPTIONS = {
    "cache": (None, False, (3, [2, 1])),
    "cache+mask-left": ("left", False, (2, [1, 3])),
    "cache+causal": (None, True, (1, [3, 2])),
    "cache+causal+mask-right": ("right", True, (3, [2, 1])),
    "cache+causal+mask-left-grown": ("left", True, (0, [2, 3, 1])),
}


def _options_setup(ctx):
    side, causal, steps = ctx.param
    B, T, d, h = 3, 6, 24, 3  # B == h: a padding mask broadcast on the wrong axis still lines up
    pad = reference.padding_mask([6, 4, 5], T, side=side, device=ctx.device) if side else None
    x = ctx.randn(B, T, d)
    if pad is not None:
        x = x.masked_fill(~pad[:, :, None], 50.0)  # loud padding embeddings
    rows = pad[:, :, None] if pad is not None else None  # padded queries: mha_empty_rows grades those
    if steps is None:
        return forward_setup(ctx, B=B, T=T, d=d, h=h, causal=causal, x=x, rows=rows,
                             mask=None if pad is None else pad[:, None, None, :])
    prefill, chunks = steps
    return decode_setup(ctx, B=B, T=T, d=d, h=h, prefill=prefill, chunks=chunks, mask=pad, rows=rows,
                        causal=causal, x=x)


@case("option_pairs", title="A padding mask with and without causal=True, padding on either side",
      concept="mask-combination", points=3, hidden=True, uses=("MultiHeadAttention",), params=FORWARD_OPTIONS)
def option_pairs(ctx):
    return _options_setup(ctx)


@option_pairs.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="mask-combination" if param[1] else "padding-broadcast")


@case("cache_option_pairs", title="A growing cache with a mask, causal=True, both or neither",
      concept="kv-cache-growth", points=5, hidden=True, uses=("MultiHeadAttention", "KVCache"),
      params=CACHE_OPTIONS, on_error=MASK_SIZE)
def cache_option_pairs(ctx):
    return _options_setup(ctx)


@cache_option_pairs.check
@guarded
def _(student, s, param):
    side, causal, _ = param
    concept = "mask-combination" if side else "causal-alignment" if causal else "kv-cache-growth"
    return check_decode(student, s, concept=concept, on_error=MASK_SIZE)


@case("mha_empty_rows", title="Left-padded positions that see no key output zeros (causal=True, or one combined mask)",
      concept="fully-masked-rows", points=1, hidden=True, uses=("MultiHeadAttention",),
      params={"causal": False, "combined-mask": True})
def mha_empty_rows(ctx):
    pad = reference.padding_mask([7, 3], 7, side="left", device=ctx.device)
    if ctx.param:  # the causal and padding masks AND-ed into one (B, 1, T, T) mask, no causal=True
        keep = reference.causal_mask(7, device=ctx.device)[None, None] & pad[:, None, None, :]
        return forward_setup(ctx, B=2, T=7, d=16, h=4, mask=keep)
    return forward_setup(ctx, B=2, T=7, d=16, h=4, causal=True, mask=pad[:, None, None, :])


@mha_empty_rows.check
@guarded
def _(student, s, param):
    return check_forward(student, s, concept="fully-masked-rows")
