"""Masked cross-entropy over real tokens, and temperature sampling.

Fill in the two functions; `grader check loss_sampling.py` checks them.
"""

import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    """Mean cross-entropy over real tokens.

    logits (B, T, V) float; targets (B, T) int64; mask (B, T) bool, True = real token.
    Returns a 0-dim float32 tensor: padding counts in neither the sum nor the count.
    """
    raise NotImplementedError("masked_cross_entropy")


def sample_next(logits, temperature, generator=None):
    """One token id per row of (B, V) logits: argmax when temperature == 0, otherwise a draw
    from softmax(logits / temperature) using `generator`. Returns (B,) int64."""
    raise NotImplementedError("sample_next")
