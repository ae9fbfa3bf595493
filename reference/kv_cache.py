"""A growing key/value cache and the cached decoding loop that uses it.

Shapes: B batch, h heads, T cached steps, d_k head size, d_model model width.
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys and values of all past steps, (B, h, T, d_k) each, grown by concatenation.

    Simpler than a preallocated buffer (gpt-fast's ``KVCache``): there are no unfilled
    slots to mask, so the reference cannot get that wrong.
    """

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None  # (B, h, T, d_k)
        self.v: torch.Tensor | None = None  # (B, h, T, d_k)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add (B, h, T_new, d_k) keys and values; return all of them, (B, h, T, d_k).

        Raises:
            ValueError: for tensors that are not 4-D or do not match the cache.
        """
        if k.dim() != 4 or k.shape != v.shape:
            raise ValueError(
                f"k and v must both be (B, h, T, d_k); got {tuple(k.shape)} and {tuple(v.shape)}"
            )
        if self.k is None or self.v is None:  # empty (the two are set together)
            self.k, self.v = k, v
        else:
            if k.shape[:2] != self.k.shape[:2] or k.shape[3] != self.k.shape[3]:
                raise ValueError(
                    f"new keys {tuple(k.shape)} do not match the cache {tuple(self.k.shape)} "
                    "outside the time dimension (dim 2)"
                )
            self.k = torch.cat([self.k, k], dim=2)  # (B, h, T + T_new, d_k)
            self.v = torch.cat([self.v, v], dim=2)  # (B, h, T + T_new, d_k)
        return self.k, self.v

    def __len__(self) -> int:
        """Number of cached time steps (0 when empty)."""
        return 0 if self.k is None else self.k.shape[2]


def _step_sizes(total: int, prefill: int, chunks: list[int] | None) -> list[int]:
    if not 0 <= prefill <= total:
        raise ValueError(f"prefill ({prefill}) must be in [0, T={total}]")
    if chunks is None:
        chunks = [1] * (total - prefill)
    if any(c < 1 for c in chunks) or prefill + sum(chunks) != total:
        raise ValueError(
            f"prefill ({prefill}) + chunks {chunks} must add up to T ({total}), each chunk >= 1"
        )
    return [prefill, *chunks] if prefill else list(chunks)


def decode_with_lengths(model, x, prefill: int, chunks: list[int] | None = None, mask=None):
    """Run ``model`` over x step by step with a fresh ``KVCache``; also report cache lengths.

    Step 1 feeds the first ``prefill`` tokens (skipped when 0), then each chunk in turn
    (default: one token at a time), always with ``causal=True``. The concatenated
    outputs must equal the full causal forward ``model(x, mask4, causal=True)``.

    Args:
        model: a ``reference.mha.MultiHeadAttention`` (or one with the same forward).
        x: (B, T, d_model) inputs.
        prefill: tokens in the first step.
        chunks: sizes of the later steps; must add up to T - prefill.
        mask: optional (B, T) bool key padding mask, True = real token (for left-padded
            batches); each step gets ``mask[:, None, None, :T_total]``. Query rows that
            see no real key come out 0.

    Returns:
        out (B, T, d_model) and the cache length after every step.
    """
    B, T, _ = x.shape
    cache = KVCache()
    outs, lengths, start = [], [], 0
    for n in _step_sizes(T, prefill, chunks):
        stop = start + n
        step_mask = None if mask is None else mask[:, None, None, :stop]  # (B, 1, 1, T_total)
        outs.append(model(x[:, start:stop], step_mask, causal=True, cache=cache))  # (B, n, d_model)
        lengths.append(len(cache))
        start = stop
    return torch.cat(outs, dim=1), lengths  # (B, T, d_model)


def decode(model, x, prefill: int, chunks: list[int] | None = None, mask=None) -> torch.Tensor:
    """``decode_with_lengths`` without the lengths: the (B, T, d_model) outputs."""
    return decode_with_lengths(model, x, prefill, chunks, mask)[0]
