"""Print how far the reference and SDPA are from the float64 oracle: ``python -m reference.selfdemo``.

Inputs are causal + right-padded batches; only real query rows are compared.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .attention import masked_attention, oracle_attention
from .device import exact_float32, resolve_device
from .masks import causal_mask, combine_masks, padding_mask

SHAPES = [(2, 8, 256, 64), (4, 2, 33, 40), (1, 4, 1024, 128)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _max_err(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> float:
    return float(((a.double() - b.double()).abs() * rows).max())


def measure(shape, dtype, device, seed: int = 0) -> tuple[float, float, float]:
    """(ref vs SDPA, ref vs oracle, SDPA vs oracle) max abs errors over real query rows."""
    B, H, L, D = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, D, generator=g).to(device, dtype) for _ in range(3))  # (B, H, L, D)
    lengths = [L - (b * L) // (2 * B) for b in range(B)]  # first sequence full, the rest shorter
    pad = padding_mask(lengths, L, device=device)  # (B, L)
    keep = combine_masks(causal_mask(L, device=device), pad)  # (B, 1, L, L)
    rows = pad[:, None, :, None]  # (B, 1, L, 1): real query rows
    ref, _ = masked_attention(q, k, v, keep)
    oracle, _ = oracle_attention(q, k, v, keep)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    return _max_err(ref, sdpa, rows), _max_err(ref, oracle, rows), _max_err(sdpa, oracle, rows)


def main() -> None:
    device = resolve_device("auto")
    print(f"torch {torch.__version__} on {device}; causal + right padding, real query rows only")
    print(f"{'dtype':<9} {'shape (B,H,L,D)':<20} {'ref-SDPA':>10} {'ref-oracle':>11} {'SDPA-oracle':>12}")
    with exact_float32():
        for dtype in DTYPES:
            for shape in SHAPES:
                errs = measure(shape, dtype, device)
                name = str(dtype).removeprefix("torch.")
                print(f"{name:<9} {str(shape):<20} {errs[0]:>10.2e} {errs[1]:>11.2e} {errs[2]:>12.2e}")
    print("\ncausal_mask(3, 5): query i may see key j iff j <= 5 - 3 + i")
    for row in causal_mask(3, 5).tolist():
        print("  " + " ".join("1" if keep else "." for keep in row))


if __name__ == "__main__":
    main()
