"""The class dashboard `index.html`: score histogram, failure rates, a table of students, run metadata.

Pure view-model builders plus one render function; the writer is the only I/O.
"""

from __future__ import annotations

import os
import statistics
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any
from pathlib import Path
from urllib.parse import quote

from grader.submission.ids import ID_BYTES, OUTPUT_NAMES, name_hash
from grader.report.html import render_page
from grader.report.outdir import write_text_atomic
from grader.report.text import fmt_points, one_line
from grader.assignment.concepts import builtin
from grader.results import Concept, GradeReport, Outcome
from grader.untrusted import storable
from grader.i18n import DEFAULT, N_, Msg, choose, ntr, tr, translate
from grader.i18n.formats import percent, timestamp

HIST_BINS = 10
HIST_W, HIST_H, HIST_PAD = 560.0, 170.0, 28.0


@dataclass(frozen=True)
class RunInfo:
    """What one grading run was: shown on the dashboard and in the Markdown summary."""

    assignment: str = ""
    version: str = ""
    title: str = ""
    grader_version: str = ""
    date: str = ""
    """ISO 8601 time of the run (defaults to the latest graded_at)."""
    isolation: str = ""
    """Sandbox level(s) used, e.g. "bwrap+cgroup"."""
    public_only: bool = False

    @classmethod
    def from_reports(cls, reports: list[GradeReport]) -> RunInfo:
        """Derive the metadata from the reports themselves (used when re-rendering saved results)."""
        if not reports:
            return cls()
        first = reports[0]
        isolations = sorted({r.environment.isolation for r in reports})
        return cls(first.assignment.id, first.assignment.version, first.assignment.title,
                   first.environment.grader_version, max(r.graded_at for r in reports), ", ".join(isolations),
                   all(r.public_only for r in reports))

    @classmethod
    def coerce(cls, run: RunInfo | Mapping[str, object] | None, reports: list[GradeReport]) -> RunInfo:
        """A RunInfo from a RunInfo, a dict of its fields (unknown keys refused) or None; blanks filled from the reports."""
        base = cls.from_reports(reports)
        if run is None:
            return base
        given = {f.name: getattr(run, f.name) for f in fields(cls)} if isinstance(run, RunInfo) else dict(run)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"unknown run fields {unknown}; known: {sorted(known)}")
        filled = {k: v for k, v in given.items() if v not in (None, "")}
        wrong = sorted(k for k, v in filled.items() if not isinstance(v, type(getattr(base, k))))
        if wrong:
            raise ValueError(f"run fields {wrong} have the wrong type: "
                             + ", ".join(f"{k} is {type(getattr(base, k)).__name__}" for k in wrong))
        return cls._with(base, filled)

    @staticmethod
    def _with(base: RunInfo, changes: Mapping[str, object]) -> RunInfo:
        """`base` with `changes`, each a field of its field's type (checked by the caller, at run time:
        mypy cannot follow field names given as strings)."""
        typed: dict[str, Any] = dict(changes)
        return replace(base, **typed)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    count: int
    label: str
    tooltip: str


@dataclass(frozen=True)
class Rate:
    key: str
    label: str
    sentence: str
    count: int
    total: int
    percent: int
    hidden: bool = False


@dataclass(frozen=True)
class StudentRow:
    id: str
    href: str
    percent: float
    percent_text: str
    points: str
    failing: str
    status: str
    graded_at: str
    load_failed: bool = False
    """The submission could not be loaded (the row is marked; ``status`` says it in words)."""


@dataclass(frozen=True)
class DashboardView:
    run: RunInfo
    n_graded: int
    mean: str
    median: str
    histogram: list[Bar]
    hist_axis_y: float
    concept_rates: list[Rate]
    case_rates: list[Rate]
    students: list[StudentRow]


def report_filename(student_id: str) -> str:
    """The per-student file stem (``<stem>.html``, ``results/<stem>.json``): the id itself when it is
    already safe (as `grader.submission.ids.student_id` makes them: letters and digits of any script and
    ``._-``, lower case, not an output's name); otherwise the id with anything else replaced by
    ``_`` plus a hash of the exact id, so that no two ids, and no id and an output of the folder
    (index.html, grades.csv, ...), share a path, also where file names are compared without case."""
    safe = "".join(ch if ch in "._@+=-" or unicodedata.category(ch)[0] in "LMN" else "_" for ch in student_id)
    safe = safe.lstrip(".")
    while len(safe.encode("utf-8", "surrogatepass")) > ID_BYTES:
        safe = safe[:-1]
    if safe and safe == student_id and safe == safe.casefold() and safe not in OUTPUT_NAMES:
        return safe
    return f"{safe or '_'}-{name_hash(storable(student_id).encode('utf-8'))}"


def _histogram(percents: list[float], lang: str = DEFAULT) -> list[Bar]:
    counts = [0] * HIST_BINS
    for p in percents:
        counts[min(HIST_BINS - 1, max(0, int(p // (100 / HIST_BINS))))] += 1
    top = max(counts + [1])
    slot = (HIST_W - HIST_PAD) / HIST_BINS
    bars = []
    for i, n in enumerate(counts):
        h = (HIST_H - 2 * HIST_PAD) * n / top
        lo, hi = i * 10, i * 10 + 10
        label = f"{lo}–{hi}" if i < HIST_BINS - 1 else f"{lo}–100"
        bars.append(Bar(HIST_PAD + i * slot + 2, HIST_H - HIST_PAD - h, slot - 4, h, n, label,
                        ntr("{n} student scored {range} %", "{n} students scored {range} %", n,
                            range=label).render(lang)))
    return bars


def _concept_rates(reports: list[GradeReport], lang: str = DEFAULT) -> list[Rate]:
    total = len(reports)
    counts: dict[str, int] = {}
    for r in reports:
        for c in r.concepts_failed():
            counts[c] = counts.get(c, 0) + 1
    vocab: dict[str, Concept] = {}
    for r in reports:  # each result carries the words it was graded with; older ones none
        for concept in r.concepts:
            vocab.setdefault(concept.id, concept)
    for k, v in builtin().items():
        vocab.setdefault(k, v)
    order = list(vocab)
    def phrase(c: str) -> Msg:
        if c in vocab and vocab[c].dashboard:
            return tr(vocab[c].dashboard)  # a catalog msgid (spec.toml's words are extracted)
        return tr("failed on: {title}", title=tr(vocab[c].title) if c in vocab else c)

    rates = [Rate(c, translate(vocab[c].title, lang) if c in vocab else c,
                  tr("{percent} % of the class {phrase}", percent=round(100 * n / total), phrase=phrase(c)).render(lang),
                  n, total, round(100 * n / total)) for c, n in counts.items()]
    return sorted(rates, key=lambda r: (-r.count, order.index(r.key) if r.key in order else len(order)))


def _case_rates(reports: list[GradeReport], lang: str = DEFAULT) -> list[Rate]:
    seen: dict[str, tuple[str, bool]] = {}
    fails: dict[str, int] = {}
    have: dict[str, int] = {}
    for r in sorted(reports, key=lambda r: r.submission.id):
        for c in r.cases:
            seen.setdefault(c.id, (c.title, c.hidden))
            have[c.id] = have.get(c.id, 0) + 1
            fails[c.id] = fails.get(c.id, 0) + (c.outcome is not Outcome.PASSED)
    out = []
    for cid, (title, hidden) in seen.items():
        pct = round(100 * fails[cid] / have[cid])
        shown = one_line(translate(title, lang), 200)
        out.append(Rate(one_line(cid, 120), shown, tr("{percent} % did not pass {title}", percent=pct,
                                                       title=shown).render(lang), fails[cid], have[cid], pct, hidden))
    return out


def _student_row(r: GradeReport, lang: str = DEFAULT) -> StudentRow:
    status = N_("could not load") if not r.load.ok else (N_("self-check") if r.public_only else N_("graded"))
    failing = ", ".join(r.concepts_failed())
    return StudentRow(one_line(r.submission.id, 120), quote(report_filename(r.submission.id) + ".html"),
                      round(r.score.percent, 2), r.score.display_percent(),
                      f"{fmt_points(r.score.earned)} / {fmt_points(r.score.possible)}",
                      one_line(failing, 400), translate(status, lang), one_line(timestamp(r.graded_at, lang), 40),
                      load_failed=not r.load.ok)


def _percent(value: float, lang: str) -> str:
    return f"{value:.0f} %" if lang == DEFAULT else percent(value, lang)


def build_dashboard(reports: list[GradeReport], run: RunInfo, lang: str = DEFAULT) -> DashboardView:
    """The dashboard's view model, its words in `lang`."""
    percents = [r.score.percent for r in reports]
    return DashboardView(
        run=run, n_graded=len(reports),
        mean=_percent(statistics.fmean(percents), lang) if percents else "—",
        median=_percent(statistics.median(percents), lang) if percents else "—",
        histogram=_histogram(percents, lang), hist_axis_y=HIST_H - HIST_PAD,
        concept_rates=_concept_rates(reports, lang) if reports else [],
        case_rates=_case_rates(reports, lang),
        students=[_student_row(r, lang) for r in sorted(reports, key=lambda r: r.submission.id)],
    )


SIMILARITY_PAGE = "similarity.html"


def render_dashboard(reports: list[GradeReport], *, run: RunInfo | Mapping[str, object] | None = None,
                     lang: str | None = None, similarity: bool = False) -> str:
    """The instructor's `index.html` for a batch of graded submissions, in `lang` (default: the
    grader's locale, whatever language the students' pages are in); `similarity`: link to the
    similarity report beside it."""
    lang = choose(lang)
    info = RunInfo.coerce(run, reports)
    info = replace(info, title=translate(info.title, lang), date=timestamp(info.date, lang))
    view = build_dashboard(reports, RunInfo._with(info, {f.name: one_line(v, 200) for f in fields(RunInfo)
                                                         if isinstance(v := getattr(info, f.name), str)}), lang)
    return render_page("dashboard.html", "dashboard.js", lang, d=view, hist_w=HIST_W, hist_h=HIST_H,
                       hist_pad=HIST_PAD, similarity=similarity)


def write_dashboard(reports: list[GradeReport], out_dir: str | os.PathLike[str], *,
                    run: RunInfo | Mapping[str, object] | None = None, lang: str | None = None,
                    similarity: bool | None = None) -> Path:
    """Write `<out_dir>/index.html` (in `lang`, see `render_dashboard`), linking to the similarity
    report when one is there (`similarity` None) or when told it will be (True: it is being written
    beside this one); returns its path."""
    out = Path(out_dir)
    linked = (out / SIMILARITY_PAGE).is_file() if similarity is None else similarity
    return write_text_atomic(out / "index.html", render_dashboard(reports, run=run, lang=lang, similarity=linked))
