# Hostile (bounded): allocates and touches memory well past the test's limit.
import time

import torch


def hog_3gib():
    # One 3 GiB tensor, every page touched. Expected: WorkerCrashed(kind="memory").
    x = torch.ones(3 * 2**30 // 4, dtype=torch.float32)
    return float(x.sum())


def hog_slowly(total_mib=1536, step_mib=64):
    # Grows in steps so RSS polling sees it. Expected: WorkerCrashed(kind="memory").
    chunks = []
    for _ in range(total_mib // step_mib):
        chunks.append(torch.ones(step_mib * 2**20 // 4))
        time.sleep(0.03)
    return len(chunks)
