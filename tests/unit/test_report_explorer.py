"""The mask explorer in the student's page, on parsed HTML: only for failing cases the student may see,
its data a compact JSON block no text can break out of, and its script only in pages that use it."""

from __future__ import annotations

import json
from dataclasses import replace

from grader.explorer import Explorer, MaskPart
from grader.report import render_submission
from grader.report.explorer_view import script_json
from grader.results import Outcome

from test_report_html import load_fixture, parse

EXPLORER = Explorer(scores=[[[[-1.0, -2.0], [-0.5, -1.5]]]], parts=[MaskPart("causal", [[True, False], [True, True]])],
                    reference=None, yours=None, fill=0.0, labels=["</script><b>x", "k1"])


def _with_explorers():
    report = load_fixture("ada_zero_fill")
    cases = [replace(c, evidence=replace(c.evidence, explorer=EXPLORER)) if c.outcome is not Outcome.PASSED else c
             for c in report.cases]
    return replace(report, cases=cases)


def _explorers(html: str):
    return parse(html).find_all("section", cls="explorer")


def test_every_failing_case_the_student_may_see_gets_an_explorer_and_hidden_ones_do_not():
    report = _with_explorers()
    shown = [c.id for c in report.cases if c.outcome is not Outcome.PASSED and not c.hidden]
    hidden = [c.id for c in report.cases if c.outcome is not Outcome.PASSED and c.hidden]
    assert shown and hidden
    html = render_submission(report)
    ids = [s.parent.attrs["data-case-id"] for s in _explorers(html)]
    assert ids == shown
    assert len(_explorers(render_submission(report, release_hidden=True))) == len(shown) + len(hidden)


def test_the_data_is_json_no_text_can_close_its_element():
    html = render_submission(_with_explorers())
    assert "</script><b>" not in html
    block = _explorers(html)[0].find("script", cls="ex-data")
    data = json.loads(block.text())
    assert data["l"][0] == "</script><b>x" and data["f"] == 0 and data["p"] == [["causal", [[True, False], [True, True]]]]
    assert script_json({"a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e"}'


def test_the_explorer_script_and_words_travel_only_with_an_explorer():
    plain = render_submission(load_fixture("ada_zero_fill"))
    assert "explorer-words" not in plain and "data-explorer" not in plain and "ex-panels" not in plain
    html = render_submission(_with_explorers())
    words = json.loads(parse(html).find("script", id="explorer-words").text())
    assert words["causal"] == "causal mask (future keys hidden)"
    zh = render_submission(_with_explorers(), lang="zh-CN")
    assert json.loads(parse(zh).find("script", id="explorer-words").text())["causal"] == "因果掩码（屏蔽未来的键）"
    # One executable script (the CSP hash covers it); the JSON blocks are data.
    doc = parse(html)
    assert [s for s in doc.find_all("script") if "type" not in s.attrs] == [doc.find_all("script")[-1]]
