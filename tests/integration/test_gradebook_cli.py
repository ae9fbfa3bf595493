"""`grader gradebook export/history/runs` through the real CLI, on a gradebook with known content."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main
from grader.records.gradebook import Gradebook
from grader.results import LoadInfo, Points, report_from_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _report(sid: str, earned: float, *, load_ok: bool = True):
    r = report_from_dict(json.loads((DATA / "dee_perfect.json").read_text(encoding="utf-8")))
    return replace(r, submission=replace(r.submission, id=sid, filename=f"{sid}_attention.py"),
                   score=Points(earned, 41.0), load=LoadInfo(ok=load_ok))


@pytest.fixture
def outdir(tmp_path) -> Path:
    """reports/masked-attention with two runs: run 1 interrupted (alice only), run 2 complete."""
    out = tmp_path / "reports" / "masked-attention"
    out.mkdir(parents=True)
    with Gradebook(out / "gradebook.sqlite") as book:
        r1 = book.start_run(assignment="masked-attention", version="1.0", grader_version="0.1.0", device="cpu",
                            isolation="", out_dir=str(out))
        book.record(r1, _report("doe_jane_12345", 12), reused=False)
        book.finish_run(r1, status="interrupted", graded=1, reused=0, failed_to_load=0, errors=0)
        r2 = book.start_run(assignment="masked-attention", version="1.1", grader_version="0.1.0", device="cpu",
                            isolation="", out_dir=str(out))
        book.record(r2, _report("doe_jane_12345", 12), reused=True)
        book.record(r2, _report("bob", 0, load_ok=False), reused=False)
        book.finish_run(r2, status="complete", graded=1, reused=1, failed_to_load=1, errors=0)
    return out


def invoke(*args):
    return CliRunner().invoke(main, ["gradebook", *map(str, args)])


def test_export_csv_has_every_run_and_score(outdir):
    result = invoke("export", "--csv", "-d", outdir)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["run_id"], r["run_status"], r["version"], r["student_id"], r["earned"], r["reused"], r["load_ok"])
            for r in rows] == [
        ("1", "interrupted", "1.0", "doe_jane_12345", "12", "no", "yes"),
        ("2", "complete", "1.1", "bob", "0", "no", "no"),
        ("2", "complete", "1.1", "doe_jane_12345", "12", "yes", "yes"),
    ]
    assert rows[0]["percent"] == "29.27" and rows[0]["filename"] == "doe_jane_12345_attention.py"


def test_export_latest_to_a_file_in_a_subprocess(outdir, tmp_path):
    target = tmp_path / "final.csv"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradebook", "export", "--csv", "--latest",
                           "--gradebook", str(outdir / "gradebook.sqlite"), "-o", str(target)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"Wrote {target}"
    rows = list(csv.DictReader(target.open()))
    assert [(r["run_id"], r["student_id"]) for r in rows] == [("2", "bob"), ("2", "doe_jane_12345")]


def test_history_shows_each_run_of_each_student(outdir):
    result = invoke("history", "doe_jane_12345", "bob", "-d", outdir)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "doe_jane_12345"
    assert lines[2].split()[:1] + lines[2].split()[2:7] == ["1", "masked-attention", "1.0", "12/41", "29.3%",
                                                             "doe_jane_12345_attention.py"]
    assert lines[2].endswith("[interrupted run]")
    assert lines[3].endswith("doe_jane_12345_attention.py  (reused)")
    assert "bob" in lines and lines[-1].endswith("bob_attention.py  (failed to load)")


def test_history_of_an_unknown_student_lists_the_known_ones(outdir):
    result = invoke("history", "carol", "-d", outdir)
    assert result.exit_code == 2
    assert result.output.strip() == (f"Error: no scores for 'carol' in {outdir / 'gradebook.sqlite'}; "
                                      "students there: bob, doe_jane_12345")


def test_runs_lists_status_and_counts(outdir):
    result = invoke("runs", "--gradebook", outdir / "gradebook.sqlite")
    assert result.exit_code == 0
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert [(r[0], r[4], r[5], r[6], r[7]) for r in rows] == [("1", "interrupted", "1", "0", "0"),
                                                               ("2", "complete", "1", "1", "1")]


def test_the_gradebook_is_found_under_reports_when_there_is_one(outdir, monkeypatch):
    monkeypatch.chdir(outdir.parent.parent)
    result = invoke("history", "bob")
    assert result.exit_code == 0 and "bob_attention.py" in result.output


def test_missing_gradebook_is_a_clear_error(tmp_path, monkeypatch):
    result = invoke("export", "--csv", "-d", tmp_path)
    assert result.exit_code == 2
    assert result.output.strip().startswith(f"Error: no gradebook at {tmp_path / 'gradebook.sqlite'}")
    assert not (tmp_path / "gradebook.sqlite").exists()
    monkeypatch.chdir(tmp_path)
    none = invoke("history", "bob")
    assert none.exit_code == 2 and "Error: no gradebook found (looked for reports/*/gradebook.sqlite)" in none.output


def test_export_needs_a_format_and_help_has_examples():
    assert invoke("export").exit_code == 2
    text = invoke("--help").output
    assert "grader gradebook export --csv -d reports/masked-attention" in text
    assert "grader gradebook history doe_jane_12345" in text
