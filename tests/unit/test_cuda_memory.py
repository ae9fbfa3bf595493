"""A worker on ``--device cuda`` bounds its CUDA allocator before student code runs: the code path
with torch.cuda stood in for (no GPU here), and for real where one is (marked gpu)."""

from __future__ import annotations

import types

import pytest
import torch

from grader.sandbox.child.server import bound_cuda_memory
from grader.sandbox.limits import GiB, Limits


def fake_torch(available: bool = True, total: int = 16 * GiB):
    calls = []
    cuda = types.SimpleNamespace(
        is_available=lambda: available,
        get_device_properties=lambda i: types.SimpleNamespace(total_memory=total),
        set_per_process_memory_fraction=lambda fraction, device: calls.append((fraction, device)))
    return types.SimpleNamespace(cuda=cuda), calls


def test_the_worker_keeps_its_allocator_to_its_share_of_the_device():
    fake, calls = fake_torch(total=16 * GiB)
    assert bound_cuda_memory(fake, 2 * GiB) == {"fraction": 0.125, "limit_bytes": 2 * GiB, "device_bytes": 16 * GiB}
    assert calls == [(0.125, 0)]


def test_a_limit_past_the_device_is_the_whole_device_and_none_sets_nothing():
    fake, calls = fake_torch(total=8 * GiB)
    assert bound_cuda_memory(fake, 40 * GiB)["fraction"] == 1.0
    assert bound_cuda_memory(fake, 0) == {}
    unavailable, none = fake_torch(available=False)
    assert bound_cuda_memory(unavailable, 2 * GiB) == {} and none == []
    assert calls == [(1.0, 0)]


def test_the_default_limits_give_each_worker_two_gib_of_gpu_memory():
    assert Limits().gpu_memory_bytes == 2 * GiB


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_an_allocation_past_the_share_raises_out_of_memory():
    got = bound_cuda_memory(torch, 256 << 20)
    assert 0 < got["fraction"] <= 1
    with pytest.raises(torch.cuda.OutOfMemoryError):
        torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.set_per_process_memory_fraction(1.0, 0)
