"""A proxy that lets case authors write ``student.masked_attention(q, k, v, mask)``.

Every attribute access becomes a call over the wire to the sandboxed worker; objects the student
creates stay in the worker and are represented here by ``StudentObject`` (a handle). Nothing of
the student's code or objects ever exists in the grader process.
"""

from __future__ import annotations

from typing import Any

from grader.assignment.signatures import Params, without_defaults
from grader.sandbox import Handle


def _unwrap(value: Any) -> Any:
    if isinstance(value, StudentObject):
        return value.handle
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


class Student:
    """The submission's top-level names, callable through the worker. Each call carries only the
    arguments that differ from the documented defaults (`grader.assignment.signatures`), so code
    whose signature is only partly the documented one is graded on what it does."""

    def __init__(self, worker: Any, defaults: dict[str, Params] | None = None):
        """``defaults``: callable key ("causal_mask", "MultiHeadAttention.__call__") -> its
        documented parameters (`call_defaults`); none: calls go as written."""
        self._worker = worker
        self._defaults = defaults or {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = self._trim(name, args, kwargs)
            return self._wrap(self._worker.call(name, *_unwrap(args), **_unwrap(kwargs)), name)

        call.__name__ = name
        return call

    def _trim(self, key: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        return without_defaults(self._defaults.get(key), args, kwargs)

    def _wrap(self, value: Any, entry: str | None = None) -> Any:
        """``entry``: the entry point a returned object is an instance of (its methods' defaults)."""
        if isinstance(value, Handle):
            return StudentObject(self, value, entry)
        if isinstance(value, (list, tuple)):
            return type(value)(self._wrap(v) for v in value)
        return value

    def vjp(self, target: str | tuple[StudentObject, str], args: tuple, kwargs: dict | None = None, *,
            wrt: list[int], cotangent: Any, output_index: int | None = None) -> tuple[Any, list[Any]]:
        """Call ``target`` with gradients on the ``wrt`` positional tensors and return
        (output, gradients of (output * cotangent).sum())."""
        remote: str | tuple[Handle, str]
        if isinstance(target, tuple):
            args, kwargs = self._trim(f"{target[0].entry}.{target[1]}", tuple(args), kwargs or {})
            remote = (target[0].handle, target[1])
        else:
            args, kwargs = self._trim(target, tuple(args), kwargs or {})
            remote = target
        value, grads = self._worker.vjp(remote, _unwrap(tuple(args)), _unwrap(kwargs or {}), wrt=wrt,
                                        cotangent=cotangent, output_index=output_index)
        return self._wrap(value), grads


class StudentObject:
    """An object living in the worker (a module, a cache). Methods are called over the wire."""

    def __init__(self, student: Student, handle: Handle, entry: str | None = None):
        self._student = student
        self.handle = handle
        self.entry = entry
        """The entry point (class) it was made by; None when not known."""

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        return self.method(method)

    def method(self, name: str) -> Any:
        worker = self._student._worker

        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = self._student._trim(f"{self.entry}.{name}", args, kwargs)
            value = worker.call_method(self.handle, name, *_unwrap(args), **_unwrap(kwargs))
            # A method returning the object itself (module.half(), .eval()) keeps its entry point.
            same = isinstance(value, Handle) and value.id == self.handle.id
            return self._student._wrap(value, self.entry if same else None)

        call.__name__ = name
        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.method("__call__")(*args, **kwargs)

    def length(self) -> Any:
        return self.method("__len__")()

    def state_dict(self) -> dict:
        return self._student._worker.state_dict(self.handle)

    def load_state_dict(self, state: dict) -> None:
        self._student._worker.load_state_dict(self.handle, state)
