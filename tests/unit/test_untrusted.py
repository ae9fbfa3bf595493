"""The one rule for untrusted text (grader.untrusted), where worker text enters, and every sink fed the
nasty corpus (tests/nasty.py): SQLite ledger and gradebook, results JSON, HTML, CSV, JUnit XML,
Markdown, GitHub annotations, Gradescope JSON and the terminal."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

import nasty
from grader import untrusted
from grader.cli.app import main
from grader.cli.student import ci_lines
from grader.grading.single import Graded
from grader.records.gradebook import Gradebook, scores_csv
from grader.assignment.fingerprint import Fingerprint
from grader.records.ledger import Ledger, LedgerKey
from grader.report import gradescope_results, grades_csv, junit_xml, markdown_summary, render_dashboard
from grader.report import render_submission, write_all
from grader.report.rerender import ResultsUnreadable, load_results, write_result_json
from grader.results import report_from_dict, to_dict
from grader.sandbox.wire import PREFIX, decode_frame, encode_frame

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


def _base(name: str = "ada_zero_fill.json"):
    return report_from_dict(json.loads((DATA / name).read_text(encoding="utf-8")))


def _nasty(name: str = "eve_syntax.json"):
    return nasty.nasty_report(_base(name))


# --- the rule ----------------------------------------------------------------------------------------

def test_text_replaces_surrogates_and_removes_escapes_and_controls():
    out = untrusted.text(nasty.MULTILINE)
    assert nasty.bad_chars(out) == []
    assert "notes_\ufffd.txt" in out and "\x1b" not in out and "pwned title" not in out  # OSC body gone too
    assert "real 15/41\nfake 41/41" in out  # a CR is a line break, never a return to overwrite the line
    assert "\n" not in untrusted.text(nasty.MULTILINE, multiline=False)


def test_text_is_bounded_with_a_note():
    out = untrusted.text(nasty.BIG, 1000)
    assert out == "A" * 1000 + f"… ({len(nasty.BIG) - 1000} more characters not shown)"


@given(st.text())
def test_text_output_is_always_valid_and_idempotent(s):
    out = untrusted.text(s)
    out.encode("utf-8")  # no lone surrogate
    assert nasty.bad_chars(out) == []
    assert untrusted.text(out) == out


def test_names_are_shown_escaped_never_raw():
    assert untrusted.name(b"ren\xe9e_4711_hw.py") == "ren\\xe9e_4711_hw.py"
    assert untrusted.name("a\r\x1b[2K\x1b]0;t\x07b\u202e.py") == "a\\x0d\\x1b[2K\\x1b]0;t\\x07b\\u202e.py"
    assert untrusted.name("李雷.py") == "李雷.py"
    assert len(untrusted.name("x" * 5000)) == untrusted.NAME_LIMIT


def test_worker_text_is_made_safe_where_it_enters_the_grader():
    frame = encode_frame({"ok": False, "error": {"type": nasty.RTL, "message": nasty.ALL,
                                                 "traceback": nasty.MULTILINE + nasty.BIG},
                          "value": {nasty.ANSI: [nasty.SURROGATE]}})
    hlen, _ = PREFIX.unpack_from(frame)
    reply = decode_frame(frame[PREFIX.size:PREFIX.size + hlen], frame[PREFIX.size + hlen:],
                         on_text=untrusted.wire_text)
    [(key, [value])] = reply["value"].items()
    strings = [reply["error"]["type"], reply["error"]["message"], reply["error"]["traceback"], key, value]
    assert all(nasty.bad_chars(s) == [] for s in strings)
    assert len(reply["error"]["traceback"]) < untrusted.MAX_TEXT + 100
    assert value == "notes_\ufffd.txt and a lone \ufffd" and reply["error"]["type"] == "reporttxt.exe"


# --- the sinks -----------------------------------------------------------------------------------------

def test_sqlite_ledger_stores_and_returns_any_text(tmp_path):
    report = _nasty()
    key = LedgerKey(nasty.ALL, "ab" * 32, "masked-attention", "all@cpu", Fingerprint(nasty.ALL, "r", "s", "0.1.0"))
    with Ledger(tmp_path) as ledger:
        ledger.record(key, report)
        back = ledger.lookup(key).report
    assert back is not None and back.submission.id == untrusted.storable(nasty.ALL)
    assert str(back.cases[0].message).startswith(untrusted.storable(nasty.ALL))


def test_sqlite_gradebook_and_its_csv(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        run = book.start_run(assignment="a", version="1", grader_version="0", device="cpu", isolation="",
                             out_dir=nasty.SURROGATE)
        for i, text in enumerate(nasty.CORPUS[:-1]):
            r = _base()
            book.record(run, nasty.nasty_report(r, f"{text} {i}", ""), reused=False)
        rows = book.scores()
    assert len(rows) == len(nasty.CORPUS) - 1
    for row in csv.reader(io.StringIO(scores_csv(rows))):
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "|", "\t", "\r", " ")), cell
            assert nasty.bad_chars(cell) == [], cell


def test_results_json_is_valid_utf8_and_reads_back(tmp_path):
    path = write_result_json(_nasty(), tmp_path / "results")
    raw = path.read_bytes()
    raw.decode("utf-8")
    assert b"\\ud800" not in raw and b"\\udce9" not in raw
    [back] = load_results(tmp_path / "results")
    assert back.submission.id == untrusted.storable(nasty.ALL)


def test_results_json_holds_one_line_per_case_and_reads_back_as_written(tmp_path):
    report = _nasty()
    path = write_result_json(report, tmp_path / "results")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(to_dict(load_results(tmp_path / "results")[0])))
    assert sum(line.startswith('    {"id": ') for line in lines) == len(report.cases)
    assert len(lines) == len(to_dict(report)) + len(report.cases) + 3  # {, a line per field, ], }


def test_html_report_and_dashboard(tmp_path):
    pages = [render_submission(_nasty()), render_submission(_nasty(), release_hidden=True)]
    for html in pages + [render_dashboard([_nasty(), _nasty("dee_perfect.json")])]:
        assert nasty.bad_chars(html) == []
        assert html.lower().count("<script") == 1  # ours only
        assert "<img" not in html
        assert len(html) < 300_000  # 1 MB strings are cut
    assert all("&lt;/script&gt;&lt;script&gt;alert(1)" in html for html in pages)  # shown, escaped


def test_grades_csv():
    reports = [nasty.nasty_report(_base(), f"{f} {i}", "") for i, f in enumerate(nasty.CORPUS[:-1])]
    rows = list(csv.reader(io.StringIO(grades_csv(reports))))
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "|", "\t", "\r", " ")), cell
            assert nasty.bad_chars(cell) == []


def test_junit_xml_parses_and_holds_no_invalid_characters():
    text = junit_xml([_nasty(), _nasty("dee_perfect.json")])
    root = ET.fromstring(text.encode("utf-8"))
    assert nasty.bad_chars(text) == []
    assert len(text) < 400_000
    out = root.find("testsuite/system-out").text
    assert "nulbyte" in out and "notes_\ufffd.txt" in out  # the public output, cleaned


def test_junit_and_markdown_never_hold_output_printed_during_hidden_cases():
    secret = "HIDDEN-INPUT shape=(2, 2, 5, 8) first=0.1234"
    base = _base("dee_perfect.json")
    r = nasty.nasty_report(base)
    r = replace(r, load=replace(r.load, hidden_stdout=secret, hidden_stderr=secret))
    for text in (junit_xml([r]), markdown_summary([r]), render_submission(r), json.dumps(gradescope_results(r))):
        assert "HIDDEN-INPUT" not in text
    assert "HIDDEN-INPUT" in render_submission(r, release_hidden=True)  # the instructor's own view


def test_markdown_summary_has_no_live_mentions_links_emoji_or_html():
    text = markdown_summary([_nasty(), _nasty("ada_zero_fill.json")])
    assert nasty.bad_chars(text) == []
    assert not re.search(r"(?<![\w`])@[A-Za-z0-9]", text), "a live @mention"
    assert not re.search(r"https?://|www\.", text), "a live link"
    assert not re.search(r":[a-z0-9_+-]+:", text), "a live :emoji:"
    assert "<script" not in text and "<img" not in text
    for line in text.splitlines():
        assert not line.startswith(("|", "-", "#")) or line.startswith(("| ", "- ", "## ", "### ")), line


def test_github_annotations_and_ci_log_cannot_start_a_command():
    g = Graded(report=_nasty("ada_zero_fill.json"), assignment=None, isolation="process", hidden_cases=0,
               hidden_points=0.0)
    lines, _ = ci_lines(g, min_score=100, file=nasty.ALL)
    annotations = [line for line in lines if line.startswith("::error")]
    assert annotations and lines[len(annotations)].startswith("::stop-commands::")
    for line in lines:
        assert nasty.bad_chars(line) == [] and "\n" not in line
        assert "##[" not in line
    assert all(line.count("::") == 2 for line in annotations)  # the prefix and the separator, nothing forged
    assert lines[-1] == f"::{lines[len(annotations)].split('::')[-1]}::"  # the fence ends with its own token
    assert all("::" not in line for line in lines[len(annotations) + 1:-1])


def test_gradescope_json():
    text = json.dumps(gradescope_results(_nasty(), release_hidden=True), ensure_ascii=False)
    text.encode("utf-8")
    assert nasty.bad_chars(json.loads(text)["tests"][0]["output"]) == []


def test_write_all_writes_every_output_for_nasty_reports(tmp_path):
    written = write_all([_nasty(), nasty.nasty_report(_base("dee_perfect.json"), "index")], tmp_path)
    assert written.index == tmp_path / "index.html" and len(written.reports) == 2
    assert "index.html" not in {p.name for p in written.reports}
    for p in tmp_path.rglob("*"):
        if p.is_file():
            p.read_bytes().decode("utf-8")


def test_terminal_gradebook_history_prints_no_raw_escapes(tmp_path):
    path = tmp_path / "g.sqlite"
    forged = "evil\r\x1b[2K\x1b]0;pwned\x07student 41/41 100.0%\u202e"
    with Gradebook(path) as book:
        run = book.start_run(assignment="masked-attention", version="1.0", grader_version="0", device="cpu",
                             isolation="", out_dir=str(tmp_path))
        r = _base()
        book.record(run, replace(r, submission=replace(r.submission, id="mallory", filename=forged)), reused=False)
        book.finish_run(run, status="complete", graded=1, reused=0, failed_to_load=0, errors=0)
    for args in (["history", "mallory"], ["runs"], ["history", "nobody\x1b[2K"]):
        result = CliRunner().invoke(main, ["gradebook", *args, "--gradebook", str(path)])
        assert nasty.bad_chars(result.output) == [], result.output
    out = CliRunner().invoke(main, ["gradebook", "history", "mallory", "--gradebook", str(path)]).output
    assert "evil \\x1b[2K\\x1b]0;pwned\\x07student" in out  # shown escaped; the CR is a space


def test_report_dicts_hold_only_valid_text_after_the_rule():
    # what the engine stores is valid by construction: json_text never fails and never writes a surrogate
    text = untrusted.json_text(to_dict(_nasty()))
    assert not re.search("[\ud800-\udfff]", text)
    json.loads(text)


def test_load_results_takes_held_reports_for_their_files_and_reads_the_rest(tmp_path):
    # A batch's own results are held in memory: their files are not read again (this one would not
    # even parse); the others are read, and the order is still the files' order.
    report = _nasty()
    write_result_json(report, tmp_path / "results")
    (tmp_path / "results" / "aaa.json").write_text("not json", encoding="utf-8")
    with pytest.raises(ResultsUnreadable):
        load_results(tmp_path / "results")
    held = _base()
    reports = load_results(tmp_path / "results", known={"aaa.json": held})
    assert reports[0] is held and len(reports) == 2
    assert reports[1].submission.id == untrusted.storable(nasty.ALL)
