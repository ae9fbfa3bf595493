"""Multi-head self-attention with the heads folded into the batch axis and torch.bmm.

q is scaled before the product (in half precision that rounds the scores differently), the mask
fill is torch.finfo(dtype).min, so rows with no visible key are zeroed explicitly.
Masks are bool, True = may attend.
"""

import math

import torch
from torch import nn


class KVCache:
    """Keys and values of past steps, each (B, h, T, d_k), kept as a list joined on demand."""

    def __init__(self):
        self.ks, self.vs = [], []

    def append(self, k, v):
        self.ks.append(k)
        self.vs.append(v)
        return torch.cat(self.ks, dim=2), torch.cat(self.vs, dim=2)

    def __len__(self):
        return sum(k.shape[2] for k in self.ks)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        if d_model % h != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by h ({h})")
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, *, causal=False, cache=None):
        B, T_new, _ = x.shape
        heads = lambda t: t.view(B, -1, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        if cache is not None:
            k, v = cache.append(k, v)
        T_total = k.shape[2]
        keep = torch.ones(B, self.h, T_new, T_total, dtype=torch.bool, device=x.device)
        if mask is not None:
            keep = keep & mask
        if causal:
            keep = keep & torch.ones(T_new, T_total, dtype=torch.bool, device=x.device).tril(T_total - T_new)
        keep = keep.reshape(B * self.h, T_new, T_total)
        q = q.reshape(B * self.h, T_new, self.d_k) * (1.0 / math.sqrt(self.d_k))
        k = k.reshape(B * self.h, T_total, self.d_k)
        v = v.reshape(B * self.h, T_total, self.d_k)
        scores = torch.bmm(q, k.transpose(1, 2))  # (B*h, T_new, T_total)
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        weights = weights * keep.any(-1, keepdim=True)  # no visible key: zeros, not uniform
        out = torch.bmm(weights, v).view(B, self.h, T_new, self.d_k)
        return self.W_o(out.transpose(1, 2).reshape(B, T_new, self.d_model))
