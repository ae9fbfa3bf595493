# Tutorial 003's class as published (no causal= or cache= in forward, assert for validation, -inf without a
# guard), with no KVCache.
# Concepts: validation, signature, fully-masked-rows
import torch
import torch.nn as nn
import torch.nn.functional as F


def build_causal_mask(seq_len: int) -> torch.Tensor:
    """生成因果掩码: 下三角为 1(可见), 上三角为 0(屏蔽)"""
    mask = torch.tril(torch.ones(seq_len, seq_len))
    return mask.unsqueeze(0).unsqueeze(0)


class MultiHeadAttention(nn.Module):
    """多头自注意力 + 可选因果掩码"""

    def __init__(self, d_model: int, h: int):
        super().__init__()
        assert d_model % h == 0, "d_model 必须能被 h 整除"
        self.d_model = d_model
        self.h = h
        self.d_k = d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        batch, seq_len, _ = x.shape
        Q = self.W_q(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        K = self.W_k(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        V = self.W_v(x).view(batch, seq_len, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.d_k ** 0.5)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        out = torch.matmul(attn, V)
        out = out.transpose(1, 2).contiguous().view(batch, seq_len, self.d_model)
        return self.W_o(out)
