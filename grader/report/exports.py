"""Exports from GradeReports: grades.csv, Gradescope results.json, JUnit XML, a Markdown summary.

Every function that returns a value is pure; the `write_*` functions are the only I/O.
Student-controlled text (ids, messages, tracebacks) is cleaned of control characters first;
CSV cells are neutralised against formulas, Markdown against markup and HTML, XML by ElementTree.
"""

from __future__ import annotations

import csv
import io
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.report.dashboard import RunInfo, report_filename
from grader.report.outdir import write_text_atomic
from grader.report.text import clean_block, csv_cell, fmt_points, md_escape, one_line
from grader.report.view import case_message, case_notes, evidence_facts, load_message
from grader.results import CaseResult, Concept, GradeReport, Outcome
from grader.untrusted import json_rows
from grader.assignment.concepts import vocabulary
from grader.i18n import DEFAULT, N_, tr, translate

CSV_FIXED_COLUMNS = ["student_id", "earned", "possible", "percent"]
GRADESCOPE_OUTPUT_LIMIT = 4000


def _by_id(reports: list[GradeReport]) -> list[GradeReport]:
    return sorted(reports, key=lambda r: r.submission.id)


def case_columns(reports: list[GradeReport]) -> list[str]:
    """Case ids in a stable order: as graded, first appearance over reports sorted by student id."""
    seen: dict[str, None] = {}
    for r in _by_id(reports):
        for c in r.cases:
            seen.setdefault(c.id, None)
    return list(seen)


def grades_csv(reports: list[GradeReport]) -> str:
    """One row per student: id, earned, possible, percent, then the points of each case (blank if absent)."""
    cases = case_columns(reports)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIXED_COLUMNS + [csv_cell(c) for c in cases])
    for r in _by_id(reports):
        points = {c.id: fmt_points(c.points.earned) for c in r.cases}
        w.writerow([csv_cell(r.submission.id), fmt_points(r.score.earned), fmt_points(r.score.possible),
                    f"{r.score.percent:.2f}"] + [points.get(c, "") for c in cases])
    return buf.getvalue()


def write_grades_csv(reports: list[GradeReport], path: str | os.PathLike[str]) -> Path:
    return write_text_atomic(path, grades_csv(reports))


def _case_text(case: CaseResult, *, details: bool, vocab: dict[str, Concept], lang: str = DEFAULT) -> str:
    """A plain-text account of one case for Gradescope's output box, in `lang`."""
    if case.outcome is Outcome.PASSED:
        return tr("Passed.").render(lang)
    parts = []
    if case.concept:
        c = vocab.get(case.concept)
        parts.append(tr("{title}. {explanation}", title=tr(c.title), explanation=tr(c.explanation)).render(lang)
                     if c else f"{case.concept}.")
    if details:
        message = case_message(case, lang)
        if message:
            parts.append(clean_block(message, 2000, lang))
        facts = evidence_facts(case.evidence, lang)
        if facts:
            parts.append("\n".join(tr("{label}: {value}", label=f.label, value=f.value).render(lang) for f in facts))
        parts += [clean_block(n, 1000, lang) for n in case_notes(case.evidence, lang)]
        if case.evidence.traceback:
            parts.append(clean_block(case.evidence.traceback, 2000, lang))
    else:
        parts.append(tr("Hidden case: details are not shown.").render(lang))
    return clean_block("\n\n".join(parts), GRADESCOPE_OUTPUT_LIMIT, lang)


def gradescope_results(report: GradeReport, *, release_hidden: bool = False) -> dict:
    """One submission in Gradescope's autograder results.json format.

    Hidden cases get visibility "after_published" and, unless released, no message or evidence.
    """
    tests = []
    vocab = vocabulary(report.concepts)
    lang = report.lang
    for case in report.cases:
        tests.append({
            "name": one_line(f"{translate(case.title, lang)} ({case.id})", 300),
            "score": case.points.earned,
            "max_score": case.points.possible,
            "status": "passed" if case.outcome is Outcome.PASSED else "failed",
            "visibility": "after_published" if case.hidden else "visible",
            "output": _case_text(case, details=release_hidden or not case.hidden, vocab=vocab, lang=lang),
            "tags": [case.concept] if case.concept and case.outcome is not Outcome.PASSED else [],
        })
    output = []
    if report.public_only:
        output.append(translate(N_("Self-check: public cases only, not an official grade."), lang))
    if not report.load.ok:
        output.append(tr("The submission could not be loaded:").render(lang) + "\n"
                      + clean_block(load_message(report, lang), 2000, lang))
    for e in report.load.cell_errors:
        output.append(tr("Error while loading ({where}): {error}", where=e.where(),
                         error=clean_block(e.error, 500, lang)).render(lang))
    return {
        "score": report.score.earned,
        "execution_time": round(sum(c.duration_s for c in report.cases), 3),
        "output": "\n\n".join(output),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def write_gradescope(reports: list[GradeReport], out_dir: str | os.PathLike[str], *,
                     release_hidden: bool = False) -> list[Path]:
    """`<out_dir>/<id>.json` per student, in Gradescope's results.json format."""
    return [write_text_atomic(Path(out_dir) / f"{report_filename(r.submission.id)}.json",
                              json_rows(gradescope_results(r, release_hidden=release_hidden), "tests"))
            for r in _by_id(reports)]


def _timestamp(iso: str) -> str:
    """JUnit's schema wants yyyy-mm-ddThh:mm:ss without a zone."""
    text = one_line(iso, 40)
    return text[:19] if len(text) >= 19 else "1970-01-01T00:00:00"


def junit_xml(reports: list[GradeReport]) -> str:
    """A <testsuites> document: one <testsuite> per student, one <testcase> per case."""
    root = ET.Element("testsuites", name="attention-grader")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for n, r in enumerate(_by_id(reports)):
        sid = one_line(r.submission.id, 200)
        suite_cases = list(r.cases)
        failures = sum(c.outcome is Outcome.FAILED for c in suite_cases)
        errors = sum(c.outcome in (Outcome.ERROR, Outcome.TIMEOUT) for c in suite_cases)
        time = sum(c.duration_s for c in suite_cases)
        suite = ET.SubElement(root, "testsuite", name=sid, package=one_line(r.assignment.id, 200), id=str(n),
                              timestamp=_timestamp(r.graded_at), hostname="localhost",
                              tests=str(len(suite_cases)), failures=str(failures), errors=str(errors),
                              skipped="0", time=f"{time:.3f}")
        vocab = vocabulary(r.concepts)
        props = ET.SubElement(suite, "properties")
        for name, value in (("score", f"{r.score.earned:g}/{r.score.possible:g}"),
                            ("assignment_version", r.assignment.version), ("loaded", str(r.load.ok).lower())):
            ET.SubElement(props, "property", name=name, value=one_line(value, 200))
        for c in suite_cases:
            tc = ET.SubElement(suite, "testcase", name=one_line(c.id, 300),
                               classname=f"{one_line(r.assignment.id, 100)}.{sid}", time=f"{c.duration_s:.3f}")
            if c.outcome is Outcome.PASSED:
                continue
            tag = "failure" if c.outcome is Outcome.FAILED else "error"
            shown = not c.hidden
            message = one_line(str(c.message), 500) if shown else "hidden case did not pass"
            el = ET.SubElement(tc, tag, message=message, type=c.concept or c.outcome.value)
            el.text = _case_text(c, details=shown, vocab=vocab)
        ET.SubElement(suite, "system-out").text = clean_block(r.load.stdout, 8000)
        ET.SubElement(suite, "system-err").text = clean_block(
            "\n".join(filter(None, [str(r.load.message), *(f"cell {e.cell}: {e.error}" for e in r.load.cell_errors),
                                    r.load.stderr])), 8000)
        totals["tests"] += len(suite_cases)
        totals["failures"] += failures
        totals["errors"] += errors
        total_time += time
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(reports: list[GradeReport], path: str | os.PathLike[str]) -> Path:
    return write_text_atomic(path, junit_xml(reports))


def markdown_summary(reports: list[GradeReport], *, run: RunInfo | None = None) -> str:
    """GitHub-flavoured Markdown: a score table, then each student's failing cases with concept and message.

    Hidden cases appear with title, concept and outcome only (step summaries are often public).
    """
    info = run or RunInfo.from_reports(reports)
    lines = [f"## {md_escape(info.title or info.assignment) or 'Grading results'}: {len(reports)} graded", ""]
    if info.public_only:
        lines += ["> Self-check: public cases only, not an official grade.", ""]
    lines += ["| Student | Score | Points | Failing cases |", "| --- | ---: | ---: | --- |"]
    for r in _by_id(reports):
        failing = [c for c in r.cases if c.outcome is not Outcome.PASSED]
        cell = ", ".join(md_escape(c.id, 80) for c in failing[:8]) + (" …" if len(failing) > 8 else "")
        if not r.load.ok:
            cell = "could not load" + (f": {md_escape(str(r.load.message), 120)}" if r.load.message else "")
        lines.append(f"| {md_escape(r.submission.id, 80)} | {r.score.display_percent()} | "
                     f"{fmt_points(r.score.earned)} / {fmt_points(r.score.possible)} | {cell or '—'} |")
    for r in _by_id(reports):
        failing = [c for c in r.cases if c.outcome is not Outcome.PASSED]
        if not failing:
            continue
        lines += ["", f"### {md_escape(r.submission.id, 80)}: {r.score.display_percent()}", ""]
        for c in failing:
            known = vocabulary(r.concepts).get(c.concept or "")
            concept = md_escape(known.title if known else (c.concept or c.outcome.value), 200)
            text = "hidden case" if c.hidden else md_escape(str(c.message), 400)
            lines.append(f"- {md_escape(c.title, 120)} ({md_escape(c.id, 120)}), {c.outcome.value}: "
                         f"*{concept}*. {text}")
    return "\n".join(lines) + "\n"


def write_markdown(reports: list[GradeReport], path: str | os.PathLike[str], *, run: RunInfo | None = None) -> Path:
    return write_text_atomic(path, markdown_summary(reports, run=run))
