# Bug: the loss is a constant 7.0, whatever the inputs (a placeholder left in)
# Concept: cross-entropy (it matches none of the classic mistakes)
import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    return torch.tensor(7.0)


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
