"""Canvas and Moodle gradebook imports (grader.report.lms) from the LMS ids in file names."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

from grader.report.lms import CANVAS_HEADER, MOODLE_HEADER, match, write_lms
from grader.results import report_from_dict

ROOT = Path(__file__).resolve().parents[2]
BASE = report_from_dict(json.loads((ROOT / "tests" / "data" / "results" / "dee_perfect.json").read_text()))


def _report(filename: str, sid: str, earned: float = 53.0):
    return dataclasses.replace(BASE, submission=dataclasses.replace(BASE.submission, id=sid, filename=filename),
                               score=dataclasses.replace(BASE.score, earned=earned, possible=53.0))


def test_patterns():
    assert (m := match(_report("doejane_late_12345_67890_attention.py", "x"))) and (m.lms, m.lms_id) == ("canvas", "12345")
    assert match(_report("doejane_12345_67890_attention-1.ipynb", "x")).lms_id == "12345"
    m = match(_report("Jane Doe_4711_assignsubmission_file_attention.py", "x"))
    assert (m.lms, m.lms_id, m.name) == ("moodle", "4711", "Jane Doe")
    assert match(_report("Li Lei_99_assignsubmission_file", "x")).lms_id == "99"  # Moodle's folder per student
    assert match(_report("alice.py", "alice")) is None


def test_imports_and_the_unmatched_listed(tmp_path):
    reports = [_report("doejane_late_12345_67890_attention.py", "doejane_12345", 40.5),
               _report("smithbob_222_333_attention.py", "smithbob_222"),
               _report("Jane Doe_4711_assignsubmission_file_attention.py", "jane-doe_4711", 12),
               _report("=cmd|calc.py", "cmd-calc-1a2b3c4d")]
    files = write_lms(reports, tmp_path, canvas_column="HW3 masked attention (1234)")
    canvas = list(csv.reader(io.StringIO(files.canvas.read_text())))
    assert canvas[0] == CANVAS_HEADER + ["HW3 masked attention (1234)"]
    assert canvas[1][0] == "Points Possible" and canvas[1][5] == "53"
    assert canvas[2:] == [["doejane", "12345", "", "", "", "40.5"], ["smithbob", "222", "", "", "", "53"]]
    moodle = list(csv.reader(io.StringIO(files.moodle.read_text())))
    assert moodle[0] == MOODLE_HEADER
    assert moodle[1][:6] == ["Participant 4711", "Jane Doe", "", "", "12", "53"]
    assert files.unmatched_ids == ["cmd-calc-1a2b3c4d"]
    rows = list(csv.reader(io.StringIO(files.unmatched.read_text())))
    assert rows[1][:2] == ["cmd-calc-1a2b3c4d", "'=cmd|calc.py"]  # a formula is neutralised

    plain = write_lms([_report("alice.py", "alice")], tmp_path, canvas_column="HW3")
    assert plain.canvas is None and plain.moodle is None and plain.unmatched_ids == []
    assert not (tmp_path / "canvas.csv").exists()  # a stale import from an earlier run is gone
