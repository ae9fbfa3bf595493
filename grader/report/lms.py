"""Gradebook imports for an LMS: a Canvas grades-import CSV and a Moodle grading worksheet.

Each student's LMS id comes from the name of the file (or folder) the LMS's bulk download gave:

    Canvas   <lastfirst>_[late_]<user id>_<submission file id>_<original name>
             doejane_late_12345_67890_attention.py  -> user 12345 (Canvas's "ID" column)
    Moodle   <Full Name>_<participant id>_assignsubmission_file[_<original name>]
             Jane Doe_4711_assignsubmission_file_attention.py -> "Participant 4711"

A file is written only when some submission matches its pattern; every graded submission that
matches neither goes to ``lms-unmatched.csv`` (and the command lists them), never dropped.
Canvas: the columns of its gradebook export (``Student, ID, SIS User ID, SIS Login ID, Section``)
then the assignment, whose header Canvas matches by name. Moodle: the offline grading
worksheet's columns; Moodle matches rows on ``Identifier``.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

from grader.report.outdir import write_text_atomic
from grader.report.text import csv_cell, fmt_points
from grader.results import GradeReport

CANVAS_NAME = re.compile(r"^(?P<name>[^_]+)_(?:late_)?(?P<user>\d+)_(?P<file>\d+)_(?P<rest>.+)$")
MOODLE_NAME = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?:file|onlinetext)(?:_(?P<rest>.*))?$")
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                 "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
CANVAS_FILE, MOODLE_FILE, UNMATCHED_FILE = "canvas.csv", "moodle.csv", "lms-unmatched.csv"


@dataclass(frozen=True)
class LmsMatch:
    report: GradeReport
    lms: str
    """"canvas" or "moodle"."""
    lms_id: str
    """Canvas user id, or Moodle participant id."""
    name: str
    """The student's name as the file name gives it (Canvas: lastfirst, lower case, no spaces)."""


@dataclass(frozen=True)
class LmsFiles:
    canvas: Path | None
    moodle: Path | None
    unmatched: Path | None
    matched_canvas: int
    matched_moodle: int
    unmatched_ids: list[str]
    """Student ids of graded submissions whose file name matches neither pattern."""


def match(report: GradeReport) -> LmsMatch | None:
    """The LMS id in a submission's file name, or None."""
    name = report.submission.filename
    m = MOODLE_NAME.match(name)
    if m:
        return LmsMatch(report, "moodle", m["participant"], m["name"])
    m = CANVAS_NAME.match(name)
    if m:
        return LmsMatch(report, "canvas", m["user"], m["name"])
    return None


def _points(report: GradeReport) -> str:
    return fmt_points(report.score.earned)


def canvas_csv(matches: list[LmsMatch], assignment_column: str) -> str:
    """Canvas's grades-import CSV: one row per student, the points earned in `assignment_column`
    (the assignment's name as the Canvas gradebook shows it, e.g. "HW3 masked attention (1234)")."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CANVAS_HEADER + [csv_cell(assignment_column)])
    possible = max((m.report.score.possible for m in matches), default=0.0)
    w.writerow(["Points Possible", "", "", "", "", fmt_points(possible)])
    for m in sorted(matches, key=lambda m: (m.name, m.lms_id)):
        w.writerow([csv_cell(m.name), m.lms_id, "", "", "", _points(m.report)])
    return buf.getvalue()


def moodle_csv(matches: list[LmsMatch]) -> str:
    """Moodle's grading worksheet (Assignment > View all submissions > Upload grading worksheet)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(MOODLE_HEADER)
    for m in sorted(matches, key=lambda m: int(m.lms_id)):
        w.writerow([f"Participant {m.lms_id}", csv_cell(m.name), "", "", _points(m.report),
                    fmt_points(m.report.score.possible), "Yes", "", "", ""])
    return buf.getvalue()


def unmatched_csv(reports: list[GradeReport]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student_id", "filename", "earned", "possible"])
    for r in sorted(reports, key=lambda r: r.submission.id):
        w.writerow([csv_cell(r.submission.id), csv_cell(r.submission.filename), fmt_points(r.score.earned),
                    fmt_points(r.score.possible)])
    return buf.getvalue()


def write_lms(reports: list[GradeReport], out_dir: str | os.PathLike[str], *, canvas_column: str) -> LmsFiles:
    """canvas.csv / moodle.csv for the submissions whose names match, lms-unmatched.csv for the
    rest; nothing (and stale files removed) when no name matches either LMS."""
    out = Path(out_dir)
    found = [(r, match(r)) for r in reports]
    canvas = [m for _, m in found if m is not None and m.lms == "canvas"]
    moodle = [m for _, m in found if m is not None and m.lms == "moodle"]
    rest = [r for r, m in found if m is None]
    paths: dict[str, Path | None] = {}
    for name, rows, text in ((CANVAS_FILE, canvas, lambda: canvas_csv(canvas, canvas_column)),
                             (MOODLE_FILE, moodle, lambda: moodle_csv(moodle)),
                             (UNMATCHED_FILE, rest if (canvas or moodle) else [], lambda: unmatched_csv(rest))):
        if rows:
            paths[name] = write_text_atomic(out / name, text())
        else:
            (out / name).unlink(missing_ok=True)
            paths[name] = None
    return LmsFiles(canvas=paths[CANVAS_FILE], moodle=paths[MOODLE_FILE], unmatched=paths[UNMATCHED_FILE],
                    matched_canvas=len(canvas), matched_moodle=len(moodle),
                    unmatched_ids=[r.submission.id for r in rest] if (canvas or moodle) else [])
