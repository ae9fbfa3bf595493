"""Masked scaled-dot-product attention: the naive same-dtype reference and the float64 oracle.

Shapes: q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv); leading dims (B, H, ...) are free.
Masks are bool with True = may attend, broadcastable to (..., Lq, Lk), like the
``attn_mask`` of ``F.scaled_dot_product_attention``. A query row that may see no
key at all yields weights 0 and output 0, with zero (finite) gradients, as SDPA
does since torch 2.5.
"""

from __future__ import annotations

import math

import torch


def check_mask(mask) -> None:
    """Raise ValueError unless ``mask`` is None or a bool tensor (True = may attend)."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask must be a bool tensor (True = may attend); got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor (True = may attend); got dtype {mask.dtype}. "
            "Convert a 0/1 mask with mask.bool(), an additive 0/-inf mask with mask == 0."
        )


def masked_attention(q, k, v, mask=None, *, scale=None):
    """softmax(q k^T * scale, masked) v, computed in the dtype of the inputs.

    Args:
        q: (..., Lq, D) queries.
        k: (..., Lk, D) keys.
        v: (..., Lk, Dv) values.
        mask: optional bool keep-mask (True = may attend) broadcastable to (..., Lq, Lk).
        scale: multiplies the scores; defaults to 1/sqrt(D).

    Returns:
        out (..., Lq, Dv) and weights (..., Lq, Lk). Fully masked rows are 0 in both.

    Raises:
        ValueError: for a mask that is not a bool tensor.
    """
    check_mask(mask)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Lq, Lk)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    # Masked keys get -inf. A row with no visible key would then be softmax(all -inf)
    # = NaN (and NaN gradients); give such rows finite scores 0 before the softmax
    # and zero their weights after it, so the forward is 0 and every gradient 0.
    row_has_key = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1)
    scores = torch.where(mask, scores, float("-inf"))
    scores = torch.where(row_has_key, scores, 0.0)
    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk)
    weights = torch.where(row_has_key, weights, 0.0)
    return weights @ v, weights  # (..., Lq, Dv), (..., Lq, Lk)


def masked_attention_by_hand(q, k, v, mask=None, *, scale=None):
    """``masked_attention`` with the softmax written out, every step in the input dtype: subtract
    each row's max, exp, sum, divide. Correct code, and in float16/bfloat16 its rounding differs
    from ``torch.softmax``'s (which works in float32 inside and rounds once): the half-precision
    tolerance allows what either way of writing it gives.

    Arguments, returns and fully masked rows as in ``masked_attention``.
    """
    check_mask(mask)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Lq, Lk)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)  # (..., Lq, 1); -inf on a row with no visible key
    top = torch.where(torch.isfinite(top), top, 0.0)
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total, 0.0)  # (..., Lq, Lk)
    return weights @ v, weights  # (..., Lq, Dv), (..., Lq, Lk)


def oracle_attention(q, k, v, mask=None, *, scale=None):
    """``masked_attention`` in float64 from the given (already rounded) inputs.

    Use it as ground truth: the inputs are cast up exactly, so the only error left
    is float64 rounding. Results stay in float64, on the inputs' device.
    Mask convention and fully masked rows as in ``masked_attention``.
    """
    return masked_attention(q.double(), k.double(), v.double(), mask, scale=scale)
