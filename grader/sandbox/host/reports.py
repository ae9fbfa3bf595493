"""What the grader learns from a worker about the submission: `LoadReport` and `NameInfo`.

Built here from the worker's replies, which are untrusted: every field is checked or converted
to the declared type before it is kept, so a forged reply can make a report say little, never
something malformed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from grader.i18n import EMPTY, Msg, join, tr, verbatim
from grader.results import CellError
from grader.sandbox.errors import (
    DISK_ERRNOS,
    CrashKind,
    SandboxError,
    WorkerCrashed,
    disk_message,
    load_failure_message,
)
from grader.sandbox.limits import Limits


@dataclass(frozen=True)
class NameInfo:
    name: str
    kind: str
    """"function", "class", "missing" or "other"."""
    signature: str | None
    params: tuple[str, ...] = ()
    available: tuple[str, ...] = ()
    """Top-level functions and classes the submission defines (for "did you mean" messages)."""
    type_name: str = ""
    """The value's type ("torch.Tensor"), for saying what a name is instead of a function."""


@dataclass(frozen=True)
class LoadReport:
    ok: bool
    """False when nothing can be graded (crash, timeout, or no unit ran and nothing was defined)."""
    message: Msg = EMPTY
    """Why nothing can be graded, or which units raised while loading."""
    cell_errors: list[CellError] = field(default_factory=list)
    failure: SandboxError | None = None
    """The WorkerTimeout / WorkerCrashed that ended loading, if any."""
    defined: tuple[str, ...] = ()


def load_report(reply: dict, limits: Limits) -> LoadReport:
    """The LoadReport for the worker's reply to "load"."""
    if not reply.get("ok"):
        err = reply.get("error") or {}
        return LoadReport(ok=False, message=verbatim(f"{err.get('type')}: {err.get('message')}"))
    raw = [e for e in reply.get("cell_errors", []) if type(e) is dict]
    if any(e.get("errno") in DISK_ERRNOS for e in raw):
        crash = WorkerCrashed(CrashKind.DISK, disk_message(limits))
        return LoadReport(ok=False, message=load_failure_message(crash), failure=crash)
    errors = [CellError(cell=e.get("cell"), error=str(e.get("error")), traceback=str(e.get("traceback")))
              for e in raw]
    defined = tuple(str(x) for x in reply.get("defined", []))
    ok = bool(reply.get("completed")) or bool(defined)
    message = EMPTY
    if errors:
        where = join([tr("cell {n}", n=e.cell) if e.cell else tr("the module") for e in errors], ", ")
        message = tr("{n} unit(s) raised while loading ({where}); grading went on.", n=len(errors), where=where)
        if not ok:
            message = errors[0].raised()  # the reason alone: whoever shows it says that loading failed
    return LoadReport(ok=ok, message=message, cell_errors=errors, defined=defined)


def valid_type_name(reported: object) -> str:
    """A type's dotted name as the worker reported it (``wire.type_name_of``); anything else (a
    forged reply) becomes ""."""
    return reported if isinstance(reported, str) and re.fullmatch(r"[A-Za-z_][\w.]{0,79}", reported) else ""


def as_text(v: Any) -> str:
    """A reply field as a str ("" for None)."""
    return v if isinstance(v, str) else ("" if v is None else str(v))
