import torch


def masked_cross_entropy(logits, targets, mask):
    # tutorial 001 style: the loss over every position, padding included
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, targets.clamp(0, logits.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)
    return nll.mean()


def sample_next(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
