"""What a sandbox reads of a submission, and how its files reach a worker's scratch dir.

`Submission` and `CodeUnit` are what both sandboxes (``Sandbox``, ``PortableSandbox``) read of a
loaded one (``grader.submission.load.LoadedSubmission``); `main_name` is the file its code runs as;
`write_files` puts a folder or zip submission's other files into the worker's scratch dir, never
outside it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from grader.i18n import Msg
from grader.sandbox.errors import SandboxError


class CodeUnit(Protocol):
    """One unit of a submission's code: the module body, or a notebook cell."""

    @property
    def label(self) -> str: ...
    @property
    def cell(self) -> int | None: ...
    @property
    def source(self) -> str: ...


class Submission(Protocol):
    """What a sandbox reads of a loaded submission (``grader.submission.load.LoadedSubmission``)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def units(self) -> Sequence[CodeUnit]: ...
    @property
    def files(self) -> dict[str, bytes]: ...
    @property
    def error(self) -> Msg | None: ...


def main_name(sub: Submission) -> str:
    """The file name the submission's code runs as (its ``__file__`` and ``sys.argv[0]``)."""
    if sub.kind == "ipynb":
        return os.path.basename(sub.path)
    units = sub.units
    if units and units[0].cell is None:
        return os.path.basename(units[0].label)
    return "submission.py"


def write_files(scratch: str, files: dict[str, bytes]) -> None:
    """A folder or zip submission's other files, into the worker's scratch dir."""
    for rel, data in files.items():
        norm = os.path.normpath(rel)
        if os.path.isabs(norm) or norm.startswith("..") or "\x00" in norm:
            raise SandboxError(f"refusing to write {rel!r} outside the scratch dir")
        dest = os.path.join(scratch, norm)
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
        except OSError as e:  # the message names the submission's path, never the host's scratch dir
            why = e.strerror or type(e).__name__
            raise SandboxError(f"cannot write the submission's file {rel!r}: {why}") from None
