import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    B, T, V = logits.shape
    per_token = F.cross_entropy(logits.float().reshape(B * T, V), targets.masked_fill(~mask, -100).reshape(B * T),
                                ignore_index=-100, reduction="none").reshape(B, T)
    n = mask.sum()
    return per_token.sum() / n if n > 0 else per_token.sum() * 0.0


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    probs = F.softmax(logits.float() / temperature, dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator)
    return (probs.cumsum(-1) < u).sum(-1).clamp_max(probs.shape[-1] - 1)  # inverse-CDF draw
