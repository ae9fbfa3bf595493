"""grades.csv, Gradescope results.json, JUnit XML, Markdown, and writing/re-rendering a whole batch."""

from __future__ import annotations

import csv
import io
import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from grader.errors import GraderError
from grader.submission.ids import name_hash
from grader.report import (
    gradescope_results, grades_csv, junit_xml, markdown_summary, write_all,
)
from grader.report.rerender import ResultsUnreadable, rerender
from grader.results import Outcome, report_from_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
CASE_IDS = ["causal_mask_square", "masked_attention_causal", "padding_right[right]", "fully_masked_rows",
            "hidden_padding[mixed]", "fp16_fill"]


def fixtures():
    return [report_from_dict(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(DATA.glob("*.json"))]


def _renamed(report, sid):
    return replace(report, submission=replace(report.submission, id=sid))


# --- CSV -------------------------------------------------------------------------------------------

def test_csv_has_stable_columns_and_one_row_per_student():
    reports = fixtures()
    forward, backward = grades_csv(reports), grades_csv(list(reversed(reports)))
    assert forward == backward
    rows = list(csv.reader(io.StringIO(forward)))
    assert rows[0] == ["student_id", "earned", "possible", "percent"] + CASE_IDS
    assert rows[1] == ["ada_zero_fill", "5", "9", "55.56", "1", "0", "2", "1", "0", "1"]
    assert [r[0] for r in rows[1:]] == ["ada_zero_fill", "ben_after_softmax", "cy_noisy", "dee_perfect", "eve_syntax"]
    assert rows[4][1:4] == ["9", "9", "100.00"]


def test_csv_neutralises_formula_injection_in_student_ids():
    base = fixtures()[3]
    reports = [_renamed(base, sid) for sid in ['=HYPERLINK("http://x","y")', "+1", "-1", "@SUM(A1)", "plain"]]
    ids = [r[0] for r in list(csv.reader(io.StringIO(grades_csv(reports))))[1:]]
    assert sorted(ids) == sorted(["'=HYPERLINK(\"http://x\",\"y\")", "'+1", "'-1", "'@SUM(A1)", "plain"])


# --- Gradescope ------------------------------------------------------------------------------------

def test_gradescope_fields_and_visibility():
    ada = fixtures()[0]
    res = gradescope_results(ada)
    json.dumps(res, allow_nan=False)
    assert res["score"] == 5.0 and res["visibility"] == "visible" and res["stdout_visibility"] == "hidden"
    assert [t["name"] for t in res["tests"]][1] == "Causal attention weights (5×5) (masked_attention_causal)"
    assert [(t["score"], t["max_score"], t["status"], t["visibility"]) for t in res["tests"]] == [
        (1.0, 1.0, "passed", "visible"), (0.0, 2.0, "failed", "visible"), (2.0, 2.0, "passed", "visible"),
        (1.0, 1.0, "passed", "visible"), (0.0, 2.0, "failed", "after_published"),
        (1.0, 1.0, "passed", "after_published")]
    failing = res["tests"][1]["output"]
    assert "Masked scores must be -inf" in failing and "query 0 → key 1" in failing
    assert res["tests"][1]["tags"] == ["mask-fill-value"]
    hidden = res["tests"][4]["output"]
    assert "SECRET" not in json.dumps(res) and "details are not shown" in hidden
    assert "SECRET-MESSAGE" in gradescope_results(ada, release_hidden=True)["tests"][4]["output"]


def test_gradescope_load_error_and_self_check_are_said_at_the_top():
    eve = fixtures()[4]
    res = gradescope_results(replace(eve, public_only=True))
    assert res["score"] == 0
    assert res["output"].startswith("Self-check: public cases only, not an official grade.")
    assert "SyntaxError: invalid syntax" in res["output"]


# --- JUnit -----------------------------------------------------------------------------------------

SUITE_ATTRS = {"name", "tests", "failures", "errors", "time", "timestamp", "hostname", "id", "package"}


def test_junit_is_well_formed_and_has_the_schema_required_structure():
    reports = fixtures()
    root = ET.fromstring(junit_xml(reports).encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == sorted(r.submission.id for r in reports)
    for suite, report in zip(suites, sorted(reports, key=lambda r: r.submission.id)):
        assert SUITE_ATTRS <= set(suite.attrib), suite.attrib
        assert len(suite.get("timestamp")) == 19 and suite.get("timestamp")[10] == "T"
        assert suite.find("properties") is not None
        assert suite.find("system-out") is not None and suite.find("system-err") is not None
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == CASE_IDS
        for case, result in zip(cases, report.cases):
            assert {"name", "classname", "time"} <= set(case.attrib)
            assert case.get("classname") == f"masked-attention.{report.submission.id}"
            bad = case.findall("failure") + case.findall("error")
            if result.outcome is Outcome.PASSED:
                assert bad == []
            else:
                assert len(bad) == 1 and bad[0].get("type") and bad[0].get("message")
                assert bad[0].tag == ("failure" if result.outcome is Outcome.FAILED else "error")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(len(c.findall("failure")) for c in cases)
        assert int(suite.get("errors")) == sum(len(c.findall("error")) for c in cases)
    assert int(root.get("tests")) == 30 and int(root.get("failures")) == 5 and int(root.get("errors")) == 7
    ada_fail = suites[0].findall("testcase")[1].find("failure")
    assert ada_fail.get("message").startswith("Your weights give attention to future keys")


def test_junit_escapes_markup_and_drops_control_characters_and_hidden_details():
    xml = junit_xml(fixtures())
    root = ET.fromstring(xml)
    noisy = next(s for s in root.findall("testsuite") if s.get("name") == "cy_noisy")
    assert "<script>alert(1)</script>" in noisy.find("system-out").text
    assert "<b>float</b>" in noisy.findall("testcase")[3].find("error").text
    assert "\x1b" not in xml and "\x07" not in xml and "SECRET" not in xml


# --- Markdown --------------------------------------------------------------------------------------

def test_markdown_summary_table_and_failures():
    md = markdown_summary(fixtures())
    lines = md.splitlines()
    assert lines[0] == "## Masked attention: 5 graded"
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| Student | Score | Points | Failing cases |"
    assert table[1] == "| --- | ---: | ---: | --- |"
    assert table[2] == r"| ada\_zero\_fill | 56% | 5 / 9 | masked\_attention\_causal, hidden\_padding\[mixed\] |"
    assert "### ben\\_after\\_softmax: 56%" in lines
    assert any("*The mask must be applied before the softmax, not to the weights*" in line for line in lines)
    assert "SECRET" not in md


def test_markdown_escapes_student_text():
    evil = _renamed(fixtures()[0], "x|y<script>alert(1)</script>")
    md = markdown_summary([evil])
    assert "<script>" not in md and "&lt;script&gt;" in md
    row = next(line for line in md.splitlines() if line.startswith("| x"))
    assert row.replace("\\|", "").count("|") == 5  # four cells, no extra column


# --- writing everything, then again from JSON --------------------------------------------------------

def test_write_all_then_rerender_from_json_gives_the_same_files(tmp_path):
    reports = fixtures()
    first = tmp_path / "run"
    written = write_all(reports, first, run={"date": "2026-11-29T10:05:00Z"})
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(["ada_zero_fill.html", "ben_after_softmax.html", "cy_noisy.html", "dee_perfect.html",
                            "eve_syntax.html", "index.html", "grades.csv", "junit.xml", "summary.md",
                            "gradescope", "results"])
    assert len(written.results) == 5 and len(list((first / "gradescope").glob("*.json"))) == 5
    again = rerender(first / "results", tmp_path / "again", run={"date": "2026-11-29T10:05:00Z"})
    for p in [*written.reports, written.index, written.grades_csv, written.junit, written.summary]:
        assert (tmp_path / "again" / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8"), p.name
    assert again.results == []


def test_rerender_defaults_to_the_results_parent_and_refuses_bad_files(tmp_path):
    results = tmp_path / "out" / "results"
    results.mkdir(parents=True)
    for p in DATA.glob("*.json"):
        shutil.copy(p, results)
    written = rerender(results)
    assert written.index == tmp_path / "out" / "index.html"
    (results / "zz_bad.json").write_text('{"schema_version": 99}', encoding="utf-8")
    with pytest.raises(ResultsUnreadable, match="zz_bad.json is not a readable grading result"):
        rerender(results)
    with pytest.raises(ResultsUnreadable, match="no results folder"):
        rerender(tmp_path / "missing")


def test_ids_that_would_share_a_file_or_an_outputs_name_get_their_own(tmp_path):
    base = fixtures()[3]
    ids = ["a/b", "a_b", "A_b", "index", "grades", "李雷"]
    written = write_all([_renamed(base, sid) for sid in ids], tmp_path)
    pages = {p.name for p in written.reports}
    assert len({p.casefold() for p in pages}) == len(ids) and "李雷.html" in pages and "a_b.html" in pages
    assert "index.html" not in pages and "grades.html" not in pages
    assert "<h1>Feedback" not in (tmp_path / "index.html").read_text(encoding="utf-8")  # still the dashboard
    assert len(list((tmp_path / "results").glob("*.json"))) == len(ids)


def test_ids_whose_files_would_still_meet_without_case_are_refused(tmp_path):
    base = fixtures()[3]
    crafted = f"x-{name_hash(b'X')}"  # spelled like the file the id "X" gets
    with pytest.raises(GraderError, match=f"would share the file {crafted}.html"):
        write_all([_renamed(base, "X"), _renamed(base, crafted)], tmp_path)


def test_pages_the_caller_just_wrote_are_not_rendered_again(tmp_path):
    reports = fixtures()
    (tmp_path / "ada_zero_fill.html").write_text("written while grading", encoding="utf-8")
    written = write_all(reports, tmp_path, pages_current={"ada_zero_fill", "ben_after_softmax"})
    assert (tmp_path / "ada_zero_fill.html").read_text(encoding="utf-8") == "written while grading"
    # listed but missing (removed since): written after all; not listed: written
    assert "<html" in (tmp_path / "ben_after_softmax.html").read_text(encoding="utf-8").lower()
    assert "<html" in (tmp_path / "cy_noisy.html").read_text(encoding="utf-8").lower()
    assert len(written.reports) == len(reports) and all(p.is_file() for p in written.reports)
