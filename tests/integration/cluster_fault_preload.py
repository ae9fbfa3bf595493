"""Test-only `dask worker --preload`: a jail that returns slightly wrong numbers (every float tensor a
student call returns is shifted by 0.01), planted in the Dask worker's sandbox. The environment
self-test passes (it returns no tensors), but the trusted reference no longer scores 100 % there, so
the worker must refuse to grade anyone.
"""

import torch

from grader.sandbox.handle import Worker


def _shifted(self, name, *args, _call=Worker.call, **kwargs):
    value = _call(self, name, *args, **kwargs)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value + 0.01
    return value


if not getattr(Worker.call, "planted", False):
    _shifted.planted = True
    Worker.call = _shifted
