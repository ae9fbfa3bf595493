"""-inf fill, a hand-written max-subtracted softmax, and a guard on rows that see no key."""

import math

import torch


def causal_mask(q_len, k_len=None, device=None):
    k_len = q_len if k_len is None else k_len
    future = torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)
    return ~future


def padding_mask(lengths, max_len, side="right", device=None):
    rows = []
    for n in [int(x) for x in lengths]:
        row = torch.zeros(max_len, dtype=torch.bool, device=device)
        if side == "right":
            row[:n] = True
        elif side == "left":
            row[max_len - n:] = True
        else:
            raise ValueError("side must be 'left' or 'right'")
        rows.append(row)
    if not rows:
        return torch.zeros(0, max_len, dtype=torch.bool, device=device)
    return torch.stack(rows)


def combine_masks(causal, padding):
    return causal.expand(padding.shape[0], 1, *causal.shape) & padding[:, None, None, :]


def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1])
    # softmax by hand, accumulated in at least float32
    acc = torch.promote_types(scores.dtype, torch.float32)
    s = scores.to(acc)
    if mask is not None:
        row_ok = mask.any(-1, keepdim=True)
        s = s.masked_fill(~mask, float("-inf"))
        s = s.masked_fill(~row_ok, 0.0)  # no -inf-only rows: max stays finite
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - m)
    w = e / e.sum(dim=-1, keepdim=True)
    if mask is not None:
        w = w.masked_fill(~row_ok, 0.0)
    w = w.to(scores.dtype)
    return w @ v, w
