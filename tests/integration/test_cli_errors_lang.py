"""A student's `Error:` line speaks the student's language: `grader check --lang zh-CN`, an assignment
whose spec.toml says `lang = "zh-CN"` (a Chinese kit), the locale. The instructor's commands stay
English whatever --lang their students' pages are in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from chinese_text import english_words
from grader.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = ROOT / "assignments" / "masked-attention"
BUGGY = ROOT / "submissions" / "masked-attention" / "buggy" / "zero_fill.py"
ENGLISH_ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANGUAGE": None, "LANG": "C.UTF-8"}


def run(*args: str, env: dict | None = None, cwd: Path | None = None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(main, list(args), env={**ENGLISH_ENV, **(env or {})})
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(main, list(args), env={**ENGLISH_ENV, **(env or {})})


def one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def chinese(line: str) -> str:
    assert line.startswith("错误："), line
    assert not english_words(line), f"English outside code in {line!r}: {english_words(line)}"
    return line


@pytest.fixture
def zh_assignment(tmp_path) -> Path:
    """masked-attention with ``lang = "zh-CN"`` in its spec.toml, as a Chinese kit has."""
    folder = tmp_path / "masked-attention"
    shutil.copytree(ASSIGNMENT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace('version = "1.0"\n', 'version = "1.0"\nlang = "zh-CN"\n'),
                    encoding="utf-8")
    return folder


def test_a_missing_file_in_chinese_by_option_by_assignment_and_by_locale(tmp_path, zh_assignment):
    missing = tmp_path / "attention.py"
    want = f"错误：提交 {missing} 不存在"
    assert chinese(one_line(run("check", str(missing), "-a", str(ASSIGNMENT), "--lang", "zh-CN"))) == want
    assert chinese(one_line(run("check", str(missing), "-a", str(zh_assignment)))) == want
    assert chinese(one_line(run("check", str(missing), "-a", str(ASSIGNMENT), env={"LANG": "zh_CN.UTF-8"}))) == want
    (tmp_path / "attention.ipynb").write_text("{}", encoding="utf-8")
    assert one_line(run("check", str(missing), "-a", str(zh_assignment))) == \
        f"错误：提交 {missing} 不存在（你是不是想检查 .ipynb？）"
    english = one_line(run("check", str(missing), "-a", str(zh_assignment), "--lang", "en"))
    assert english == f"Error: submission {missing} does not exist (did you mean the .ipynb?)"


def test_a_misspelt_assignment_gets_did_you_mean_in_chinese(tmp_path):
    line = chinese(one_line(run("check", str(BUGGY), "-a", "masked-atention", "--lang", "zh-CN",
                                "-o", str(tmp_path / "r"))))
    assert line.startswith("错误：没有名为 'masked-atention' 的作业；你是不是想输入 'masked-attention'？已知的作业：")


def test_a_file_no_assignment_claims_says_what_to_do_in_chinese(tmp_path):
    stray = tmp_path / "notes.py"
    stray.write_text("def unrelated():\n    return 1\n", encoding="utf-8")
    line = chinese(one_line(run("check", str(stray), "--lang", "zh-CN", "-o", str(tmp_path / "r"))))
    assert line.startswith("错误：无法判断 notes.py 属于哪个作业") and "-a" in line


def test_an_unwritable_report_folder_in_chinese(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    line = one_line(run("check", str(BUGGY), "-a", str(ASSIGNMENT), "--lang", "zh-CN", "-o", str(blocker / "out")))
    assert line.startswith(f"错误：无法写入 {blocker / 'out'}：")  # the OS's own reason follows, as the OS says it


def test_the_instructors_commands_stay_english(tmp_path, zh_assignment):
    line = one_line(run("grade", str(tmp_path / "nothing"), "-a", str(zh_assignment), "--lang", "zh-CN",
                        "-o", str(tmp_path / "out"), env={"LANG": "zh_CN.UTF-8"}))
    assert line.startswith("Error: ")
