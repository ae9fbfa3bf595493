"""Masked attention with torch.bmm over the flattened leading dims (B*H, L, d).

Mask convention: bool, True = may attend.
"""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    """(q_len, k_len) bool; the queries are the last q_len of the k_len positions."""
    if k_len is None:
        k_len = q_len
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=k_len - q_len)


def padding_mask(lengths, max_len, side="right", device=None):
    """(B, max_len) bool, True = real token."""
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device).reshape(-1)
    pos = torch.arange(max_len, device=lengths.device)
    if side == "right":
        return pos[None, :] < lengths[:, None]
    if side == "left":
        return pos[None, :] >= (max_len - lengths)[:, None]
    raise ValueError(f"side must be 'left' or 'right', got {side!r}")


def combine_masks(causal, padding):
    """causal (Lq, Lk) AND padding (B, Lk) -> (B, 1, Lq, Lk)."""
    return causal[None, None, :, :] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    """q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (out (..., Lq, dv), weights (..., Lq, Lk))."""
    *lead, lq, d = q.shape
    lk, dv = k.shape[-2], v.shape[-1]
    q3, k3, v3 = q.reshape(-1, lq, d), k.reshape(-1, lk, d), v.reshape(-1, lk, dv)  # (N, L, d)
    scores = torch.bmm(q3, k3.transpose(1, 2)).reshape(*lead, lq, lk) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
    out = torch.bmm(weights.reshape(-1, lq, lk), v3).reshape(*lead, lq, dv)
    return out, weights
