# Tutorial 001 (tril + masked_fill with torch.finfo(dtype).min), adapted to the kit's API as a student would.
# Bugs: tril(ones(q_len, k_len)) is top-left when q_len != k_len; the mask ignores device=; with a finite fill a
# query that sees no key gets weight 1/Lk on every key (the mean of v) instead of zeros.
# Concepts: causal-alignment, device-placement, fully-masked-rows
import math
import torch


def causal_mask(q_len, k_len=None, device=None):
    if k_len is None:
        k_len = q_len
    allowed = torch.tril(torch.ones(q_len, k_len, dtype=torch.bool))   # 下三角，含对角线
    return allowed


def padding_mask(lengths, max_len, side="right", device=None):
    lengths = torch.as_tensor(lengths)
    pos = torch.arange(max_len)
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
    return weights @ v, weights
