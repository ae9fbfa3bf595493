"""Multi-head self-attention with a key/value cache.

Fill in ``KVCache`` and ``MultiHeadAttention`` and submit this file (the grader imports
it as ``mha.py``). The file must be self-contained: write your own attention function here.
Check your work with ``grader check mha.py``.

Mask convention: a mask is a ``torch.bool`` tensor and ``True`` means "this query MAY
attend to this key" (the opposite of ``nn.MultiheadAttention``'s True = ignore).

Shapes: B batch, T_new new tokens in this call, T_total = keys attended to (cached +
new), h heads, d_k = d_model // h.
"""

import math

import torch
from torch import nn


class KVCache:
    """Keys and values of all past time steps, each (B, h, T, d_k).

    Starts empty. ``append`` adds new time steps along dim 2 (time) and returns
    everything cached so far.
    """

    def __init__(self):
        raise NotImplementedError

    def append(self, k, v):
        """Append new keys and values and return all of them.

        Args:
            k: (B, h, T_new, d_k) new keys.
            v: (B, h, T_new, d_k) new values.

        Returns:
            (k_all, v_all), each (B, h, T_cached + T_new, d_k): the old entries followed
            by the new ones (concatenated on dim 2).
        """
        raise NotImplementedError

    def __len__(self):
        """The number of cached time steps (0 when empty)."""
        raise NotImplementedError


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with bias-free projections.

    Attributes (exactly these names; the grader copies weights into them):
        W_q, W_k, W_v, W_o: ``nn.Linear(d_model, d_model, bias=False)``.
    """

    def __init__(self, d_model, h):
        """
        Args:
            d_model: model width.
            h: number of heads; d_k = d_model // h.

        Raises:
            ValueError: if d_model is not divisible by h.
        """
        super().__init__()
        raise NotImplementedError

    def forward(self, x, mask=None, *, causal=False, cache=None):
        """Attend from the new tokens x to themselves and to everything in ``cache``.

        Steps:
          1. q, k, v = W_q(x), W_k(x), W_v(x), each split into heads with
             ``view(B, T_new, h, d_k).transpose(1, 2)`` -> (B, h, T_new, d_k).
          2. If ``cache`` is given, append the new k, v to it FIRST and attend over
             all cached keys/values (T_total = len(cache) after the append);
             otherwise T_total = T_new.
          3. Scaled dot-product attention per head with scale 1 / sqrt(d_k).
          4. Merge heads with ``transpose(1, 2).reshape(B, T_new, d_model)``, then W_o.

        Args:
            x: (B, T_new, d_model).
            mask: optional bool keep-mask (True = may attend) broadcastable to
                (B, 1, T_new, T_total); a key padding mask (B, T_total) is passed as
                ``pad[:, None, None, :]``.
            causal: if True, a query may not attend to future keys. The T_new queries
                are the LAST T_new of the T_total positions: query i may attend to key j
                iff j <= T_total - T_new + i (with a cache, a single new token sees every
                cached key). Combine with ``mask`` by AND.
            cache: optional ``KVCache``.

        Returns:
            (B, T_new, d_model), in x's dtype and on x's device. A query that may attend
            to no key gets attention output 0 (never NaN). No dropout.
        """
        raise NotImplementedError
