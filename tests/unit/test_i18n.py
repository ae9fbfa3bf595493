"""Messages kept as msgids with arguments, the language choice, and locale formats (grader.i18n)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from grader.i18n import DEFAULT, Msg, choose, english, normalise, ntr, tr, translate, verbatim
from grader.i18n.formats import decimal, percent, timestamp
from grader.report.html import render_submission
from grader.results import CaseResult, Evidence, Outcome, Points, report_from_dict, to_dict

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("tag, expected", [
    ("zh-CN", "zh-CN"), ("zh_CN.UTF-8", "zh-CN"), ("zh", "zh-CN"), ("zh-Hans", "zh-CN"), ("en_GB.UTF-8", "en"),
    ("en", "en"), ("C", None), ("POSIX", None), ("fr_FR.UTF-8", None), ("", None), (None, None),
])
def test_a_language_tag_or_posix_locale_names_a_supported_language_or_none(tag, expected):
    assert normalise(tag) == expected


def test_the_option_beats_the_assignment_which_beats_the_locale():
    env = {"LANG": "zh_CN.UTF-8"}
    assert choose("en", "zh-CN", env) == "en"
    assert choose(None, "en", env) == "en"
    assert choose(None, None, env) == "zh-CN"
    assert choose(None, None, {"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}) == "en"  # LC_ALL wins, as in POSIX
    assert choose(None, None, {"LANG": "C.UTF-8"}) == DEFAULT
    assert choose(None, None, {"LANGUAGE": "fr:zh_CN", "LANG": "C"}) == "zh-CN"  # GNU's list: first supported
    assert choose(None, None, {}) == DEFAULT


def test_a_message_renders_in_either_language_and_survives_json():
    m = tr("{what} has shape {actual}, expected {expected}.", what="weights", actual="(2, 3)", expected="(2, 4)")
    assert str(m) == "weights has shape (2, 3), expected (2, 4)."
    assert m.render("zh-CN") == "weights 的形状是 (2, 3)，期望 (2, 4)。"
    back = Msg.from_list(json.loads(json.dumps(m.to_list())))
    assert back == m and back.render("zh-CN") == m.render("zh-CN")


def test_joined_and_nested_messages_translate_each_part_and_keep_student_text_verbatim():
    m = tr("Your output contains NaN. ") + verbatim("student's <text>") + tr(
        "Not implemented yet: {where}. Write it, then check again.", where=tr("your code raised NotImplementedError"))
    zh = m.render("zh-CN")
    assert zh.startswith("你的输出含有 NaN。student's <text>尚未实现：你的代码抛出了 NotImplementedError。")
    assert Msg.from_list(m.to_list()).render("zh-CN") == zh


def test_plural_forms_come_from_the_catalog():
    assert ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", 1).render("en") == \
        "1 hidden case at grading time"
    assert ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", 3).render("en") == \
        "3 hidden cases at grading time"
    assert ntr("{n} hidden case at grading time", "{n} hidden cases at grading time", 3).render("zh-CN") == \
        "正式评分时还有 3 个隐藏用例"


def test_a_string_without_a_translation_falls_back_to_english_on_its_own():
    m = tr("A sentence no catalog has ({n}).", n=2) + tr("Your output contains NaN. ")
    assert m.render("zh-CN") == "A sentence no catalog has (2).你的输出含有 NaN。"
    assert translate("No catalog has this title", "zh-CN") == "No catalog has this title"


def test_non_plain_arguments_are_kept_as_text():
    import torch

    m = tr("{name} came back on {device}, not on the inputs' device: create masks and constants with device=q.device.",
           name="out", device=torch.device("meta"))
    assert json.loads(json.dumps(m.to_list()))[0]["args"]["device"] == "meta"


def test_numbers_and_dates_follow_the_locale_and_english_keeps_its_forms():
    assert decimal(0.12345, "en") == "0.1235" and decimal(2.0, "en") == "2"
    assert decimal(12345.67, "zh-CN", 6) == "12,345.7" and decimal(0.5, "zh-CN") == "0.5"
    assert decimal(float("nan"), "zh-CN") == "NaN" and decimal(float("-inf"), "zh-CN") == "−∞"
    assert percent(83.4, "en") == "83%" and percent(83.4, "zh-CN") == "83%"
    assert timestamp("2026-11-29T10:05:00Z", "en") == "2026-11-29T10:05:00Z"
    assert timestamp("2026-11-29T10:05:00Z", "zh-CN") == "2026年11月29日 10:05:00 UTC"
    assert timestamp("not a date", "zh-CN") == "not a date"


def test_a_case_result_keeps_english_text_beside_the_msgid_for_older_readers():
    case = CaseResult("c", "Causal mask on a square sequence", Outcome.FAILED, Points(0, 1), False, "mask-fill-value",
                      tr("Your output contains NaN. "), Evidence(notes=[tr("{n} of {total} cells differ", n=3, total=25)]))
    d = to_dict(case)
    assert d["message"] == "Your output contains NaN. "
    assert d["message_i18n"] == [{"msgid": "Your output contains NaN. "}]
    assert d["evidence"]["notes"] == ["3 of 25 cells differ"]
    assert d["evidence"]["notes_i18n"] == [[{"msgid": "{n} of {total} cells differ", "args": {"n": 3, "total": 25}}]]


def test_results_of_schema_1_still_read_and_render_english_messages_in_a_chinese_page():
    old = json.loads((DATA / "results-v1" / "ada_zero_fill.json").read_text(encoding="utf-8"))
    assert old["schema_version"] == 1 and "lang" not in old
    report = report_from_dict(old)
    assert report.lang == "en" and all(c.message == english(str(c.message)) for c in report.cases)  # text only
    html = render_submission(report, lang="zh-CN")
    assert '<html lang="zh-CN">' in html and "全部用例" in html
    failing = next(c for c in report.cases if c.outcome is not Outcome.PASSED and not c.hidden)
    assert str(failing.message).split(":")[0] in html  # no msgid to translate: the English sentence is shown


def test_the_recorded_language_is_the_one_a_page_renders_in_by_default():
    report = report_from_dict(json.loads((DATA / "results" / "ada_zero_fill.json").read_text(encoding="utf-8")))
    assert '<html lang="en">' in render_submission(report)
    assert '<html lang="zh-CN">' in render_submission(replace(report, lang="zh-CN"))
    assert '<html lang="en">' in render_submission(replace(report, lang="zh-CN"), lang="en")


def test_a_document_is_translated_block_by_block_and_code_stays_as_written():
    from grader.i18n import add_assignment_locales
    from grader.i18n.documents import markdown_blocks, translate_markdown

    add_assignment_locales(DATA.parent.parent / "assignments" / "masked-attention" / "locales")  # as loading it does
    text = ("# Masked attention\n\nCheck your work (public cases only; hidden cases run at grading time):\n\n"
            "```bash\ngrader check a.py\n\ngrader check b.py\n```\n\n## `causal_mask`\n\nNo catalog has this.\n")
    assert [prose for _, prose in markdown_blocks(text)] == [True, True, False, False, True]
    assert translate_markdown(text, "zh-CN") == (
        "# 带掩码的注意力\n\n检查你的代码（只运行公开用例；隐藏用例在正式评分时运行）：\n\n"
        "```bash\ngrader check a.py\n\ngrader check b.py\n```\n\n## `causal_mask`\n\nNo catalog has this.\n")
    assert translate_markdown(text, "en") == text


def test_a_message_read_back_from_a_results_file_is_filled_as_data_never_formatted():
    """A hand-edited results file's msgid cannot reach into its arguments' attributes, nor break
    a re-render: unknown or dotted placeholders stay as written, in every language."""
    from grader.i18n import Msg

    forged = [{"msgid": "{x.__class__.__mro__} {x[0]} {missing} {x}", "args": {"x": "abc"}}]
    for lang in ("en", "zh-CN"):
        assert Msg.from_list(forged).render(lang) == "{x.__class__.__mro__} {x[0]} {missing} abc"
    assert Msg.from_list([{"msgid": "{{braces}} {n}", "args": {"n": 2}}]).render("en") == "{braces} 2"
