"""Multi-head self-attention with a growing KV cache.

Bug: KVCache.__len__ returns the batch size (dim 0) instead of the number of cached time steps
(dim 2); append itself concatenates on dim 2 and keeps everything. Concept: kv-cache-growth

Masks are bool, True = may attend.
"""

import math

import torch
from torch import nn


def masked_attention(q, k, v, mask=None):
    """q (..., Lq, d), k/v (..., Lk, d); rows with no visible key give zeros."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    has_key = mask.any(dim=-1, keepdim=True)
    weights = torch.where(has_key, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    return weights @ v, weights


class KVCache:
    """Keys and values of past steps, each (B, h, T, d_k)."""

    def __init__(self):
        self.k = None
        self.v = None

    def append(self, k, v):
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)
            self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[0]  # the batch size, not the cached time steps


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
        q = self._split(self.W_q(x))
        k = self._split(self.W_k(x))
        v = self._split(self.W_v(x))
        if cache is not None:
            k, v = cache.append(k, v)
        T_total = k.shape[2]
        keep = mask
        if causal:
            tri = torch.ones(T_new, T_total, dtype=torch.bool, device=x.device).tril(T_total - T_new)
            keep = tri if keep is None else keep & tri
        out, _ = masked_attention(q, k, v, keep)  # (B, h, T_new, d_k)
        out = out.transpose(1, 2).reshape(B, T_new, self.d_model)
        return self.W_o(out)
