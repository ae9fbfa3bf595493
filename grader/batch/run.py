"""The instructor's batch: grade a class's submissions in parallel into one output folder.

    discover -> load (hash) -> ledger lookup -> a back-end's slots (local, or a Dask cluster)
             -> per result: the Tally records it (grader.batch.recording: ledger, JSON, HTML, gradebook)
             -> at the end: dashboard and exports over every result in the folder

Results are recorded by the calling thread as soon as a slot hands them over, in the order
`grader.batch.recording` gives, so a stopped batch resumes by grading only what the ledger does
not hold. The first Ctrl-C (SIGINT/SIGTERM) lets the submissions in progress finish and be
recorded, then stops; a second one stops at once (`grader.batch.interrupts`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

from grader import __version__
from grader.assignment.fingerprint import fingerprint
from grader.batch.backend import Backend, Todo
from grader.batch.config import BatchConfig, BatchResult, Event, EventKind
from grader.batch.interrupts import Interrupts
from grader.batch.local import LocalBackend
from grader.batch.output_lock import OutputLock, prepare_output
from grader.batch.recording import Tally, reuse
from grader.batch.summary import summarize
from grader.errors import GraderError, OutputNotWritable
from grader.records.gradebook import GRADEBOOK_NAME, Gradebook
from grader.records.ledger import Ledger, LedgerKey, mode_of
from grader.report import RunInfo, load_results, write_all
from grader.submission.discover import discover
from grader.submission.intake import Intake
from grader.submission.load import LoadedSubmission
from grader.timings import mark


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
    result = BatchResult(out_dir=out, gradebook=cfg.gradebook or out / GRADEBOOK_NAME)
    with OutputLock(out, wait=cfg.wait, on_wait=lambda h: on_event(Event(EventKind.WAITING, 0, 0, message=h))):
        found = discover(cfg.paths, exclude=out, folders_are_submissions=cfg.folders_are_submissions,
                         newest=cfg.newest)
        result.found = len(found.submissions)
        for warning in found.warnings:
            on_event(Event(EventKind.WARNING, 0, 0, message=warning))
        # Each student's files read behind the intake's boundary, never in this loop's process.
        subs = [intake.load(f.path, main_module=a.main_module, cell_tag=a.cell_tag) for f in found.submissions]
        intake.close()
        mark("submissions.read", n=len(subs))
        mode = mode_of(public_only=False, device=dev.type)
        print_ = fingerprint(a)
        keys = [LedgerKey(f.id, s.sha256, a.id, mode, print_) for f, s in zip(found.submissions, subs)]
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
                todo = reuse(cfg, ledger, book, run_id, keys, subs, result)
                backend = (LocalBackend(a, dev, cfg.jobs, debug=cfg.debug, lang=cfg.lang,
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
            mark("outputs.start")
            _write_outputs(cfg, subs={f.id: s for f, s in zip(found.submissions, subs)}, result=result)
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
    with Interrupts(lambda: (stop.set(), on_event(Event(EventKind.STOPPING, 0, total)))) as interrupts, \
            backend.start(total, stop) as ready:
        result.isolation = ready.isolation
        mark("slots.start")
        if ready.warning:
            on_event(Event(EventKind.WARNING, 0, total, message=ready.warning))
        on_event(Event(EventKind.READY, 0, total, seconds=time.perf_counter() - t_start, message=ready.message,
                       reused=ready.slots))
        backend.grade(todo, tally, stop)
        result.interrupted = interrupts.requested and tally.done < total


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


# --- --cluster: the same run, tasks on Dask workers (grader/batch/cluster.py) -------------------

def _cluster_spec(cfg: BatchConfig):
    if cfg.cluster is None:
        return None
    from grader.batch.cluster.spec import TLSFiles, parse_spec

    tls = TLSFiles(*cfg.cluster_tls) if cfg.cluster_tls else None
    return parse_spec(cfg.cluster, tls=tls, insecure=cfg.insecure_cluster)


def _cluster_device(spec, name: str) -> torch.device:
    from grader.batch.cluster.spec import device_for

    return device_for(spec, name)


def _cluster_backend(spec, a, dev: torch.device, cfg: BatchConfig) -> Backend:
    from grader.batch.cluster import ClusterBackend

    return ClusterBackend(spec, a, dev, debug=cfg.debug, lang=cfg.lang, accept_isolation=cfg.accept_isolation)


def _write_outputs(cfg: BatchConfig, *, subs: dict[str, LoadedSubmission], result: BatchResult) -> None:
    """Similarity over this run's submissions, then the dashboard and exports over every result of
    this assignment in the folder."""
    a = cfg.assignment
    results_dir = cfg.out_dir / "results"
    if not any(results_dir.glob("*.json")):
        return
    reports = [r for r in load_results(results_dir) if r.assignment.id == a.id]
    if not reports:
        return
    found_ids = set(subs)
    if cfg.similarity and len(subs) >= 2:
        from grader.batch.outputs import write_batch_similarity

        result.similarity, _, result.similar_pairs = write_batch_similarity(
            a, subs, reports, cfg.out_dir, lang=cfg.dashboard_lang)
    run = RunInfo(assignment=a.id, version=a.version, title=a.title, grader_version=__version__,
                  isolation=", ".join(sorted({r.environment.isolation for r in reports})))
    written = write_all(reports, cfg.out_dir, run=run, release_hidden=cfg.release_hidden, write_results=False,
                        pages_current=result.pages_written, lang=cfg.lang, dashboard_lang=cfg.dashboard_lang,
                        canvas_column=cfg.canvas_column)
    result.dashboard = written.index
    result.lms = written.lms
    result.summary = summarize(reports)
    result.earlier = sum(r.submission.id not in found_ids for r in reports)
