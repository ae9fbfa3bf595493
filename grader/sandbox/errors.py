"""Errors raised by `Worker` methods (all are `SandboxError`s), and why a worker died, in words.

The second half is pure: from what the supervisor reported (its status line), the cgroup's OOM
count and the `Limits`, to a `WorkerCrashed` / message. The same death always gives the same message.
"""

from __future__ import annotations

import enum
import errno
import signal

from grader.i18n import Msg, tr, verbatim
from grader.sandbox.limits import GiB, Limits


class SandboxError(Exception):
    """Base class: something went wrong running the submission in its worker."""


class EnvironmentBroken(SandboxError):
    """The jail on this machine cannot run correct code (the self-test failed): grade nothing."""


class StudentError(SandboxError):
    """The student's code raised. `traceback` is cut to the student's own frames."""

    def __init__(self, exc_type: str, message: str, traceback: str = ""):
        super().__init__(f"{exc_type}: {message}" if message else exc_type)
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback


class WorkerTimeout(SandboxError):
    """The worker ran past a wall-clock limit and was killed (with everything it started)."""

    def __init__(self, phase: Msg | str, seconds: float):
        self.text = tr("time limit of {seconds} s exceeded while {phase}", seconds=format(seconds, "g"), phase=phase)
        """What the student reads, translatable."""
        super().__init__(str(self.text))
        self.phase = str(phase)
        """What the worker was doing, in English (``text`` holds it translatable)."""
        self.seconds = seconds


class CrashKind(str, enum.Enum):
    """How a worker died (`WorkerCrashed.kind`)."""

    MEMORY = "memory"
    """Over its memory limit (the cgroup's OOM kill, or the RSS poll)."""
    SIGNAL = "signal"
    """Killed by a signal (its CPU time limit among them)."""
    EXIT = "exit"
    """Its process exited or stopped while a request was outstanding."""
    OUTPUT = "output"
    """Printed past the output limit."""
    DISK = "disk"
    """Wrote more than its scratch space may hold."""


class WorkerCrashed(SandboxError):
    """The worker died or was stopped; `kind` says how, `text` what the student reads."""

    def __init__(self, kind: CrashKind, message: Msg):
        super().__init__(str(message))
        self.kind = kind
        self.text = message


class WireError(SandboxError):
    """Bytes on the channel that do not form a valid frame or value."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# --- why a worker died, in words for the student ---------------------------------------------

DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""A student error with one of these errnos means the worker hit its disk limits."""


def crash(status: dict, *, oom_killed: bool, limits: Limits, phase: Msg | str) -> WorkerCrashed:
    """The channel closed while `phase`: how the worker died, from the supervisor's exit report
    (``{"signal": n}``, ``{"exit": n}`` or nothing) and whether its memory cgroup killed it."""
    st = status
    if oom_killed:
        err = WorkerCrashed(CrashKind.MEMORY, memory_message(limits, phase))
    elif "signal" in st:
        sig = st["signal"]
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        if sig == signal.SIGXCPU:
            err = WorkerCrashed(CrashKind.SIGNAL, tr("the worker used up its CPU time while {phase}", phase=phase))
        else:
            err = WorkerCrashed(CrashKind.SIGNAL, tr("the worker was killed by {signal} while {phase}", signal=name,
                                             phase=phase))
    elif "exit" in st:
        err = WorkerCrashed(CrashKind.EXIT, tr("the submission's process exited (exit code {code}) while {phase}; code "
                                       "that calls os._exit() or exit() stops its own grading",
                                       code=st["exit"], phase=phase))
    else:
        err = WorkerCrashed(CrashKind.EXIT, tr("the worker stopped while {phase}", phase=phase))
    return err


def disk_message(limits: Limits) -> Msg:
    return tr("your code wrote more than its files may hold ({total} MiB and {files} files in all, {one} MiB in "
              "one file), so it was stopped", total=limits.scratch_bytes >> 20, files=limits.scratch_files,
              one=limits.max_file_bytes >> 20)


def memory_message(limits: Limits, phase: Msg | str) -> Msg:
    return tr("the worker went over its memory limit of {gib} GiB while {phase}",
              gib=format(limits.memory_bytes / GiB, ".2g"), phase=phase)


def load_failure_message(e: SandboxError) -> Msg:
    if isinstance(e, WorkerTimeout):
        return tr("Loading the submission took longer than {seconds} s. Move long-running code (training loops, "
                  "demos) out of the top level or behind `if __name__ == \"__main__\":`.", seconds=format(e.seconds, "g"))
    # The reason alone: whoever shows it already says that the submission could not be loaded.
    text = getattr(e, "text", None)
    return text if isinstance(text, Msg) else verbatim(str(e))
