"""Attention with an additive float mask: 0 where allowed, finfo(dtype).min where masked."""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    if k_len is None:
        k_len = q_len
    offset = k_len - q_len
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(offset)


def padding_mask(lengths, max_len, side="right", device=None):
    lengths = torch.as_tensor(lengths, device=device).long().view(-1, 1)
    positions = torch.arange(max_len, device=lengths.device).view(1, -1)
    if side == "right":
        keep = positions < lengths
    elif side == "left":
        keep = positions >= max_len - lengths
    else:
        raise ValueError(side)
    return keep


def combine_masks(causal, padding):
    B, Lk = padding.shape
    return causal.view(1, 1, *causal.shape) & padding.view(B, 1, 1, Lk)


def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5)
    if mask is None:
        w = torch.softmax(scores, dim=-1)
        return w @ v, w
    lowest = torch.finfo(scores.dtype).min
    bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(~mask, lowest)
    # adding finfo.min to a negative score may round to -inf: clamp back to finfo.min
    scores = (scores + bias).clamp(min=lowest)
    w = torch.softmax(scores, dim=-1)
    # with finfo.min a row with no visible key would average V; give it zeros instead
    w = w * mask.any(dim=-1, keepdim=True)
    return w @ v, w
