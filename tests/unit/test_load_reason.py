"""Why a submission did not load is said once: the sandbox's reason carries no "failed to load"
prefix of its own, and the terminal, the HTML report and the notebook output each add theirs once,
without listing the same error again below it."""

from __future__ import annotations

import dataclasses
import json
from html import unescape
from pathlib import Path

import pytest

from grader.report.check_text import case_lines, load_lines
from grader.report.html import render_submission
from grader.report.inline import InlineView, render_inline
from grader.report.view import build_view
from grader.results import LoadInfo, report_from_dict
from grader.i18n import tr
from grader.sandbox.errors import crash, load_failure_message
from grader.sandbox.host.reports import load_report
from grader.sandbox.limits import Limits

DATA = Path(__file__).resolve().parents[1] / "data" / "results"
ERROR = "NameError: name 'undefined_name' is not defined"
TRACEBACK = f'Traceback (most recent call last):\n  File "<submission: bad.py>", line 2, in <module>\n{ERROR}'
PREFIXES = {"en": ("could not be loaded", "failed to load"), "zh-CN": ("无法加载", "加载失败")}


def _report(load: LoadInfo):
    report = report_from_dict(json.loads((DATA / "eve_syntax.json").read_text(encoding="utf-8")))
    return dataclasses.replace(report, load=load)


def _raised_at_import() -> LoadInfo:
    """What the engine records when the module's top level raised and nothing got defined."""
    reply = {"ok": True, "completed": False, "defined": [],
             "cell_errors": [{"cell": None, "error": ERROR, "traceback": TRACEBACK}]}
    w = load_report(reply, Limits())
    assert not w.ok
    return LoadInfo(ok=False, message=w.message, cell_errors=w.cell_errors)


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_terminal_says_once_that_and_why_the_submission_did_not_load(lang):
    report = _report(_raised_at_import())
    lines = load_lines(report, lang) + case_lines(report, lang)
    (line,) = [x for x in lines if "undefined_name" in x]
    assert line == {"en": f"Your submission could not be loaded: the module's top-level code raised {ERROR}",
                    "zh-CN": f"你的提交无法加载：模块的顶层代码抛出了 {ERROR}"}[lang]
    assert sum(line.count(p) for p in PREFIXES[lang]) == 1
    verbose = load_lines(report, lang, verbose=True)
    assert verbose[0] == line and verbose[-1].strip() == ERROR  # the traceback under it, with -v


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_report_page_and_the_notebook_output_name_the_error_once_beside_its_traceback(lang):
    report = _report(_raised_at_import())
    page = render_submission(report, lang=lang)
    n = InlineView(title="", graded_file="", warning="", note="", lead="", passed="", hidden="", function="")
    cell = render_inline(n, build_view(report), lang)
    for html in (unescape(page), unescape(cell)):
        assert html.count(ERROR) == 2  # the reason, and the traceback's last line
        assert "id=\"cell-errors\"" not in html and "class=\"cell-errors\"" not in html
        assert not any(p in html for p in ("failed to load", "加载失败", "could not be loaded:", "无法加载："))


def test_a_crash_while_loading_is_the_reason_itself():
    died = crash({"signal": 11}, oom_killed=False, limits=Limits(), phase=tr("loading your code"))
    report = _report(LoadInfo(ok=False, message=load_failure_message(died)))
    assert load_lines(report, "en") == ["Your submission could not be loaded: the worker was killed by SIGSEGV "
                                        "while loading your code"]
    assert load_lines(report, "zh-CN")[0].count("无法加载") == 1


@pytest.mark.parametrize("error", ["SyntaxError: invalid syntax (<submission: bad.py>, line 19)",
                                   "IndentationError: unexpected indent (<submission: bad.py>, line 3)"])
def test_a_syntax_error_is_said_as_code_that_does_not_compile_not_as_one_it_raised(error):
    reply = {"ok": True, "completed": False, "defined": [],
             "cell_errors": [{"cell": None, "error": error, "traceback": error}]}
    w = load_report(reply, Limits())
    report = _report(LoadInfo(ok=False, message=w.message, cell_errors=w.cell_errors))
    assert load_lines(report, "en")[0] == f"Your submission could not be loaded: the module's top-level code does not compile: {error}"
    assert load_lines(report, "zh-CN")[0] == f"你的提交无法加载：模块的顶层代码无法编译（语法错误，一行都没有运行）：{error}"
