"""A digest of what a submission's calls returned in one case, kept for cases it failed.

Two submissions whose code differs give bitwise-identical wrong outputs on the same hidden inputs
only rarely, unless they share their code or a classic mistake; the similarity report counts how
rare each shared digest is. Only references to the returned values are kept while the case runs
(they are in this process anyway); the bytes are hashed only when the case did not pass.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

DIGEST_HEX = 32


class DigestingCalls:
    """A worker for the case's `Student` proxy that remembers every value its calls returned."""

    def __init__(self, worker: Any):
        self._worker = worker
        self.returned: list[Any] = []

    def _keep(self, value: Any) -> Any:
        self.returned.append(value)
        return value

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._keep(self._worker.call(name, *args, **kwargs))

    def call_method(self, handle: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._keep(self._worker.call_method(handle, method, *args, **kwargs))

    def vjp(self, *args: Any, **kwargs: Any) -> Any:
        return self._keep(self._worker.vjp(*args, **kwargs))

    def state_dict(self, handle: Any) -> Any:
        return self._keep(self._worker.state_dict(handle))

    def load_state_dict(self, handle: Any, state: Any) -> None:
        self._worker.load_state_dict(handle, state)


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach()
        h.update(f"T{t.dtype}{tuple(t.shape)}{t.device.type}|".encode())
        if t.device.type != "meta" and t.numel():
            flat = t.cpu().contiguous().reshape(-1)
            h.update(flat.view(torch.uint8).numpy().tobytes() if flat.dtype is not torch.bool
                     else flat.to(torch.uint8).numpy().tobytes())
    elif isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}|".encode())
        for v in value:
            _feed(h, v)
    elif isinstance(value, dict):
        h.update(f"D{len(value)}|".encode())
        for k in sorted(value, key=str):
            h.update(f"{k!s}=".encode("utf-8", "replace"))
            _feed(h, value[k])
    elif value is None or isinstance(value, (bool, int, float, str)):
        h.update(f"V{type(value).__name__}:{value!r}|".encode("utf-8", "replace"))
    else:  # a handle or an opaque value: its kind only (handle ids differ between workers)
        h.update(f"O{type(value).__name__}|".encode())


def output_digest(returned: list[Any]) -> str:
    """32 hex digits of SHA-256 over every returned value: dtype, shape and raw bytes of tensors."""
    h = hashlib.sha256()
    for v in returned:
        _feed(h, v)
    return h.hexdigest()[:DIGEST_HEX]
