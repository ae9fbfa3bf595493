# Hostile tail: appended to a correct submission (the tests do it), it makes every function and
# method the submission defines return its real results spoiled: as meta tensors of the right
# shape (no values), in another dtype, or on another device. No check may raise on them as if the
# case were wrong: each is the student's failed case, with a message.
import functools as _functools
import inspect as _inspect

import torch as _torch

SPOIL = "meta"


def _spoiled(x):
    if type(x) is _torch.Tensor:
        if SPOIL == "meta":
            return x.detach().to("meta")
        if SPOIL == "float64":
            return x.detach().to(_torch.float64)
        if SPOIL == "int8":
            return x.detach().to(_torch.int8)
        if SPOIL == "device":  # another device than the inputs': the CPU from a GPU, else meta
            return x.detach().to("cpu" if x.device.type != "cpu" else "meta")
    if isinstance(x, tuple):
        return tuple(_spoiled(v) for v in x)
    if isinstance(x, list):
        return [_spoiled(v) for v in x]
    return x


def _wrap(fn):
    @_functools.wraps(fn)
    def spoiled(*args, **kwargs):
        return _spoiled(fn(*args, **kwargs))
    return spoiled


for _name, _value in list(globals().items()):
    if _name.startswith("_") or getattr(_value, "__module__", None) != __name__:
        continue
    if _inspect.isfunction(_value):
        globals()[_name] = _wrap(_value)
    elif _inspect.isclass(_value):
        for _method, _fn in list(vars(_value).items()):
            if _inspect.isfunction(_fn) and (_method == "forward" or not _method.startswith("_")):
                setattr(_value, _method, _wrap(_fn))
