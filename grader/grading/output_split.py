"""What a submission printed, split where the first hidden case's inputs were about to go to its
worker: before that the student may see it; after it, it may quote hidden inputs, so it is kept
for the instructor only (``LoadInfo.hidden_stdout``)."""

from __future__ import annotations

import os

from grader.grading.protocols import GradingWorker


class OutputSplit:
    """Marks a worker's output once (``mark``), then splits what was printed (``split``)."""

    def __init__(self) -> None:
        self._worker: object | None = None
        self._before: tuple[str, str] | None = None

    def mark(self, worker: GradingWorker) -> None:
        if self._before is None:
            self._worker, self._before = worker, worker.output()

    def split(self, worker: GradingWorker) -> tuple[tuple[str, str], tuple[str, str]]:
        """((stdout, stderr) the student may see, (stdout, stderr) for the instructor only)."""
        now = worker.output()
        if self._before is None:
            return now, ("", "")
        if worker is not self._worker:  # a fresh worker after the mark: all of it came after
            return self._before, now
        after = tuple(n[len(os.path.commonprefix([b, n])):] for b, n in zip(self._before, now))
        return self._before, after  # type: ignore[return-value]
