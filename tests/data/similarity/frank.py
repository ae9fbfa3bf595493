import math
import torch


def causal_mask(q_len, k_len=None, device=None):
    kl = q_len if k_len is None else k_len
    rows = torch.arange(q_len, device=device)[:, None] + (kl - q_len)
    cols = torch.arange(kl, device=device)[None, :]
    return cols <= rows


def padding_mask(lengths, max_len, side="right", device=None):
    n = torch.tensor(lengths, device=device) if not torch.is_tensor(lengths) else lengths.to(device)
    n = n.reshape(-1, 1).long()
    at = torch.arange(max_len, device=n.device).reshape(1, -1)
    if side == "left":
        return at >= max_len - n
    if side != "right":
        raise ValueError("side must be left or right")
    return at < n


def combine_masks(causal, padding):
    return causal.unsqueeze(0).unsqueeze(0) & padding.unsqueeze(1).unsqueeze(2)


def masked_attention(q, k, v, mask=None):
    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = torch.where(mask, s, torch.zeros_like(s))
    p = torch.softmax(s, dim=-1)
    if mask is not None:
        p = torch.where(mask.any(dim=-1, keepdim=True), p, torch.zeros((), dtype=p.dtype, device=p.device))
    return torch.matmul(p, v), p
