"""Writing every output of a batch, and writing them again from saved JSON without grading.

Layout under `out_dir`:
    results/<id>.json      canonical GradeReport JSON
    <id>.html              the student's report
    index.html             the class dashboard
    grades.csv, junit.xml, summary.md, gradescope/<id>.json
    canvas.csv, moodle.csv, lms-unmatched.csv   LMS gradebook imports (grader.report.lms), when names match
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.errors import GraderError
from grader.report.dashboard import RunInfo, report_filename, write_dashboard
from grader.report.exports import write_gradescope, write_grades_csv, write_junit, write_markdown
from grader.report.html import write_submission
from grader.report.lms import LmsFiles, write_lms
from grader.report.outdir import write_text_atomic
from grader.results import GradeReport, report_from_dict, to_dict
from grader.untrusted import json_rows
from grader.assignment.spec import available
from grader.i18n import add_assignment_locales


class ResultsUnreadable(GraderError):
    """A saved result file is not a GradeReport this grader can read."""


@dataclass(frozen=True)
class Written:
    """Paths written by `write_all`."""

    reports: list[Path]
    index: Path
    grades_csv: Path
    gradescope: list[Path]
    junit: Path
    summary: Path
    results: list[Path]
    lms: LmsFiles


def _check_unique_names(reports: list[GradeReport]) -> None:
    names: dict[str, str] = {}
    for r in reports:
        name = report_filename(r.submission.id).casefold()  # as a case-insensitive file system sees it
        if name in names and names[name] != r.submission.id:
            raise GraderError(f"student ids {names[name]!r} and {r.submission.id!r} would share the file "
                              f"{name}.html; rename one submission")
        names[name] = r.submission.id


def result_json_text(data: dict) -> str:
    """A result as its file holds it: strict JSON, one line per top-level field and one per case
    (`json_rows`), a third of ``indent=2``'s size."""
    return json_rows(data, "cases")


def write_result_json(report: GradeReport, results_dir: str | os.PathLike[str], data: dict | None = None) -> Path:
    """`<results_dir>/<id>.json`, the canonical form (NaN/inf as strings, so strict JSON;
    `result_json_text`). `data`: ``to_dict(report)`` when the caller already has it."""
    text = result_json_text(to_dict(report) if data is None else data)
    return write_text_atomic(Path(results_dir) / f"{report_filename(report.submission.id)}.json", text)


def write_all(reports: list[GradeReport], out_dir: str | os.PathLike[str], *,
              run: RunInfo | Mapping[str, object] | None = None, release_hidden: bool = False,
              write_results: bool = True, pages_current: Collection[str] = (), lang: str | None = None,
              dashboard_lang: str | None = None, canvas_column: str | None = None,
              similarity: bool | None = None) -> Written:
    """Write the per-student reports, the dashboard and every export (and the JSON, unless told not to).
    `pages_current`: submission ids whose page the caller has just written from the same report with
    the same `release_hidden` and language (a batch writes each page as it is graded); those are not
    rendered again. `lang`: the students' pages' language (default: each report's own);
    `dashboard_lang`: the dashboard's (default: the grader's locale). `canvas_column`: the Canvas
    assignment column's header (default: the assignment's title). `similarity`: whether the
    dashboard links the similarity report (default: when its page is there)."""
    out = Path(out_dir)
    _check_unique_names(reports)
    info = RunInfo.coerce(run, reports)
    results = [write_result_json(r, out / "results") for r in reports] if write_results else []
    pages = []
    for r in reports:
        page = out / f"{report_filename(r.submission.id)}.html"
        if r.submission.id not in pages_current or not page.is_file():
            write_submission(r, page, release_hidden=release_hidden, lang=lang)
        pages.append(page)
    return Written(
        reports=pages,
        index=write_dashboard(reports, out, run=info, lang=dashboard_lang, similarity=similarity),
        grades_csv=write_grades_csv(reports, out / "grades.csv"),
        gradescope=write_gradescope(reports, out / "gradescope", release_hidden=release_hidden),
        junit=write_junit(reports, out / "junit.xml"),
        summary=write_markdown(reports, out / "summary.md", run=info),
        results=results,
        lms=write_lms(reports, out, canvas_column=canvas_column or info.title or info.assignment),
    )


def load_results(results_dir: str | os.PathLike[str],
                 known: Mapping[str, GradeReport] | None = None) -> list[GradeReport]:
    """Every `*.json` GradeReport in `results_dir`, sorted by file name. `known`: reports held in
    memory already, by file name (`<id>.json`), each the one its file was written from (a batch's
    own results): those files are not read again."""
    folder = Path(results_dir)
    if not folder.is_dir():
        raise ResultsUnreadable(f"no results folder at {folder}; expected <out>/results/<student_id>.json files")
    known = known or {}
    reports = []
    for path in sorted(folder.glob("*.json")):
        held = known.get(path.name)
        if held is not None:
            reports.append(held)
            continue
        try:
            reports.append(report_from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (ValueError, KeyError, TypeError) as e:
            raise ResultsUnreadable(f"{path} is not a readable grading result: {e}") from e
    if not reports:
        raise ResultsUnreadable(f"{folder} holds no *.json results")
    return reports


def rerender(results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *,
             run: RunInfo | Mapping[str, object] | None = None, release_hidden: bool = False,
             lang: str | None = None, dashboard_lang: str | None = None,
             canvas_column: str | None = None) -> Written:
    """Re-create the HTML and exports from saved results (default out_dir: the results folder's parent),
    the students' pages in `lang` (default: the language each was graded in)."""
    reports = load_results(results_dir)
    known = available()
    for aid in sorted({r.assignment.id for r in reports} & set(known)):
        add_assignment_locales(known[aid] / "locales")  # its words in other languages, where installed
    target = Path(out_dir) if out_dir is not None else Path(results_dir).resolve().parent
    return write_all(reports, target, run=run, release_hidden=release_hidden, write_results=False, lang=lang,
                     dashboard_lang=dashboard_lang, canvas_column=canvas_column)
