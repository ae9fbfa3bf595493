"""The gradebook: runs and scores kept across runs, read back as history and CSV."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from grader.errors import GradebookBusy, GraderError
from grader.records.gradebook import Gradebook, scores_csv
from grader.results import Points, report_from_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _report(sid: str, earned: float, possible: float = 41.0, name: str = "dee_perfect.json"):
    r = report_from_dict(json.loads((DATA / name).read_text(encoding="utf-8")))
    return replace(r, submission=replace(r.submission, id=sid, filename=f"{sid}.py"), score=Points(earned, possible))


def _run(book: Gradebook, out: str = "/reports/a", version: str = "1.0") -> int:
    return book.start_run(assignment="masked-attention", version=version, grader_version="0.1.0", device="cpu",
                          isolation="", out_dir=out)


def test_runs_and_scores_are_kept_and_read_back(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        r1 = _run(book)
        book.record(r1, _report("alice", 30), reused=False)
        book.record(r1, _report("bob", 41), reused=False)
        book.finish_run(r1, status="complete", graded=2, reused=0, failed_to_load=0, errors=0,
                        isolation="process+rlimits")
        r2 = _run(book)
        book.record(r2, _report("alice", 41), reused=False)
        book.record(r2, _report("bob", 41), reused=True)
        book.finish_run(r2, status="complete", graded=1, reused=1, failed_to_load=0, errors=0)
    with Gradebook(path, readonly=True) as book:
        runs = book.runs()
        assert [(r.id, r.status, r.graded, r.reused, r.isolation) for r in runs] == [
            (1, "complete", 2, 0, "process+rlimits"), (2, "complete", 1, 1, "")]
        assert [(h.run_id, h.earned, h.reused) for h in book.history("alice")] == [(1, 30.0, False), (2, 41.0, False)]
        assert [(s.student_id, s.run_id) for s in book.scores(latest=True)] == [("alice", 2), ("bob", 2)]
        assert len(book.scores()) == 4
        assert book.students() == ["alice", "bob"]
        assert book.history("nobody") == []


def test_recording_a_student_twice_in_one_run_keeps_one_row(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        run = _run(book)
        book.record(run, _report("alice", 10), reused=False)
        book.record(run, _report("alice", 20), reused=False)
        assert [(s.student_id, s.earned) for s in book.scores()] == [("alice", 20.0)]


def test_a_run_left_running_on_the_same_folder_is_marked_interrupted(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        _run(book, out="/reports/a")           # a run that crashed
        _run(book, out="/reports/other")       # another folder's run, possibly alive
        _run(book, out="/reports/a")
        assert [r.status for r in book.runs()] == ["interrupted", "running", "running"]


def test_csv_export_has_one_row_per_score_and_neutralises_formulas(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        run = _run(book)
        book.record(run, _report("=cmd", 20.5), reused=True)
        book.finish_run(run, status="complete", graded=0, reused=1, failed_to_load=0, errors=0)
        rows = list(csv.DictReader(io.StringIO(scores_csv(book.scores()))))
    assert len(rows) == 1
    row = rows[0]
    assert row["student_id"] == "'=cmd"
    assert (row["earned"], row["possible"], row["percent"], row["reused"], row["run_status"]) == (
        "20.5", "41", "50.00", "yes", "complete")


def test_missing_gradebook_is_a_clear_error_and_not_created(tmp_path):
    with pytest.raises(GraderError, match=r"no gradebook at .*nope\.sqlite; run `grader grade"):
        Gradebook(tmp_path / "nope.sqlite", readonly=True)
    assert not (tmp_path / "nope.sqlite").exists()


def test_a_locked_gradebook_is_reported_as_busy(tmp_path):
    path = tmp_path / "g.sqlite"
    Gradebook(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Gradebook(path, busy_timeout_s=0.1) as book:
            with pytest.raises(GradebookBusy, match=r"g\.sqlite is busy"):
                _run(book)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
