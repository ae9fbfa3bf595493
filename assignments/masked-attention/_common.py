"""Helpers shared by this assignment's public and hidden cases (shipped to students: nothing secret)."""

from __future__ import annotations

import torch

import reference
from grader.cases import Setup, SetupContext, Verdict
from grader.checks.attention import attention_case, check_attention


def qkv(ctx: SetupContext, B: int, H: int, Lq: int, Lk: int, D: int, *, dtype=torch.float32,
        q_scale: float = 1.0, negative_scores: bool = False):
    """Random q, k, v. With negative_scores, q = +u and k = -u so every real score is negative
    (a 0 fill then beats every real score)."""
    q = ctx.randn(B, H, Lq, D, dtype=dtype, scale=q_scale)
    if negative_scores:
        u = ctx.randn(B, H, 1, D).abs() + 0.5
        q = (u.expand(B, H, Lq, D) * (1 + 0.1 * ctx.randn(B, H, Lq, D).abs())).to(dtype)
        k = (-u.expand(B, H, Lk, D) * (1 + 0.1 * ctx.randn(B, H, Lk, D).abs())).to(dtype)
    else:
        k = ctx.randn(B, H, Lk, D, dtype=dtype)
    v = ctx.randn(B, H, Lk, D, dtype=dtype)
    return q, k, v


def make_loud(k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor):
    """Padded keys get k=30, v=100, so any weight that leaks onto them moves the output a lot."""
    hidden = ~pad[:, None, :, None]  # (B, 1, Lk, 1)
    return k.masked_fill(hidden, 30.0), v.masked_fill(hidden, 100.0)


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
