"""The instructor's batch: grade a class's submissions in parallel into one output folder.

    discover -> load (hash) -> ledger lookup -> N slots (own Sandbox + Engine, shared setups)
             -> per result: results/<id>.json (atomic), <id>.html, ledger, gradebook
             -> at the end: dashboard and exports over every result in the folder

Every result is recorded by the main thread as soon as its slot hands it over, in this order:
ledger entry (committed, holding the result), JSON file (temp file + rename), HTML, gradebook row
(committed). A batch stopped at any point therefore resumes by grading only what has no ledger
entry, and restores any JSON file the stop left missing: nothing is lost, nothing recorded twice. The first Ctrl-C (SIGINT/SIGTERM) lets the submissions in progress
finish and be recorded, then stops; a second one stops at once.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import queue
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

import torch

from grader import __version__
from grader.batch import slots
from grader.assignment.spec import Assignment
from grader.submission.discover import discover
from grader.grading.call_plan import learn_calls
from grader.grading.engine import Engine, limits_for
from grader.errors import GradebookBusy, GraderError, OutputNotWritable
from grader.records.gradebook import GRADEBOOK_NAME, Gradebook
from grader.records.ledger import Ledger, LedgerKey, mode_of
from grader.submission.load import LoadedSubmission, load_submission
from grader.report.outdir import writable_dir
from grader.report import RunInfo, load_results, write_all, write_result_json, write_submission
from grader.report.dashboard import report_filename
from grader.results import GradeReport, to_dict
from grader.sandbox import Limits, Sandbox

LOCK_NAME = ".grader.lock"


@dataclass(frozen=True)
class BatchConfig:
    assignment: Assignment
    paths: list[Path]
    out_dir: Path
    jobs: int = 1
    force: bool = False
    """Grade again even what the ledger already holds."""
    release_hidden: bool = False
    device: str = "auto"
    gradebook: Path | None = None
    """Default: <out_dir>/gradebook.sqlite."""
    wait: bool = False
    """Wait for another run holding the output folder instead of failing."""
    debug: bool = False
    """Add the traceback to the message of a submission the grader could not grade."""
    cluster: str | None = None
    """Grade on a Dask cluster instead of local slots: "local:N" or a scheduler address (grader.batch.cluster)."""


@dataclass(frozen=True)
class Event:
    """Progress, for the command to show: one per finished submission (kind "graded" or "error")."""

    kind: str
    """"waiting" (for another run's lock; message says whose), "plan" (before grading), "ready" (the
    sandboxes started: seconds it took, message the isolation), "graded", "error" (the grader could
    not grade it; message says why) or "stopping"."""
    done: int
    total: int
    """Submissions to grade in this run (those the ledger already holds are not counted)."""
    student_id: str = ""
    report: GradeReport | None = None
    seconds: float = 0.0
    failing: int = 0
    """Graded so far below 100 % (or not graded because of a grader error)."""
    message: str = ""
    reused: int = 0
    """(plan) Submissions taken from the ledger instead of graded; (ready) number of slots."""


@dataclass(frozen=True)
class ConceptRate:
    concept: str
    students: int
    """Students failing at least one case of this concept."""
    total: int

    @property
    def percent(self) -> float:
        return 100.0 * self.students / self.total if self.total else 0.0


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    failed_to_load: int
    concept_rates: list[ConceptRate]
    """Most failed first."""


@dataclass
class BatchResult:
    out_dir: Path
    found: int = 0
    graded: int = 0
    reused: int = 0
    failed_to_load: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    """(student id, message) of submissions the grader could not grade (not recorded; retried next run)."""
    interrupted: bool = False
    dashboard: Path | None = None
    summary: Summary | None = None
    earlier: int = 0
    """Results in the folder from earlier runs for students not in this batch (shown on the dashboard too)."""
    gradebook: Path | None = None
    isolation: str = ""
    """The sandbox level the slots ran with (empty when nothing was graded)."""
    elapsed_s: float = 0.0
    pages_written: set[str] = field(default_factory=set)
    """Submission ids whose HTML page this run wrote as it graded them (not rendered again at the end)."""


def summarize(reports: list[GradeReport]) -> Summary:
    """Mean and median percent, load failures, and the share of students failing each concept."""
    percents = [r.score.percent for r in reports]
    counts: dict[str, int] = {}
    for r in reports:
        for c in r.concepts_failed():
            counts[c] = counts.get(c, 0) + 1
    rates = [ConceptRate(c, k, len(reports)) for c, k in counts.items()]
    rates.sort(key=lambda x: (-x.students, x.concept))
    return Summary(len(reports), statistics.fmean(percents) if percents else 0.0,
                   statistics.median(percents) if percents else 0.0,
                   sum(not r.load.ok for r in reports), rates)


# --- the output folder --------------------------------------------------------------------------

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

    def __enter__(self) -> "OutputLock":
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


class _Interrupts:
    """SIGINT/SIGTERM: the first sets a flag (finish what is running), the second raises KeyboardInterrupt."""

    def __init__(self, on_first: Callable[[], None]):
        self.requested = False
        self._on_first = on_first
        self._saved: dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._on_first()

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._saved.items():
            signal.signal(sig, old)


# --- the run ------------------------------------------------------------------------------------

def run_batch(cfg: BatchConfig, on_event: Callable[[Event], None] = lambda e: None) -> BatchResult:
    """Grade `cfg.paths` into `cfg.out_dir`. Raises GraderError subclasses for operator errors."""
    from grader.device import resolve_device

    t0 = time.perf_counter()
    a = cfg.assignment
    spec = _cluster_spec(cfg)
    try:
        dev = resolve_device(cfg.device) if spec is None else _cluster_device(spec, cfg.device)
    except ValueError as e:
        raise GraderError(str(e)) from e
    out = prepare_output(cfg.out_dir)
    result = BatchResult(out_dir=out, gradebook=cfg.gradebook or out / GRADEBOOK_NAME)
    with OutputLock(out, wait=cfg.wait, on_wait=lambda h: on_event(Event("waiting", 0, 0, message=h))):
        found = discover(cfg.paths, assignment_id=a.id, main_module=a.main_module, exclude=out)
        result.found = len(found.submissions)
        subs = [load_submission(f.path, main_module=a.main_module, cell_tag=a.cell_tag) for f in found.submissions]
        mode = mode_of(public_only=False, device=dev.type)
        keys = [LedgerKey(f.id, s.sha256, a.id, a.version, __version__, mode) for f, s in zip(found.submissions, subs)]
        try:
            result.gradebook.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputNotWritable(f"cannot create the gradebook's folder {result.gradebook.parent}: "
                                    f"{e.strerror or e}") from e
        with Ledger(out) as ledger, Gradebook(result.gradebook) as book:
            run_id = book.start_run(assignment=a.id, version=a.version, grader_version=__version__,
                                    device=str(dev), isolation="", out_dir=str(out.resolve()))
            status = "failed"
            try:
                todo = _reuse(cfg, ledger, book, run_id, keys, subs, result)
                if spec is None:
                    _grade_all(cfg, dev, todo, ledger, book, run_id, result, on_event)
                else:
                    _grade_on_cluster(cfg, spec, dev, todo, ledger, book, run_id, result, on_event)
                status = "interrupted" if result.interrupted else "complete"
            except KeyboardInterrupt:
                status, result.interrupted = "interrupted", True
                raise
            finally:
                book.finish_run(run_id, status=status, isolation=result.isolation, graded=result.graded,
                                reused=result.reused, failed_to_load=result.failed_to_load, errors=len(result.errors))
        if not result.interrupted:
            _write_outputs(cfg, found_ids={f.id for f in found.submissions}, result=result)
    result.elapsed_s = time.perf_counter() - t0
    return result


def _reuse(cfg: BatchConfig, ledger: Ledger, book: Gradebook, run_id: int, keys: list[LedgerKey],
           subs: list[LoadedSubmission], result: BatchResult) -> list[tuple[LedgerKey, LoadedSubmission]]:
    """Record what the ledger already holds; return what is left to grade."""
    todo = []
    for key, sub in zip(keys, subs):
        prior = None if cfg.force else ledger.lookup(key)
        if prior is None:
            todo.append((key, sub))
            continue
        path = cfg.out_dir / "results" / f"{report_filename(key.student_id)}.json"
        if not _same_json(path, prior):
            write_result_json(prior, path.parent)
        book.record(run_id, prior, reused=True)
        result.reused += 1
        result.failed_to_load += not prior.load.ok
    return todo


def _same_json(path: Path, report: GradeReport) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")) == to_dict(report)
    except (OSError, ValueError):
        return False


def _grade_all(cfg: BatchConfig, dev: torch.device, todo: list[tuple[LedgerKey, LoadedSubmission]],
               ledger: Ledger, book: Gradebook, run_id: int, result: BatchResult,
               on_event: Callable[[Event], None]) -> None:
    total = len(todo)
    on_event(Event("plan", 0, total, reused=result.reused))
    if not todo:
        return
    n = min(cfg.jobs, total)
    forked = n > 1 and dev.type == "cpu" and sys.platform.startswith("linux")  # fork()-safe there
    stop = threading.Event()
    t_start = time.perf_counter()
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # N slots on few cores: one grader thread each avoids oversubscription
    sandbox: Sandbox | None = None
    try:
        with _Interrupts(lambda: (stop.set(), on_event(Event("stopping", 0, total)))) as interrupts:
            sandbox = _start_sandbox(limits_for(cfg.assignment), str(dev))
            engines = _engines(cfg.assignment, sandbox, dev, 1 if forked else n, learn=True)
            _freeze_heap()
            result.isolation = sandbox.isolation
            on_event(Event("ready", 0, total, seconds=time.perf_counter() - t_start, message=result.isolation,
                           reused=n))
            tally = _Tally(cfg, ledger, book, run_id, result, on_event, total)
            if forked:
                slots.run(engines[0], todo, n, tally, stop, cfg.debug)
            else:
                _grade_in_threads(engines, todo, tally, stop, cfg.debug)
            result.interrupted = interrupts.requested and tally.done < total
    finally:
        stop.set()
        if sandbox is not None:
            sandbox.close()
        torch.set_num_threads(saved_threads)


def _grade_in_threads(engines: list[Engine], todo: list[tuple[LedgerKey, LoadedSubmission]], tally: "_Tally",
                      stop: threading.Event, debug: bool) -> None:
    """One grading thread per engine; results are recorded here, in the calling thread."""
    jobs: queue.Queue = queue.Queue()
    for item in todo:
        jobs.put(item)
    done_q: queue.Queue = queue.Queue()
    threads = [threading.Thread(target=_slot, args=(e, jobs, done_q, stop, debug), daemon=True,
                                name=f"grade-slot-{i}") for i, e in enumerate(engines)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) or not done_q.empty():
        try:
            tally.take(*done_q.get(timeout=0.1))
        except queue.Empty:
            continue


# --- --cluster: the same recording, tasks on Dask workers (grader/batch/cluster.py) -------------------

def _cluster_spec(cfg: BatchConfig):
    if cfg.cluster is None:
        return None
    from grader.batch.cluster import parse_spec

    return parse_spec(cfg.cluster)


def _cluster_device(spec, name: str) -> torch.device:
    from grader.batch.cluster import device_for

    return device_for(spec, name)


def _grade_on_cluster(cfg: BatchConfig, spec, dev: torch.device, todo: list[tuple[LedgerKey, LoadedSubmission]],
                      ledger: Ledger, book: Gradebook, run_id: int, result: BatchResult,
                      on_event: Callable[[Event], None]) -> None:
    """Like `_grade_all`, with Dask workers for slots; each key is recorded once, whatever Dask re-runs."""
    from grader.batch.cluster import ClusterPool

    total = len(todo)
    on_event(Event("plan", 0, total, reused=result.reused))
    if not todo:
        return
    stop = threading.Event()
    t_start = time.perf_counter()
    recorded: set[LedgerKey] = set()
    tally = _Tally(cfg, ledger, book, run_id, result, on_event, total)
    with _Interrupts(lambda: (stop.set(), on_event(Event("stopping", 0, total)))) as interrupts, \
            ClusterPool(spec, cfg.assignment, dev, debug=cfg.debug) as pool:
        result.isolation = pool.isolation
        on_event(Event("ready", 0, total, seconds=time.perf_counter() - t_start,
                       message=f"{pool.isolation} on {pool.workers} Dask worker(s) at {spec}", reused=pool.workers))
        for key, report, seconds, error in pool.grade(todo, stop):
            if key in recorded:  # Dask may re-run a task whose worker died after it finished
                continue
            if report is not None:
                recorded.add(key)
            tally.take(key, report, seconds, error)
        result.interrupted = interrupts.requested and tally.done < total


@dataclass
class _Tally:
    """Takes each finished submission, in the recording thread: counts it, records it, reports it.
    One place for the local slots and the Dask path."""

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
        self.done += 1
        if report is None:  # a grader fault: not recorded, retried by the next run
            self.failing += 1
            self.result.errors.append((key.student_id, error))
            self.on_event(Event("error", self.done, self.total, key.student_id, None, seconds, self.failing, error))
            return
        _record(self.cfg, self.ledger, self.book, self.run_id, key, report, data)
        self.result.pages_written.add(report.submission.id)
        self.result.graded += 1
        self.result.failed_to_load += not report.load.ok
        self.failing += report.score.earned < report.score.possible
        self.on_event(Event("graded", self.done, self.total, key.student_id, report, seconds, self.failing))


def _record(cfg: BatchConfig, ledger: Ledger, book: Gradebook, run_id: int, key: LedgerKey,
            report: GradeReport, data: dict | None = None) -> None:
    # The ledger first: it is the source of truth. A crash after it and before the JSON is written is
    # repaired by the next run (which restores the JSON from the ledger); before it, nothing is kept.
    data = to_dict(report) if data is None else data
    ledger.record(key, report, data)
    try:
        write_result_json(report, cfg.out_dir / "results", data)
        write_submission(report, cfg.out_dir / f"{report_filename(report.submission.id)}.html",
                         release_hidden=cfg.release_hidden)
    except OSError as e:
        raise OutputNotWritable(f"cannot write {report.submission.id}'s result in {cfg.out_dir}: "
                                f"{e.strerror or e}") from e
    book.record(run_id, report, reused=False)


def _start_sandbox(limits: Limits, device: str) -> Sandbox:
    """One sandbox (one warm zygote) for every slot: a Sandbox is thread-safe and can be shared
    with forked slots, spawns are serialised at the zygote (~1 ms each) and a second zygote would
    cost ~1 s of CPU at start-up and ~300 MB of RSS."""
    try:
        return Sandbox(limits, device=device)
    except Exception as e:  # noqa: BLE001
        raise GraderError(f"the sandbox could not start: {e}") from e


def _engines(a: Assignment, sandbox: Sandbox, dev: torch.device, n: int, *, learn: bool = False) -> list[Engine]:
    """`n` engines on `sandbox`, sharing one computation of the reference setups and, with `learn`,
    one call plan learned from the trusted reference."""
    engines = [Engine(a, sandbox, device=dev) for _ in range(n)]
    engines[0].prepare()
    if learn:
        learn_calls(engines[0], a)
    for e in engines[1:]:
        e.share_setups_from(engines[0])
    return engines


def _freeze_heap() -> None:
    """Keep what exists now (torch, the reference setups) out of every later cyclic collection:
    a full collection over torch's objects costs ~50 ms, and grading allocates enough to trigger one
    every few submissions. (No collection first: ~0.15 s before the first result, for little garbage.)"""
    gc.freeze()


def _slot(engine: Engine, jobs: queue.Queue, done_q: queue.Queue, stop: threading.Event, debug: bool) -> None:
    """One grading thread: take submissions until none are left or a stop is requested."""
    while not stop.is_set():
        try:
            key, sub = jobs.get_nowait()
        except queue.Empty:
            return
        done_q.put((key, *slots.grade_one(engine, key, sub, debug)))


def _write_outputs(cfg: BatchConfig, *, found_ids: set[str], result: BatchResult) -> None:
    """Dashboard and exports over every result of this assignment in the folder."""
    a = cfg.assignment
    results_dir = cfg.out_dir / "results"
    if not any(results_dir.glob("*.json")):
        return
    reports = [r for r in load_results(results_dir) if r.assignment.id == a.id]
    if not reports:
        return
    run = RunInfo(assignment=a.id, version=a.version, title=a.title, grader_version=__version__,
                  isolation=", ".join(sorted({r.environment.isolation for r in reports})))
    written = write_all(reports, cfg.out_dir, run=run, release_hidden=cfg.release_hidden, write_results=False,
                        pages_current=result.pages_written)
    result.dashboard = written.index
    result.summary = summarize(reports)
    result.earlier = sum(r.submission.id not in found_ids for r in reports)
