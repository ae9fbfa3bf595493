"""Run a case's check against the trusted reference in this process, through the same `Student` proxy.

Used where the grader must decide something about a case itself rather than believe what a
submission says: e.g. whether a meta-device case can be judged at all (the reference makes the
same calls on the same inputs; if it cannot run them, the case is inconclusive for everyone).

Only the trusted ``reference`` package runs here, never student code. Arguments are copied on the
way in, so a case's shared setup cannot be changed by the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from grader.sandbox.wire import Handle

if TYPE_CHECKING:
    from grader.assignment.spec import Assignment

_TOKEN = "reference-in-process"


class ReferenceWorker:
    """The calls `grader.grading.proxy.Student` makes on a worker, answered by a module's functions and
    classes in this process. Objects stay here and cross as `Handle`s, as they would from a worker."""

    def __init__(self, module: ModuleType):
        self._module = module
        self._objects: dict[int, Any] = {}

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self._module, name, None)
        if fn is None:
            raise NotInReference(name)
        return self._out(fn(*self._in(args), **self._in(kwargs)))

    def call_method(self, handle: Handle, method: str, *args: Any, **kwargs: Any) -> Any:
        obj = self._object(handle)
        return self._out(getattr(obj, method)(*self._in(args), **self._in(kwargs)))

    def state_dict(self, handle: Handle) -> dict[str, Any]:
        return {k: v.detach().clone() for k, v in self._object(handle).state_dict().items()}

    def load_state_dict(self, handle: Handle, state: dict) -> None:
        self._object(handle).load_state_dict(self._in(dict(state)))

    def vjp(self, target: Any, args: Any, kwargs: dict | None = None, *, wrt: list[int], cotangent: Any,
            output_index: int | None = None) -> tuple[Any, list]:
        fn = getattr(self._object(target[0]), target[1]) if isinstance(target, tuple) else getattr(self._module, target)
        args = list(self._in(tuple(args)))
        for i in wrt:
            args[i] = args[i].detach().requires_grad_(True)
        with torch.enable_grad():
            out = fn(*args, **self._in(kwargs or {}))
            y = out if output_index is None else out[output_index]
            (y * cotangent).sum().backward()
        grads = [None if args[i].grad is None else args[i].grad.detach() for i in wrt]
        return self._out(out), grads

    # --- values in and out ---

    def _object(self, handle: Any) -> Any:
        if type(handle) is not Handle or handle.worker != _TOKEN:
            raise ValueError("this handle does not belong to the in-process reference")
        return self._objects[handle.id]

    def _in(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if type(value) is Handle:
            return self._object(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self._in(v) for v in value)
        if isinstance(value, dict):
            return {k: self._in(v) for k, v in value.items()}
        return value

    def _out(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach()
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(self._out(v) for v in value)
        if isinstance(value, dict):
            return {k: self._out(v) for k, v in value.items()}
        self._objects[id(value)] = value
        return Handle(id(value), type(value).__name__, _TOKEN)


class NotInReference(AttributeError):
    """The reference module does not provide a name a case calls (an instructor's own assignment)."""


def reference_submission(assignment: Assignment, workdir: Path) -> Path:
    """A folder submission whose main module re-exports the trusted reference's entry points."""
    folder = workdir / "reference-solution"
    names = ", ".join(e.name for e in assignment.entry_points)
    if assignment.reference_file is not None:  # the assignment's own: one module
        folder.mkdir(parents=True)
        shutil.copy(assignment.reference_file, folder / assignment.reference_file.name)
        (folder / assignment.main_module).write_text(f"from {assignment.reference_file.stem} import {names}\n",
                                                     encoding="utf-8")
        return folder
    import reference

    pkg = folder / "reference"
    pkg.mkdir(parents=True)
    for src in Path(reference.__file__).parent.glob("*.py"):
        shutil.copy(src, pkg / src.name)
    # Two modules of the package re-export the grader's own (comparison rules, device helpers),
    # which a worker may not read: the copy carries the code itself.
    from grader import device
    from grader.checks import tolerance

    shutil.copy(tolerance.__file__, pkg / "compare.py")
    shutil.copy(device.__file__, pkg / "device.py")
    (folder / assignment.main_module).write_text(f"from reference import {names}\n", encoding="utf-8")
    return folder
