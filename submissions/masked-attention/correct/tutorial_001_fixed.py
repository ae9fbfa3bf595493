# Tutorial 001's style (tril + masked_fill with torch.finfo(dtype).min) with its three mistakes fixed:
# bottom-right alignment, masks on the requested device, rows with no visible key zeroed.

import math
import torch


def causal_mask(q_len, k_len=None, device=None):
    if k_len is None:
        k_len = q_len
    # The queries are the last q_len positions: shift the triangle by k_len - q_len (bottom-right).
    return torch.tril(torch.ones(q_len, k_len, dtype=torch.bool, device=device), diagonal=k_len - q_len)


def padding_mask(lengths, max_len, side="right", device=None):
    lengths = torch.as_tensor(lengths, device=device)
    pos = torch.arange(max_len, device=lengths.device)
    if side == "left":
        return pos[None, :] >= (max_len - lengths[:, None])
    return pos[None, :] < lengths[:, None]


def combine_masks(causal, padding):
    # padding 掩码只看列，广播成 (B,1,T,T)，两个都允许才允许
    return causal[None, None] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)   # 每行和为 1
    if mask is not None:
        # A row with no visible key is all finfo.min: softmax would give 1/Lk per key. Zero it.
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
    return weights @ v, weights
