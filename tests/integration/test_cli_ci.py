"""`grader ci`: JUnit, the job summary, annotations that student text cannot hijack, the threshold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec import load_assignment
from grader.cli.app import main
from grader.cli import student
from grader.grading.single import Graded

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "submissions" / "masked-attention"
CORRECT = SUBS / "correct" / "einsum.py"
BUGGY = SUBS / "buggy" / "zero_fill.py"
FULL = load_assignment(ROOT / "assignments" / "masked-attention")
N_CASES = str(len(FULL.instances()))
POINTS = f"{FULL.possible():g}"

HOSTILE = '''
import torch
print("::error::printed by the student")
print("##[set-output name=grade;]100")

EVIL = "bad\\n::set-output name=score::100\\r\\n##[set-output name=grade;]100 %0A::add-mask::x ::error::forged"

def causal_mask(q_len, k_len=None, device=None):
    raise ValueError(EVIL)

def padding_mask(lengths, max_len, side="right", device=None):
    raise ValueError(EVIL)

def combine_masks(causal, padding):
    raise ValueError(EVIL)

def masked_attention(q, k, v, mask=None):
    print("::warning::again")
    raise RuntimeError(EVIL)
'''


def _suite(junit: Path) -> ET.Element:
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    return suite


def test_correct_submission_meets_the_default_threshold(tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("previous step\n", encoding="utf-8")
    junit = tmp_path / "junit.xml"
    result = CliRunner().invoke(main, ["ci", str(CORRECT), "-a", "masked-attention", "--junit", str(junit)],
                                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 0, result.output
    suite = _suite(junit)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (N_CASES, "0", "0")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["score"] == f"{POINTS}/{POINTS}"
    text = summary.read_text("utf-8")
    assert text.startswith("previous step\n## Masks and masked scaled-dot-product attention: 1 graded")
    assert f"| einsum | 100% | {POINTS} / {POINTS} | — |" in text
    lines = result.output.splitlines()
    assert not any(line.startswith("::error") for line in lines)
    assert re.fullmatch(r"::stop-commands::[0-9a-f]{32}", lines[0])
    assert lines[-1] == f"::{lines[0].split('::')[2]}::"
    assert lines[1] == f"masked-attention v1.0: einsum.py scored {POINTS}/{POINTS} (100%); required 100%: PASS"


def test_buggy_submission_is_annotated_and_fails_below_the_threshold(tmp_path):
    junit = tmp_path / "j.xml"
    result = CliRunner().invoke(main, ["ci", str(BUGGY), "-a", "masked-attention", "--junit", str(junit)],
                                env={"GITHUB_STEP_SUMMARY": ""})
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("::error ")]
    public = [e for e in errors if "(attention_causal_small)" in e]
    assert len(public) == 1
    assert public[0].startswith("::error title=masked_attention with a causal mask (attention_causal_small),"
                                "file=submissions/masked-attention/buggy/zero_fill.py::Masked scores must be -inf")
    hidden = [e for e in errors if "Hidden case" in e]
    assert hidden and all(re.search(r"::Hidden case (failed|error|timeout): [^:]+\.$", e) for e in hidden)
    suite = _suite(junit)
    failed = [tc.get("name") for tc in suite.iter("testcase") if len(tc)]
    assert "attention_causal_small" in failed and len(errors) == min(len(failed), 10)
    assert not (tmp_path / "summary.md").exists()


@pytest.mark.slow
def test_hostile_text_cannot_issue_workflow_commands(tmp_path):
    sub = tmp_path / "evil,name::x%0A.py"
    sub.write_text(HOSTILE, encoding="utf-8")
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    proc = subprocess.run([sys.executable, "-m", "grader", "ci", str(sub), "-a", "masked-attention",
                           "--min-score", "0", "--junit", str(junit), "--summary", str(summary)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr  # 0 % >= --min-score 0
    out = proc.stdout
    assert "printed by the student" not in out and "again" not in out  # student output is never echoed
    assert "##[" not in out
    lines = out.replace("\r", "\n").split("\n")
    fence = [line for line in lines if line.startswith("::stop-commands::")]
    assert len(fence) == 1
    token = fence[0].split("::")[2]
    commands = [line.lstrip() for line in lines if line.lstrip().startswith("::")]
    allowed = re.compile(rf"::(error|warning) title=[^:]*::[^\n]*|::stop-commands::{token}|::{token}::")
    assert commands and all(allowed.fullmatch(c) for c in commands), commands
    for c in commands:  # after the runner's own unescaping, nothing in a message starts a command
        data = c.split("::", 2)[2].replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")
        assert not any(part.lstrip().startswith("::") for part in data.splitlines()[1:])
        assert "::" not in data.split("\n")[0] or c.startswith(f"::{token}")
    assert _suite(junit).get("tests") == N_CASES
    assert summary.read_text("utf-8").startswith("## ")


def test_threshold_decides_the_exit_status():
    graded = _graded(earned=30, possible=40)
    assert student.ci_lines(graded, min_score=75, file=None)[1] is True
    assert student.ci_lines(graded, min_score=75.01, file=None)[1] is False
    assert student.ci_lines(_graded(earned=0, possible=0), min_score=0, file=None)[1] is False


def _graded(*, earned: float, possible: float) -> Graded:
    from grader.results import AssignmentInfo, Environment, GradeReport, LoadInfo, Points, SubmissionInfo

    report = GradeReport(SubmissionInfo("a", "0", "a.py", "py"), AssignmentInfo("x", "1"), Points(earned, possible),
                         [], LoadInfo(ok=True), Environment("0", "0", "3", "cpu", "process"), "2026-01-01T00:00:00Z")
    return Graded(report, None, "process", 0, 0.0)


def test_usage_errors(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["ci", str(CORRECT)])
    assert missing.exit_code == 2 and "Missing option '-a'" in missing.output
    unknown = runner.invoke(main, ["ci", str(CORRECT), "-a", "nope"])
    assert unknown.exit_code == 2
    (line,) = unknown.output.strip().splitlines()
    assert line.startswith("Error: unknown assignment 'nope'; known assignments: ") and "masked-attention" in line
    blocker = tmp_path / "f"
    blocker.write_text("")
    unwritable = runner.invoke(main, ["ci", str(CORRECT), "-a", "masked-attention", "--junit",
                                      str(blocker / "junit.xml")])
    assert unwritable.exit_code == 2 and unwritable.output.startswith(f"Error: cannot write to {blocker}:")
    assert runner.invoke(main, ["ci", "--help"]).output.count("grader ci ") >= 2
