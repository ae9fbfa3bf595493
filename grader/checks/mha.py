"""Multi-head attention variants for diagnosis, computed in float64 from copied weights.

Each variant reproduces one classic mistake (split without transpose, interleaved split, merge
without transpose, scale by sqrt(d_model), no causal mask, top-left causal alignment while
decoding). When a student's output matches a variant and not the reference, that mistake's
concept is named. Pure tensor code; nothing here runs student code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch



@dataclass(frozen=True)
class Variant:
    split: str = "standard"  # "standard" | "no_transpose" | "interleaved"
    merge: str = "standard"  # "standard" | "no_transpose" | "interleaved"
    scale: str = "d_k"  # "d_k" | "d_model"
    causal: str = "bottom_right"  # "bottom_right" | "top_left" | "none"
    cached_mask: str = "grow"  # "grow" | "square" (mask[:Tq, :Tq] -> only when Tq == T_total)


VARIANTS: dict[str, Variant] = {
    "head-split": Variant(split="no_transpose"),
    "head-split/interleaved": Variant(split="interleaved"),
    "head-split/interleaved-both": Variant(split="interleaved", merge="interleaved"),
    "head-merge": Variant(merge="no_transpose"),
    "scaling": Variant(scale="d_model"),
    "causal-leak": Variant(causal="none"),
    "causal-alignment": Variant(causal="top_left"),
}


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
    """Float64 attention of the diagnosis models; a row with no visible key gives 0. Its own, so
    that a student kit diagnoses without the reference package."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, h, Tq, Tk)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0) @ v


def forward(weights: dict[str, torch.Tensor], h: int, x: torch.Tensor, *, mask=None, causal=False,
            past: tuple[torch.Tensor, torch.Tensor] | None = None, variant: Variant = Variant()):
    """One MHA step in float64. ``past`` holds cached (k, v); returns (out, (k_all, v_all))."""
    W = {n: weights[f"W_{n}.weight"].double().cpu() for n in "qkvo"}
    x = x.double().cpu()
    E = x.shape[-1]
    q, k, v = (_split(x @ W[n].T, h, variant.split) for n in "qkv")
    if past is not None:
        k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
    tq, tk = q.shape[2], k.shape[2]
    keep = None if mask is None else mask.cpu()
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


def matching_variant(actual: torch.Tensor, compute, *, where: torch.Tensor | None = None,
                     candidates: tuple[str, ...] = tuple(VARIANTS), tol: float = 1e-3) -> str | None:
    """The concept of the first variant the student's output reproduces (and the reference does not)."""
    got = actual.detach().double().cpu()
    ref = compute(Variant())

    def dist(a: torch.Tensor, b: torch.Tensor) -> float:
        d = (a - b).abs()
        if where is not None:
            d = d[where.expand_as(d)]
        return float(d.max()) if d.numel() else 0.0

    for concept in candidates:
        mutant = compute(VARIANTS[concept])
        if mutant.shape != got.shape:
            continue
        near = dist(got, mutant)
        # Close to the mistake, and the mistake far from the reference: by 3x the tolerance and by
        # 10x how close the student is (bfloat16 outputs sit ~5e-3 from a mistake 0.27 away).
        if near < tol and dist(ref, mutant) > max(3 * tol, 10 * near):
            return concept.split("/")[0]
    return None
