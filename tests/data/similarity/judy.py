"""Masked attention: causal and padding masks, and scaled dot-product attention.

Fill in the four functions below and submit this file (the grader imports it as
``attention.py``). Only ``torch`` is needed. Check your work with ``grader check attention.py``.

Mask convention, used everywhere in this assignment: a mask is a ``torch.bool`` tensor
and ``True`` means "this query MAY attend to this key". (Careful: ``nn.MultiheadAttention``
uses the opposite convention, True = ignore, and ``nn.Transformer.generate_square_subsequent_mask``
returns an additive 0/-inf float mask. Neither is what is asked here.)

Shapes: B batch, H heads, Lq queries, Lk keys, d head size.
"""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    """Causal keep-mask of shape (q_len, k_len), dtype torch.bool.

    The q_len queries are the LAST q_len of the k_len positions (as in a KV-cache step,
    where earlier keys are already cached): query i may attend to key j iff
    ``j <= k_len - q_len + i``. A token may attend to itself.

    Examples (1 = may attend)::

        causal_mask(3)        causal_mask(2, 5)     causal_mask(1, 4)
        1 0 0                 1 1 1 1 0             1 1 1 1
        1 1 0                 1 1 1 1 1
        1 1 1

    When q_len > k_len the first q_len - k_len rows are all False.

    Args:
        q_len: number of queries, Lq.
        k_len: number of keys, Lk; defaults to q_len.
        device: the device to create the mask on (e.g. ``x.device``).

    Returns:
        bool tensor (q_len, k_len), True = may attend.
    """
    raise NotImplementedError


def padding_mask(lengths, max_len, side="right", device=None):
    """Key padding keep-mask of shape (B, max_len), dtype torch.bool: True = real token.

    Args:
        lengths: B real lengths (a list of ints or a 1-D integer tensor), each in [0, max_len].
        max_len: the padded length.
        side: "right": real tokens first, padding after (``[T T T F F]`` for length 3);
              "left": padding first, real tokens at the end (``[F F T T T]``), as in
              batched generation.
        device: the device to create the mask on.

    Returns:
        bool tensor (B, max_len).
    """
    raise NotImplementedError


def combine_masks(causal, padding):
    """Combine a causal (Lq, Lk) keep-mask with a key padding (B, Lk) keep-mask.

    A query may attend to a key only if the key is real AND not in the future.
    Padding hides keys (the last dimension), so it broadcasts as (B, 1, 1, Lk).

    Args:
        causal: bool (Lq, Lk), e.g. from ``causal_mask``.
        padding: bool (B, Lk), e.g. from ``padding_mask``.

    Returns:
        bool tensor (B, 1, Lq, Lk), True = may attend.
    """
    raise NotImplementedError


def masked_attention(q, k, v, mask=None):
    """Scaled dot-product attention with an optional boolean keep-mask.

    weights = softmax(q @ k^T / sqrt(d)) over the keys (last dim), with masked keys
    getting weight exactly 0; out = weights @ v.

    Requirements:
      * scale by 1 / sqrt(d) with d = q.shape[-1];
      * ``mask`` (optional) is bool, True = may attend, and broadcastable to
        (..., Lq, Lk): e.g. (Lq, Lk), (B, 1, 1, Lk), (B, 1, Lq, Lk) or (B, H, Lq, Lk);
      * a query row that may attend to no key at all gives weights 0 and output 0 --
        never NaN -- and gradients that stay finite;
      * works for float16, bfloat16, float32 and float64 inputs, and returns out and
        weights in the inputs' dtype (pick mask fill values that fit the dtype);
      * works on any device: create any mask or constant on the inputs' device;
      * no dropout.

    Args:
        q: (..., Lq, d) queries, e.g. (B, H, Lq, d).
        k: (..., Lk, d) keys.
        v: (..., Lk, d_v) values.
        mask: optional bool tensor broadcastable to (..., Lq, Lk).

    Returns:
        (out, weights): out (..., Lq, d_v), weights (..., Lq, Lk).
    """
    raise NotImplementedError
