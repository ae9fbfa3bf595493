"""GradeReport -> ReportView: everything the student page shows, already filtered, cleaned and formatted.

Hidden cases lose their message and evidence here, once, unless the instructor released them;
the template never sees what it must not show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.checks.diagnose import NOT_IMPLEMENTED
from grader.report.heatmap import HeatmapView, build_heatmap
from grader.report.text import clean_block, fmt_num, fmt_points, one_line
from grader.results import CaseResult, Concept, Evidence, GradeReport, Outcome
from grader.assignment.concepts import vocabulary

MAX_LISTED = 20
"""Leaking cells / NaN locations listed in words before "and N more"."""
TRACEBACK_LIMIT = 4000
OUTPUT_LIMIT = 8000

OUTCOME_LABELS = {
    Outcome.PASSED: ("✓", "passed"),
    Outcome.FAILED: ("✗", "failed"),
    Outcome.ERROR: ("!", "raised an error"),
    Outcome.TIMEOUT: ("⏱", "timed out"),
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


def _listed(cells: list[list[int]], what: str) -> str:
    shown = ", ".join("(" + ", ".join(str(i) for i in c) + ")" for c in cells[:MAX_LISTED])
    more = len(cells) - MAX_LISTED
    return shown + (f" … and {more} more {what}" if more > 0 else "")


def _leak_text(cells: list[list[int]]) -> str:
    words = [f"query {c[-2]} → key {c[-1]}" if len(c) >= 2 else str(c) for c in cells[:MAX_LISTED]]
    more = len(cells) - MAX_LISTED
    return ", ".join(words) + (f" … and {more} more" if more > 0 else "")


def _shape(s: list[int] | None) -> str:
    return "—" if s is None else "(" + ", ".join(str(i) for i in s) + ")"


def evidence_facts(ev: Evidence) -> list[Fact]:
    """The evidence as labelled lines, in the order a student should read them."""
    facts: list[Fact] = []
    if ev.expected_shape is not None or ev.actual_shape is not None:
        facts.append(Fact("Shape", f"expected {_shape(ev.expected_shape)}, yours {_shape(ev.actual_shape)}",
                          ev.expected_shape != ev.actual_shape))
    if ev.expected_dtype is not None or ev.actual_dtype is not None:
        facts.append(Fact("Dtype", f"expected {one_line(ev.expected_dtype) or '—'}, yours {one_line(ev.actual_dtype) or '—'}",
                          ev.expected_dtype != ev.actual_dtype))
    if ev.max_abs_error is not None:
        allowed = f" (allowed {fmt_num(ev.allowed_error, 3)})" if ev.allowed_error is not None else ""
        facts.append(Fact("Largest difference", fmt_num(ev.max_abs_error, 3) + allowed, True))
    if ev.first_bad_index is not None:
        facts.append(Fact("First wrong value", f"at index [{', '.join(str(i) for i in ev.first_bad_index)}]: expected "
                          f"{fmt_num(ev.expected_value)}, yours {fmt_num(ev.actual_value)}", True))
    if ev.leaking_cells:
        facts.append(Fact("Weight on cells it may not see", _leak_text(ev.leaking_cells), True))
    if ev.row_sums is not None:
        sums = ", ".join(fmt_num(s, 3) for s in ev.row_sums[:MAX_LISTED])
        off = any(not (abs(s - 1) <= 1e-3) for s in ev.row_sums)
        facts.append(Fact("Your row sums", sums + (" … " if len(ev.row_sums) > MAX_LISTED else ""), off))
    if ev.nan_locations:
        facts.append(Fact("NaN at", _listed(ev.nan_locations, "places"), True))
    return facts


def _case_view(i: int, case: CaseResult, release_hidden: bool, vocab: dict[str, Concept],
               uid_prefix: str = "") -> CaseView:
    icon, label = OUTCOME_LABELS[case.outcome]
    if case.concept == "load-error" and case.outcome is not Outcome.PASSED:
        icon, label = "–", "not run"
    shown = release_hidden or not case.hidden
    concept = case.concept if case.outcome is not Outcome.PASSED else None
    common = dict(
        anchor=f"{uid_prefix}case-{i}", id=one_line(case.id, 120), title=one_line(case.title, 200),
        outcome=case.outcome.value, icon=icon, outcome_label=label,
        points=f"{fmt_points(case.points.earned)} / {fmt_points(case.points.possible)}",
        hidden=case.hidden, concept=concept,
        concept_title=NOT_IMPLEMENTED if case.not_implemented else _title(vocab, concept),
        explanation=vocab[concept].explanation if concept in vocab else "", details_shown=shown,
    )
    if not shown:
        return CaseView(**common)
    ev = case.evidence
    maps = [m for j, h in enumerate(ev.heatmaps)
            if (m := build_heatmap(h, f"{uid_prefix}c{i}h{j}", ev.leaking_cells)) is not None]
    return CaseView(
        **common, message=clean_block(case.message, 2000), facts=evidence_facts(ev),
        notes=[clean_block(n, 1000) for n in ev.notes], traceback=clean_block(ev.traceback, TRACEBACK_LIMIT),
        heatmaps=maps,
    )


def _groups(cases: list[CaseView], load_ok: bool, vocab: dict[str, Concept]) -> list[ConceptGroup]:
    """Non-passing cases by concept, concepts in the order their first case was graded.

    When nothing could load, the "not run" cases repeat the load banner and are left out here.
    """
    by: dict[str, list[CaseView]] = {}
    for c in cases:
        if c.outcome == Outcome.PASSED.value or (not load_ok and c.concept == "load-error"):
            continue
        # An error without a concept is code not written yet: grouped as such, with no explanation.
        by.setdefault(c.concept or ("not-implemented" if c.outcome == Outcome.ERROR.value else "other"), []).append(c)
    titles = {"other": "Other problems", "not-implemented": NOT_IMPLEMENTED}
    return [ConceptGroup(k, vocab[k].title if k in vocab else titles.get(k, k),
                         vocab[k].explanation if k in vocab else "", v) for k, v in by.items()]


def _title(vocab: dict[str, Concept], concept: str | None) -> str:
    return vocab[concept].title if concept in vocab else (concept or "")


def self_check_lead(report: GradeReport) -> str:
    """"Public cases: 5 of 41 points checked, 27 hidden cases at grading time": a self-check's
    score is a share of the public points only, so it leads with how much of the grade that is."""
    total = report.score.possible + report.hidden_points
    n = report.hidden_cases
    hidden = f"{n} hidden case{'' if n == 1 else 's'} at grading time" if n else "no hidden cases"
    return f"Public cases: {fmt_points(report.score.possible)} of {fmt_points(total)} points checked, {hidden}"


def build_view(report: GradeReport, *, release_hidden: bool = False, uid_prefix: str = "") -> ReportView:
    """The one place where a GradeReport becomes what the student page may show.

    ``uid_prefix`` keeps element ids (anchors, SVG patterns) unique where several views share one
    page: the self-check outputs of a notebook."""
    vocab = vocabulary(report.concepts)
    cases = [_case_view(i, c, release_hidden, vocab, uid_prefix) for i, c in enumerate(report.cases)]
    env = report.environment
    load = report.load
    groups = _groups(cases, load.ok, vocab)
    return ReportView(
        student_id=one_line(report.submission.id, 120), filename=one_line(report.submission.filename, 200),
        assignment=one_line(report.assignment.id, 120), assignment_title=one_line(report.assignment.title, 200),
        version=one_line(report.assignment.version, 60),
        score_percent=report.score.display_percent(),
        score_points=f"{fmt_points(report.score.earned)} / {fmt_points(report.score.possible)} points",
        all_earned=report.score.earned >= report.score.possible,
        self_check_lead=self_check_lead(report) if report.public_only else "",
        self_check_passed=(f"passed {sum(c.outcome is Outcome.PASSED for c in report.cases)} of {len(report.cases)} "
                           f"public cases ({fmt_points(report.score.earned)} / {fmt_points(report.score.possible)} "
                           "points)") if report.public_only else "",
        graded_at=one_line(report.graded_at, 60),
        environment=[Fact("Grader", one_line(env.grader_version, 60)),
                     Fact("PyTorch", one_line(env.torch_version, 60)),
                     Fact("Python", one_line(env.python_version, 60)),
                     Fact("Device", one_line(env.device, 60)),
                     Fact("Dtypes", ", ".join(one_line(d, 30) for d in env.dtypes) or "—"),
                     Fact("Isolation", one_line(env.isolation, 80))],
        public_only=report.public_only, release_hidden=release_hidden,
        load_ok=load.ok, load_message=clean_block(load.message, 2000),
        cell_errors=[CellErrorView(one_line(e.where()[:1].upper() + e.where()[1:], 120), clean_block(e.error, 500),
                                   clean_block(e.traceback, TRACEBACK_LIMIT)) for e in load.cell_errors],
        stdout=clean_block(load.stdout, OUTPUT_LIMIT), stderr=clean_block(load.stderr, OUTPUT_LIMIT),
        hidden_stdout=clean_block(load.hidden_stdout, OUTPUT_LIMIT) if release_hidden else "",
        hidden_stderr=clean_block(load.hidden_stderr, OUTPUT_LIMIT) if release_hidden else "",
        cases=cases, groups=groups,
        passed=[c for c in cases if c.outcome == Outcome.PASSED.value],
        n_hidden_withheld=sum(1 for c in cases if not c.details_shown),
        grouped=frozenset(c.anchor for g in groups for c in g.cases),
    )


