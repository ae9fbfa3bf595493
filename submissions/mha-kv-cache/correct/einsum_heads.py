"""Multi-head attention written with einsum over per-head weight views.

W_q.weight is (d_model, d_model) with output feature index = head * d_k + i, so
weight.view(h, d_k, d_model) is exactly the standard view(B, T, h, d_k) head split.
"""

import math

import torch
import torch.nn as nn


def attention(q, k, v, keep=None):
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    if keep is not None:
        keep = keep.expand(s.shape)
        seen = keep.any(-1, keepdim=True)
        s = torch.where(keep, s, float("-inf"))
        s = torch.where(seen, s, 0.0)
    p = s.softmax(-1)
    if keep is not None:
        p = torch.where(seen, p, 0.0)
    return torch.einsum("bhqk,bhkd->bhqd", p, v)


class KVCache:
    """Stores chunks and concatenates them along time on every append."""

    def __init__(self):
        self._k, self._v = [], []
        self._len = 0

    def append(self, k, v):
        self._k.append(k)
        self._v.append(v)
        self._len += k.shape[2]
        k_all = torch.cat(self._k, dim=2) if len(self._k) > 1 else k
        v_all = torch.cat(self._v, dim=2) if len(self._v) > 1 else v
        self._k, self._v = [k_all], [v_all]
        return k_all, v_all

    def __len__(self):
        return self._len


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        if d_model % h:
            raise ValueError("d_model must be a multiple of h")
        self.d_model = d_model
        self.h = h
        self.d_k = d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def _heads(self, lin, x):
        w = lin.weight.view(self.h, self.d_k, self.d_model)
        return torch.einsum("bte,hde->bhtd", x, w)

    def forward(self, x, mask=None, *, causal=False, cache=None):
        q = self._heads(self.W_q, x)
        k = self._heads(self.W_k, x)
        v = self._heads(self.W_v, x)
        if cache is not None:
            k, v = cache.append(k, v)
        n_new, n_all = q.shape[2], k.shape[2]
        keep = mask
        if causal:
            qpos = torch.arange(n_all - n_new, n_all, device=x.device)
            kpos = torch.arange(n_all, device=x.device)
            tri = kpos[None, :] <= qpos[:, None]
            keep = tri if keep is None else torch.logical_and(keep, tri)
        o = attention(q, k, v, keep)  # (B, h, T_new, d_k)
        w_o = self.W_o.weight.view(self.d_model, self.h, self.d_k)
        return torch.einsum("bhtd,ehd->bte", o, w_o)
