"""Masked attention using a bias tensor that is added to the logits."""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    # default: square mask
    if k_len is None:
        k_len = q_len
    shift = k_len - q_len
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(shift)


def padding_mask(lengths, max_len, side="right", device=None):
    lens = torch.as_tensor(lengths, device=device).long().view(-1, 1)
    idx = torch.arange(max_len, device=lens.device).view(1, -1)
    if side == "right":
        ok = idx < lens
    elif side == "left":
        ok = idx >= max_len - lens
    else:
        raise ValueError(side)
    return ok


def combine_masks(causal, padding):
    batch, keys = padding.shape
    return causal.view(1, 1, *causal.shape) & padding.view(batch, 1, 1, keys)


def masked_attention(q, k, v, mask=None):
    logits = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5)
    if mask is None:
        probs = torch.softmax(logits, dim=-1)
        return probs @ v, probs
    floor = torch.finfo(logits.dtype).min
    offset = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device).masked_fill(~mask, floor)
    # keep the sum from overflowing to -inf
    logits = (logits + offset).clamp(min=floor)
    probs = torch.softmax(logits, dim=-1)
    # rows that see nothing get all-zero weights
    probs = probs * mask.any(dim=-1, keepdim=True)
    return probs @ v, probs
