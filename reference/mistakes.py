"""What each classic mistake gives, in float64: the diagnosis models of the two attention assignments.

A case's setup calls these once (the grading side runs the setup live; ``grader release`` runs it
for the public cases and stores the results in the kit), and its check compares the student's
tensor with them through ``grader.checks.hypotheses``. Like the rest of this package they are
working attention code, so they stay with the instructor: a student kit carries their results,
never this file.

Attention (``attention_mistakes``): masked scores filled with 0, the mask applied after the
softmax, a bool mask added as if it were additive, the softmax over queries, a missing or
``1/d`` scale, and the wrong masks a case supplies (padding on rows, OR instead of AND,
top-left causal alignment).

Multi-head attention (``forward``/``decode`` with a ``Variant``): split without transpose,
interleaved split, merge without transpose, scale by sqrt(d_model), no causal mask, top-left
causal alignment while decoding, a mask dropped when causal=True comes with it. ``Variant()`` is the right model: the float64 oracle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# --- masked attention ---------------------------------------------------------------------------

def _softmax64(scores: torch.Tensor, keep: torch.Tensor | None, dim: int = -1) -> torch.Tensor:
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores, dim=dim)
    return torch.nan_to_num(w, nan=0.0)


def attention_mistakes(q: torch.Tensor, k: torch.Tensor, keep: torch.Tensor | None,
                       alt_masks: dict[str, torch.Tensor] | None = None, *,
                       d_v: int | None = None) -> dict[str, torch.Tensor]:
    """Concept (or "concept/variant") -> the float64 weights (..., Lq, Lk) that mistake gives for
    these q, k and bool keep mask, on the CPU. ``alt_masks``: concept -> the wrong keep mask a
    classic mistake builds; ``d_v``: v's last size, when it differs from d (scaling by sqrt(d_v)
    is then a mistake). Order matters: the diagnosis names the first one that matches."""
    q, k = q.detach().double().cpu(), k.detach().double().cpu()
    d = q.shape[-1]
    raw = q @ k.transpose(-2, -1)
    scores = raw / math.sqrt(d)
    keep = keep.cpu() if keep is not None else None
    out: dict[str, torch.Tensor] = {}
    if keep is not None:
        keep_b = keep.expand(scores.shape)
        out["mask-fill-value"] = torch.softmax(scores.masked_fill(~keep_b, 0.0), -1)
        out["mask-after-softmax"] = torch.softmax(scores, -1) * keep_b
        out["mask-convention"] = torch.softmax(scores + keep_b.double(), -1)  # bool mask used as additive
        for concept, alt in (alt_masks or {}).items():
            out[concept] = _softmax64(scores, alt.cpu().expand(scores.shape))
    out["softmax-axis"] = _softmax64(scores, keep, dim=-2)
    out["scaling"] = _softmax64(raw, keep)
    out["scaling/d"] = _softmax64(raw / d, keep)
    if d_v is not None and d_v != d:
        out["scaling/d_v"] = _softmax64(raw / math.sqrt(d_v), keep)
    return out


# --- multi-head attention -------------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    split: str = "standard"  # "standard" | "no_transpose" | "interleaved"
    merge: str = "standard"  # "standard" | "no_transpose" | "interleaved"
    scale: str = "d_k"  # "d_k" | "d_model"
    causal: str = "bottom_right"  # "bottom_right" | "top_left" | "none"
    mask: str = "and_causal"  # "and_causal" | "dropped_when_causal" (causal=True replaces a passed mask)


VARIANTS: dict[str, Variant] = {
    "head-split": Variant(split="no_transpose"),
    "head-split/interleaved": Variant(split="interleaved"),
    "head-split/interleaved-both": Variant(split="interleaved", merge="interleaved"),
    "head-merge": Variant(merge="no_transpose"),
    "scaling": Variant(scale="d_model"),
    "causal-leak": Variant(causal="none"),
    "causal-alignment": Variant(causal="top_left"),
    "mask-combination/dropped-when-causal": Variant(mask="dropped_when_causal"),
}
"""Mistake ("concept" or "concept/variant") -> the model that makes it, in the order diagnosis tries them."""


def _split(t: torch.Tensor, h: int, how: str) -> torch.Tensor:
    B, T, E = t.shape
    d = E // h
    if how == "no_transpose":
        return t.reshape(B, h, T, d)  # mixes positions and heads
    if how == "interleaved":
        return t.reshape(B, T, d, h).permute(0, 3, 1, 2)  # (B, h, T, d) from strided features
    return t.reshape(B, T, h, d).transpose(1, 2)  # (B, h, T, d)


def _merge(o: torch.Tensor, how: str) -> torch.Tensor:
    B, h, T, d = o.shape
    if how == "no_transpose":
        return o.reshape(B, T, h * d)
    if how == "interleaved":
        return o.permute(0, 2, 3, 1).reshape(B, T, h * d)  # inverse of the interleaved split
    return o.transpose(1, 2).reshape(B, T, h * d)  # (B, T, E)


def _causal(tq: int, tk: int, how: str) -> torch.Tensor | None:
    if how == "none":
        return None
    if how == "top_left":
        return torch.ones(tq, tk, dtype=torch.bool).tril()
    return torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq)  # query i sees keys j <= tk - tq + i


def _attend64(q, k, v, keep, scale: float) -> torch.Tensor:
    """Float64 attention of the models; a row with no visible key gives 0."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, h, Tq, Tk)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0) @ v


def forward(weights: dict[str, torch.Tensor], h: int, x: torch.Tensor, *, mask=None, causal=False,
            past: tuple[torch.Tensor, torch.Tensor] | None = None, variant: Variant = Variant()):
    """One MHA step in float64 on the CPU. ``past`` holds cached (k, v); returns (out, (k_all, v_all))."""
    W = {n: weights[f"W_{n}.weight"].double().cpu() for n in "qkvo"}
    x = x.double().cpu()
    E = x.shape[-1]
    q, k, v = (_split(x @ W[n].T, h, variant.split) for n in "qkv")
    if past is not None:
        k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
    tq, tk = q.shape[2], k.shape[2]
    keep = None if mask is None or (causal and variant.mask == "dropped_when_causal") else mask.cpu()
    if causal:
        tri = _causal(tq, tk, variant.causal)
        if tri is not None:
            keep = tri if keep is None else keep & tri
    scale = 1 / math.sqrt(E if variant.scale == "d_model" else E // h)
    out = _attend64(q, k, v, keep, scale)
    return _merge(out, variant.merge) @ W["o"].T, (k, v)


def decode(weights, h: int, x: torch.Tensor, steps: list[tuple[int, int]], *, mask=None, causal: bool = True,
           variant: Variant = Variant()) -> torch.Tensor:
    """Step-by-step decoding through a cache (each step a slice [start, end) of x); ``mask`` is the
    (B, T) keep mask of the whole sequence, grown with the cache. ``causal=False``: each step's
    tokens see every cached and every new token."""
    past, outs = None, []
    for start, end in steps:
        m = None if mask is None else mask[:, None, None, :end]
        out, past = forward(weights, h, x[:, start:end], mask=m, causal=causal, past=past, variant=variant)
        outs.append(out)
    return torch.cat(outs, 1)


def forward_mistakes(weights, h: int, x: torch.Tensor, *, mask=None, causal: bool = False,
                     names: tuple[str, ...] = tuple(VARIANTS)) -> dict[str, torch.Tensor]:
    """Mistake -> the float64 output (B, T, d_model) of one forward call made with it."""
    return {n: forward(weights, h, x, mask=mask, causal=causal, variant=VARIANTS[n])[0] for n in names}


def decode_mistakes(weights, h: int, x: torch.Tensor, steps: list[tuple[int, int]], *, mask=None,
                    causal: bool = True, names: tuple[str, ...] = tuple(VARIANTS)) -> dict[str, torch.Tensor]:
    """Mistake -> the float64 outputs of step-by-step decoding (concatenated) made with it."""
    return {n: decode(weights, h, x, steps, mask=mask, causal=causal, variant=VARIANTS[n]) for n in names}


def step_masks(weights, h: int, x: torch.Tensor, steps: list[tuple[int, int]], *, mask=None,
               causal: bool = True) -> dict:
    """What the report's mask explorer shows of one call: the queries and keys (float64, per head)
    of the first decoding step after the prefill (else the only step), its keep mask (True = may
    attend), and the keep mask each mask mistake uses there ("concept" -> (B, 1, Tq, Tk)), for
    those that differ. ``mask``: the call's keep mask of the whole sequence, (B, 1, 1, T) or with
    query rows (B, 1, T, T) (a causal and a padding mask combined into one), or None."""
    W = {n: weights[f"W_{n}.weight"].double().cpu() for n in "qk"}
    x = x.double().cpu()
    start, end = steps[1] if len(steps) > 1 else steps[0]
    q = _split(x[:, start:end] @ W["q"].T, h, "standard")  # (B, h, Tq, d_k)
    k = _split(x[:, :end] @ W["k"].T, h, "standard")  # (B, h, Tk, d_k)
    B, tq, tk = x.shape[0], end - start, end
    if mask is None:
        pad = torch.ones(B, 1, 1, tk, dtype=torch.bool)
    else:  # the step's query rows of a mask that has them
        m = mask.cpu()
        m = m[..., start:end, :tk] if m.dim() >= 2 and m.shape[-2] > 1 else m[..., :tk]
        pad = m.expand(B, 1, m.shape[-2], tk)

    def keep_with(how: str, padded: bool = True) -> torch.Tensor:
        tri = _causal(tq, tk, how) if causal else None
        keep = pad if padded else torch.ones(B, 1, 1, tk, dtype=torch.bool)
        return (keep & tri if tri is not None else keep).expand(B, 1, tq, tk)

    keep = keep_with("bottom_right")
    wrong = {"causal-alignment": keep_with("top_left"), "causal-leak": keep_with("none"),
             "mask-combination": keep_with("bottom_right", padded=False)}
    return dict(q=q, k=k, keep=keep, masks={c: m for c, m in wrong.items() if not torch.equal(m, keep)})
