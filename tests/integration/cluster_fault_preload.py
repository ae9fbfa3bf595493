"""Test-only `dask worker --preload`: a jail that returns slightly wrong numbers (every float tensor a
student call returns is shifted by 0.01), planted in the Dask worker's sandbox. The environment
self-test passes (it returns no tensors), but the trusted reference no longer scores 100 % there, so
the worker must refuse to grade anyone.
"""

import torch

from grader.sandbox.host.worker import Worker


def _shift(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value + 0.01
    if isinstance(value, (tuple, list)):
        return type(value)(_shift(v) for v in value)
    if isinstance(value, dict):
        return {k: _shift(v) for k, v in value.items()}
    return value


def _shifted(self, name, *args, _call=Worker.call, **kwargs):
    return _shift(_call(self, name, *args, **kwargs))


def _shifted_method(self, handle, method, *args, _call=Worker.call_method, **kwargs):
    return _shift(_call(self, handle, method, *args, **kwargs))


if not getattr(Worker.call, "planted", False):
    _shifted.planted = True
    Worker.call = _shifted
    Worker.call_method = _shifted_method
