"""What a self-check prints in a terminal (``grader check``, the kit's pytest plugin): one line
per case, a hint under each failure, how much of the grade the public cases check; in the
report's language (``GradeReport.lang``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from grader.assignment.concepts import vocabulary
from grader.i18n import DEFAULT, Msg, ntr, tr, translate
from grader.report.text import fmt_points

if TYPE_CHECKING:
    from grader.grading.single import Graded
    from grader.results import GradeReport


def marks() -> tuple[str, str]:
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗—".encode(enc)
        return "✓", "✗"
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL"


def hidden_sentence(n: int, points: float, lang: str = DEFAULT) -> str:
    return ntr("{n} hidden case will run at grading time (worth {points} more points); this self-check is not your "
               "grade.", "{n} hidden cases will run at grading time (worth {points} more points); this self-check is "
               "not your grade.", n, points=fmt_points(points)).render(lang)


def lead_sentence(public_points: float, hidden_cases: int, hidden_points: float, lang: str = DEFAULT) -> str:
    """How much of the grade the public cases check: what a self-check leads with, not a percentage."""
    hidden = ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", hidden_cases) \
        if hidden_cases else tr("no hidden cases")
    return tr("Public cases: {public} of {total} points checked, {hidden}.", public=fmt_points(public_points),
              total=fmt_points(public_points + hidden_points), hidden=hidden).render(lang)


def check_lines(g: Graded, *, verbose: bool = False, lang: str | None = None) -> list[str]:
    """What ``grader check`` prints in `lang` (default: the report's): one line per case, a hint
    under each failure, the total."""
    from grader.report.text import one_line
    from grader.results import Outcome

    r = g.report
    lang = lang or r.lang

    def say(m: Msg) -> str:
        return m.render(lang)

    ok, bad = marks()
    dash = "—" if ok == "✓" else "-"
    lines = [f"{r.assignment.id} v{r.assignment.version} {dash} " + say(tr(
        "self-check of {file} (public cases only)", file=one_line(r.submission.filename, 200)))]
    if g.note:
        lines.append(one_line(say(g.note), 300))
    lines += load_lines(r, lang, verbose=verbose)
    lines += case_lines(r, lang, verbose=verbose)
    lines += printed_lines(r, lang, verbose=verbose)
    passed = sum(c.outcome is Outcome.PASSED for c in r.cases)
    lines.append(lead_sentence(r.score.possible, g.hidden_cases, g.hidden_points, lang))
    args = dict(passed=passed, total=len(r.cases), earned=fmt_points(r.score.earned),
                possible=fmt_points(r.score.possible))
    lines.append(say(tr("Passed {passed} of {total} public cases ({earned}/{possible} points); this self-check is "
                        "not your grade.", **args) if g.hidden_cases
                     else tr("Passed {passed} of {total} public cases ({earned}/{possible} points).", **args)))
    if not g.hidden_cases and passed == len(r.cases) and r.load.ok:
        lines.append(say(tr("All cases passed.")))
    if verbose:
        lines.append(say(tr("Assignment folder: {path}", path=str(g.assignment.dir))))
        lines.append(say(tr("Sandbox isolation: {isolation}", isolation=g.isolation)))
        if r.environment.limits:
            lines.append(say(tr("Sandbox limits: {limits}", limits=r.environment.limits)))
    return lines

def load_lines(r: GradeReport, lang: str, *, verbose: bool = False) -> list[str]:
    """Why the submission did not load, and each code cell that raised while it loaded (with its
    traceback when `verbose`)."""
    from grader.report.text import one_line
    from grader.report.view import load_message, reported_cell_errors

    lines = []
    if not r.load.ok:
        lines.append(tr("Your submission could not be loaded: {reason}",
                        reason=one_line(load_message(r, lang), 400)).render(lang))
        if verbose and r.load.cell_errors and r.load.cell_errors[0].traceback:
            lines += traceback_lines(r.load.cell_errors[0].traceback)
    for e in reported_cell_errors(r):
        lines.append(tr("Error while loading ({where}): {error}", where=one_line(e.where().render(lang), 100),
                        error=one_line(e.error, 300)).render(lang))
        if verbose and e.traceback:
            lines += traceback_lines(e.traceback)
    return lines


def case_lines(r: GradeReport, lang: str, *, verbose: bool = False) -> list[str]:
    """One line per case (✓/✗, title, id, concept), the hint under each failure; with `verbose`
    the concept's title and the evidence too. Shared by ``grader check`` and the notebook's text."""
    from grader.report.text import one_line
    from grader.report.view import case_message, case_notes, concept_title, evidence_facts
    from grader.results import Outcome

    def say(m: Msg) -> str:
        return m.render(lang)

    ok, bad = marks()
    dash = "—" if ok == "✓" else "-"
    lines: list[str] = []
    vocab = vocabulary(r.concepts)
    for c in r.cases:
        title = one_line(translate(c.title, lang), 100)
        if c.outcome is Outcome.PASSED:
            lines.append(f"  {ok} {title} [{c.id}]")
            continue
        concept = c.concept or (say(tr("not implemented yet")) if c.not_implemented else c.outcome.value)
        label = concept
        if c.concept and lang != DEFAULT:  # the concept's title in the student's language, its id beside it
            label = say(tr("{title} ({id})", title=concept_title(vocab, concept, lang), id=concept))
        lines.append(f"  {bad} {title} [{c.id}] {dash} {label}")
        if r.load.ok:  # otherwise each case failed for the one reason the load line above gives
            lines.append(f"      {one_line(case_message(c, lang), 240 if not verbose else 2000)}")
        if verbose and c.concept:
            if lang == DEFAULT:  # elsewhere the title is on the case's line already
                lines.append("      " + say(tr("({title})", title=concept_title(vocab, concept, lang))))
            lines += ["      " + say(tr("{label}: {value}", label=f.label, value=one_line(f.value, 300)))
                      for f in evidence_facts(c.evidence, lang)]
            lines += ["      " + one_line(n, 300) for n in case_notes(c.evidence, lang)]
        if verbose and c.evidence.traceback:
            lines += traceback_lines(c.evidence.traceback)
    return lines


PRINTED_LINES = 5
"""Lines of the student's own output a self-check shows (without -v; the report has it all)."""


def printed_lines(r: GradeReport, lang: str, *, verbose: bool = False) -> list[str]:
    """What the submission printed while it loaded and ran the public cases: the first lines
    (every line, up to 40, with `verbose`), each cleaned of control characters and bounded."""
    from grader.report.text import one_line

    printed = [line for line in (r.load.stdout + "\n" + r.load.stderr).splitlines() if line.strip()]
    if not printed:
        return []
    limit = 40 if verbose else PRINTED_LINES
    lines = [tr("Your code printed (while loading and on the public cases):").render(lang)]
    lines += ["    | " + one_line(line, 200) for line in printed[:limit]]
    if len(printed) > limit:
        lines.append("    " + ntr("… {n} more line, in the report.", "… {n} more lines, in the report.",
                                   len(printed) - limit).render(lang))
    return lines


def traceback_lines(traceback: str, limit: int = 30) -> list[str]:
    """A student's traceback under its case (-v), indented, the last `limit` lines."""
    from grader.report.text import one_line

    kept = [line for line in traceback.splitlines() if line.strip()][-limit:]
    return ["        " + one_line(line, 300) for line in kept]
