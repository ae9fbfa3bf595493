"""Attention through F.scaled_dot_product_attention with an explicit bool attn_mask.

SDPA does not return the weights, so they are computed separately with the same rule
(torch >= 2.5: a row with no visible key gives 0).
"""

import math

import torch
import torch.nn.functional as F


def causal_mask(q_len, k_len=None, device=None):
    k_len = q_len if k_len is None else k_len
    rows = torch.arange(k_len - q_len, k_len, device=device).unsqueeze(-1)
    cols = torch.arange(k_len, device=device)
    return cols <= rows


def padding_mask(lengths, max_len, side="right", device=None):
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device)
    idx = torch.arange(max_len, device=lengths.device)
    if side == "right":
        return idx < lengths[:, None]
    if side == "left":
        return idx >= max_len - lengths[:, None]
    raise ValueError(f"unknown side {side!r}")


def combine_masks(causal, padding):
    return causal & padding[:, None, None, :]


def _weights(q, k, mask):
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is None:
        return scores.softmax(-1)
    any_key = mask.any(-1, keepdim=True)
    scores = scores.masked_fill(~mask, float("-inf")).masked_fill(~any_key, 0.0)
    return scores.softmax(-1).masked_fill(~any_key, 0.0)


def masked_attention(q, k, v, mask=None):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
    return out, _weights(q, k, mask)
