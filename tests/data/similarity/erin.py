# Bug: masked scores are filled with 0 instead of -inf, so masked keys keep weight (and beat negative scores)
# Concept: mask-fill-value

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
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v), weights
    scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    # A row with no visible key is softmax(all -inf) = NaN: replace it by zeros.
    has_key = mask.any(dim=-1, keepdim=True)
    weights = torch.where(has_key, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    return torch.matmul(weights, v), weights
