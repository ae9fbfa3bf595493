"""What the run asks of a back-end (local threads or slot processes, or a Dask cluster): start
its slots, then grade the submissions, handing each result to the `Tally` (the one place that
records them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from contextlib import AbstractContextManager
from typing import Protocol

from grader.batch.recording import Tally
from grader.records.ledger import LedgerKey
from grader.submission.load import LoadedSubmission

Todo = list[tuple[LedgerKey, LoadedSubmission]]


@dataclass(frozen=True)
class Ready:
    """The back-end's slots are up."""

    isolation: str
    """The sandbox level they grade with (recorded in the run)."""
    message: str
    """What the "ready" event says (the isolation, and where for a cluster)."""
    slots: int
    warning: str = ""
    """Said once at start-up when the sandbox bounds less than it should (no cgroup could be
    written: memory only polled, no process or CPU cap); "" otherwise."""


class Backend(Protocol):
    def start(self, total: int, stop: threading.Event) -> AbstractContextManager[Ready]:
        """Start the slots for `total` submissions; on exit, `stop` is set and everything is closed."""
        ...

    def grade(self, todo: Todo, tally: Tally, stop: threading.Event) -> None:
        """Grade `todo`, `tally.take` each result once, in this thread; after `stop` is set, start
        nothing new and return when what runs is finished."""
        ...
