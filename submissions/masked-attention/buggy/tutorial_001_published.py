# Tutorial 001 as published, pasted under the kit's names: causal_mask(T) and padding_mask(lengths, max_len)
# keep the tutorial's signatures (no k_len, device or side), and finfo.min rows with no visible key come out uniform.
# Concepts: signature, fully-masked-rows
import math
import torch


def causal_mask(T):
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))   # 下三角，含对角线
    return allowed


def padding_mask(lengths, max_len):
    lengths = torch.as_tensor(lengths)
    return torch.arange(max_len)[None, :] < lengths[:, None]


def combine_masks(causal, padding):
    return causal[None, None] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)   # 每行和为 1
    return weights @ v, weights
