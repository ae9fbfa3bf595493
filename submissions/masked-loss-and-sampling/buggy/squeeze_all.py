# Bug: .squeeze() instead of .squeeze(-1): for a batch of one the draw is a 0-dim tensor, not shape (1,)
# Concept: sample-shape
import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, torch.where(mask, targets, 0).unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum() / mask.sum().clamp_min(1)


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return probs.multinomial(1, generator=generator).squeeze()
