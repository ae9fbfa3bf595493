"""`grader report` writes the Canvas and Moodle imports from the LMS ids in the submissions' file
names and lists, on the terminal and in lms-unmatched.csv, every submission that matched neither."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: the whole `grader report` (pages, dashboard, exports)

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
NAMES = {"ada_zero_fill": "lovelaceada_late_1815_901_attention.py",
         "ben_after_softmax": "Ben Bitdiddle_42_assignsubmission_file_attention.ipynb",
         "cy_noisy": "cy.py"}


def test_report_writes_lms_imports_and_lists_the_unmatched(tmp_path):
    results = tmp_path / "out" / "results"
    results.mkdir(parents=True)
    for p in DATA.glob("*.json"):
        d = json.loads(p.read_text(encoding="utf-8"))
        d["submission"]["filename"] = NAMES.get(p.stem, d["submission"]["filename"])
        (results / p.name).write_text(json.dumps(d), encoding="utf-8")
    r = CliRunner().invoke(main, ["report", str(tmp_path / "out"), "--canvas-column", "HW1 (77)"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    assert f"Canvas import: {out / 'canvas.csv'} (1 student(s))" in r.output
    assert f"Moodle grading worksheet: {out / 'moodle.csv'} (1 student(s))" in r.output
    assert "Not in any LMS file (3;" in r.output and "cy_noisy" in r.output
    canvas = list(csv.reader(io.StringIO((out / "canvas.csv").read_text())))
    assert canvas[0][-1] == "HW1 (77)" and canvas[2][:2] == ["lovelaceada", "1815"]
    moodle = list(csv.reader(io.StringIO((out / "moodle.csv").read_text())))
    assert moodle[1][:2] == ["Participant 42", "Ben Bitdiddle"]
    unmatched = list(csv.DictReader(io.StringIO((out / "lms-unmatched.csv").read_text())))
    assert sorted(u["student_id"] for u in unmatched) == ["cy_noisy", "dee_perfect", "eve_syntax"]
