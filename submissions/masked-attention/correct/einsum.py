"""Attention with einsum and torch.where (no masked_fill)."""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    k_len = q_len if k_len is None else k_len
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return j <= i + (k_len - q_len)


def padding_mask(lengths, max_len, side="right", device=None):
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(list(lengths), dtype=torch.long, device=device)
    lengths = lengths.to(device=device, dtype=torch.long)
    pos = torch.arange(max_len, device=lengths.device)
    if side == "left":
        pos = pos.flip(0)  # distance from the end
    elif side != "right":
        raise ValueError("side must be 'left' or 'right'")
    return pos.unsqueeze(0) < lengths.unsqueeze(1)


def combine_masks(causal, padding):
    return torch.logical_and(causal.unsqueeze(0).unsqueeze(0), padding.unsqueeze(1).unsqueeze(2))


def masked_attention(q, k, v, mask=None):
    d = q.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d)
    if mask is not None:
        visible = mask.any(dim=-1, keepdim=True)
        scores = torch.where(mask, scores, float("-inf"))
        # fully masked rows get finite (zero) scores so that softmax and its gradient stay finite
        scores = torch.where(visible, scores, 0.0)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = torch.where(visible, weights, 0.0)
    out = torch.einsum("...qk,...kd->...qd", weights, v)
    return out, weights
