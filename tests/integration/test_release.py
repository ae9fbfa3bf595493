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
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignments import load_assignment
from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "submissions" / "masked-attention"
FULL = load_assignment(ROOT / "assignments" / "masked-attention")
HIDDEN = [i for i in FULL.instances() if i.case.hidden]
HIDDEN_SENTENCE = f"{len(HIDDEN)} hidden cases will run at grading time"
PUBLIC = ["causal_mask_square", "padding_mask_right", "combine_masks_basic", "attention_basic",
          "attention_causal_small"]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "kit"
    proc = subprocess.run([sys.executable, "-m", "grader", "release", "masked-attention", "-o", str(out)],
                          capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (f"Kit for masked-attention v1.0 in {out}: 5 public cases; "
                                            f"{len(HIDDEN)} hidden cases stay with you (counted, not shipped).")
    return out


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_kit_contents(kit):
    assert _files(kit) == {
        "README.md", "attention.py", "attention.ipynb", "conftest.py",
        "assignments/masked-attention/spec.toml", "assignments/masked-attention/cases_public.py",
        "assignments/masked-attention/_common.py"}
    src = ROOT / "assignments" / "masked-attention"
    assert (kit / "attention.py").read_bytes() == (src / "starter" / "attention.py").read_bytes()
    assert (kit / "README.md").read_text("utf-8").startswith((src / "README.md").read_text("utf-8").rstrip())
    assert 'pytest_plugins = ["grader.pytest_plugin"]' in (kit / "conftest.py").read_text("utf-8")
    spec = tomllib.loads((kit / "assignments/masked-attention/spec.toml").read_text("utf-8"))
    assert spec["kit"] == {"hidden_cases": len(HIDDEN), "hidden_points": round(sum(i.points for i in HIDDEN), 6),
                           "submission": "attention.py"}
    assert [e["name"] for e in spec["entry_points"]] == ["causal_mask", "padding_mask", "combine_masks",
                                                         "masked_attention"]


def test_no_hidden_case_id_title_source_or_seed_in_the_kit(kit):
    full = FULL
    hidden = [c for c in full.cases if c.hidden]
    assert len(hidden) >= 10
    secrets = {str(full.seed)} | {c.id for c in hidden} | {c.title for c in hidden} | {
        i.id for c in hidden for i in c.instances()}
    sources = [(full.dir / "cases_hidden.py").read_text("utf-8")] + [
        inspect.getsource(fn) for c in hidden for fn in (c.setup, c.check_fn)]
    for path in (p for p in kit.rglob("*") if p.is_file()):
        text = path.read_text("utf-8")
        for s in secrets:
            assert not re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text), f"{path.name} contains {s!r}"
        assert not [src for src in sources if src in text], f"{path.name} holds hidden case source"
    kit_a = load_assignment(kit / "assignments" / "masked-attention")
    assert [i.id for i in kit_a.instances()] == PUBLIC and kit_a.seed != full.seed


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
    assert sum(line.startswith("  ✓ ") for line in out) == 5
    assert any(line.startswith(HIDDEN_SENTENCE) for line in out)
    assert (work / "grader-report" / "attention.html").is_file()


def _pytest_in(kit: Path, submission: Path, tmp_path: Path) -> dict[str, ET.Element]:
    kit_dir = tmp_path / "kit"
    shutil.copytree(kit, kit_dir)
    shutil.copy(submission, kit_dir / "my_attention.py")
    junit = tmp_path / f"{submission.stem}.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--submission",
                           "my_attention.py", f"--junitxml={junit}"], cwd=kit_dir, capture_output=True,
                          text=True, env=_env(), timeout=180)
    assert HIDDEN_SENTENCE in proc.stdout, proc.stdout + proc.stderr
    cases = {tc.get("name"): tc for tc in ET.parse(junit).getroot().iter("testcase")}
    assert sorted(cases) == sorted(PUBLIC), proc.stdout
    return cases


def test_pytest_in_the_kit_passes_a_correct_submission(kit, tmp_path):
    cases = _pytest_in(kit, SUBS / "correct" / "einsum.py", tmp_path)
    assert all(len(tc) == 0 for tc in cases.values())


def test_pytest_in_the_kit_fails_the_right_case_of_a_buggy_submission(kit, tmp_path):
    cases = _pytest_in(kit, SUBS / "buggy" / "zero_fill.py", tmp_path)
    failed = {name: tc.find("failure") for name, tc in cases.items() if tc.find("failure") is not None}
    assert list(failed) == ["attention_causal_small"]
    text = failed["attention_causal_small"].text
    assert "concept: mask-fill-value" in text and "Masked positions received attention weight" in text
