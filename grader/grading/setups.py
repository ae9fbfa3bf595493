"""A case's setup (inputs and reference results): computed by the case's own code, blamed on the
case when that code raises, moved to the grading device, and the reply cap it implies.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from grader.assignment.spec import Assignment
from grader.cases import CaseInstance, Setup, SetupContext
from grader.errors import AssignmentSpecError, GraderError
from grader.grading.outcomes import short


def compute_setup(a: Assignment, inst: CaseInstance, device: torch.device) -> Setup:
    """Run the case's setup with its own generator; an exception in it is the author's
    (`author_error`), a GraderError passes through."""
    ctx = SetupContext(inst.generator(a.seed), inst.param, device)
    try:
        return inst.case.setup(ctx)
    except GraderError:
        raise
    except Exception as e:  # the author's code: name the case, file and line
        raise author_error(a, inst, e, "setup") from e


def author_error(a: Assignment, inst: CaseInstance, e: BaseException, stage: str) -> AssignmentSpecError:
    """An exception in an instructor's case (not the student's, not the sandbox's), blamed on the case:
    its id, and the file and line of the assignment's innermost frame."""
    import traceback

    root = os.path.realpath(a.dir)
    mine = [f for f in traceback.extract_tb(e.__traceback__)
            if os.path.realpath(f.filename).startswith(root + os.sep)]
    at = f"{mine[-1].filename}, line {mine[-1].lineno}" if mine else inst.case.where()
    return AssignmentSpecError(f"case {inst.id!r} of {a.id} ({at}): its {stage} raised "
                               f"{type(e).__name__}: {short(str(e))}. This is the assignment's code, not the "
                               "student's: fix the case")


def on_device(s: Setup, device: torch.device) -> Setup:
    """A stored (CPU) setup moved to the device the kit grades on."""
    if device.type == "cpu":
        return s

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x if x.device.type == "meta" else x.to(device)
        if isinstance(x, dict):
            return {k: move(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(move(v) for v in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: move(getattr(x, f.name)) for f in dataclasses.fields(x)
                                             if f.init})
        return x

    return Setup(move(s.inputs), move(s.expected), move(s.extra))


REPLY_FLOOR = 16 << 20
"""The smallest reply cap: room for a correct implementation's own extras (a registered mask
buffer of a few MiB in a state_dict, say) whatever the case's size."""


def reply_cap(setup: Setup) -> int:
    """The largest reply a case's calls may return: 8x the bytes of its inputs and expected results,
    and at least `REPLY_FLOOR`. A reply beyond it is refused before the grader reads it, so a
    submission cannot grow the grader's memory (each slot's) by answering with hundreds of MiB."""
    return max(REPLY_FLOOR, 8 * _tensor_bytes((setup.inputs, setup.expected, setup.extra)))


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.nelement() * value.element_size()
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0
