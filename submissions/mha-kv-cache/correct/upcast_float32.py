"""Multi-head self-attention that computes in float32 whatever the module's dtype, and returns
the input's dtype (mixed precision's usual trick). Masks are bool, True = may attend.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class KVCache:
    """Keys and values of past steps, each (B, h, T, d_k)."""

    def __init__(self):
        self.k = self.v = None

    def append(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        if d_model % h != 0:
            raise ValueError(f"d_model={d_model} is not divisible by h={h}")
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def _split(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def forward(self, x, mask=None, *, causal=False, cache=None):
        B, T_new, _ = x.shape
        x32 = x.float()
        q, k, v = (self._split(F.linear(x32, lin.weight.float())) for lin in (self.W_q, self.W_k, self.W_v))
        if cache is not None:
            k, v = cache.append(k, v)
        T_total = k.shape[2]
        keep = mask
        if causal:
            tri = torch.ones(T_new, T_total, dtype=torch.bool, device=x.device).tril(T_total - T_new)
            keep = tri if keep is None else keep & tri
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T_new, T_total), float32
        if keep is not None:
            seen = keep.any(-1, keepdim=True)
            scores = torch.where(seen, scores.masked_fill(~keep, float("-inf")), 0.0)
        weights = torch.softmax(scores, dim=-1)
        if keep is not None:
            weights = torch.where(seen, weights, 0.0)
        out = (weights @ v).transpose(1, 2).reshape(B, T_new, self.d_model)
        return F.linear(out, self.W_o.weight.float()).to(x.dtype)
