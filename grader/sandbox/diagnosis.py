"""Why a worker died, in words for the student: the `SandboxError` each way of dying becomes.

Pure: from what the supervisor reported (its status line), the cgroup's OOM count and the
`Limits`, to a `WorkerCrashed` / message. The same death always gives the same message.
"""

from __future__ import annotations

import errno
import signal

from grader.sandbox.errors import SandboxError, WorkerCrashed, WorkerTimeout
from grader.sandbox.limits import GiB, Limits

DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""A student error with one of these errnos means the worker hit its disk limits."""


def crash(status: dict, *, oom_killed: bool, limits: Limits, phase: str) -> WorkerCrashed:
    """The channel closed while `phase`: how the worker died, from the supervisor's exit report
    (``{"signal": n}``, ``{"exit": n}`` or nothing) and whether its memory cgroup killed it."""
    st = status
    if oom_killed:
        err = WorkerCrashed("memory", memory_message(limits, phase))
    elif "signal" in st:
        sig = st["signal"]
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        if sig == signal.SIGXCPU:
            err = WorkerCrashed("signal", f"the worker used up its CPU time while {phase}")
        else:
            err = WorkerCrashed("signal", f"the worker was killed by {name} while {phase}")
    elif "exit" in st:
        err = WorkerCrashed("exit", f"the submission's process exited (exit code {st['exit']}) while "
                            f"{phase}; code that calls os._exit() or exit() stops its own grading")
    else:
        err = WorkerCrashed("exit", f"the worker stopped while {phase}")
    return err


def disk_message(limits: Limits) -> str:
    return (f"your code wrote more than its files may hold ({limits.scratch_bytes >> 20} MiB and "
            f"{limits.scratch_files} files in all, {limits.max_file_bytes >> 20} MiB in one file), "
            "so it was stopped")


def memory_message(limits: Limits, phase: str) -> str:
    return f"the worker went over its memory limit of {limits.memory_bytes / GiB:.2g} GiB while {phase}"


def load_failure_message(e: SandboxError) -> str:
    if isinstance(e, WorkerTimeout):
        return (f"Loading the submission took longer than {e.seconds:g} s. Move long-running code "
                "(training loops, demos) out of the top level or behind `if __name__ == \"__main__\":`.")
    return f"The submission could not be loaded: {e}"
