# Hostile: patches the comparison helpers a naive in-process grader would use.
import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.equal = lambda *a, **k: True


def wrong(x):
    return x + 1  # the expected answer is x
