"""GradeReport -> ReportView: everything the student page shows, already filtered, cleaned and formatted.

Hidden cases lose their message and evidence here, once, unless the instructor released them;
the template never sees what it must not show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.checks.diagnose import NOT_IMPLEMENTED
from grader.i18n import DEFAULT, N_, Msg, ntr, tr, translate
from grader.i18n.formats import decimal, listing, timestamp
from grader.report.explorer_view import ExplorerView, build_explorer
from grader.report.heatmap import HeatmapView, build_heatmap
from grader.report.text import clean_block, fmt_num, fmt_points, one_line
from grader.results import CaseResult, CellError, Concept, Evidence, GradeReport, Outcome
from grader.assignment.concepts import vocabulary

MAX_LISTED = 20
"""Leaking cells / NaN locations listed in words before "and N more"."""
TRACEBACK_LIMIT = 4000
OUTPUT_LIMIT = 8000

OUTCOME_LABELS = {
    Outcome.PASSED: ("✓", N_("passed")),
    Outcome.FAILED: ("✗", N_("failed")),
    Outcome.ERROR: ("!", N_("raised an error")),
    Outcome.TIMEOUT: ("◷", N_("timed out")),  # not ⏱: no font but a colour emoji one has it
}


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    bad: bool = False
    """Draw attention: the student's value differs from the reference here."""


@dataclass(frozen=True)
class CaseView:
    anchor: str
    id: str
    title: str
    outcome: str
    """Outcome value: passed / failed / error / timeout (a CSS class too)."""
    icon: str
    outcome_label: str
    points: str
    hidden: bool
    concept: str | None
    concept_title: str
    explanation: str
    details_shown: bool
    """False for a hidden case whose details were not released."""
    message: str = ""
    facts: list[Fact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    traceback: str = ""
    heatmaps: list[HeatmapView] = field(default_factory=list)
    explorer: ExplorerView | None = None
    """The mask experiment on this case's own tensors (failing attention and mask cases)."""


@dataclass(frozen=True)
class ConceptGroup:
    concept: str
    title: str
    explanation: str
    cases: list[CaseView]


@dataclass(frozen=True)
class CellErrorView:
    label: str
    error: str
    traceback: str


@dataclass(frozen=True)
class ReportView:
    student_id: str
    filename: str
    assignment: str
    assignment_title: str
    version: str
    score_percent: str
    score_points: str
    all_earned: bool
    self_check_lead: str
    """For a self-check, what leads the page instead of a percentage: how much of the grade the
    public cases check, and how many hidden cases remain ("" for a grade)."""
    self_check_passed: str
    graded_at: str
    environment: list[Fact]
    public_only: bool
    release_hidden: bool
    load_ok: bool
    load_message: str
    load_traceback: str
    """The traceback of the unit the load message names ("" when none raised)."""
    cell_errors: list[CellErrorView]
    stdout: str
    stderr: str
    hidden_stdout: str
    """Output printed once hidden cases had started: shown only when the instructor released hidden
    cases (it may quote hidden inputs); empty otherwise."""
    hidden_stderr: str
    cases: list[CaseView]
    """Every case in grading order (the summary table)."""
    groups: list[ConceptGroup]
    """Cases that did not pass, grouped by concept in the order their first case was graded."""
    passed: list[CaseView]
    n_hidden_withheld: int
    grouped: frozenset[str]
    """Anchors of the cases that have a detail block (the summary table links only to those)."""


def _listed(cells: list[list[int]], lang: str) -> str:
    shown = listing(("(" + ", ".join(str(i) for i in c) + ")" for c in cells[:MAX_LISTED]), lang)
    more = len(cells) - MAX_LISTED
    return shown + (ntr(" … and {n} more place", " … and {n} more places", more).render(lang) if more > 0 else "")


def _leak_text(cells: list[list[int]], lang: str) -> str:
    words = [tr("query {q} → key {k}", q=c[-2], k=c[-1]).render(lang) if len(c) >= 2 else str(c)
             for c in cells[:MAX_LISTED]]
    more = len(cells) - MAX_LISTED
    return listing(words, lang) + (tr(" … and {n} more", n=more).render(lang) if more > 0 else "")


def _shape(s: list[int] | None) -> str:
    return "—" if s is None else "(" + ", ".join(str(i) for i in s) + ")"


def _num(x: float | int | None, lang: str, digits: int = 4) -> str:
    return decimal(x, lang, digits) if isinstance(x, float) else fmt_num(x, digits)


def evidence_facts(ev: Evidence, lang: str = DEFAULT) -> list[Fact]:
    """The evidence as labelled lines in `lang`, in the order a student should read them."""
    def fact(label: str, value: Msg | str, bad: bool = False) -> Fact:
        return Fact(translate(label, lang), value if isinstance(value, str) else value.render(lang), bad)

    facts: list[Fact] = []
    # A shape or dtype is evidence only against an expected one, and a matching scalar shape says
    # nothing: "expected —, yours (2, 4, 16)" beside NaN evidence read as if the shape were wrong.
    # A dtype is shown only where it differs ("expected torch.int64, yours torch.int64" is noise).
    if ev.expected_shape is not None and not (ev.expected_shape == ev.actual_shape and not ev.expected_shape):
        facts.append(fact(N_("Shape"), tr("expected {expected}, yours {actual}", expected=_shape(ev.expected_shape),
                                          actual=_shape(ev.actual_shape)), ev.expected_shape != ev.actual_shape))
    if ev.expected_dtype is not None and ev.expected_dtype != ev.actual_dtype:
        facts.append(fact(N_("Dtype"), tr("expected {expected}, yours {actual}",
                                          expected=one_line(ev.expected_dtype) or "—",
                                          actual=one_line(ev.actual_dtype) or "—"), True))
    if ev.max_abs_error is not None:
        value = _num(ev.max_abs_error, lang, 3)
        if ev.allowed_error is not None:
            value = tr("{value} (allowed {allowed})", value=value, allowed=_num(ev.allowed_error, lang, 3)).render(lang)
        facts.append(fact(N_("Largest difference"), value, True))
    if ev.first_bad_index is not None:
        facts.append(fact(N_("First wrong value"), tr(
            "at index [{index}]: expected {expected}, yours {actual}",
            index=", ".join(str(i) for i in ev.first_bad_index),
            expected=_num(ev.expected_value, lang), actual=_num(ev.actual_value, lang)), True))
    if ev.leaking_cells:
        facts.append(fact(N_("Weight on cells it may not see"), _leak_text(ev.leaking_cells, lang), True))
    if ev.row_sums is not None:
        sums = ", ".join(_num(s, lang, 3) for s in ev.row_sums[:MAX_LISTED])
        off = any(not (abs(s - 1) <= 1e-3) for s in ev.row_sums)
        facts.append(fact(N_("Your row sums"), sums + (" … " if len(ev.row_sums) > MAX_LISTED else ""), off))
    if ev.nan_locations:
        facts.append(fact(N_("NaN at"), _listed(ev.nan_locations, lang), True))
    return facts


def case_message(case: CaseResult, lang: str) -> str:
    """The case's message in `lang`."""
    return case.message.render(lang)


def case_notes(ev: Evidence, lang: str) -> list[str]:
    return [n.render(lang) for n in ev.notes]


def concept_title(vocab: dict[str, Concept], concept: str | None, lang: str) -> str:
    return translate(vocab[concept].title, lang) if concept in vocab else (concept or "")


def concept_explanation(vocab: dict[str, Concept], concept: str | None, lang: str) -> str:
    return translate(vocab[concept].explanation, lang) if concept in vocab else ""


def _case_view(i: int, case: CaseResult, release_hidden: bool, vocab: dict[str, Concept],
               uid_prefix: str = "", lang: str = DEFAULT) -> CaseView:
    icon, label = OUTCOME_LABELS[case.outcome]
    if case.concept in ("load-error", "not-run") and case.outcome is not Outcome.PASSED:
        icon, label = "–", N_("not run")
    shown = release_hidden or not case.hidden
    concept = case.concept if case.outcome is not Outcome.PASSED else None
    common: dict[str, Any] = dict(
        anchor=f"{uid_prefix}case-{i}", id=one_line(case.id, 120), title=one_line(translate(case.title, lang), 200),
        outcome=case.outcome.value, icon=icon, outcome_label=translate(label, lang),
        points=f"{fmt_points(case.points.earned)} / {fmt_points(case.points.possible)}",
        hidden=case.hidden, concept=concept,
        concept_title=translate(NOT_IMPLEMENTED, lang) if case.not_implemented else concept_title(vocab, concept, lang),
        explanation=concept_explanation(vocab, concept, lang), details_shown=shown,
    )
    if not shown:
        return CaseView(**common)
    ev = case.evidence
    maps = [m for j, h in enumerate(ev.heatmaps)
            if (m := build_heatmap(h, f"{uid_prefix}c{i}h{j}", ev.leaking_cells, lang)) is not None]
    return CaseView(
        **common, message=clean_block(case_message(case, lang), 2000, lang), facts=evidence_facts(ev, lang),
        notes=[clean_block(n, 1000, lang) for n in case_notes(ev, lang)],
        traceback=clean_block(ev.traceback, TRACEBACK_LIMIT, lang), heatmaps=maps,
        explorer=build_explorer(ev.explorer, f"{uid_prefix}x{i}") if case.outcome is not Outcome.PASSED else None,
    )


def _groups(cases: list[CaseView], load_ok: bool, vocab: dict[str, Concept], lang: str) -> list[ConceptGroup]:
    """Non-passing cases by concept, concepts in the order their first case was graded.

    When nothing could load, the "not run" cases repeat the load banner and are left out here.
    """
    by: dict[str, list[CaseView]] = {}
    for c in cases:
        if c.outcome == Outcome.PASSED.value or (not load_ok and c.concept == "load-error"):
            continue
        # An error without a concept is code not written yet: grouped as such, with no explanation.
        by.setdefault(c.concept or ("not-implemented" if c.outcome == Outcome.ERROR.value else "other"), []).append(c)
    titles = {"other": translate(N_("Other problems"), lang), "not-implemented": translate(NOT_IMPLEMENTED, lang)}
    return [ConceptGroup(k, concept_title(vocab, k, lang) if k in vocab else titles.get(k, k),
                         concept_explanation(vocab, k, lang), v) for k, v in by.items()]


def self_check_lead(report: GradeReport, lang: str = DEFAULT) -> str:
    """"Public cases: 5 of 41 points checked, 27 hidden cases at grading time": a self-check's
    score is a share of the public points only, so it leads with how much of the grade that is."""
    total = report.score.possible + report.hidden_points
    n = report.hidden_cases
    hidden = ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", n) if n \
        else tr("no hidden cases")
    return tr("Public cases: {public} of {total} points checked, {hidden}", public=fmt_points(report.score.possible),
              total=fmt_points(total), hidden=hidden).render(lang)


def build_view(report: GradeReport, *, release_hidden: bool = False, uid_prefix: str = "",
               lang: str | None = None) -> ReportView:
    """The one place where a GradeReport becomes what the student page may show, in `lang`
    (default: the language the report was graded in).

    ``uid_prefix`` keeps element ids (anchors, SVG patterns) unique where several views share one
    page: the self-check outputs of a notebook."""
    lang = lang or report.lang
    vocab = vocabulary(report.concepts)
    cases = [_case_view(i, c, release_hidden, vocab, uid_prefix, lang) for i, c in enumerate(report.cases)]
    env = report.environment
    load = report.load
    groups = _groups(cases, load.ok, vocab, lang)
    earned, possible = fmt_points(report.score.earned), fmt_points(report.score.possible)
    return ReportView(
        student_id=one_line(report.submission.id, 120), filename=one_line(report.submission.filename, 200),
        assignment=one_line(report.assignment.id, 120), assignment_title=one_line(translate(report.assignment.title, lang), 200),
        version=one_line(report.assignment.version, 60),
        score_percent=report.score.display_percent(),
        score_points=tr("{earned} / {possible} points", earned=earned, possible=possible).render(lang),
        all_earned=report.score.earned >= report.score.possible,
        self_check_lead=self_check_lead(report, lang) if report.public_only else "",
        self_check_passed=tr("passed {passed} of {total} public cases ({earned} / {possible} points)",
                             passed=sum(c.outcome is Outcome.PASSED for c in report.cases), total=len(report.cases),
                             earned=earned, possible=possible).render(lang) if report.public_only else "",
        graded_at=one_line(timestamp(report.graded_at, lang), 60),
        environment=[Fact(translate(N_("Grader"), lang), one_line(env.grader_version, 60)),
                     Fact("PyTorch", one_line(env.torch_version, 60)),
                     Fact("Python", one_line(env.python_version, 60)),
                     Fact(translate(N_("Device"), lang), one_line(env.device, 60)),
                     Fact(translate(N_("Dtypes"), lang), ", ".join(one_line(d, 30) for d in env.dtypes) or "—"),
                     Fact(translate(N_("Isolation"), lang), one_line(env.isolation, 80))],
        public_only=report.public_only, release_hidden=release_hidden,
        load_ok=load.ok, load_message=clean_block(_capitalised(load_message(report, lang)), 2000, lang),
        load_traceback=(clean_block(load.cell_errors[0].traceback, TRACEBACK_LIMIT, lang)
                        if not load.ok and load.cell_errors else ""),
        cell_errors=[CellErrorView(one_line(_capitalised(e.where().render(lang)), 120), clean_block(e.error, 500, lang),
                                   clean_block(e.traceback, TRACEBACK_LIMIT, lang)) for e in reported_cell_errors(report)],
        stdout=clean_block(load.stdout, OUTPUT_LIMIT, lang), stderr=clean_block(load.stderr, OUTPUT_LIMIT, lang),
        hidden_stdout=clean_block(load.hidden_stdout, OUTPUT_LIMIT, lang) if release_hidden else "",
        hidden_stderr=clean_block(load.hidden_stderr, OUTPUT_LIMIT, lang) if release_hidden else "",
        cases=cases, groups=groups,
        passed=[c for c in cases if c.outcome == Outcome.PASSED.value],
        n_hidden_withheld=sum(1 for c in cases if not c.details_shown),
        grouped=frozenset(c.anchor for g in groups for c in g.cases),
    )




def load_message(report: GradeReport, lang: str) -> str:
    """Why the submission could not load, in `lang`: when a unit raised, that unit (by its label)
    and its error, which the load's cell errors then need not repeat (``reported_cell_errors``)."""
    load = report.load
    return (load.cell_errors[0].raised() if not load.ok and load.cell_errors else load.message).render(lang)


def reported_cell_errors(report: GradeReport) -> list[CellError]:
    """The cell errors to list below the load message: all but the one it already names."""
    load = report.load
    return load.cell_errors[1:] if not load.ok else load.cell_errors


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
