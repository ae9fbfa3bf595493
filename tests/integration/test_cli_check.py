"""`grader check`: the student's self-check, through the real CLI (CliRunner and one subprocess)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grader.assignment.spec import load_assignment
from grader.cli.app import main
from grader.i18n import english, normalise
from grader.grading.single import Graded, early_device
from grader.report.check_text import check_lines

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "submissions" / "masked-attention"
CORRECT = SUBS / "correct" / "einsum.py"
BUGGY = SUBS / "buggy" / "zero_fill.py"
_FULL = load_assignment(ROOT / "assignments" / "masked-attention")
PUBLIC = [i.id for i in _FULL.instances(public_only=True)]
N_HIDDEN = sum(i.case.hidden for i in _FULL.instances())
P_PUBLIC = _FULL.possible(public_only=True)
ZERO_FILL_FAILS = ["attention_causal_small", "attention_empty_row", "attention_half[float16]",
                   "attention_half[bfloat16]", "attention_large_scores", "attention_twice", "attention_value_size"]
"""The public cases a 0 fill fails: every one that masks a score."""
ZERO_FILL_POINTS = P_PUBLIC - sum(i.points for i in _FULL.instances(public_only=True) if i.id in ZERO_FILL_FAILS)
LEAD = f"Public cases: {P_PUBLIC:g} of {_FULL.possible():g} points checked, {N_HIDDEN} hidden cases at grading time."


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", *args])


def test_correct_submission_passes_every_public_case(tmp_path):
    result = run(str(CORRECT), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "masked-attention v1.0 — self-check of einsum.py (public cases only)"
    for cid in PUBLIC:
        assert sum(line.startswith("  ✓ ") and line.endswith(f"[{cid}]") for line in lines) == 1, cid
    assert "✗" not in result.output
    assert lines[-3:-1] == [LEAD, f"Passed {len(PUBLIC)} of {len(PUBLIC)} public cases ({P_PUBLIC:g}/{P_PUBLIC:g} "
                                  "points); this self-check is not your grade."]
    assert "%" not in result.output  # a share of the public points is not a grade
    assert "all cases passed" not in result.output.lower() and "all tests passed" not in result.output.lower()
    report = tmp_path / "out" / "einsum.html"
    assert lines[-1] == f"Report: {report}"
    assert report.is_file() and "masked_attention with a causal mask" in report.read_text("utf-8")


def test_the_report_made_ready_while_the_sandbox_starts_gets_the_language_and_may_fail(tmp_path, monkeypatch):
    """check compiles its page's templates on a thread while the sandbox starts; that head start is
    asked for in the feedback's language, and if it fails the check still passes and writes its page."""
    import grader.cli.student as student

    asked = []

    def failing(lang):
        asked.append(lang)
        raise RuntimeError("no head start")

    monkeypatch.setattr(student, "_prepare_report", failing)
    result = run(str(CORRECT), "-o", str(tmp_path / "out"), "--lang", "zh-CN")
    assert result.exit_code == 0, result.output
    assert [normalise(lang) for lang in asked] == ["zh-CN"]
    assert (tmp_path / "out" / "einsum.html").is_file()


def test_buggy_submission_fails_the_right_case_with_its_concept(tmp_path):
    result = run(str(BUGGY), "-a", "masked-attention", "-o", str(tmp_path))
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("  ✗ "))
    assert lines[i] == "  ✗ masked_attention with a causal mask [attention_causal_small] — mask-fill-value"
    assert lines[i + 1].startswith("      Masked positions received attention weight")
    failed = [line for line in lines if line.startswith("  ✗ ")]
    assert [re.search(r" \[(.+)\] — ", line).group(1) for line in failed] == ZERO_FILL_FAILS
    assert all(line.endswith(" — mask-fill-value") for line in failed)
    passed = len(PUBLIC) - len(ZERO_FILL_FAILS)
    assert lines[-3:-1] == [LEAD, f"Passed {passed} of {len(PUBLIC)} public cases ({ZERO_FILL_POINTS:g}/{P_PUBLIC:g} "
                                  "points); this self-check is not your grade."]
    assert (tmp_path / "zero_fill.html").is_file()


@pytest.mark.slow
def test_ascii_terminal_and_module_entry_point(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(BUGGY), "-o", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "masked-attention v1.0 - self-check of zero_fill.py (public cases only)"
    assert "  FAIL masked_attention with a causal mask [attention_causal_small] - mask-fill-value" in out
    assert sum(line.startswith("  ok ") for line in out) == len(PUBLIC) - len(ZERO_FILL_FAILS)
    assert LEAD in out
    assert (tmp_path / "zero_fill.html").is_file()


# --- usage errors: one line, exit 2, no grading --------------------------------------------

def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_missing_submission(tmp_path):
    line = _one_error_line(run(str(tmp_path / "nope.py")))
    assert line == f"Error: submission {tmp_path / 'nope.py'} does not exist"


def test_unknown_assignment_lists_known_ones(tmp_path):
    line = _one_error_line(run(str(CORRECT), "-a", "flash-attention", "-o", str(tmp_path)))
    assert line.startswith("Error: unknown assignment 'flash-attention'; known assignments: ")
    assert "masked-attention" in line and "mha-kv-cache" in line


def test_a_misspelt_assignment_gets_a_guess_and_each_name_once(tmp_path):
    line = _one_error_line(run(str(CORRECT), "-a", "masked-atention", "-o", str(tmp_path)))
    assert line.startswith("Error: unknown assignment 'masked-atention'; did you mean 'masked-attention'? ")
    assert line.count("masked-attention") == 2  # the guess and the listing, never listed twice


def test_a_reader_that_closes_the_pipe_early_is_not_an_error(tmp_path):
    """`grader check attention.py | head -1`: the rest of the output has nowhere to go, quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "grader", "check", str(CORRECT), "-o", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert first.startswith(b"masked-attention v1.0"), err
    assert "Error" not in err and "BrokenPipe" not in err, err


def test_the_py_and_the_notebook_of_one_kit_keep_a_report_each(tmp_path):
    shutil.copy(CORRECT, tmp_path / "attention.py")
    shutil.copy(SUBS / "correct" / "correct_notebook.ipynb", tmp_path / "attention.ipynb")
    for name in ("attention.py", "attention.ipynb"):
        result = run(str(tmp_path / name), "-a", "masked-attention", "-o", str(tmp_path / "out"))
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1].endswith(f"{name.replace('.py', '')}.html")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["attention.html", "attention.ipynb.html"]


def test_the_terminal_shows_what_the_code_printed_and_with_v_the_traceback(tmp_path):
    src = CORRECT.read_text(encoding="utf-8").replace(
        "def masked_attention(", "print('debug: loaded')\nprint('\\x1b[2Jcleared?')\n"
        "def _boom():\n    raise ValueError('scores look odd')\n\n\ndef _unused(", 1)
    src += "\n\ndef masked_attention(q, k, v, mask=None):\n    _boom()\n"
    sub = tmp_path / "noisy.py"
    sub.write_text(src, encoding="utf-8")
    plain = run(str(sub), "-a", "masked-attention", "-o", str(tmp_path / "a"))
    lines = plain.output.splitlines()
    i = lines.index("Your code printed (while loading and on the public cases):")
    assert lines[i + 1:i + 3] == ["    | debug: loaded", "    | cleared?"]  # no escape sequence reaches the terminal
    assert "\x1b" not in plain.output and "Traceback" not in plain.output
    verbose = run(str(sub), "-a", "masked-attention", "-o", str(tmp_path / "b"), "-v")
    assert "Traceback" in verbose.output
    assert "        ValueError: scores look odd" in verbose.output.splitlines()


def test_output_folder_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _one_error_line(run(str(CORRECT), "-o", str(blocker / "reports")))
    assert line.startswith(f"Error: cannot write to {blocker / 'reports'}: ")


def test_unreadable_submission(tmp_path, monkeypatch):
    sub = tmp_path / "attention.py"
    sub.write_text("def f(): pass\n")
    real_open = open

    def deny(path, *a, **k):
        if Path(path) == sub:
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", deny)
    line = _one_error_line(run(str(sub), "-o", str(tmp_path)))
    assert line == f"Error: cannot read submission {sub}: Permission denied"


def test_cannot_infer_the_assignment(tmp_path):
    sub = tmp_path / "other.py"
    sub.write_text("def something_else():\n    return 1\n")
    line = _one_error_line(run(str(sub), "-o", str(tmp_path)))
    assert line.startswith("Error: could not tell which assignment other.py is for; pass -a/--assignment (known:")


def test_verbose_shows_the_traceback(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path / "nope.py"), "--verbose"])
    assert result.exit_code == 2
    assert "Traceback" in result.output and result.output.rstrip().endswith("does not exist")


def test_help_teaches_by_example():
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    assert "  grader check attention.ipynb" in result.output and "Exit status: 0" in result.output


# --- the summary lines without grading -----------------------------------------------------

def _graded(hidden: int, outcomes: list[str]) -> Graded:
    from grader.results import (AssignmentInfo, CaseResult, Environment, GradeReport, LoadInfo, Outcome,
                                Points, SubmissionInfo)

    cases = [CaseResult(id=f"c{i}", title=f"case {i}", outcome=Outcome(o),
                        points=Points(float(o == "passed"), 1.0), hidden=False,
                        concept=None if o == "passed" else "scaling", message=english("Divide by sqrt(d_k)."))
             for i, o in enumerate(outcomes)]
    earned = sum(c.points.earned for c in cases)
    report = GradeReport(SubmissionInfo("a", "0", "a.py", "py"), AssignmentInfo("x", "1"),
                         Points(earned, len(cases)), cases, LoadInfo(ok=True),
                         Environment("0", "0", "3", "cpu", "process"), "2026-01-01T00:00:00Z", public_only=True)
    return Graded(report, None, "process", hidden, 2.0 * hidden)


def test_no_hidden_cases_and_all_passed_says_so():
    lines = check_lines(_graded(0, ["passed", "passed"]))
    assert lines[-3:] == ["Public cases: 2 of 2 points checked, no hidden cases.",
                          "Passed 2 of 2 public cases (2/2 points).", "All cases passed."]


def test_hidden_cases_never_allow_all_passed():
    lines = check_lines(_graded(1, ["passed"]))
    assert lines[-2:] == ["Public cases: 1 of 3 points checked, 1 hidden case at grading time.",
                          "Passed 1 of 1 public cases (1/1 points); this self-check is not your grade."]
    assert not any("All cases passed" in line for line in lines)


def test_no_percentage_in_the_summary():
    lines = check_lines(_graded(0, ["passed"] * 199 + ["failed"]))
    assert "Passed 199 of 200 public cases (199/200 points)." in lines
    assert not any("%" in line for line in lines)


def test_code_not_written_yet_is_named_so_without_a_concept():
    import dataclasses

    from grader.results import Outcome

    g = _graded(0, ["error"])
    case = dataclasses.replace(g.report.cases[0], concept=None,
                               message=english("Not implemented yet: f still raises NotImplementedError. Write it, then "
                                       "check again."))
    assert case.not_implemented and not dataclasses.replace(case, outcome=Outcome.FAILED).not_implemented
    g = dataclasses.replace(g, report=dataclasses.replace(g.report, cases=[case]))
    lines = check_lines(g)
    assert lines[1:3] == ["  ✗ case 0 [c0] — not implemented yet",
                          "      Not implemented yet: f still raises NotImplementedError. Write it, then check again."]
    assert lines[3].startswith("Public cases:")  # no concept line, no evidence


# --- what the messages name: the cell, the type, the real mistake ----------------------------

def test_a_demo_cell_that_rebinds_an_entry_point_is_named_with_the_type(tmp_path):
    result = run(str(SUBS / "buggy" / "demo_cell_rebinds.ipynb"), "-a", "masked-attention", "-o", str(tmp_path))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    i = lines.index("  ✗ causal_mask on a square sequence [causal_mask_square] — signature")
    assert lines[i + 1] == ("      'causal_mask' should be a function (causal_mask(q_len, k_len=None, device=None)) "
                            "but is a torch.Tensor: code cell 7, line 3 rebinds it "
                            "(`causal_mask = causal_mask(seq_len)`). Give the value another name.")
    assert "a other" not in result.output


def test_a_cell_that_raises_is_named_as_jupyter_shows_it(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_markdown_cell("text"),
                nbformat.v4.new_code_cell(CORRECT.read_text("utf-8")),
                nbformat.v4.new_markdown_cell("## Demo"),
                nbformat.v4.new_code_cell("plot_attention(w)  # a helper from the lecture\n")]
    p = tmp_path / "attention.ipynb"
    nbformat.write(nb, str(p))
    result = run(str(p), "-a", "masked-attention", "-o", str(tmp_path / "out"))
    assert ("Error while loading (code cell 2 (plot_attention(w) # a helper from the lecture)): "
            "NameError: name 'plot_attention' is not defined") in result.output.splitlines()


def test_with_device_auto_the_sandbox_starts_before_the_imports(tmp_path, monkeypatch):
    """On a machine without a GPU, `--device auto` (the default) starts the sandbox's self-test
    beside the grader's own torch import instead of after it."""
    import json

    if early_device("auto") != "cpu":
        pytest.skip("this machine shows a GPU device node")
    marks = tmp_path / "marks.jsonl"
    monkeypatch.setenv("GRADER_TIMINGS", str(marks))
    result = run(str(CORRECT), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    at = {m["phase"]: m["t"] for m in map(json.loads, marks.read_text().splitlines())}
    assert at["sandbox.start"] < at["imports"]


def test_a_wrong_guess_of_the_device_costs_time_not_the_check(tmp_path, monkeypatch):
    """The sandbox started for the guessed device is replaced once torch names another one."""
    import grader.grading.single as single

    started = []
    real_start = single.start_early
    monkeypatch.setattr(single, "early_device", lambda device: "cuda" if device == "auto" else device)
    monkeypatch.setattr(single, "start_early", lambda folder, device, isolation=None: (
        started.append(device), real_start(folder, device, isolation))[1])
    monkeypatch.setattr("grader.device.resolve_device", lambda name="auto": __import__("torch").device("cpu"))
    result = run(str(CORRECT), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert started == ["cuda", "cpu"]
    assert f"Passed {len(PUBLIC)} of {len(PUBLIC)} public cases" in result.output
