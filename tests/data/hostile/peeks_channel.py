# Hostile: correct code that, whenever it is called, peeks at its own channel to the grader (fd 3)
# for requests waiting there and prints a fingerprint of each whole frame it finds ("PEEK" and the
# sha256 prefixes). The grader writes one request at a time and waits for its reply, so a peek
# must never find one (tests/integration/test_engine.py).

import hashlib
import math
import socket
import struct

import torch


def _look_ahead():
    with socket.fromfd(3, socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        try:
            queued = channel.recv(1 << 24, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, OSError):
            queued = b""
    return queued


def _public_call(*tensors):
    data, seen = _look_ahead(), []
    while len(data) >= 8:
        hlen, plen = struct.unpack_from("<II", data)
        if len(data) < 8 + hlen + plen:
            break
        seen.append(hashlib.sha256(data[:8 + hlen + plen]).hexdigest()[:16])
        data = data[8 + hlen + plen:]
    print("PEEK", " ".join(seen))


def causal_mask(q_len, k_len=None, device=None):
    """(q_len, k_len) bool; the queries are the last q_len of the k_len positions."""
    if device is None:
        _public_call()
    if k_len is None:
        k_len = q_len
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=k_len - q_len)


def padding_mask(lengths, max_len, side="right", device=None):
    """(B, max_len) bool, True = real token."""
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=device).reshape(-1)
    pos = torch.arange(max_len, device=lengths.device)
    if side == "right":
        return pos[None, :] < lengths[:, None]
    if side == "left":
        return pos[None, :] >= (max_len - lengths)[:, None]
    raise ValueError(f"side must be 'left' or 'right', got {side!r}")


def combine_masks(causal, padding):
    """causal (Lq, Lk) AND padding (B, Lk) -> (B, 1, Lq, Lk)."""
    return causal[None, None, :, :] & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    """q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (out (..., Lq, dv), weights (..., Lq, Lk))."""
    _public_call(q)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v), weights
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # A row with no visible key is softmax(all -inf) = NaN: replace it by zeros.
    has_key = mask.any(dim=-1, keepdim=True)
    weights = torch.where(has_key, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    return torch.matmul(weights, v), weights
