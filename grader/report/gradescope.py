"""What the Gradescope autograder writes to ``/autograder/results/results.json`` for one submission.

Built on the "Gradescope JSON" export (`grader.report.exports.gradescope_results`): per-case
scores, status and visibility, then the student's report as the submission's output, an HTML
fragment Gradescope renders (``output_format: "html"``). The fragment is rendered by Jinja with
autoescaping from the same view model as the student's page, so hidden cases show their title and
outcome only and student text is escaped. No ``leaderboard`` key: Gradescope shows none.

Fields written (Gradescope's autograder specification): top level ``score``, ``execution_time``,
``output``, ``output_format``, ``test_output_format``, ``visibility``, ``stdout_visibility``,
``tests``; per test ``name``, ``score``, ``max_score``, ``status``, ``visibility``, ``output``,
``tags``.
"""

from __future__ import annotations

from grader.assignment.concepts import vocabulary
from grader.i18n import DEFAULT, normalise, tr
from grader.report.exports import gradescope_results
from grader.report.html import environment
from grader.report.inline import stylesheet
from grader.report.text import clean_block
from grader.report.view import build_view, concept_explanation
from grader.results import GradeReport

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
"""Gradescope's visibility values, from least to most shown."""
HTML_OUTPUT_LIMIT = 1_000_000
"""Characters of HTML past which the plain-text output is written instead (a page Gradescope
must still load quickly)."""


def report_fragment(report: GradeReport, lang: str | None = None) -> str:
    """The student's report as one ``<div>`` with its own scoped styles and no script."""
    lang = normalise(lang or report.lang) or DEFAULT
    view = build_view(report, release_hidden=False, uid_prefix="gs-", lang=lang)
    return environment(lang).get_template("gradescope_output.html").render(
        v=view, css=stylesheet(), load_explanation=concept_explanation(vocabulary(report.concepts), "load-error", lang))


def autograder_results(report: GradeReport, *, hidden_visibility: str = "after_published") -> dict:
    """results.json for one graded submission: hidden cases get `hidden_visibility`, the output is
    the student's report as HTML (plain text when it would be too large)."""
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"hidden_visibility must be one of {', '.join(VISIBILITIES)}, not {hidden_visibility!r}")
    results = gradescope_results(report)
    for case, test in zip(report.cases, results["tests"]):
        if case.hidden:
            test["visibility"] = hidden_visibility
    html = report_fragment(report)
    if len(html) <= HTML_OUTPUT_LIMIT:
        results["output"] = html
        results["output_format"] = "html"
    return results


def failure_results(detail: str, *, lang: str = DEFAULT) -> dict:
    """results.json when the grader itself failed: score 0, a message saying it is not the
    student's fault, and the detail for the instructor (hidden from the student)."""
    message = tr("The autograder could not grade this submission because of a fault in the grader, not in "
                 "your code. Your instructor has been told and will grade it again; you do not need to "
                 "resubmit.").render(lang)
    return {
        "score": 0.0,
        "output": message,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [{"name": tr("Autograder error").render(lang), "score": 0.0, "max_score": 0.0,
                   "status": "failed", "visibility": "hidden",
                   "output": clean_block(detail, 4000, lang)}],
    }
