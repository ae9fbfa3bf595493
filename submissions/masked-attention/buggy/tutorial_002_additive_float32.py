# Tutorial 002 (an additive -inf mask added to the scores), adapted to the kit's API as a student would.
# Bugs: the additive mask is torch.zeros(mask.shape): float32 on the CPU, so it promotes float16/bfloat16 scores
# (weights @ v then raises) and fails on another device; -inf rows give NaN; triu is top-left for q_len != k_len.
# Concepts: causal-alignment, device-placement, fully-masked-rows, mask-dtype-promotion
import math
import torch
import torch.nn.functional as F


def causal_mask(q_len, k_len=None, device=None):
    if k_len is None:
        k_len = q_len
    # 先创建一个全是负无穷的矩阵，triu(diagonal=1)：上三角是 -inf，下三角是 0
    m = torch.full((q_len, k_len), float("-inf"))
    m = torch.triu(m, diagonal=1)
    return m == 0


def padding_mask(lengths, max_len, side="right", device=None):
    lengths = torch.as_tensor(lengths)
    pos = torch.arange(max_len)
    if side == "left":
        return pos[None, :] >= (max_len - lengths[:, None])
    return pos[None, :] < lengths[:, None]


def combine_masks(causal, padding):
    return causal[None, None] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        additive = torch.zeros(mask.shape)
        additive = additive.masked_fill(~mask, float("-inf"))
        scores = scores + additive          # 将掩码加到分数上
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights
