"""Multi-head attention on F.scaled_dot_product_attention with an explicit bool mask.

is_causal is never used: it aligns top-left, which is wrong once a cache makes T_new < T_total.
"""

import torch
import torch.nn.functional as F
from torch import nn


class KVCache:
    def __init__(self):
        self.keys = None
        self.values = None

    def append(self, k, v):
        self.keys = k if self.keys is None else torch.cat((self.keys, k), dim=2)
        self.values = v if self.values is None else torch.cat((self.values, v), dim=2)
        return self.keys, self.values

    def __len__(self):
        return 0 if self.keys is None else self.keys.size(2)


def sdpa_attention(q, k, v, mask=None):
    # torch >= 2.5: a query row with no visible key gives 0 (and zero gradients)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        if d_model % h != 0:
            raise ValueError(f"{d_model} % {h} != 0")
        self.h = h
        self.d_k = d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, *, causal=False, cache=None):
        B, T, C = x.shape
        q, k, v = (W(x).view(B, T, self.h, self.d_k).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        if cache is not None:
            k, v = cache.append(k, v)
        S = k.size(2)
        attn_mask = mask
        if causal:
            tri = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
            attn_mask = tri if attn_mask is None else attn_mask & tri
        y = sdpa_attention(q, k, v, attn_mask)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.W_o(y)
