# Bug: targets shifted by one as in causal-LM training code (logits[:, :-1] against targets[:, 1:]);
# the targets given are already aligned with the logits
# Concept: cross-entropy
import torch
import torch.nn.functional as F


def masked_cross_entropy(logits, targets, mask):
    logits, targets, mask = logits[:, :-1], targets[:, 1:], mask[:, 1:]
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, torch.where(mask, targets, 0).unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum() / mask.sum().clamp_min(1)


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
