"""What a batch writes and says at the end: the similarity report over this run's submissions
(the starter left out), then the dashboard and exports over every result of the assignment in the
folder, and the summary for the terminal.

The similarity report reads only what `grader.submission.load` already read (the code units,
bounded, never executed) and the assignment's own starter files; it compares in
`grader.similarity` and writes with `grader.report.similarity_page`.
"""

from __future__ import annotations

import os
import pickle
import signal
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import __version__
from grader.assignment.kit import starter_files
from grader.assignment.spec import Assignment
from grader.batch.config import BatchConfig, BatchResult, ConceptRate, Summary
from grader.report import RunInfo, load_results, write_all
from grader.report.similarity_page import write_similarity
from grader.results import GradeReport
from grader.similarity.fingerprint import MAX_CHARS, fingerprints, normalised_tokens
from grader.similarity.pairs import Document, ranked_pairs
from grader.submission.load import LoadedSubmission, load_submission


def write_outputs(cfg: BatchConfig, *, subs: dict[str, LoadedSubmission], result: BatchResult,
                  starters: list[LoadedSubmission] | None = None) -> None:
    """Similarity over this run's submissions, then the dashboard and exports over every result of
    this assignment in the folder; `result` says what was written, and the summary. `starters`:
    the assignment's starter files as read already (`grader.assignment.kit.starter_files`); None:
    read them now."""
    a = cfg.assignment
    results_dir = cfg.out_dir / "results"
    if not any(results_dir.glob("*.json")):
        return
    reports = [r for r in load_results(results_dir, known=result.recorded) if r.assignment.id == a.id]
    if not reports:
        return
    similarity = None
    if cfg.similarity and len(subs) >= 2:
        similarity = Aside(lambda: write_batch_similarity(a, subs, reports, cfg.out_dir, lang=cfg.dashboard_lang,
                                                          starters=starters))
    try:
        run = RunInfo(assignment=a.id, version=a.version, title=a.title, grader_version=__version__,
                      isolation=", ".join(sorted({r.environment.isolation for r in reports})))
        written = write_all(reports, cfg.out_dir, run=run, release_hidden=cfg.release_hidden, write_results=False,
                            pages_current=result.pages_written, lang=cfg.lang, dashboard_lang=cfg.dashboard_lang,
                            canvas_column=cfg.canvas_column, similarity=True if similarity is not None else None)
    except BaseException:  # Ctrl-C or a failed export: stop the child, do not redo its work
        if similarity is not None:
            similarity.cancel()
        raise
    if similarity is not None:
        result.similarity, _, result.similar_pairs = similarity.result()
    result.dashboard = written.index
    result.lms = written.lms
    result.summary = summarize(reports)
    result.earlier = sum(r.submission.id not in subs for r in reports)


class Aside:
    """`fn()` run in a forked child while this process goes on, so that the end of a batch uses
    both cores (the similarity report beside the dashboard and exports: ~0.2 s of 0.5 for a class
    of 40). Only on Linux and with this process down to one thread, so no lock the child needs
    can be held by a thread that is not there; elsewhere, or when the child fails in any way,
    `result()` runs `fn` here (and raises what it raises)."""

    def __init__(self, fn: Callable[[], Any]):
        self._fn = fn
        self._pid = 0
        self._read = -1
        if not sys.platform.startswith("linux") or threading.active_count() != 1:
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            try:
                os.close(read)
                data = pickle.dumps(fn())
                with os.fdopen(write, "wb") as f:
                    f.write(data)
            finally:
                os._exit(0)
        os.close(write)
        self._pid, self._read = pid, read

    def result(self) -> Any:
        if self._pid:
            with os.fdopen(self._read, "rb") as f:
                data = f.read()
            os.waitpid(self._pid, 0)
            self._pid = 0
            try:
                return pickle.loads(data)
            except Exception:  # noqa: BLE001 - the child died or failed: do it here
                pass
        return self._fn()

    def cancel(self) -> None:
        """Stop the child, if any, and reap it; `result()` is not to be called after."""
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            os.close(self._read)
            self._pid = 0


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


def document(student_id: str, sub: LoadedSubmission) -> Document:
    units, labels, budget = [], [], MAX_CHARS
    for u in sub.units:
        if budget <= 0:
            break
        units.append(u.source[:budget])
        labels.append(u.label)
        budget -= len(units[-1])
    return Document(student_id, units, labels, fingerprints(normalised_tokens(units)))


def starter_documents(assignment: Assignment, loaded: list[LoadedSubmission] | None = None) -> list[Document]:
    """The starter files as the similarity report reads them; `loaded`: those files read already
    (a batch has its intake read them beside the sandbox's start, instead of importing nbformat here
    at the end)."""
    if loaded is None or any(s.error for s in loaded):  # what the intake could not read, read here
        loaded = [load_submission(path, main_module=assignment.main_module, cell_tag=assignment.cell_tag)
                  for path in starter_files(assignment.dir)]
    return [document("starter", s) for s in loaded]


def write_batch_similarity(assignment: Assignment, subs: dict[str, LoadedSubmission], reports: list[GradeReport],
                           out_dir: Path, *, lang: str | None = None,
                           starters: list[LoadedSubmission] | None = None) -> tuple[Path, Path, int]:
    """similarity.html and .csv over `subs` (student id -> what was loaded) and their reports;
    returns both paths and the number of pairs listed. `starters`: see `starter_documents`."""
    docs = {sid: document(sid, s) for sid, s in sorted(subs.items()) if not s.error}
    graded = [r for r in reports if r.submission.id in subs]
    starter_docs = starter_documents(assignment, starters)
    hashes = {h for d in starter_docs for h in d.prints.hashes}
    lines = frozenset(line.strip() for d in starter_docs for u in d.units for line in u.splitlines() if line.strip())
    pairs = ranked_pairs(list(docs.values()), hashes, graded)
    page, table = write_similarity(pairs, docs, out_dir, assignment=assignment.id, compared=len(subs),
                                   starter=lines, lang=lang)
    return page, table, len(pairs)
