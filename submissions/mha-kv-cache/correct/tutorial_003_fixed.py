# Tutorial 003's class adapted to the kit's API with its mistakes fixed: ValueError instead of assert, and rows
# with no visible key guarded (finite scores before the softmax, zero weights after it).

import torch
import torch.nn as nn
import torch.nn.functional as F


def build_causal_mask(seq_len: int, device=None) -> torch.Tensor:
    mask = torch.tril(torch.ones(seq_len, seq_len, device=device))
    return mask.unsqueeze(0).unsqueeze(0)


class KVCache:
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
    def __init__(self, d_model: int, h: int):
        super().__init__()
        if d_model % h != 0:
            raise ValueError(f"d_model ({d_model}) 必须能被 h ({h}) 整除")
        self.d_model = d_model
        self.h = h
        self.d_k = d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None, *, causal=False, cache=None):
        batch, seq_len, _ = x.shape
        Q = self.W_q(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        K = self.W_k(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        V = self.W_v(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        if cache is not None:
            K, V = cache.append(K, V)
        total = K.shape[2]
        scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.d_k ** 0.5)
        if causal:
            # 每步根据当前序列长度重新构建掩码，取最后 seq_len 行
            cm = build_causal_mask(total, device=x.device)[:, :, total - seq_len:, :]
            scores = scores.masked_fill(cm == 0, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        # A query that sees no key (a left-padded position) has a row of -inf: softmax would give NaN.
        # Give such rows finite scores, then zero their weights (forward and gradients stay clean).
        sees_a_key = torch.isfinite(scores).any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~sees_a_key, 0.0)
        attn = F.softmax(scores, dim=-1).masked_fill(~sees_a_key, 0.0)
        out = torch.matmul(attn, V)
        out = out.transpose(1, 2).contiguous().view(batch, seq_len, self.d_model)
        return self.W_o(out)
