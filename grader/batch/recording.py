"""The output folder of a run and what is written into it, by the one thread that writes.

The folder is created and proved writable, then held with an exclusive lock (`<out>/.grader.lock`,
flock) for the length of the run, so two runs never write one folder (`OutputLock`). Each result
is recorded in this order: ledger entry (committed, holding the result), JSON file (temp file +
rename), HTML, gradebook row (committed). A batch stopped at any point therefore resumes by
grading only what has no ledger entry, and restores any JSON file the stop left missing: nothing
is lost, nothing recorded twice.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from collections.abc import Callable

from grader.batch.config import BatchConfig, BatchResult, Event, EventKind, Todo
from grader.errors import GradebookBusy, OutputNotWritable
from grader.records.gradebook import Gradebook
from grader.records.ledger import Ledger, LedgerKey
from grader.report import write_result_json, write_submission
from grader.report.dashboard import report_filename
from grader.report.outdir import writable_dir
from grader.results import GradeReport, to_dict
from grader.submission.load import LoadedSubmission
from grader.timings import mark

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


def reuse(cfg: BatchConfig, ledger: Ledger, book: Gradebook, run_id: int, keys: list[LedgerKey],
          subs: list[LoadedSubmission], result: BatchResult) -> Todo:
    """Record what the ledger already holds (restoring a missing or different JSON file); return
    what is left to grade. Files graded before by something else are counted in
    ``result.regraded`` by what changed."""
    todo: Todo = []
    for key, sub in zip(keys, subs):
        if cfg.force:
            todo.append((key, sub))
            continue
        found = ledger.lookup(key)
        prior = found.report
        if prior is None:
            if found.changed:
                result.regraded[found.changed] = result.regraded.get(found.changed, 0) + 1
            todo.append((key, sub))
            continue
        path = cfg.out_dir / "results" / f"{report_filename(key.student_id)}.json"
        if not _same_json(path, prior):
            write_result_json(prior, path.parent)
        result.recorded[path.name] = prior
        book.record(run_id, prior, reused=True)
        result.reused += 1
        result.failed_to_load += not prior.load.ok
    return todo


def _same_json(path: Path, report: GradeReport) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")) == to_dict(report)
    except (OSError, ValueError):
        return False


@dataclass
class Tally:
    """Takes each finished submission, in the recording thread: counts it, records it, reports it.
    One place for every back-end (threads, slot processes, Dask)."""

    cfg: BatchConfig
    ledger: Ledger
    book: Gradebook
    run_id: int
    result: BatchResult
    on_event: Callable[[Event], None]
    total: int
    done: int = 0
    failing: int = 0

    def take(self, key: LedgerKey, report: GradeReport | None, seconds: float, error: str,
             data: dict | None = None) -> None:
        """`data`: ``to_dict(report)`` when the caller already has it."""
        mark("result")
        if report is not None and (report.submission.id, report.submission.sha256) != (key.student_id, key.sha256):
            error = (f"its result names {report.submission.id!r} (sha256 {report.submission.sha256[:12]}), "
                     "not the submission sent: a result is filed only under its own job")
            report = None
        self.done += 1
        if report is None:  # a grader fault: not recorded, retried by the next run
            self.failing += 1
            self.result.errors.append((key.student_id, error))
            self.on_event(Event(EventKind.ERROR, self.done, self.total, key.student_id, None, seconds, self.failing, error))
            return
        written = record(self.cfg, self.ledger, self.book, self.run_id, key, report, data)
        self.result.pages_written.add(report.submission.id)
        self.result.recorded[written.name] = report
        self.result.graded += 1
        self.result.failed_to_load += not report.load.ok
        self.failing += report.score.earned < report.score.possible
        self.on_event(Event(EventKind.GRADED, self.done, self.total, key.student_id, report, seconds, self.failing))


def record(cfg: BatchConfig, ledger: Ledger, book: Gradebook, run_id: int, key: LedgerKey,
           report: GradeReport, data: dict | None = None) -> Path:
    """Record one graded submission: ledger, JSON, HTML, gradebook (in that order, see above).
    Returns the results file written."""
    # The ledger first: it is the source of truth. A crash after it and before the JSON is written is
    # repaired by the next run (which restores the JSON from the ledger); before it, nothing is kept.
    data = to_dict(report) if data is None else data
    ledger.record(key, report, data)
    try:
        written = write_result_json(report, cfg.out_dir / "results", data)
        write_submission(report, cfg.out_dir / f"{report_filename(report.submission.id)}.html",
                         release_hidden=cfg.release_hidden)
    except OSError as e:
        raise OutputNotWritable(f"cannot write {report.submission.id}'s result in {cfg.out_dir}: "
                                f"{e.strerror or e}") from e
    book.record(run_id, report, reused=False)
    return written
