"""What a self-check prints in a terminal (``grader check``, the kit's pytest plugin): one line
per case, a hint under each failure, how much of the grade the public cases check."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from grader.assignment.concepts import vocabulary
from grader.report.text import fmt_points

if TYPE_CHECKING:
    from grader.grading.single import Graded


def marks() -> tuple[str, str]:
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗—".encode(enc)
        return "✓", "✗"
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL"


def hidden_sentence(n: int, points: float) -> str:
    s = "case" if n == 1 else "cases"
    return (f"{n} hidden {s} will run at grading time (worth {fmt_points(points)} more points); "
            "this self-check is not your grade.")


def lead_sentence(public_points: float, hidden_cases: int, hidden_points: float) -> str:
    """How much of the grade the public cases check: what a self-check leads with, not a percentage."""
    hidden = (f"{hidden_cases} hidden case{'' if hidden_cases == 1 else 's'} at grading time" if hidden_cases
              else "no hidden cases")
    return f"Public cases: {fmt_points(public_points)} of {fmt_points(public_points + hidden_points)} points checked, {hidden}."


def check_lines(g: "Graded", *, verbose: bool = False) -> list[str]:
    """What ``grader check`` prints: one line per case, a hint under each failure, the total."""
    from grader.report.text import one_line
    from grader.results import Outcome

    r = g.report
    ok, bad = marks()
    dash = "—" if ok == "✓" else "-"
    lines = [f"{r.assignment.id} v{r.assignment.version} {dash} self-check of {one_line(r.submission.filename, 200)} "
             f"(public cases only)"]
    if g.note:
        lines.append(one_line(g.note, 300))
    if not r.load.ok:
        lines.append(f"Your submission could not be loaded: {one_line(r.load.message, 400)}")
    for e in r.load.cell_errors:
        lines.append(f"Error while loading ({one_line(e.where(), 100)}): {one_line(e.error, 300)}")
    for c in r.cases:
        if c.outcome is Outcome.PASSED:
            lines.append(f"  {ok} {one_line(c.title, 100)} [{c.id}]")
            continue
        concept = c.concept or ("not implemented yet" if c.not_implemented else c.outcome.value)
        lines.append(f"  {bad} {one_line(c.title, 100)} [{c.id}] {dash} {concept}")
        lines.append(f"      {one_line(c.message, 240 if not verbose else 2000)}")
        if verbose and c.concept:
            from grader.report.view import evidence_facts

            known = vocabulary(r.concepts).get(concept)
            lines.append(f"      ({known.title if known else concept})")
            lines += [f"      {f.label}: {one_line(f.value, 300)}" for f in evidence_facts(c.evidence)]
    passed = sum(c.outcome is Outcome.PASSED for c in r.cases)
    lines.append(lead_sentence(r.score.possible, g.hidden_cases, g.hidden_points))
    lines.append(f"Passed {passed} of {len(r.cases)} public cases ({fmt_points(r.score.earned)}/{fmt_points(r.score.possible)} "
                 "points)" + ("; this self-check is not your grade." if g.hidden_cases else "."))
    if not g.hidden_cases and passed == len(r.cases) and r.load.ok:
        lines.append("All cases passed.")
    if verbose:
        lines.append(f"Assignment folder: {g.assignment.dir}")
        lines.append(f"Sandbox isolation: {g.isolation}")
    return lines
