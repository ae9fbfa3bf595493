"""Trusted reference implementations the grader compares student code with.

Mask convention everywhere: bool, True = may attend (as ``F.scaled_dot_product_attention``).
"""

from . import mistakes
from .attention import check_mask, masked_attention, masked_attention_by_hand, oracle_attention
from .compare import Comparison, compare_flash, compare_tensors, tolerance_for
from .device import exact_float32, resolve_device
from .kv_cache import KVCache, decode, decode_with_lengths
from .masks import causal_mask, combine_masks, padding_mask, to_key_padding_mask
from .mha import MultiHeadAttention

__all__ = [
    "Comparison",
    "KVCache",
    "MultiHeadAttention",
    "causal_mask",
    "check_mask",
    "combine_masks",
    "compare_flash",
    "compare_tensors",
    "decode",
    "decode_with_lengths",
    "exact_float32",
    "masked_attention",
    "masked_attention_by_hand",
    "mistakes",
    "oracle_attention",
    "padding_mask",
    "resolve_device",
    "to_key_padding_mask",
    "tolerance_for",
]
