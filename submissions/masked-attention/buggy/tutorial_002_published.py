# Tutorial 002 as published, pasted under the kit's names: causal_mask(seq_len) returns the additive (1, T, T)
# float mask, and masked_attention adds the bool keep-mask it is given to the scores as if it were additive.
# Concepts: mask-convention, signature
import math
import torch
import torch.nn.functional as F


def causal_mask(seq_len):
    mask = torch.full((1, seq_len, seq_len), float("-inf"))
    mask = torch.triu(mask, diagonal=1)
    return mask


def padding_mask(lengths, max_len):
    lengths = torch.as_tensor(lengths)
    return torch.arange(max_len)[None, :] < lengths[:, None]


def combine_masks(causal, padding):
    return causal[None, None] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask          # 将掩码加到分数上
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights
