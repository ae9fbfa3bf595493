"""`grader release`: the student kit holds nothing hidden, and `grader check` / `pytest` work inside it."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import grader
from grader.assignment.spec import load_assignment
from grader.cli.app import main
from grader.authoring.release import reference_lines, shipped_texts

pytestmark = pytest.mark.slow  # full tier: a released kit, checked and pytest-ed in subprocesses

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "submissions" / "masked-attention"
FULL = load_assignment(ROOT / "assignments" / "masked-attention")
HIDDEN = [i for i in FULL.instances() if i.case.hidden]
HIDDEN_SENTENCE = f"{len(HIDDEN)} hidden cases will run at grading time"
PUBLIC = [i.id for i in FULL.instances(public_only=True)]
PUBLIC_POINTS = FULL.possible(public_only=True)
LEAD = (f"Public cases: {PUBLIC_POINTS:g} of {FULL.possible():g} points checked, "
        f"{len(HIDDEN)} hidden cases at grading time.")


@pytest.fixture(scope="module")
def kit(released_kit) -> Path:
    """masked-attention's kit, released once per session (test_student_install.py grades every
    sample in it)."""
    out, output = released_kit("masked-attention")
    assert output.splitlines()[-1] == (f"Kit for masked-attention v1.0 in {out}: {len(PUBLIC)} public cases; "
                                       f"{len(HIDDEN)} hidden cases stay with you (counted, not shipped).")
    return out


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_kit_contents(kit):
    assert _files(kit) == {
        "README.md", "attention.py", "attention.ipynb", "conftest.py", "explore.html",
        "assignments/masked-attention/spec.toml", "assignments/masked-attention/cases_public.py",
        "assignments/masked-attention/_common.py", "assignments/masked-attention/expected.safetensors",
        "assignments/masked-attention/locales/zh_CN/LC_MESSAGES/assignment.po",
        f"wheel/attention_grader-{grader.__version__}-py3-none-any.whl"}
    src = ROOT / "assignments" / "masked-attention"
    assert (kit / "attention.py").read_bytes() == (src / "starter" / "attention.py").read_bytes()
    assert (kit / "README.md").read_text("utf-8").startswith((src / "README.md").read_text("utf-8").rstrip())
    assert 'pytest_plugins = ["grader.pytest_plugin"]' in (kit / "conftest.py").read_text("utf-8")
    spec = tomllib.loads((kit / "assignments/masked-attention/spec.toml").read_text("utf-8"))
    starters = spec["kit"].pop("starters")
    assert spec["kit"] == {"hidden_cases": len(HIDDEN), "hidden_points": round(sum(i.points for i in HIDDEN), 6),
                           "submission": "attention.py"}
    assert sorted(starters) == ["attention.ipynb", "attention.py"] and all(len(v) == 64 for v in starters.values())
    assert [e["name"] for e in spec["entry_points"]] == ["causal_mask", "padding_mask", "combine_masks",
                                                         "masked_attention"]


def test_kit_readme_installs_pytest_and_gives_the_command_for_each_file(kit):
    readme = (kit / "README.md").read_text("utf-8")
    wheel = f"wheel/attention_grader-{grader.__version__}-py3-none-any.whl"
    install = next(line for line in readme.splitlines() if wheel in line)
    assert f'`pip install "./{wheel}[kit]"`' in install and "pytest" in install and "no solution" in install
    assert (kit / wheel).is_file()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]["kit"]
    assert any(dep.startswith("pytest") for dep in extra)  # what [kit] installs
    assert "grader check attention.ipynb    # if you work in the notebook" in readme
    assert "grader check attention.py       # if you work in the .py file" in readme
    notebook = (kit / "attention.ipynb").read_text("utf-8")
    assert "grader check attention.ipynb" in notebook and "grader check attention.py" not in notebook


def test_kit_readme_sets_up_python_the_cpu_torch_first_and_jupyter(kit):
    readme = (kit / "README.md").read_text("utf-8")
    setup = readme[readme.index("## Setting up (once)"):readme.index("## Checking your work")]
    assert "Python 3.11 or newer" in setup
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["requires-python"]
    assert requires == ">=3.11"  # what the README promises
    lines = setup.splitlines()
    cpu = next(n for n, line in enumerate(lines) if "download.pytorch.org/whl/cpu" in line)
    grader_line = next(n for n, line in enumerate(lines) if "attention_grader-" in line)
    assert cpu < grader_line  # torch's CPU build is in place before the grader asks for torch
    assert "jupyter lab attention.ipynb" in setup and "WSL" in setup


def test_no_hidden_case_id_title_source_or_seed_in_the_kit(kit):
    full = FULL
    hidden = [c for c in full.cases if c.hidden]
    assert len(hidden) >= 10
    secrets = {str(full.seed)} | {c.id for c in hidden} | {c.title for c in hidden} | {
        i.id for c in hidden for i in c.instances()}
    sources = [(full.dir / "cases_hidden.py").read_text("utf-8")] + [
        inspect.getsource(fn) for c in hidden for fn in (c.setup, c.check_fn)]
    reference_code = reference_lines("reference")
    assert len(reference_code) > 100
    texts = shipped_texts(kit)  # the wheel opened member by member
    assert any(name.endswith("!grader/grading/engine.py") for name, _ in texts)
    for name, text in texts:
        for s in secrets:
            assert not re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text), f"{name} contains {s!r}"
        assert not [src for src in sources if src in text], f"{name} holds hidden case source"
        assert not [line for line in reference_code if line in text], f"{name} holds the reference's code"
        assert not name.startswith("wheel/") or "!reference/" not in name
    kit_a = load_assignment(kit / "assignments" / "masked-attention")
    assert [i.id for i in kit_a.instances()] == PUBLIC and kit_a.seed != full.seed


def test_the_kit_seed_reveals_nothing_of_the_assignment_seed(kit):
    """The kit's seed once was a hash of a string holding the assignment's six-digit seed: trying
    every seed below a million found it in a second. Now it is drawn at random: no small seed
    hashes to it in any of the ways a release could have derived it, and the assignment's seed
    is nowhere in the kit's spec."""
    import hashlib

    text = (kit / "assignments/masked-attention/spec.toml").read_text("utf-8")
    shipped = tomllib.loads(text)["seed"]
    assert shipped != FULL.seed and str(FULL.seed) not in text
    derivations = [lambda s: f"student-kit:{FULL.id}:{FULL.version}:{s}", lambda s: f"{s}",
                   lambda s: f"{FULL.id}:{s}"]
    wanted = {shipped, shipped >> 1}
    for derive in derivations:  # each digest once, read as a 6- and as an 8-byte seed
        digests = ((s, hashlib.sha256(derive(s).encode()).digest()) for s in range(1_000_000))
        found = [s for s, d in digests if int.from_bytes(d[:6], "little") in wanted
                 or int.from_bytes(d[:8], "little") in wanted]
        assert found == []


def test_the_kit_carries_only_the_public_part_of_the_assignments_translations(kit):
    from babel.messages.pofile import read_po

    def ids(path: Path) -> set[str]:
        with path.open("rb") as f:
            return {m.id for m in read_po(f) if m.id}

    po = "locales/zh_CN/LC_MESSAGES/assignment.po"
    shipped, full = ids(kit / "assignments" / "masked-attention" / po), ids(FULL.dir / po)
    assert {c.title for c in FULL.cases if not c.hidden} <= shipped
    assert not shipped & {c.title for c in FULL.cases if c.hidden}
    hidden_only = {"Any mask broadcastable to (B, H, Lq, Lk) must work: do not assume its rank."}  # cases_hidden.py
    assert hidden_only <= full and not hidden_only & shipped


def test_a_kit_released_in_chinese_speaks_chinese(tmp_path):
    out = tmp_path / "kit"
    result = CliRunner().invoke(main, ["release", "masked-attention", "-o", str(out), "--lang", "zh-CN"])
    assert result.exit_code == 0, result.output
    assert 'lang = "zh-CN"' in (out / "assignments/masked-attention/spec.toml").read_text("utf-8")
    readme = (out / "README.md").read_text("utf-8")
    assert readme.startswith("# 掩码与带掩码的缩放点积注意力\n\n在 `attention.py`（或笔记本 `attention.ipynb`）中实现四个函数。")
    assert "## 准备环境（只需一次）" in readme and "先装 PyTorch 的 CPU 版本" in readme
    assert "## 检查你的代码" in readme and f"正式评分时还会运行 {len(HIDDEN)} 个隐藏用例" in readme
    # code blocks stay as written but for their comments
    assert "grader check attention.ipynb    # 在笔记本里做作业时\n" in readme
    assert "grader check attention.ipynb    # 在笔记本里做作业时（先保存）" in readme
    assert "pytest                          # 同样的公开用例，作为 pytest 测试运行" in readme
    import json

    def cells(path: Path, kind: str) -> list[str]:
        return ["".join(c["source"]) for c in json.loads(path.read_text("utf-8"))["cells"] if c["cell_type"] == kind]

    starter = ROOT / "assignments" / "masked-attention" / "starter" / "attention.ipynb"
    assert cells(out / "attention.ipynb", "code") == cells(starter, "code")
    markdown = cells(out / "attention.ipynb", "markdown")
    assert markdown[0].startswith("# 带掩码的注意力") and "## `causal_mask`" in markdown
    shutil.copy(SUBS / "buggy" / "zero_fill.py", out / "attention.py")
    proc = subprocess.run([sys.executable, "-m", "grader", "check", "attention.py"], cwd=out, capture_output=True,
                          text=True, env={**_env(), "LANG": "C.UTF-8"}, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "  ✗ 带因果掩码的 masked_attention [attention_causal_small] — 被屏蔽的分数在 softmax 之前必须是 -inf（或 finfo(dtype).min）（mask-fill-value）" in proc.stdout.splitlines()
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}"],
                          cwd=out, capture_output=True, text=True, env={**_env(), "LANG": "C.UTF-8"}, timeout=180)
    assert f"正式评分时还会运行 {len(HIDDEN)} 个隐藏用例" in proc.stdout, proc.stdout + proc.stderr
    failure = next(tc.find("failure") for tc in ET.parse(junit).getroot().iter("testcase")
                   if tc.get("name") == "attention_causal_small")
    assert "概念：mask-fill-value（被屏蔽的分数在 softmax 之前必须是 -inf" in failure.text
    assert "被屏蔽的位置分到了注意力权重" in failure.text
    assert failure.text.startswith("带因果掩码的 masked_attention [attention_causal_small]：未通过"), failure.text
    assert "attention_causal_small: 带因果掩码的 masked_attention" in proc.stdout  # the failure's heading
    assert ": failed" not in proc.stdout


@pytest.mark.parametrize("aid", ["masked-attention", "mha-kv-cache", "masked-loss-and-sampling"])
def test_every_assignment_releases_without_a_leak(released_kit, aid):
    folder, _ = released_kit(aid)  # exit code 0: a public title equal to a hidden one is refused
    assert (folder / "assignments" / aid / "expected.safetensors").is_file()


def test_release_refuses_a_kit_that_would_leak(tmp_path):
    src = tmp_path / "assignments" / "leaky"
    shutil.copytree(ROOT / "assignments" / "masked-attention", src)
    spec = (src / "spec.toml").read_text("utf-8").replace('id = "masked-attention"', 'id = "leaky"')
    (src / "spec.toml").write_text(spec, encoding="utf-8")
    (src / "README.md").write_text("# Leaky\nHint: the case causal_negative_scores is hidden.\n", encoding="utf-8")
    out = tmp_path / "kit"
    result = CliRunner().invoke(main, ["release", str(src), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.startswith("Error: refusing to release leaky: README.md mentions 'causal_negative_scores'")
    assert not out.exists() or not any(out.iterdir())


def test_release_refuses_a_grader_wheel_that_carries_the_mistake_models(tmp_path, monkeypatch):
    """The diagnosis models (what each classic mistake gives) are the instructor's: a student wheel
    holding them (here as grader/checks/mha.py) is refused, and told where they belong."""
    from grader.authoring import slim
    from reference import mistakes

    build = slim.build_wheel

    def with_models(out_dir: Path, **kwargs) -> Path:
        path = build(out_dir, **kwargs)
        with zipfile.ZipFile(path, "a") as z:
            z.writestr("grader/checks/mha.py", inspect.getsource(mistakes))
        return path

    monkeypatch.setattr(slim, "build_wheel", with_models)
    out = tmp_path / "kit"
    result = CliRunner().invoke(main, ["release", "mha-kv-cache", "-o", str(out)])
    assert result.exit_code == 2
    wheel = f"wheel/attention_grader-{grader.__version__}-py3-none-any.whl"
    assert result.output.startswith(f"Error: refusing to release mha-kv-cache: {wheel}!grader/checks/mha.py "
                                    "mentions 'reference source: ")
    assert ("The grader a student installs may hold no reference code: keep solutions and diagnosis models (what "
            "each mistake gives) with the reference, computed in the cases' setups") in result.output
    assert not out.exists()


def test_a_reference_line_stays_secret_when_the_grader_holds_it_too(tmp_path):
    """A line of the reference that the grader also holds would ship in the wheel: still refused."""
    from grader.checks import hypotheses

    shared = next(line.strip() for line in inspect.getsource(hypotheses).splitlines() if len(line.strip()) >= 40)
    ref = tmp_path / "solution.py"
    ref.write_text(f"def model(x):\n    {shared}\n", encoding="utf-8")
    assert shared in reference_lines("solution", ref)


def test_release_without_hidden_cases(tmp_path):
    src = tmp_path / "public-only"
    shutil.copytree(ROOT / "assignments" / "masked-attention", src, ignore=shutil.ignore_patterns("cases_hidden.py"))
    result = CliRunner().invoke(main, ["release", str(src), "-o", str(tmp_path / "kit")])
    assert result.exit_code == 0, result.output
    spec = tomllib.loads((tmp_path / "kit/assignments/masked-attention/spec.toml").read_text("utf-8"))
    assert spec["kit"]["hidden_cases"] == 0
    assert "There are no hidden cases" in (tmp_path / "kit/README.md").read_text("utf-8")


def test_release_usage_errors(tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(main, ["release", "nope", "-o", str(tmp_path / "k")])
    assert unknown.exit_code == 2 and unknown.output.startswith("Error: unknown assignment 'nope'; known")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    busy = runner.invoke(main, ["release", "masked-attention", "-o", str(tmp_path / "full")])
    assert busy.exit_code == 2
    assert busy.output == f"Error: {tmp_path / 'full'} already exists and is not an empty folder; choose a new output folder\n"
    assert "grader release masked-attention -o" in runner.invoke(main, ["release", "--help"]).output


def test_ci_refuses_a_kit(kit):
    result = CliRunner().invoke(main, ["ci", str(kit / "attention.py"), "-a",
                                       str(kit / "assignments" / "masked-attention")])
    assert result.exit_code == 2
    assert "is a student kit (public cases only); grader ci needs the full assignment" in result.output


# --- inside the kit: grader check and pytest (subprocesses, as a student runs them) ---------

def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_ASSIGNMENTS", "PYTEST_ADDOPTS")}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def test_grader_check_inside_the_kit_uses_the_kit(kit, tmp_path):
    work = tmp_path / "kit"
    shutil.copytree(kit, work)
    shutil.copy(SUBS / "correct" / "sdpa.py", work / "attention.py")
    proc = subprocess.run([sys.executable, "-m", "grader", "check", "attention.py", "--verbose"], cwd=work,
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert f"Assignment folder: {(work / 'assignments' / 'masked-attention').resolve()}" in out
    assert sum(line.startswith("  ✓ ") for line in out) == len(PUBLIC)
    assert LEAD in out
    assert (work / "grader-report" / "attention.html").is_file()


def _kit_with_solved_notebook(kit: Path, tmp_path: Path) -> Path:
    """The kit as a student leaves it who worked in the notebook: attention.py untouched."""
    work = tmp_path / "kit"
    shutil.copytree(kit, work)
    shutil.copy(SUBS / "correct" / "correct_notebook.ipynb", work / "attention.ipynb")
    return work


def test_grader_check_on_the_kit_folder_grades_the_notebook_the_student_changed(kit, tmp_path):
    work = _kit_with_solved_notebook(kit, tmp_path)
    result = CliRunner().invoke(main, ["check", str(work), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "Graded attention.ipynb: attention.py next to it is the starter as released (unchanged)."
    assert sum(line.startswith("  ✓ ") for line in lines) == len(PUBLIC)


def test_grader_check_of_the_untouched_stub_says_not_implemented_and_names_the_notebook(kit, tmp_path):
    work = _kit_with_solved_notebook(kit, tmp_path)
    result = CliRunner().invoke(main, ["check", str(work / "attention.py"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[1] == ("attention.py is the starter as released (unchanged); your work seems to be in "
                        "attention.ipynb: grader check attention.ipynb")
    failed = [line for line in lines if line.startswith("  ✗ ")]
    assert len(failed) == len(PUBLIC) and all(line.endswith(" — not implemented yet") for line in failed)
    hints = [lines[lines.index(line) + 1].strip() for line in failed]
    assert all(h.startswith("Not implemented yet: ") and h.endswith("still raises NotImplementedError. Write it, "
                                                                     "then check again.") for h in hints)
    assert "diagonal" not in result.output  # no concept's hint for code that is not written


def test_a_renamed_function_inside_the_kit_is_reported_missing_not_as_an_unknown_assignment(kit, tmp_path):
    work = tmp_path / "kit"
    shutil.copytree(kit, work)
    text = (SUBS / "correct" / "einsum.py").read_text("utf-8").replace("def combine_masks(", "def combine(")
    (work / "mine.py").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["check", str(work / "mine.py"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert ("      Your submission defines no 'combine_masks'; found: causal_mask, padding_mask, combine, "
            "masked_attention. Define combine_masks(causal, padding).") in result.output.splitlines()


def _pytest_in(kit_dir: Path, tmp_path: Path, *args: str) -> tuple[dict[str, ET.Element], str]:
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args,
                           f"--junitxml={junit}"], cwd=kit_dir, capture_output=True, text=True, env=_env(), timeout=180)
    assert HIDDEN_SENTENCE in proc.stdout, proc.stdout + proc.stderr
    cases = {tc.get("name"): tc for tc in ET.parse(junit).getroot().iter("testcase")}
    assert sorted(cases) == sorted(PUBLIC), proc.stdout
    return cases, proc.stdout


def test_pytest_in_the_kit_checks_the_notebook_the_student_worked_in(kit, tmp_path):
    cases, out = _pytest_in(_kit_with_solved_notebook(kit, tmp_path), tmp_path)  # no --submission
    assert all(len(tc) == 0 for tc in cases.values())
    assert "Graded attention.ipynb: attention.py next to it is the starter as released (unchanged)." in out


def test_pytest_in_the_kit_fails_the_right_cases_of_a_buggy_submission(kit, tmp_path):
    kit_dir = tmp_path / "kit"
    shutil.copytree(kit, kit_dir)
    shutil.copy(SUBS / "buggy" / "zero_fill.py", kit_dir / "my_attention.py")
    cases, _ = _pytest_in(kit_dir, tmp_path, "--submission", "my_attention.py")
    failed = {name: tc.find("failure") for name, tc in cases.items() if tc.find("failure") is not None}
    assert sorted(failed) == ["attention_causal_small", "attention_empty_row", "attention_half[bfloat16]",
                              "attention_half[float16]", "attention_large_scores", "attention_twice",
                              "attention_value_size"]  # the public ones expected.toml declares for zero_fill
    text = failed["attention_causal_small"].text
    assert "concept: mask-fill-value" in text and "Masked positions received attention weight" in text
