"""Helpers shared by this assignment's public and hidden cases (shipped to students: nothing secret).

Setups compute everything a check compares with: the float64 oracle and, as diagnosis
hypotheses, the outputs each classic mistake gives (``reference.mistakes``, which stays with the
instructor). Checks only compare (``grader.checks.hypotheses``): in a student kit they run on the
setups ``grader release`` stored.
"""

from __future__ import annotations

import dataclasses
import math

import torch

import reference
from grader.cases import Setup, SetupContext, Verdict
from grader.checks.compare import HALF, Expected, check_comparable, check_structure, check_values, farthest_of, identical
from grader.checks.diagnose import concept_of_exception
from grader.checks.explore import mask_step_explorer
from grader.checks.hypotheses import Hypotheses, concept_of, matching_mistake
from grader.assignment.builtin import CONCEPTS
from grader.results import Evidence
from grader.sandbox import StudentError
from grader.i18n import Msg, tr

NAMES = ("W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight")
LAYOUT = ("head-split", "head-split/interleaved", "head-split/interleaved-both", "head-merge", "scaling")
"""The mistakes a plain forward pass shows (head layout, scale): what ``root_cause`` looks for."""

MESSAGES = {
    "head-split": tr("Split heads with x.view(B, T, h, d_k).transpose(1, 2): viewing straight to (B, h, T, d_k) (or "
                     "splitting features with a stride) mixes positions and heads."),
    "head-merge": tr("Merge heads with out.transpose(1, 2).reshape(B, T, d_model) before W_o."),
    "scaling": tr("Divide the scores by sqrt(d_k) of one head, not by sqrt(d_model)."),
    "causal-leak": tr("With causal=True a token must not see later tokens, also when a mask is given too: AND the "
                      "causal mask with it."),
    "causal-alignment": tr("With a cache, the new tokens are the last positions: query i of T_new sees keys j <= "
                           "T_total - T_new + i (rows N..N+T_new-1 of the causal mask)."),
    "kv-cache-growth": tr("After each step the cache must hold every token so far: len(cache) grows by T_new."),
    "kv-cache-append": tr("KVCache.append concatenates on the time axis (dim 2) and returns all keys and values."),
    "padding-broadcast": tr("Padding hides keys: a (B, T) padding mask is used as (B, 1, 1, T)."),
    "mask-combination/dropped-when-causal": tr("With causal=True and a mask, both apply: AND the mask with the "
                                               "causal mask. Your output matches the causal mask alone, the mask "
                                               "passed with it dropped."),
    "mask-combination": tr("During decoding, keep the padding mask for cached keys and extend it with True for every "
                           "new token, AND-ed with the causal mask."),
    "dropout": tr("Two identical calls in eval mode must give identical outputs: use nn.Dropout (which .eval() turns "
                  "off) or pass training=self.training."),
    "fully-masked-rows": tr("A query that may see no key (a left-padded position with causal=True) must output "
                            "zeros, never NaN: find such rows with mask.any(-1), give them finite scores before the "
                            "softmax (torch.where) and set their weights to 0 after it, before W_o."),
    "dtype-overflow": tr("In float16 the mask fill must fit the dtype: use torch.finfo(scores.dtype).min or -inf, "
                         "never -1e9 or float32's min, and keep every tensor in the module's dtype."),
}


def message_for(mistake: str) -> str:
    """A mistake's own message ("concept/variant"), else its concept's."""
    return MESSAGES.get(mistake) or MESSAGES.get(concept_of(mistake)) or CONCEPTS[concept_of(mistake)] + "."


def make_weights(ctx: SetupContext, d: int, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """Random weights, exactly representable in ``dtype`` (so the float64 oracle sees the same values)."""
    return {n: ctx.randn(d, d, scale=1 / math.sqrt(d)).to(dtype).float() for n in NAMES}


def ref_module(weights, d: int, h: int, dtype=torch.float32, device=None, *,
               attend=None) -> reference.MultiHeadAttention:
    # The reference is looked up on call, never at import: a student kit imports this module
    # without the reference (its public setups are stored).
    m = reference.MultiHeadAttention(d, h, attend=attend or reference.masked_attention)
    m.load_state_dict(weights)
    return m.to(device=device, dtype=dtype).eval()


def prescaled_attention(q, k, v, mask=None):
    """``reference.masked_attention`` with q scaled before the product ((q * d_k ** -0.5) @ k^T):
    correct code whose half-precision scores round differently (the product of q and the scale is
    rounded first)."""
    return reference.masked_attention(q * q.shape[-1] ** -0.5, k, v, mask, scale=1.0)


def sdpa_attention(q, k, v, mask=None):
    """``F.scaled_dot_product_attention``: PyTorch's fused kernel, which rounds in its own order."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), None


def half_ways():
    """Besides torch.softmax after the product, correct ways of writing the heads' attention that
    round differently in float16/bfloat16: a softmax by hand (max, exp, sum, divide), q scaled
    first, and SDPA (looked up on call: a kit imports this module without the reference).
    Measured over random causal MHA inputs up to 6 x the cases' scale, a by-hand reciprocal
    softmax on pre-scaled q reached 1.5 x the allowance of torch.softmax's naive result alone,
    SDPA 1.05 x; against all four none passed 0.56 x (tests/unit/test_reference_mha.py)."""
    return (reference.masked_attention_by_hand, prescaled_attention, sdpa_attention)


def expected(weights, h: int, x: torch.Tensor, **kw) -> Expected:
    """float64 oracle plus the naive same-dtype reference for one forward call. In half precision
    the naive result is, per element, the farthest from the oracle of the module with torch.softmax
    and with each of ``half_ways()``: all are correct code, and the rule allows twice the error of
    whichever rounds worst."""
    d = x.shape[-1]
    oracle, _ = reference.mistakes.forward(weights, h, x, **kw)
    mask, causal = kw.get("mask"), kw.get("causal", False)
    ways = (reference.masked_attention,) + (half_ways() if x.dtype in HALF else ())
    with torch.no_grad(), reference.exact_float32():
        outs = [ref_module(weights, d, h, x.dtype, x.device, attend=w)(x, mask, causal=causal) for w in ways]
    return Expected(oracle, farthest_of(oracle, outs), x.dtype)


class Refused(Exception):
    """The student's module cannot take the reference weights; carries the verdict."""

    def __init__(self, verdict: Verdict):
        self.verdict = verdict


def load_student(student, d: int, h: int, weights, dtype=torch.float32):
    """Build the student's module, check its four projections, copy the reference weights in, eval()."""
    m = student.MultiHeadAttention(d, h)
    own = m.state_dict()
    for name in NAMES:
        t = own.get(name)
        if type(t) is not torch.Tensor or tuple(t.shape) != (d, d):
            raise Refused(Verdict.fail("signature", tr("Expected {layer} = nn.Linear(d_model, d_model, bias=False); "
                                                       "state_dict()['{name}'] is {found}.", layer=name.split('.')[0], name=name,
                                                       found=getattr(t, 'shape', 'missing'))))
    biases = [k for k in own if k.startswith(("W_q.", "W_k.", "W_v.", "W_o.")) and k.endswith("bias")]
    if biases:
        raise Refused(Verdict.fail("signature", tr("The projections must have bias=False; found {names}.", names=', '.join(biases))))
    m.load_state_dict({**own, **{k: v.to(own[k].device) for k, v in weights.items()}})
    if dtype != torch.float32:  # dtypes do not cross the wire; the module's own casts do
        m = m.method({torch.float16: "half", torch.bfloat16: "bfloat16", torch.float64: "double"}[dtype])()
    m.eval()
    return m


def mistaken(out, hyp: Hypotheses, *, where=None, only: tuple[str, ...] | None = None,
             tol: float = 1e-3) -> str | None:
    """The first mistake ("concept" or "concept/variant") the output reproduces (and the reference does not), by
    ``matching_mistake``'s rule (bfloat16 outputs sit ~5e-3 from a mistake 0.27 away)."""
    return matching_mistake(out, hyp.reference, hyp.mistakes, tol=tol, where=where, only=only)


def check_mha(out, exp: Expected, mistakes: dict[str, torch.Tensor], *, concept: str, where=None,
              candidates: tuple[str, ...] | None = None, what: Msg | str = "forward(x)") -> Verdict:
    """Value check; on a mismatch, name the mistake (of ``mistakes``, computed at setup) the output reproduces."""
    v = check_values(out, exp, what=what, concept=concept, message=message_for(concept), where=where)
    if v.passed or v.evidence.max_abs_error is None:
        return v
    tol = 1e-3 if exp.dtype in (torch.float32, torch.float64) else 3e-2
    specific = mistaken(out, Hypotheses(exp.oracle, mistakes), where=where, only=candidates, tol=tol)
    if specific:
        return Verdict.fail(concept_of(specific), message_for(specific), v.evidence)
    return v


def guarded(fn):
    """Decorator for checks: a Refused module becomes its verdict."""

    def run(student, s: Setup, param):
        try:
            return fn(student, s, param)
        except Refused as r:
            return r.verdict

    return run


def run_steps(student, m, x: torch.Tensor, steps, *, mask=None, causal: bool = True):
    """Decode through the student's cache; returns (outputs concatenated, cache length after each step)."""
    cache = student.KVCache()
    outs, lengths = [], []
    for n, (start, end) in enumerate(steps):
        kw = {} if mask is None else {"mask": mask[:, None, None, :end]}
        try:
            out = m(x[:, start:end], causal=causal, cache=cache, **kw)
        except StudentError as e:
            e.step, e.new, e.total = n, end - start, end  # where: a later step after good ones points at sizes
            raise
        if type(out) is not torch.Tensor:
            raise Refused(Verdict.fail("signature", tr("forward returned {name}, expected a tensor.", name=type(out).__name__)))
        outs.append(out)
        lengths.append(cache.length())
    return torch.cat(outs, 1), lengths


def steps_of(prefill: int, chunks: list[int]) -> list[tuple[int, int]]:
    bounds, at = [], 0
    for n in ([prefill] if prefill else []) + chunks:
        bounds.append((at, at + n))
        at += n
    return bounds


def probe(weights, h: int, x: torch.Tensor) -> Hypotheses:
    """At setup: what a plain forward pass over x[:1, :6] gives, right and with each head layout
    or scale mistake (what ``root_cause`` compares with)."""
    few = x[:1, :6]
    return Hypotheses(reference.mistakes.forward(weights, h, few)[0],
                      reference.mistakes.forward_mistakes(weights, h, few, names=LAYOUT))


def root_cause(student, m, hyp: Hypotheses, x: torch.Tensor) -> Verdict | None:
    """When a black-box or decode check fails, look for the underlying mistake first: a head
    layout or scale mistake that a plain forward pass reproduces (``hyp``: the setup's ``probe``)."""
    try:
        out = m(x[:1, :6].float())
    except StudentError:
        return None
    if type(out) is not torch.Tensor:
        return None
    specific = mistaken(out, hyp, only=LAYOUT)
    return Verdict.fail(concept_of(specific), message_for(specific)) if specific else None


def broken_cache(student) -> Verdict | None:
    """The student's KVCache on its own: appends of 2 then 1 steps must concatenate and be kept."""
    k1, v1 = torch.arange(16.0).reshape(1, 2, 2, 4), -torch.arange(16.0).reshape(1, 2, 2, 4)
    k2, v2 = k1[:, :, :1] + 100, v1[:, :, :1] - 100
    try:
        cache = student.KVCache()
        cache.append(k1, v1)
        first = cache.length()
        got = cache.append(k2, v2)
    except StudentError as e:
        if e.exc_type == "NotImplementedError":
            raise  # a placeholder: the engine says "not implemented yet"
        return Verdict.fail("kv-cache-append", tr("Decoding failed inside KVCache.append ({exc_type}: {message}): "
                                                  "concatenate on the time axis, dim 2 of (B, h, T, d_k).", exc_type=e.exc_type, message=e.message[:120]))
    ok = (isinstance(got, (tuple, list)) and len(got) == 2 and all(check_comparable(t, "") is None for t in got)
          and identical(got[0], torch.cat([k1, k2], 2)) and identical(got[1], torch.cat([v1, v2], 2)))
    if not ok:
        return Verdict.fail("kv-cache-append", tr("Decoding failed because KVCache.append does not return the "
                                                  "concatenation of everything cached so far on the time axis (dim "
                                                  "2)."))
    n = cache.length()
    if first != 2:  # the second append returned the first step too, so it was kept: only the count is wrong
        return Verdict.fail("kv-cache-growth", len_message([first, n], [2, 3]))
    if n != 3:
        return Verdict.fail("kv-cache-append", tr("Decoding failed because the cache does not keep what it appends: "
                                                  "after appends of 2 and 1 steps, len(cache) should be 3."))
    return None


def len_message(lengths: list, want: list) -> Msg:
    """append keeps and returns every step, but __len__ counts something else (the batch, the heads)."""
    return tr("KVCache.append keeps and returns every step, but len(cache) after each step is {lengths}, expected "
              "{want}: __len__ must count the cached time steps (dim 2 of the keys), not the batch or the heads.",
              lengths=repr(lengths), want=repr(want))


def check_decode(student, s: Setup, *, concept: str, on_error: dict[str, str] | None = None) -> Verdict:
    """Decode through the student's cache and compare. ``on_error``: the case's own patterns (as in
    ``@case``), for an exception raised at a later step."""
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"])
    causal = i.get("causal", True)
    try:
        got, lengths = run_steps(student, m, i["x"], i["steps"], mask=i.get("mask"), causal=causal)
    except StudentError as e:
        if e.exc_type == "NotImplementedError":
            raise  # a placeholder: the engine says "not implemented yet"
        cause = broken_cache(student) or root_cause(student, m, s.extra["probe"], i["x"])
        if cause:
            return cause
        if getattr(e, "step", 0) > 0:  # the first steps ran: what fails depends on this step's sizes
            return Verdict.fail(concept_of_exception(e.exc_type, e.message, concept, on_error), tr(
                "forward ran the first {steps} step(s) but raised {exc} at the step of {new} new token(s) with "
                "{total} cached: {detail}. Whatever is sized by the sequence (the causal mask, the padding mask, "
                "buffers) must have this step's sizes: {new} queries, {total} keys.", steps=e.step, exc=e.exc_type,
                new=e.new, total=e.total, detail=" ".join(e.message.split())[:160]), Evidence(traceback=e.traceback))
        raise
    want = [end for _, end in i["steps"]]
    if lengths != want:
        # What len(cache) said over the steps decides, with the cache tried on its own: a cache
        # whose append is right and whose len is wrong has a wrong __len__; one that is right on
        # its own was not appended to (or was appended the wrong tensors) by forward.
        seen = Evidence(notes=[tr("len(cache) after each step: {lengths}; expected {want}", lengths=lengths, want=want)])
        alone = broken_cache(student)
        if alone is not None and alone.concept == "kv-cache-growth":
            return Verdict.fail("kv-cache-growth", len_message(lengths, want), seen)
        if alone is not None:
            return Verdict(False, alone.concept, alone.message, seen)
        c = "kv-cache-append" if len(set(lengths)) == 1 else "kv-cache-growth"
        return Verdict.fail(c, tr("{rule} len(cache) after each step: {lengths}; expected {want}.",
                                  rule=message_for(c), lengths=repr(lengths), want=repr(want)), seen)
    return with_explorer(check_mha(got, s.expected, s.extra["mistakes"], concept=concept, where=s.extra.get("rows"),
                                   what=tr("the concatenated decode outputs")), s)


def with_explorer(v: Verdict, s: Setup) -> Verdict:
    """A failure diagnosed as a mask mistake, with the mask explorer of the call's scores (the
    setup's ``explore``): the reference's mask against the one the student's output matches."""
    seen = s.extra.get("explore")
    if v.passed or not seen or v.concept not in seen["masks"]:
        return v
    e = mask_step_explorer(seen["q"], seen["k"], seen["keep"], seen["masks"][v.concept])
    return Verdict(False, v.concept, v.message, dataclasses.replace(v.evidence, explorer=e))


def decode_setup(ctx: SetupContext, *, B: int, T: int, d: int, h: int, prefill: int, chunks: list[int],
                 mask=None, rows=None, causal: bool = True, x=None) -> Setup:
    weights = make_weights(ctx, d)
    x = ctx.randn(B, T, d) if x is None else x
    steps = steps_of(prefill, chunks)
    oracle = reference.mistakes.decode(weights, h, x, steps, mask=mask, causal=causal)
    if causal:
        with torch.no_grad():
            naive = reference.decode(ref_module(weights, d, h, device=ctx.device), x, prefill, chunks, mask=mask)
    else:
        naive = None  # float32 inputs: the fixed tolerance applies, no naive reference needed
    mistakes = reference.mistakes.decode_mistakes(weights, h, x, steps, mask=mask, causal=causal)
    explore = reference.mistakes.step_masks(weights, h, x, steps, mask=None if mask is None else mask[:, None, None, :],
                                            causal=causal)
    return Setup(inputs=dict(weights=weights, d=d, h=h, x=x, steps=steps, mask=mask, causal=causal),
                 expected=Expected(oracle, naive, x.dtype),
                 extra=dict(rows=rows, mistakes=mistakes, probe=probe(weights, h, x), explore=explore))


def forward_setup(ctx: SetupContext, *, B, T, d, h, causal=False, mask=None, rows=None, dtype=torch.float32,
                  x=None) -> Setup:
    w = make_weights(ctx, d, dtype)
    x = ctx.randn(B, T, d, dtype=dtype) if x is None else x
    mistakes = reference.mistakes.forward_mistakes(w, h, x, mask=mask, causal=causal)
    explore = reference.mistakes.step_masks(w, h, x, [(0, x.shape[1])], mask=mask, causal=causal)
    return Setup(inputs=dict(d=d, h=h, weights=w, x=x, causal=causal, mask=mask, dtype=dtype),
                 expected=expected(w, h, x, mask=mask, causal=causal),
                 extra=dict(rows=rows, mistakes=mistakes, explore=explore))


def check_forward(student, s: Setup, *, concept: str, candidates: tuple[str, ...] | None = None) -> Verdict:
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"], i["dtype"])
    out = m(i["x"], i["mask"], causal=i["causal"])
    return with_explorer(check_mha(out, s.expected, s.extra["mistakes"], concept=concept, where=s.extra.get("rows"),
                                   candidates=candidates), s)


def check_on_meta(student, d: int, h: int, x: torch.Tensor) -> Verdict:
    """The module moved to the meta device must run there (masks made on x.device or as buffers)."""
    m = student.MultiHeadAttention(d, h).to("meta")
    m.eval()
    out = m(x, causal=True)
    bad = check_structure(out, tuple(x.shape), torch.float32, what=tr("forward(x) on meta"), shape_concept="device-placement")
    if bad:
        return bad
    if out.device.type != "meta":
        return Verdict.fail("device-placement", tr("The output came back on {device}: create masks with "
                                                   "device=x.device or register them as buffers so .to() moves them.", device=out.device))
    return Verdict.ok()


def check_twice(student, s: Setup) -> Verdict:
    i = s.inputs
    m = load_student(student, i["d"], i["h"], i["weights"])
    a, b = m(i["x"], causal=True), m(i["x"], causal=True)
    bad = check_comparable(a, "forward(x)") or check_comparable(b, tr("forward(x), called again"))
    if bad:
        return bad
    if not identical(a, b):
        return Verdict.fail("dropout", tr("Two identical calls in eval mode gave different outputs: use nn.Dropout "
                                          "(which .eval() turns off) or pass training=self.training."))
    return check_forward(student, s, concept="dropout")

