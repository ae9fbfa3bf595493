"""click's own words in a student command follow the student's language (``--lang``, else the kit's,
else the locale): its usage errors and ``grader check --help``; an operator's command keeps English."""

from __future__ import annotations

import gettext

import click.core
import click.exceptions
import pytest
from click.testing import CliRunner

from grader.cli.app import main
from grader.cli.click_language import CLICK_WORDS, HELP_OPTION, student_language
from grader.i18n import translate

ENGLISH = {"LC_ALL": None, "LC_MESSAGES": None, "LANGUAGE": None, "LANG": "C.UTF-8"}
CHINESE = {**ENGLISH, "LANG": "zh_CN.UTF-8"}


def run(*args: str, env: dict = ENGLISH):
    return CliRunner().invoke(main, list(args), prog_name="grader", env=env, catch_exceptions=False)


@pytest.mark.parametrize("args, said", [
    (["check", "--bogus"], "错误：没有 '--bogus' 这个选项。 你是不是想输入 '--verbose'？"),
    (["check"], "错误：缺少参数 'SUBMISSION'."),
    (["check", "a.py", "b.py"], "错误：多出了一个无法识别的参数（b.py）"),
    (["check", "a.py", "--device", "gpu"], "错误：'--device' 的取值无效：'gpu' 不是 'cpu', 'cuda', 'auto' 中的一个。"),
    (["chek"], "错误：没有 'chek' 这个命令。 你是不是想输入 'check'？"),
])
def test_usage_errors_speak_the_students_language(args, said):
    for result in (run(*args, "--lang", "zh-CN") if args[0] == "check" else run(*args, env=CHINESE),
                   run(*args, env=CHINESE)):
        assert result.exit_code == 2
        lines = result.output.splitlines()
        assert lines[0].startswith("用法：grader") and lines[1].startswith("运行 'grader") and lines[-1] == said


def test_check_help_is_in_chinese_but_for_code():
    out = run("check", "--help", "--lang=zh-CN").output
    assert out.startswith("用法：grader check [OPTIONS] SUBMISSION\n\n  提交之前，先用公开用例检查你的代码。")
    assert "\n选项：\n" in out and "显示这条帮助并退出。" in out and "[默认：grader-report]" in out
    assert "[环境变量：GRADER_CACHE_DIR]" in out and "反馈使用的语言" in out
    assert not any(w in out for w in ("Usage", "Options", "Show this", "default:", "env var", "Check your work"))
    top = run("--help", env=CHINESE).output
    assert "\n命令：\n" in top and "  check      提交之前，先用公开用例检查你的代码。" in top


def test_english_stays_click_and_operator_commands_stay_english_under_a_chinese_locale():
    assert run("check", "--bogus").output.splitlines()[-1] == "Error: No such option '--bogus'. Did you mean '--verbose'?"
    assert "Show this message and exit." in run("check", "--help").output
    grade = run("grade", "--bogus", env=CHINESE).output.splitlines()
    assert grade[0].startswith("Usage: grader grade") and grade[-1].startswith("Error: No such option '--bogus'.")
    assert "Show this message and exit." in run("grade", "--help", env=CHINESE).output
    # the student's language was click's only while the command ran
    assert click.core._ is gettext.gettext and click.exceptions.ngettext is gettext.ngettext


def test_the_language_comes_from_lang_then_the_kit_then_the_locale(monkeypatch, tmp_path):
    import grader.assignment.kit as kit

    seen = []
    monkeypatch.setattr(kit, "language_near", lambda sub, a: seen.append((sub, a)) or "zh-CN")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attention.py").write_text("")
    assert student_language(["attention.py", "--lang", "en"]) == "en" and seen == []
    assert student_language(["attention.py", "-a", "masked-attention"]) == "zh-CN"
    assert [(str(s), a) for s, a in seen] == [("attention.py", "masked-attention")]


def test_every_translation_of_clicks_words_formats_as_click_formats_it():
    values = dict(message="m", command="grader check", option="--help", name="'--x'", param_hint="'--x'",
                  choices="'a', 'b'", choice="'a'", var="V", default="d", value="v", number_type="integer",
                  range="0<=x<=1", possibility="'--y'", possibilities="'--y', '--z'", args="b", nargs=2)
    for msgid in (*CLICK_WORDS, HELP_OPTION):
        zh = translate(msgid, "zh-CN")
        assert zh != msgid and zh.format(**values)
