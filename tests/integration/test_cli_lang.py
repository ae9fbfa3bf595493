"""Feedback in Chinese through the real CLI: `check`, `grade`, `report` and `ci` with --lang, the
locale and spec.toml's `lang`, the language recorded in the results and re-rendered either way, and
a student id in Chinese characters everywhere it appears."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from chinese_text import english_words
from grader.cli.app import main
from grader.results import SCHEMA_VERSION

pytestmark = pytest.mark.slow  # full tier: whole check, grade and ci runs in Chinese

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = ROOT / "assignments" / "masked-attention"
BUGGY = ROOT / "submissions" / "masked-attention" / "buggy" / "zero_fill.py"
CORRECT = ROOT / "submissions" / "masked-attention" / "correct" / "einsum.py"
ENGLISH_ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANGUAGE": None, "LANG": "C.UTF-8"}

def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env={**ENGLISH_ENV, **(env or {})}, catch_exceptions=False)


def test_check_in_chinese_is_chinese_but_for_code(tmp_path):
    result = run("check", str(BUGGY), "-a", str(ASSIGNMENT), "-o", str(tmp_path), "--lang", "zh-CN", "-v")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "masked-attention v1.0 — 自检 zero_fill.py（仅公开用例）"
    assert "  ✗ 带因果掩码的 masked_attention [attention_causal_small] — 被屏蔽的分数在 softmax 之前必须是 -inf（或 finfo(dtype).min）（mask-fill-value）" in lines
    assert any(line.strip().startswith("被屏蔽的位置分到了注意力权重") for line in lines)
    assert any(line.strip().startswith("落在不可见位置上的权重：查询 0 → 键 1") for line in lines)
    from grader.assignment.spec import load_assignment

    public = load_assignment(ASSIGNMENT).instances(public_only=True)
    failed = [c for c in public if any(f"[{c.id}] — " in line for line in lines)]
    assert len(failed) == 7  # every public case that masks a score
    points = sum(c.points for c in public)
    earned = points - sum(c.points for c in failed)
    assert any(line.startswith(f"通过了 {len(public)} 个公开用例中的 {len(public) - 7} 个（{earned:g}/{points:g} 分）")
               for line in lines)
    assert lines[-1].startswith("报告：")
    assert any(line.startswith("沙箱资源限制：") for line in lines)  # -v: what bounds the sandbox, in Chinese too
    leftovers = {n: english_words(line) for n, line in enumerate(lines) if english_words(line)}
    assert not leftovers, "English outside code:\n" + "\n".join(f"{lines[n]}\n    -> {w}" for n, w in leftovers.items())
    page = (tmp_path / "zero_fill.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page and "被屏蔽的分数在 softmax 之前必须是 -inf" in page


def test_the_allow_list_still_catches_english():
    assert english_words("  ✗ 带因果掩码的 masked_attention [attention_causal_small] — mask-fill-value") == []
    assert english_words("被屏蔽的位置分到了注意力权重：把 torch.finfo(scores.dtype).min 填进去") == []
    assert english_words("Masked positions received attention weight") == ["Masked", "positions", "received",
                                                                           "attention", "weight"]
    assert english_words("公开用例：hidden cases") == ["hidden", "cases"]
    assert english_words("  ✓ 查询比键少时的 causal_mask（分块） [causal_mask_offset[2 of 5]]") == []
    assert english_words("  ✓ masked_attention with a causal mask [attention_causal_small]") == ["with", "causal",
                                                                                                 "mask"]


def test_english_stays_the_default_and_the_locale_or_the_assignment_can_choose_chinese(tmp_path):
    english = run("check", str(BUGGY), "-a", str(ASSIGNMENT), "-o", str(tmp_path / "en"))
    assert english.output.splitlines()[0] == "masked-attention v1.0 — self-check of zero_fill.py (public cases only)"
    by_locale = run("check", str(BUGGY), "-a", str(ASSIGNMENT), "-o", str(tmp_path / "loc"),
                    env={"LANG": "zh_CN.UTF-8"})
    assert by_locale.output.splitlines()[0].endswith("自检 zero_fill.py（仅公开用例）")

    folder = tmp_path / "masked-attention"
    shutil.copytree(ASSIGNMENT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace('version = "1.0"\n', 'version = "1.0"\nlang = "zh-CN"\n'),
                    encoding="utf-8")
    by_spec = run("check", str(BUGGY), "-a", str(folder), "-o", str(tmp_path / "spec"))
    assert "自检" in by_spec.output.splitlines()[0] and "带因果掩码的 masked_attention" in by_spec.output
    overridden = run("check", str(BUGGY), "-a", str(folder), "-o", str(tmp_path / "opt"), "--lang", "en")
    assert "self-check of zero_fill.py" in overridden.output and "自检" not in overridden.output


def test_an_unknown_language_is_refused_with_the_choices(tmp_path):
    result = CliRunner().invoke(main, ["check", str(BUGGY), "-o", str(tmp_path), "--lang", "fr"])
    assert result.exit_code == 2 and "'en', 'zh-CN'" in result.output
    folder = tmp_path / "masked-attention"
    shutil.copytree(ASSIGNMENT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace('version = "1.0"\n', 'version = "1.0"\nlang = "fr"\n'),
                    encoding="utf-8")
    result = run("check", str(BUGGY), "-a", str(folder), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2 and "lang = 'fr' is not a language the grader speaks; use one of: en, zh-CN" \
        in result.output


@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory) -> Path:
    """A class of two graded with --lang zh-CN and an English dashboard; one student id is Chinese."""
    root = tmp_path_factory.mktemp("zh-class")
    subs = root / "subs"
    subs.mkdir()
    shutil.copy(BUGGY, subs / "张三.py")
    shutil.copy(CORRECT, subs / "lee.py")
    out = root / "out"
    result = run("grade", str(subs), "-a", str(ASSIGNMENT), "-o", str(out), "-j", "1", "--lang", "zh-CN",
                 "--dashboard-lang", "en")
    assert result.exit_code == 0, result.output
    return out


def _page(out: Path, stem: str) -> str:
    [path] = [p for p in out.glob("*.html") if p.name.startswith(stem)]
    return path.read_text(encoding="utf-8")


def test_grade_records_the_language_and_the_students_read_chinese_while_the_dashboard_is_english(graded_zh):
    [result_json] = [p for p in (graded_zh / "results").glob("*.json") if p.name.startswith("张三")]
    data = json.loads(result_json.read_text(encoding="utf-8"))
    assert data["lang"] == "zh-CN" and data["schema_version"] == SCHEMA_VERSION and data["submission"]["id"] == "张三"
    failing = next(c for c in data["cases"] if c["id"] == "attention_causal_small")
    assert failing["message"].startswith("Masked positions received attention weight")  # English kept for old readers
    assert failing["message_i18n"][0]["msgid"] == failing["message"]
    page = _page(graded_zh, "张三")
    assert '<html lang="zh-CN">' in page and '<span class="student-id">张三</span> 的反馈' in page
    assert "被屏蔽的位置分到了注意力权重" in page and "Masked positions received" not in page
    [gs] = [p for p in (graded_zh / "gradescope").glob("*.json") if p.name.startswith("张三")]
    tests = {t["name"]: t for t in json.loads(gs.read_text(encoding="utf-8"))["tests"]}
    failed = tests["带因果掩码的 masked_attention (attention_causal_small)"]["output"]
    assert failed.startswith("被屏蔽的分数在 softmax 之前必须是 -inf") and "最大差值：1（允许 2e-05）" in failed
    index = (graded_zh / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in index and "What went wrong most often" in index
    assert '>张三</a>' in index and "filled masked scores with 0" in index


def test_report_rerenders_the_saved_results_in_either_language(graded_zh, tmp_path):
    en = tmp_path / "en"
    result = run("report", str(graded_zh), "-o", str(en), "--lang", "en")
    assert result.exit_code == 0, result.output
    page = _page(en, "张三")
    assert '<html lang="en">' in page and "Feedback for <span class=\"student-id\">张三</span>" in page
    assert "Masked positions received attention weight" in page and "被屏蔽" not in page
    zh = tmp_path / "zh"
    result = run("report", str(graded_zh), "-o", str(zh), "--lang", "zh-CN", "--dashboard-lang", "zh-CN")
    assert result.exit_code == 0, result.output
    assert "被屏蔽的位置分到了注意力权重" in _page(zh, "张三")
    index = (zh / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in index and "最常见的错误" in index and "全班 50% 的学生把被屏蔽的分数填成了 0" in index
    default = tmp_path / "default"  # no --lang: each page in the language it was graded in
    assert run("report", str(graded_zh), "-o", str(default)).exit_code == 0
    assert '<html lang="zh-CN">' in _page(default, "张三")


def test_ci_annotations_speak_the_chosen_language(tmp_path):
    result = run("ci", str(BUGGY), "-a", str(ASSIGNMENT), "--junit", str(tmp_path / "j.xml"), "--lang", "zh-CN")
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("::error")]
    assert any("被屏蔽的位置分到了注意力权重" in line for line in errors)
    assert any("隐藏用例" in line for line in errors)  # hidden cases: title and concept only, in Chinese


def test_load_errors_and_cell_errors_are_chinese_too(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("", encoding="utf-8")
    result = run("check", str(empty), "-a", str(ASSIGNMENT), "-o", str(tmp_path / "a"), "--lang", "zh-CN")
    assert result.output.splitlines()[1] == "你的提交无法加载：empty.py 是空的"
    notebook = ROOT / "submissions" / "masked-attention" / "correct" / "correct_notebook.ipynb"
    result = run("check", str(notebook), "-a", str(ASSIGNMENT), "-o", str(tmp_path / "b"), "--lang", "zh-CN")
    assert result.output.splitlines()[1].startswith("加载代码单元格 7（q = k = v = torch.randn(1, 2, 4, 8)）时出错：NameError")
    page = (tmp_path / "b" / "correct_notebook.ipynb.html").read_text(encoding="utf-8")
    assert "代码单元格 7（q = k = v = torch.randn(1, 2, 4, 8)）" in page and "加载时抛出错误的代码" in page
