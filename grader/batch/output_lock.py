"""The output folder of a run: created and proved writable, then held with an exclusive lock
(`<out>/.grader.lock`, flock) for the length of the run, so two runs never write one folder."""

from __future__ import annotations

import fcntl
import os
from datetime import datetime
from pathlib import Path
from collections.abc import Callable

from grader.errors import GradebookBusy, OutputNotWritable
from grader.report.outdir import writable_dir

LOCK_NAME = ".grader.lock"


def prepare_output(out_dir: Path) -> Path:
    """Create the output folder; OutputNotWritable when it cannot be created or written."""
    return writable_dir(out_dir, what="the output folder ", hint="pass -o/--output with a folder you can write to")


class OutputLock:
    """An exclusive lock on `<out>/.grader.lock` (flock) for the length of a run."""

    def __init__(self, out_dir: Path, *, wait: bool = False, on_wait: Callable[[str], None] | None = None,
                 hint: str = "wait for it to finish, or pass --wait to start when it has"):
        self.path = out_dir / LOCK_NAME
        self.wait = wait
        self.hint = hint
        self.on_wait = on_wait
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputNotWritable(f"cannot create {self.path}: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            if not self.wait:
                os.close(fd)
                raise GradebookBusy(f"{self.path.parent} is in use by another grader run ({holder}); "
                                    f"{self.hint}") from None
            if self.on_wait:
                self.on_wait(holder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {datetime.now().strftime('%H:%M:%S')}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
