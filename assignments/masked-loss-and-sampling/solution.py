"""The trusted reference for masked-loss-and-sampling (never shipped: the kit stores its results).

Shapes: B batch, T time, V vocabulary. Masks are bool, True = a real token (counts in the loss).
"""

from __future__ import annotations

import torch


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the real tokens only.

    Args:
        logits: (B, T, V) unnormalised scores, any float dtype.
        targets: (B, T) int64 token ids; at padding they may be anything (even out of range).
        mask: (B, T) bool, True = real token.

    Returns:
        A 0-dim float32 tensor: sum of -log p(target) over real tokens / number of real tokens
        (0 when there is none). Padding gets zero gradient.
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2] or mask.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (B, T, V) with targets and mask (B, T); got {tuple(logits.shape)}, "
                         f"{tuple(targets.shape)}, {tuple(mask.shape)}")
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V); float32: fp16 sums overflow
    safe = torch.where(mask, targets, torch.zeros_like(targets))  # padding ids may be out of range
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, T)
    nll = torch.where(mask, nll, torch.zeros_like(nll))
    return nll.sum() / mask.sum().clamp_min(1)


def sample_next(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token id per row of (B, V) logits: argmax at temperature 0, else a draw from
    softmax(logits / temperature) with ``generator``. Returns (B,) int64."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


# --- what the cases compare with (instructor-only, like the reference itself) ------------------

def oracle_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> float:
    """``masked_cross_entropy`` in float64 from the given (already rounded) logits."""
    nll = _nll64(logits, targets)
    return float((nll * mask).sum() / max(int(mask.sum()), 1))


def loss_mistakes(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Concept -> the loss a classic mistake gives on these inputs (float64)."""
    nll = _nll64(logits, targets)
    B, T = mask.shape
    out = {"loss-padding": float(nll.mean()),                       # averaged over padding too
           "loss-denominator": float((nll * mask).sum() / (B * T))}  # divided by B·T
    in_range = bool(((targets >= 0) & (targets < logits.shape[-1])).all())
    if in_range and bool((targets != 0).any()):
        out["ignore-index"] = float(nll[targets != 0].mean())      # ignore_index=0 instead of the mask
    return out


def _nll64(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    V = logits.shape[-1]
    logp = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
    return -logp.gather(-1, targets.clamp(0, V - 1).unsqueeze(-1)).squeeze(-1)  # (B, T)


def sampling_probs(row: torch.Tensor, temperature: float) -> torch.Tensor:
    """The distribution ``sample_next`` draws from for one row of logits (float64)."""
    return torch.softmax(row.double() / temperature, dim=-1)
