"""The ledger: a result is found again only under exactly the key it was graded with; a file graded
before by other cases, reference, spec or grader is graded again, and the ledger says what changed."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from grader.assignment.fingerprint import Fingerprint
from grader.errors import GradebookBusy
from grader.records.ledger import LEDGER_NAME, Ledger, LedgerKey, Lookup, mode_of
from grader.results import report_from_dict, to_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _report(name: str = "ada_zero_fill.json"):
    return report_from_dict(json.loads((DATA / name).read_text(encoding="utf-8")))


PRINT = Fingerprint(cases="c1", reference="r1", spec="s1", grader="0.1.0")
KEY = LedgerKey("ada", "ab" * 32, "masked-attention", mode_of(public_only=False, device="cpu"), PRINT)


def test_mode_names_the_cases_run_and_the_device():
    assert mode_of(public_only=False, device="cpu") == "all@cpu"
    assert mode_of(public_only=True, device="cuda") == "public@cuda"


def test_recorded_result_comes_back_identical_after_reopening(tmp_path):
    report = _report()
    with Ledger(tmp_path) as ledger:
        assert ledger.lookup(KEY) == Lookup(None, ())
        ledger.record(KEY, report)
    with Ledger(tmp_path) as ledger:
        assert to_dict(ledger.lookup(KEY).report) == to_dict(report)
        assert len(ledger) == 1
    assert (tmp_path / LEDGER_NAME).is_file()


@pytest.mark.parametrize("field, value", [
    ("student_id", "ben"), ("sha256", "cd" * 32), ("assignment", "mha-kv-cache"), ("mode", "public@cpu"),
])
def test_another_file_or_mode_misses_with_nothing_changed(tmp_path, field, value):
    with Ledger(tmp_path) as ledger:
        ledger.record(KEY, _report())
        assert ledger.lookup(replace(KEY, **{field: value})) == Lookup(None, ())


@pytest.mark.parametrize("changes, said", [
    (dict(cases="c2"), ("cases",)), (dict(reference="r2"), ("reference",)), (dict(spec="s2"), ("spec",)),
    (dict(grader="0.2.0"), ("grader",)), (dict(cases="c2", spec="s2"), ("cases", "spec")),
])
def test_a_changed_fingerprint_misses_and_says_what_changed(tmp_path, changes, said):
    with Ledger(tmp_path) as ledger:
        ledger.record(KEY, _report())
    with Ledger(tmp_path) as ledger:
        assert ledger.lookup(replace(KEY, fingerprint=replace(PRINT, **changes))) == Lookup(None, said)
        assert ledger.lookup(KEY).report is not None


def test_an_entry_of_a_ledger_from_before_fingerprints_is_graded_again_by_the_grader(tmp_path):
    with sqlite3.connect(tmp_path / LEDGER_NAME) as conn:
        conn.execute("CREATE TABLE entries (student_id TEXT, sha256 TEXT, assignment TEXT, version TEXT, "
                     "grader_version TEXT, mode TEXT, result_json TEXT, recorded_at TEXT)")
        conn.execute("INSERT INTO entries VALUES (?, ?, ?, '1.0', '0.1.0', ?, '{}', '')",
                     (KEY.student_id, KEY.sha256, KEY.assignment, KEY.mode))
    with Ledger(tmp_path) as ledger:
        assert ledger.lookup(KEY) == Lookup(None, ("grader",))
        ledger.record(KEY, _report())
        assert ledger.lookup(KEY).report is not None


def test_recording_the_same_key_again_replaces_it(tmp_path):
    first, second = _report("ada_zero_fill.json"), _report("dee_perfect.json")
    with Ledger(tmp_path) as ledger:
        ledger.record(KEY, first)
        ledger.record(KEY, second)
        assert len(ledger) == 1
        assert ledger.lookup(KEY).report.submission.id == second.submission.id


def test_an_unreadable_stored_result_means_grade_again(tmp_path):
    with Ledger(tmp_path) as ledger:
        ledger.record(KEY, _report())
    with sqlite3.connect(tmp_path / LEDGER_NAME) as conn:
        conn.execute("UPDATE graded SET result_json = '{\"schema_version\": 999}'")
    with Ledger(tmp_path) as ledger:
        assert ledger.lookup(KEY).report is None


def test_a_locked_ledger_is_reported_as_busy(tmp_path):
    Ledger(tmp_path).close()
    holder = sqlite3.connect(tmp_path / LEDGER_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Ledger(tmp_path, busy_timeout_s=0.1) as ledger:
            with pytest.raises(GradebookBusy, match=r"ledger\.sqlite is busy \(another grader is writing to it"):
                ledger.record(KEY, _report())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
