import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    # pad id assumed to be 0; the mask is never used
    B, T, V = logits.shape
    return F.cross_entropy(logits.float().reshape(B * T, V), targets.reshape(B * T), ignore_index=0)


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
