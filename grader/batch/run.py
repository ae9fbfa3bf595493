"""The instructor's batch: grade a class's submissions in parallel into one output folder.

    discover -> load (hash) -> ledger lookup -> a back-end's slots: on this machine (grader.batch.local,
                                                   grader.batch.slots) or on a Dask cluster (grader.batch.cluster)
             -> per result: the Tally records it (grader.batch.recording: ledger, JSON, HTML, gradebook)
             -> at the end: similarity, dashboard and exports, the summary (grader.batch.outputs)

Results are recorded by the calling thread as soon as a slot hands them over, in the order
`grader.batch.recording` gives, so a stopped batch resumes by grading only what the ledger does
not hold. The first Ctrl-C (SIGINT/SIGTERM) lets the submissions in progress finish and be
recorded, then stops; a second one stops at once (`Interrupts`).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import torch

from grader import __version__
from grader.assignment.fingerprint import fingerprint
from grader.assignment.kit import starter_files
from grader.batch.config import BatchConfig, BatchResult, Event, EventKind, Ready, Todo
from grader.batch.local import LocalBackend
from grader.batch.recording import OutputLock, Tally, prepare_output, reuse
from grader.errors import GraderError, OutputNotWritable
from grader.records.gradebook import GRADEBOOK_NAME, Gradebook
from grader.records.ledger import Ledger, LedgerKey, mode_of
from grader.submission.discover import discover
from grader.submission.intake import Intake
from grader.timings import mark

if TYPE_CHECKING:
    from grader.assignment.spec import Assignment
    from grader.batch.cluster.spec import ClusterSpec


class Backend(Protocol):
    """What the run asks of a back-end (`grader.batch.local.LocalBackend`, or
    `grader.batch.cluster.backend.ClusterBackend`): start its slots, then grade the submissions,
    handing each result to the `Tally` (the one place that records them)."""

    def start(self, total: int, stop: threading.Event) -> AbstractContextManager[Ready]:
        """Start the slots for `total` submissions; on exit, `stop` is set and everything is closed."""
        ...

    def grade(self, todo: Todo, tally: Tally, stop: threading.Event) -> None:
        """Grade `todo`, `tally.take` each result once, in this thread; after `stop` is set, start
        nothing new and return when what runs is finished."""
        ...


def run_batch(cfg: BatchConfig, on_event: Callable[[Event], None] = lambda e: None) -> BatchResult:
    """Grade `cfg.paths` into `cfg.out_dir`. Raises GraderError subclasses for operator errors."""
    t0 = time.perf_counter()
    with Intake().start() as intake:  # its process starts while the output folder is prepared
        return _run(cfg, on_event, t0, intake)


def _run(cfg: BatchConfig, on_event: Callable[[Event], None], t0: float, intake: Intake) -> BatchResult:
    from grader.device import resolve_device

    a = cfg.assignment
    spec = _cluster_spec(cfg)
    try:
        dev = resolve_device(cfg.device) if spec is None else _cluster_device(spec, cfg.device)
    except ValueError as e:
        raise GraderError(str(e)) from e
    out = prepare_output(cfg.out_dir)
    gradebook = cfg.gradebook or out / GRADEBOOK_NAME
    result = BatchResult(out_dir=out, gradebook=gradebook)
    with OutputLock(out, wait=cfg.wait, on_wait=lambda h: on_event(Event(EventKind.WAITING, 0, 0, message=h))):
        found = discover(cfg.paths, exclude=out, folders_are_submissions=cfg.folders_are_submissions,
                         newest=cfg.newest)
        result.found = len(found.submissions)
        for warning in found.warnings:
            on_event(Event(EventKind.WARNING, 0, 0, message=warning))
        # Each student's files read behind the intake's boundary, never in this loop's process.
        subs = [intake.load(f.path, main_module=a.main_module, cell_tag=a.cell_tag) for f in found.submissions]
        # The starter files too (the similarity report leaves their code out): read by the intake now,
        # beside the sandbox's start, not by this process at the end.
        starters = ([intake.load(p, main_module=a.main_module, cell_tag=a.cell_tag) for p in starter_files(a.dir)]
                    if cfg.similarity and len(subs) >= 2 else None)
        intake.close()
        mark("submissions.read", n=len(subs))
        mode = mode_of(public_only=False, device=dev.type)
        print_ = fingerprint(a)
        keys = [LedgerKey(f.id, s.sha256, a.id, mode, print_) for f, s in zip(found.submissions, subs)]
        try:
            gradebook.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputNotWritable(f"cannot create the gradebook's folder {gradebook.parent}: "
                                    f"{e.strerror or e}") from e
        with Ledger(out) as ledger, Gradebook(gradebook) as book:
            run_id = book.start_run(assignment=a.id, version=a.version, grader_version=__version__,
                                    device=str(dev), isolation="", out_dir=str(out.resolve()))
            status = "failed"
            try:
                todo = reuse(cfg, ledger, book, run_id, keys, subs, result)
                backend: Backend = (LocalBackend(a, dev, cfg.jobs, debug=cfg.debug, lang=cfg.lang,
                                                 accept_isolation=cfg.accept_isolation, cache_dir=cfg.cache_dir,
                                                 isolation=cfg.isolation, batch_cpus=cfg.batch_cpus,
                                                 batch_memory_bytes=cfg.batch_memory_bytes)
                                    if spec is None
                                    else _cluster_backend(spec, a, dev, cfg))
                tally = Tally(cfg, ledger, book, run_id, result, on_event, len(todo))
                _grade(backend, todo, tally, on_event)
                status = "interrupted" if result.interrupted else "complete"
            except KeyboardInterrupt:
                status, result.interrupted = "interrupted", True
                raise
            finally:
                book.finish_run(run_id, status=status, isolation=result.isolation, graded=result.graded,
                                reused=result.reused, failed_to_load=result.failed_to_load, errors=len(result.errors))
        if not result.interrupted:
            # Imported here: the similarity report's modules are needed only now.
            from grader.batch.outputs import write_outputs

            mark("outputs.start")
            write_outputs(cfg, subs={f.id: s for f, s in zip(found.submissions, subs)}, result=result,
                          starters=starters)
            mark("outputs.end")
    result.elapsed_s = time.perf_counter() - t0
    return result


def _grade(backend: Backend, todo: Todo, tally: Tally, on_event: Callable[[Event], None]) -> None:
    """The run loop every back-end shares: plan, start the slots, grade, note an interruption."""
    total, result = len(todo), tally.result
    on_event(Event(EventKind.PLAN, 0, total, reused=result.reused, message=regrade_reasons(tally.cfg.assignment.id,
                                                                                  result.regraded)))
    if not todo:
        return
    stop = threading.Event()
    t_start = time.perf_counter()

    def on_first_interrupt() -> None:
        stop.set()
        on_event(Event(EventKind.STOPPING, 0, total))

    with Interrupts(on_first_interrupt) as interrupts, backend.start(total, stop) as ready:
        result.isolation = ready.isolation
        mark("slots.start")
        if ready.warning:
            on_event(Event(EventKind.WARNING, 0, total, message=ready.warning))
        on_event(Event(EventKind.READY, 0, total, seconds=time.perf_counter() - t_start, message=ready.message,
                       reused=ready.slots))
        backend.grade(todo, tally, stop)
        result.interrupted = interrupts.requested and tally.done < total


_Handler = Callable[[int, FrameType | None], Any] | int | None
"""What `signal.signal` returns and takes: a function, SIG_DFL or SIG_IGN, or None (not set from Python)."""


class Interrupts:
    """SIGINT/SIGTERM: the first sets `requested` and calls `on_first` (finish what is running), the
    second raises KeyboardInterrupt. Installed only from the main thread; restored on exit."""

    def __init__(self, on_first: Callable[[], None]):
        self.requested = False
        self._on_first = on_first
        self._saved: dict[int, _Handler] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._on_first()

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._saved.items():
            signal.signal(sig, old)


_PART_WORDS = {"cases": "the cases", "reference": "the reference", "spec": "the spec.toml", "grader": "the grader"}


def regrade_reasons(assignment: str, regraded: dict[tuple[str, ...], int]) -> str:
    """One line per kind of change: "The cases of masked-attention changed since the last run:
    regrading 26." (empty when the ledger held nothing stale)."""
    lines = []
    for parts, n in sorted(regraded.items(), key=lambda kv: -kv[1]):
        words = [_PART_WORDS.get(p, p) for p in parts]
        what = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        lines.append(f"{what[0].upper()}{what[1:]} of {assignment} changed since the last run: regrading {n}.")
    return "\n".join(lines)


# --- --cluster: the same run, tasks on Dask workers (grader/batch/cluster/), imported only then --

def _cluster_spec(cfg: BatchConfig) -> ClusterSpec | None:
    if cfg.cluster is None:
        return None
    from grader.batch.cluster.spec import TLSFiles, parse_spec

    tls = TLSFiles(*cfg.cluster_tls) if cfg.cluster_tls else None
    return parse_spec(cfg.cluster, tls=tls, insecure=cfg.insecure_cluster)


def _cluster_device(spec: ClusterSpec, name: str) -> torch.device:
    from grader.batch.cluster.spec import device_for

    return device_for(spec, name)


def _cluster_backend(spec: ClusterSpec, a: Assignment, dev: torch.device, cfg: BatchConfig) -> Backend:
    from grader.batch.cluster.backend import ClusterBackend

    return ClusterBackend(spec, a, dev, debug=cfg.debug, lang=cfg.lang, accept_isolation=cfg.accept_isolation)
