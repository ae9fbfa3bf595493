"""The reaper: a thread that finishes killed workers' clean-up off the grading path.

A job handed to it runs on its thread, in order; one job's failure never stops the others.
`stop` returns once every job handed over has run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class Reaper:
    """A thread that finishes retired workers' clean-up (Worker.retire), off the grading path."""

    MAX_BACKLOG = 8

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="grader-sandbox-reaper", daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], None]) -> bool:
        """Run `job` on the thread; False (nothing queued) when the backlog is full."""
        if self._q.qsize() >= self.MAX_BACKLOG:
            return False
        self._q.put(job)
        return True

    def _run(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # noqa: BLE001 - one worker's clean-up must not stop the others'
                pass

    def stop(self) -> None:
        """Finish every retired worker's clean-up, then end the thread."""
        self._q.put(None)
        self._thread.join()
