# Bug: every target is looked up, padding included, and the result multiplied by the mask: a padding
# target outside the vocabulary makes gather raise (index out of bounds)
# Concept: ignore-index
import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum() / mask.sum().clamp_min(1)


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
