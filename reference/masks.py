"""Boolean attention masks. One convention throughout: True = may attend.

Shapes: B batch, Lq query positions, Lk key positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def causal_mask(q_len: int, k_len: int | None = None, device=None) -> torch.Tensor:
    """Bottom-right aligned causal keep-mask of shape (Lq, Lk).

    The queries are the *last* Lq of Lk positions (a KV-cache step), so query i
    may see key j iff ``j <= Lk - Lq + i``. With Lq == Lk this is the usual lower
    triangle; with Lq == 1 the single query sees every key. When Lq > Lk the
    leading ``Lq - Lk`` rows are entirely False (attention gives them 0).

    Args:
        q_len: Lq, the number of queries.
        k_len: Lk, the number of keys; defaults to ``q_len``.
        device: where to create the mask.

    Raises:
        ValueError: for a negative length.
    """
    k_len = q_len if k_len is None else k_len
    if q_len < 0 or k_len < 0:
        raise ValueError(f"lengths must be >= 0; got q_len={q_len}, k_len={k_len}")
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)  # (Lq, Lk)
    return torch.tril(ones, diagonal=k_len - q_len)


def padding_mask(
    lengths: Sequence[int] | torch.Tensor, max_len: int, side: str = "right", device=None
) -> torch.Tensor:
    """Keep-mask of shape (B, max_len): True marks a real token, False padding.

    Args:
        lengths: B real lengths, a list or a 1-D integer tensor.
        max_len: the padded length.
        side: ``"right"`` puts real tokens first (``[T T T F F]``), ``"left"`` puts
            them last (``[F F T T T]``), as in batched generation.
        device: where to create the mask.

    Raises:
        ValueError: for a bad side, or a length below 0 or above ``max_len``.
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right'; got {side!r}")
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device).reshape(-1)  # (B,)
    if lengths.numel() and (lengths.min() < 0 or lengths.max() > max_len):
        raise ValueError(
            f"every length must be in [0, max_len={max_len}]; got {lengths.tolist()}"
        )
    pos = torch.arange(max_len, device=lengths.device)  # (max_len,)
    if side == "right":
        return pos[None, :] < lengths[:, None]  # (B, max_len)
    return pos[None, :] >= (max_len - lengths)[:, None]  # (B, max_len)


def combine_masks(causal: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """AND a causal (Lq, Lk) keep-mask with a key padding (B, Lk) keep-mask.

    Padding hides *keys* (columns), so it broadcasts as (B, 1, 1, Lk).

    Returns:
        bool (B, 1, Lq, Lk), True = may attend.

    Raises:
        ValueError: for non-bool masks or mismatched Lk.
    """
    if causal.dtype != torch.bool or padding.dtype != torch.bool:
        raise ValueError(
            f"masks must be bool (True = may attend); got {causal.dtype} and {padding.dtype}"
        )
    if causal.dim() != 2 or padding.dim() != 2 or causal.shape[1] != padding.shape[1]:
        raise ValueError(
            f"expected causal (Lq, Lk) and padding (B, Lk); got {tuple(causal.shape)} "
            f"and {tuple(padding.shape)}"
        )
    return causal[None, None, :, :] & padding[:, None, None, :]  # (B, 1, Lq, Lk)


def to_key_padding_mask(keep: torch.Tensor) -> torch.Tensor:
    """Convert a (B, Lk) keep-mask to ``nn.MultiheadAttention``'s key_padding_mask (True = ignore)."""
    if keep.dtype != torch.bool:
        raise ValueError(f"keep mask must be bool (True = may attend); got {keep.dtype}")
    return ~keep
