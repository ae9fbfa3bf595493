"""Errors raised by `Worker` methods; all are `SandboxError`s."""

from __future__ import annotations

from grader.i18n import Msg, tr


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


class WorkerCrashed(SandboxError):
    """The worker died or was stopped: kind is "memory", "signal", "exit", "output" or "disk"."""

    def __init__(self, kind: str, message: Msg | str):
        super().__init__(str(message))
        self.kind = kind
        self.message = str(message)
        self.text = message
        """``message`` as given: translatable when it is a `Msg`."""


class WireError(SandboxError):
    """Bytes on the channel that do not form a valid frame or value."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class OffPlan(BaseException):
    """A request that is not the next frame sent ahead (``Worker.send_ahead``). Not a SandboxError
    and not even an Exception, so that no case's ``except Exception`` can swallow it: the engine
    catches it, starts a fresh worker and runs the case again the straight way."""

    def __init__(self, phase: str):
        super().__init__(f"off the call plan while {phase}")
