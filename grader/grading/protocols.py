"""What grading needs of a sandbox and of its workers (`grader.sandbox.Sandbox` and ``Worker``
are the real ones; the benchmarks' in-process floor and the tests bring their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from grader.i18n import Msg
from grader.sandbox import Limits
from grader.submission.load import LoadedSubmission

if TYPE_CHECKING:
    from grader.sandbox.host.reports import LoadReport


class GradingWorker(Protocol):
    """One worker running one submission's code."""

    load: LoadReport
    """What loading the submission's code gave: ok, message, failure, cell_errors."""
    reply_cap: int | None
    """The largest reply the next call may send, in bytes (None: the limits' own cap)."""

    @property
    def alive(self) -> bool: ...

    def output(self) -> tuple[str, str]: ...

    def describe_all(self, names: list[str]) -> dict[str, Any]: ...

    def retire(self) -> None: ...

    def close(self) -> None: ...


class GradingSandbox(Protocol):
    """Where workers come from."""

    @property
    def limits(self) -> Limits: ...

    @property
    def isolation(self) -> str:
        """The isolation level's name, as every report records it."""
        ...

    @property
    def limits_note(self) -> Msg | str:
        """What bounds each worker's resources, in plain words (every report records it)."""
        ...

    def open(self, sub: LoadedSubmission, *, started: Any = None) -> GradingWorker: ...

    def start(self, sub: LoadedSubmission) -> Any: ...
