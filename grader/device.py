"""Device choice and exact float32 matmuls for the reference computations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_NAMES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> torch.device:
    """Turn a device name from the command line or a spec into a ``torch.device``.

    Args:
        name: ``"auto"`` (CUDA when available, else CPU), ``"cpu"`` or ``"cuda"``.

    Raises:
        ValueError: for another name, or ``"cuda"`` on a machine without CUDA.
    """
    if name not in _NAMES:
        raise ValueError(f"device must be one of {', '.join(_NAMES)}; got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}); use device 'cpu' or 'auto'"
        )
    return torch.device(name)


@contextlib.contextmanager
def exact_float32() -> Iterator[None]:
    """Run the body with TF32 off and float32 matmul precision "highest", then restore.

    On Ampere and later GPUs TF32 matmuls keep only 10 mantissa bits, which is far
    above the float32 tolerance (1e-5) the reference is compared with.
    """
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.backends.cudnn.allow_tf32 = saved[1]
        torch.set_float32_matmul_precision(saved[2])
