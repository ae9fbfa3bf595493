"""A class of 20 with hostile names and messages mixed in, through the real CLI: all graded, every
export written and re-rendered, and nothing a submission says or is named reaches an output raw.

The names: one that is not UTF-8, all-Chinese ones, one per output of the folder (index), two that
differ only in case, one holding CR, an erase-line and an OSC title sequence; the submissions:
tests/data/hostile/ (a surrogate raised at import, a forged meta-device message, arguments printed
during hidden calls, timeout words in an import error, the nasty corpus) and a zip with a file and
a folder of the same name.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import nasty
from grader.cli.app import main
from grader.submission.ids import name_hash, student_id

pytestmark = pytest.mark.slow  # full tier: hostile submissions through the CLI, each running into a limit

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"
HOSTILE = ROOT / "tests" / "data" / "hostile"
CORRECT = SAMPLES / "correct" / "sdpa.py"
BUGGY = SAMPLES / "buggy" / "no_scaling.py"  # fails exactly the scaling cases

NOT_UTF8 = os.fsdecode(b"ren\xe9e_4711_hw.py")
ESCAPES = "mallory\r\x1b[2K\x1b]0;pwned\x07_hw.py"
HOSTILE_FILES = ["raises_surrogate_at_import.py", "forged_meta_message.py", "prints_args.py",
                 "time_words_at_import.py", "nasty_text.py"]


def _make_class(folder: Path) -> None:
    folder.mkdir()
    for name, src in [(NOT_UTF8, CORRECT), ("李雷.py", CORRECT), ("韩梅梅.py", BUGGY), ("index.py", CORRECT),
                      ("Alice.py", CORRECT), ("alice.py", BUGGY), (ESCAPES, BUGGY)]:
        shutil.copy(src, folder / name)
    for name in HOSTILE_FILES:
        shutil.copy(HOSTILE / name, folder / name)
    with zipfile.ZipFile(folder / "clash.zip", "w") as z:
        z.writestr("submission.py", CORRECT.read_text())
        z.writestr("utils", "x = 1\n")
        z.writestr("utils/helpers.py", "y = 2\n")
    for i in range(7):  # ordinary students around them
        shutil.copy(CORRECT if i % 2 else BUGGY, folder / f"student{i}.py")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    _make_class(base / "class")
    out = base / "out"
    result = CliRunner().invoke(main, ["grade", str(base / "class"), "-a", "masked-attention", "-o", str(out),
                                       "-j", "2"], catch_exceptions=False)
    results = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "results").glob("*.json")}
    return base, out, result, results


def _id(name: str) -> str:
    return student_id(name)


def test_all_twenty_are_graded_and_every_export_is_written(batch):
    base, out, result, results = batch
    assert result.exit_code == 0, result.output
    assert "20 submission(s): 20 graded, 0 reused from the ledger" in result.output
    assert len(results) == 20
    assert {"李雷", "韩梅梅", "ren-e_4711", "alice", f"alice-{name_hash('Alice.py')}",
            f"index-{name_hash('index.py')}", _id(ESCAPES), "clash"} <= set(results)
    pages = {p.name for p in out.glob("*.html")}
    assert pages == {f"{sid}.html" for sid in results} | {"index.html", "similarity.html"}
    for name in ("grades.csv", "junit.xml", "summary.md", "gradebook.sqlite", "ledger.sqlite"):
        assert (out / name).is_file(), name
    assert len(list((out / "gradescope").glob("*.json"))) == 20
    assert nasty.bad_chars(result.output) == []


def test_grader_report_re_renders_them_all(batch):
    base, out, _, results = batch
    again = base / "again"
    result = CliRunner().invoke(main, ["report", str(out), "-o", str(again)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Wrote 20 report(s)" in result.output
    # the similarity page needs the submissions' code, which re-rendering from results does not read
    assert {p.name for p in again.glob("*.html")} == {p.name for p in out.glob("*.html")} - {"similarity.html"}


def test_no_output_holds_raw_student_text(batch):
    _, out, _, _ = batch
    files = [out / n for n in ("grades.csv", "junit.xml", "summary.md", "index.html")]
    files += sorted(out.glob("*.html")) + sorted((out / "gradescope").glob("*.json"))
    for path in files:
        text = path.read_bytes().decode("utf-8")
        assert nasty.bad_chars(text) == [], path.name
        if path.suffix == ".html":
            data_blocks = text.lower().count('<script type="application/json"')  # the explorer's data, never run
            assert text.lower().count("<script") - data_blocks <= 1, path.name
    ET.fromstring((out / "junit.xml").read_bytes())
    for row in csv.reader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))):
        assert not any(cell.startswith(("=", "+", "-", "@", "|")) for cell in row)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w`])@[A-Za-z0-9]|https?://|www\.|:[a-z0-9_+-]+:", summary)


def test_a_surrogate_raised_at_import_is_that_students_load_error(batch):
    r = batch[3]["raises_surrogate_at_import"]
    assert not r["load"]["ok"] and "notes_\ufffd.txt" in r["load"]["message"]
    assert {c["concept"] for c in r["cases"]} == {"load-error"}


def test_a_file_name_that_is_not_utf8_is_graded_normally(batch):
    r = batch[3]["ren-e_4711"]
    assert r["score"]["earned"] == r["score"]["possible"]
    assert r["submission"]["filename"] == "ren\\xe9e_4711_hw.py"


def test_a_forged_meta_message_gets_what_cpu_mask_gets(batch):
    r = batch[3]["forged_meta_message"]
    from grader.assignment.spec import load_assignment

    failing = {c["id"] for c in r["cases"] if c["outcome"] != "passed"}
    device_cases = {i.id for i in load_assignment("masked-attention").instances() if i.case.concept == "device-placement"}
    assert failing == device_cases


def test_names_unicode_case_and_outputs_get_their_own_report(batch):
    _, out, _, results = batch
    assert results["李雷"]["score"]["earned"] == results["李雷"]["score"]["possible"]
    assert results["韩梅梅"]["score"]["earned"] < results["韩梅梅"]["score"]["possible"]
    upper = f"alice-{name_hash('Alice.py')}"
    assert results[upper]["submission"]["filename"] == "Alice.py"
    assert results[upper]["score"]["earned"] > results["alice"]["score"]["earned"]  # two students, two grades
    dashboard = (out / "index.html").read_text(encoding="utf-8")
    assert 'id="students"' in dashboard and f'href="index-{name_hash("index.py")}.html"' in dashboard
    assert "%E6%9D%8E%E9%9B%B7.html" in dashboard  # 李雷.html, linked


def test_output_printed_during_hidden_cases_stays_out_of_the_students_view(batch):
    _, out, _, results = batch
    r = results["prints_args"]
    assert r["score"]["earned"] == r["score"]["possible"]
    # What it prints for the hidden case causal_mask_device (q_len=4, k_len=7 on meta; no public case
    # makes that call), escaped as the pages escape it.
    hidden_call = "ARGS causal_mask: 4, 7, 'meta'"
    assert hidden_call in r["load"]["hidden_stdout"]  # kept for the instructor
    page = (out / "prints_args.html").read_text(encoding="utf-8")
    assert "LOADED: printed at import" in page and "causal_mask: 4, 7" not in page
    suite = next(s for s in ET.fromstring((out / "junit.xml").read_bytes()) if s.get("name") == "prints_args")
    assert "LOADED" in suite.find("system-out").text and hidden_call not in suite.find("system-out").text
    assert "causal_mask: 4, 7" not in (out / "summary.md").read_text(encoding="utf-8")
    assert "causal_mask: 4, 7" not in (out / "gradescope" / "prints_args.json").read_text(encoding="utf-8")


def test_timeout_words_in_an_import_error_are_a_load_error(batch):
    r = batch[3]["time_words_at_import"]
    assert {(c["outcome"], c["concept"]) for c in r["cases"]} == {("error", "load-error")}


def test_a_zip_with_a_file_and_a_folder_of_one_name_is_a_load_error_without_host_paths(batch):
    base, _, _, results = batch
    r = results["clash"]
    assert not r["load"]["ok"]
    assert "holds both a file and a folder named 'utils'" in r["load"]["message"]
    for data in results.values():
        assert str(base) not in json.dumps(data, ensure_ascii=False) and "/tmp/" not in data["load"]["message"]


def test_an_escape_sequence_in_a_name_cannot_rewrite_the_terminal(batch):
    _, out, result, results = batch
    sid = _id(ESCAPES)
    assert results[sid]["submission"]["filename"] == "mallory\\x0d\\x1b[2K\\x1b]0;pwned\\x07_hw.py"
    history = CliRunner().invoke(main, ["gradebook", "history", sid, "-d", str(out)])
    assert history.exit_code == 0, history.output
    assert nasty.bad_chars(history.output) == []
    assert "mallory\\x0d\\x1b[2K\\x1b]0;pwned\\x07_hw.py" in history.output
