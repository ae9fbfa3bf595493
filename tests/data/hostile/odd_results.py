# Hostile: results that are not plain tensors. Expected: Opaque(type name) in the grader.
import numpy as np
import torch


class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True


def liar():
    return torch.zeros(3).as_subclass(Liar)


def array():
    return np.ones(3)


def thing():
    return object()


def nested():
    return {"pair": (torch.arange(3), [1.5, float("nan"), None, "s", True])}


def parameter():
    return torch.nn.Parameter(torch.ones(2))
