"""Batch grading on a Dask cluster (`grader grade --cluster`): one task per submission.

    instructor (grader.batch.run)                          each Dask worker process
    ledger hits skipped before submitting              GraderPlugin.setup: the assignment's files
    payload = the submission's bytes, name, kind  -->    -> Sandbox (own warm zygote) + Engine (setups once)
                                                       grade_remote: bytes -> private temp dir -> load
    record each result once, by ledger key        <--    -> Engine.grade -> to_dict(report): plain JSON data

The workers grade exactly as a local run does (same Sandbox, limits and Engine); the instructor's
process stays the only writer of the ledger, gradebook, reports and exports. A worker that dies
costs nothing: Dask runs its task again elsewhere. A task that killed `allowed-failures + 1` workers
comes back as `KilledWorker` and is recorded as that submission's crash. `distributed` is optional
(the `cluster` extra) and imported only by the cluster modules: the back-end here, the --cluster
value in `grader.batch.cluster.spec`, what travels in `grader.batch.cluster.payload`, the worker's side in
`grader.batch.cluster.worker`, the instructor's connection in `grader.batch.cluster.backend`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from grader.batch.backend import Ready, Todo
from grader.batch.config import Event, EventKind
from grader.batch.cluster.backend import ClusterPool
from grader.batch.cluster.spec import ClusterSpec
from grader.batch.recording import Tally
from grader.records.ledger import LedgerKey


class ClusterBackend:
    """The run's slots are the cluster's worker threads; each key is recorded once, whatever Dask re-runs."""

    def __init__(self, spec: ClusterSpec, assignment, device, *, debug: bool = False, lang: str | None = None,
                 accept_isolation: str | None = None):
        self.spec, self.assignment, self.device, self.debug = spec, assignment, device, debug
        self.lang = lang
        self.accept_isolation = accept_isolation
        self.pool = None

    @contextlib.contextmanager
    def start(self, total: int, stop: threading.Event) -> Iterator[Ready]:
        try:
            with ClusterPool(self.spec, self.assignment, self.device, debug=self.debug, lang=self.lang,
                             accept_isolation=self.accept_isolation) as pool:
                self.pool = pool
                yield Ready(pool.isolation, f"{pool.isolation} on {pool.workers} Dask worker(s) at {self.spec}",
                            pool.workers)
        finally:
            stop.set()
            self.pool = None

    def grade(self, todo: Todo, tally: Tally, stop: threading.Event) -> None:
        recorded: set[LedgerKey] = set()
        for key, report, seconds, error in self.pool.grade(todo, stop):
            while self.pool.notices:  # a worker's result refused and graded again here
                tally.on_event(Event(EventKind.WARNING, tally.done, tally.total, key.student_id,
                                     message=self.pool.notices.pop(0)))
            if key in recorded:  # Dask may re-run a task whose worker died after it finished
                continue
            if report is not None:
                recorded.add(key)
            tally.take(key, report, seconds, error)
