"""Multi-head self-attention with the softmax written by hand, every step in the input dtype.

Subtract each row's max, exp, sum, divide: correct code, which in float16/bfloat16 rounds
differently from torch.softmax (that one works in float32 inside). Masks are bool, True = may attend.
"""

import math

import torch
from torch import nn


def softmax_by_hand(scores):
    """Softmax over the last axis; a row of -inf only (no visible key) gives zeros."""
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, e / total, torch.zeros_like(e))


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
        q, k, v = self._split(self.W_q(x)), self._split(self.W_k(x)), self._split(self.W_v(x))
        if cache is not None:
            k, v = cache.append(k, v)
        T_total = k.shape[2]
        keep = mask
        if causal:
            tri = torch.ones(T_new, T_total, dtype=torch.bool, device=x.device).tril(T_total - T_new)
            keep = tri if keep is None else keep & tri
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T_new, T_total)
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        out = softmax_by_hand(scores) @ v  # (B, h, T_new, d_k)
        return self.W_o(out.transpose(1, 2).reshape(B, T_new, self.d_model))
