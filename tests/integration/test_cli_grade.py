"""`grader grade` and `grader report` driven through the real CLI on copies of the sample submissions."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec import load_assignment
from grader.batch.config import Event, EventKind
from grader.cli.app import main
from grader.cli.instructor import Progress
from grader.results import report_from_dict

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"
CLASS_IDS = ["alice", "broken", "carol", "doe_jane_12345", "smith_bob_67890"]
FULL_POINTS = round(load_assignment(ROOT / "assignments" / "masked-attention").possible(), 6)


def make_class(folder: Path) -> Path:
    """A small LMS-style class folder: files with LMS names, a student folder, a notebook, a broken file."""
    folder.mkdir(parents=True)
    shutil.copy(SAMPLES / "correct" / "sdpa.py", folder / "doe_jane_12345_attention.py")
    shutil.copy(SAMPLES / "buggy" / "no_scaling.py", folder / "smith_bob_late_67890_attention.py")
    (folder / "alice").mkdir()
    shutil.copy(SAMPLES / "correct" / "einsum.py", folder / "alice" / "attention.py")
    shutil.copy(SAMPLES / "correct" / "correct_notebook.ipynb", folder / "carol.ipynb")
    (folder / "broken.py").write_text("def masked_attention(:\n")
    (folder / "README.txt").write_text("not a submission\n")
    return folder


def grade(*args: str | Path):
    return CliRunner().invoke(main, ["grade", *map(str, args)], catch_exceptions=False)


def result_bytes(out: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted((out / "results").glob("*.json"))}


def runs(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "gradebook.sqlite") as conn:
        return conn.execute("SELECT id, status, graded, reused FROM runs ORDER BY id").fetchall()


def scores(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "gradebook.sqlite") as conn:
        return conn.execute("SELECT run_id, student_id, reused FROM scores ORDER BY run_id, student_id").fetchall()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One real batch over the class folder (-j 2); tests that change it work on a copy."""
    base = tmp_path_factory.mktemp("batch")
    cls = make_class(base / "class")
    out = base / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "2")
    return cls, out, result


# --- one batch ---------------------------------------------------------------------------------

def test_batch_exits_0_and_writes_every_output(graded):
    _, out, result = graded
    assert result.exit_code == 0, result.output
    assert sorted(result_bytes(out)) == CLASS_IDS
    assert sorted(p.stem for p in out.glob("*.html")) == sorted(CLASS_IDS + ["index", "similarity"])
    for name in ("grades.csv", "junit.xml", "summary.md", "gradebook.sqlite", "ledger.sqlite", "similarity.csv"):
        assert (out / name).is_file(), name
    assert sorted(p.stem for p in (out / "gradescope").glob("*.json")) == CLASS_IDS
    assert not list((out / "results").glob(".*")), "no temporary files left behind"


def test_batch_prints_plain_progress_lines_and_the_summary(graded):
    _, out, result = graded
    lines = result.output.splitlines()
    assert "Grading 5 submission(s)." in lines
    progress = sorted(line for line in lines if line.startswith("["))
    assert len(progress) == 5
    # no_scaling fails every case that compares weights: 30 % of the points
    assert any(line.startswith("[") and " smith_bob_67890 30% (" in line and line.endswith(" s)") for line in lines)
    assert any(" broken 0% (failed to load) (" in line for line in lines)
    assert "5 submission(s): 5 graded, 0 reused from the ledger, 1 failed to load, 0 not graded" in result.output
    score = json.loads((out / "results" / "smith_bob_67890.json").read_text("utf-8"))["score"]
    mean = (300 + 100 * score["earned"] / score["possible"]) / 5  # three at 100 %, one that did not load
    assert f"  students 5   mean {mean:.1f}%   median 100.0%   failed to load 1" in lines
    assert any(line.split()[:2] == ["scaling", "1/5"] for line in lines)
    assert f"Dashboard: {out / 'index.html'}" in lines


def test_lms_names_folders_and_notebooks_give_the_right_results(graded):
    _, out, _ = graded
    reports = {p.stem: report_from_dict(json.loads(p.read_text())) for p in (out / "results").glob("*.json")}
    assert reports["doe_jane_12345"].submission.filename == "doe_jane_12345_attention.py"
    assert reports["doe_jane_12345"].score.earned == reports["doe_jane_12345"].score.possible
    assert (reports["alice"].submission.kind, reports["carol"].submission.kind) == ("folder", "ipynb")
    assert reports["carol"].score.percent == 100.0
    smith = reports["smith_bob_67890"]
    assert "scaling" in smith.concepts_failed() and smith.score.percent < 100
    broken = reports["broken"]
    assert not broken.load.ok and broken.score.earned == 0 and "SyntaxError" in str(broken.load.message)
    assert runs(out) == [(1, "complete", 5, 0)]


def test_csv_export_matches_the_results(graded):
    _, out, _ = graded
    rows = (out / "grades.csv").read_text().splitlines()
    assert rows[0].startswith("student_id,earned,possible,percent,")
    assert [r.split(",")[0] for r in rows[1:]] == CLASS_IDS


# --- re-runs: ledger, --force, resume ----------------------------------------------------------

def _copy_batch(graded, tmp_path) -> tuple[Path, Path]:
    cls, out, _ = graded
    shutil.copytree(out, tmp_path / "out")
    return cls, tmp_path / "out"


def test_rerun_grades_nothing_and_keeps_results_identical(graded, tmp_path):
    cls, out = _copy_batch(graded, tmp_path)
    before = result_bytes(out)
    result = grade(cls, "-a", "masked-attention", "-o", out)
    assert result.exit_code == 0, result.output
    assert "Nothing to grade: all 5 submission(s) are unchanged since they were graded" in result.output
    assert "5 submission(s): 0 graded, 5 reused from the ledger, 1 failed to load" in result.output
    assert result_bytes(out) == before
    assert runs(out) == [(1, "complete", 5, 0), (2, "complete", 0, 5)]
    assert [s for s in scores(out) if s[0] == 2] == [(2, sid, 1) for sid in CLASS_IDS]


def test_rerun_restores_a_deleted_result_from_the_ledger(graded, tmp_path):
    cls, out = _copy_batch(graded, tmp_path)
    before = result_bytes(out)
    (out / "results" / "carol.json").unlink()
    result = grade(cls, "-a", "masked-attention", "-o", out)
    assert result.exit_code == 0 and "0 graded, 5 reused" in result.output
    assert result_bytes(out) == before


@pytest.mark.slow
def test_changed_submission_and_force_are_graded_again(graded, tmp_path):
    cls, out = _copy_batch(graded, tmp_path)
    new_cls = tmp_path / "class"
    shutil.copytree(cls, new_cls)
    shutil.copy(SAMPLES / "correct" / "sdpa.py", new_cls / "smith_bob_late_67890_attention.py")  # fixed bug
    result = grade(new_cls / "smith_bob_late_67890_attention.py", "-a", "masked-attention", "-o", out)
    assert result.exit_code == 0, result.output
    assert "1 submission(s): 1 graded, 0 reused" in result.output
    assert "  students 5 (4 from earlier runs)   mean 80.0%" in result.output
    assert json.loads((out / "results" / "smith_bob_67890.json").read_text())["score"]["earned"] == FULL_POINTS

    forced = grade(new_cls / "broken.py", "-a", "masked-attention", "-o", out, "--force")
    assert forced.exit_code == 0 and "1 submission(s): 1 graded, 0 reused" in forced.output
    assert runs(out)[-1] == (3, "complete", 1, 0)


def _start(args: list, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"grader exited early ({proc.returncode}): {proc.communicate()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError("timed out waiting for the grader")
        time.sleep(0.05)


def _slow_copy(src: Path, dst: Path, seconds: float = 0.6) -> None:
    """A copy whose import takes `seconds` longer, so a run lasts long enough to be interrupted mid-way."""
    dst.write_text(f"import time as _t\n_t.sleep({seconds})\n" + src.read_text())


def _six_submissions(folder: Path) -> Path:
    """Six submissions, each loading 2 s longer: after the first result, the rest still need 5 s or
    more of wall time however fast the machine (sleeping is not sped up), so an interrupt sent on
    the first result lands mid-run even when this test process is slow to send it."""
    folder.mkdir()
    for name in ("additive", "einsum", "neg_inf_guard", "reference_style", "sdpa"):
        _slow_copy(SAMPLES / "correct" / f"{name}.py", folder / f"{name}.py", seconds=2.0)
    _slow_copy(SAMPLES / "buggy" / "no_scaling.py", folder / "no_scaling.py", seconds=2.0)
    return folder


@pytest.mark.slow
def test_the_real_command_exits_fast_and_leaves_nothing_behind(tmp_path):
    """As a real process `grader grade` skips the interpreter's tear-down of torch; its exit
    status, outputs and the sandbox's clean-up (the scratch root under TMPDIR) are the same."""
    import os

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cls = tmp_path / "class"
    cls.mkdir()
    shutil.copy(SAMPLES / "correct" / "sdpa.py", cls / "sdpa.py")
    shutil.copy(SAMPLES / "buggy" / "no_scaling.py", cls / "no_scaling.py")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "grader", "grade", str(cls), "-a", "masked-attention", "-o", str(out),
                        "-j", "2"], cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "2 submission(s): 2 graded, 0 reused" in p.stdout  # the summary is flushed before the exit
    assert sorted(r.stem for r in (out / "results").glob("*.json")) == ["no_scaling", "sdpa"]
    assert runs(out)[-1][1:] == ("complete", 2, 0)
    assert list(tmp.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])  # -j 2: slot processes (grader/batch/slots.py), -j 1: one thread
def test_sigint_stops_cleanly_and_the_rerun_resumes_without_loss_or_duplicates(tmp_path, jobs):
    import signal

    cls, out = _six_submissions(tmp_path / "class"), tmp_path / "out"
    proc = _start(["grade", cls, "-a", "masked-attention", "-o", out, "-j", jobs], tmp_path)
    _wait_for(lambda: any((out / "results").glob("*.json")), proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Stopping after the submissions in progress" in stderr
    assert "Interrupted: " in stderr and "run the same command again to grade the rest" in stderr
    first = result_bytes(out)
    assert 1 <= len(first) < 6
    assert runs(out) == [(1, "interrupted", len(first), 0)]

    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "1")
    assert result.exit_code == 0, result.output
    assert f"Grading {6 - len(first)} submission(s); {len(first)} unchanged since graded, reused." in result.output
    after = result_bytes(out)
    assert sorted(after) == ["additive", "einsum", "neg_inf_guard", "no_scaling", "reference_style", "sdpa"]
    assert {k: after[k] for k in first} == first
    assert runs(out) == [(1, "interrupted", len(first), 0), (2, "complete", 6 - len(first), len(first))]
    run2 = [s for s in scores(out) if s[0] == 2]
    assert sorted(s[1] for s in run2) == sorted(after) and sum(s[2] for s in run2) == len(first)
    with sqlite3.connect(out / "ledger.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT student_id) FROM graded").fetchone() == (6, 6)


@pytest.mark.slow
def test_a_crashed_run_is_resumed_and_marked_interrupted(tmp_path):
    cls, out = _six_submissions(tmp_path / "class"), tmp_path / "out"
    proc = _start(["grade", cls, "-a", "masked-attention", "-o", out, "-j", "1"], tmp_path)
    _wait_for(lambda: any((out / "results").glob("*.json")), proc)
    proc.kill()
    proc.communicate(timeout=60)
    first = result_bytes(out)
    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "2")
    assert result.exit_code == 0, result.output
    assert len(result_bytes(out)) == 6 and {k: result_bytes(out)[k] for k in first} == first
    assert [r[:2] for r in runs(out)] == [(1, "interrupted"), (2, "complete")]
    assert runs(out)[1][2] + runs(out)[1][3] == 6


@pytest.mark.slow
def test_a_second_run_on_the_same_folder_fails_clearly_or_waits(tmp_path):
    """While another run holds the output folder (here this test, through the lock every run takes),
    a second run stops with one clear line, and one with --wait says it waits, waits, then grades.
    The holder lets go only once the waiter has said so, so no start-up race decides the outcome."""
    import os
    import select

    from grader.batch.recording import OutputLock

    cls = tmp_path / "class"
    cls.mkdir()
    for name in ("additive", "einsum", "sdpa"):
        shutil.copy(SAMPLES / "correct" / f"{name}.py", cls / f"{name}.py")
    out = tmp_path / "out"
    out.mkdir()
    with OutputLock(out):
        busy = grade(cls, "-a", "masked-attention", "-o", out)
        assert busy.exit_code == 2
        assert f"Error: {out} is in use by another grader run (pid {os.getpid()}, started " in busy.output
        assert "pass --wait to start when it has" in busy.output
        waiter = _start(["grade", cls, "-a", "masked-attention", "-o", out, "--wait"], tmp_path)
        said = b""
        while b"Waiting for the other run writing to this folder" not in said:
            ready, _, _ = select.select([waiter.stderr], [], [], 300)
            chunk = os.read(waiter.stderr.fileno(), 4096) if ready else b""  # unbuffered: select sees it all
            assert chunk, f"the waiting run ended or fell silent first: {said!r}"
            said += chunk
    out2, err2 = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err2
    assert "3 submission(s): 3 graded" in out2
    again = grade(cls, "-a", "masked-attention", "-o", out)
    assert again.exit_code == 0 and "3 submission(s): 0 graded, 3 reused" in again.output
    assert runs(out) == [(1, "complete", 3, 0), (2, "complete", 0, 3)]


# --- operator errors ---------------------------------------------------------------------------

def test_empty_folder_is_one_clear_line_and_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    result = grade(tmp_path / "empty", "-a", "masked-attention", "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: no submissions found in {tmp_path / 'empty'}; expected .py, .ipynb or .zip files or one "
        "sub-folder per student"]


def test_unknown_assignment_lists_the_known_ones(tmp_path):
    result = grade(tmp_path, "-a", "nope", "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "Error: unknown assignment 'nope'; known assignments: " in result.output
    assert "masked-attention" in result.output and "mha-kv-cache" in result.output
    assert "Traceback" not in result.output


def test_output_folder_not_writable(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "file").write_text("")
    result = grade(tmp_path / "a.py", "-a", "masked-attention", "-o", tmp_path / "file" / "out")
    assert result.exit_code == 2
    assert f"Error: cannot write to the output folder {tmp_path / 'file' / 'out'}: Not a directory" in result.output


def test_verbose_adds_the_traceback(tmp_path):
    (tmp_path / "empty").mkdir()
    result = grade(tmp_path / "empty", "-a", "masked-attention", "-o", tmp_path / "out", "--verbose")
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.output and "NoSubmissions" in result.output
    assert "Error: no submissions found" in result.output


def test_missing_assignment_option_is_a_usage_error(tmp_path):
    result = grade(tmp_path)
    assert result.exit_code == 2 and "Missing option '-a' / '--assignment'" in result.output


def test_help_teaches_by_example():
    text = CliRunner().invoke(main, ["grade", "--help"]).output
    assert "  grader grade submissions/ -a masked-attention\n" in text
    assert "lastname_firstname_12345" in text and "--force" in text and "--wait" in text


# --- progress on a terminal --------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_rewrites_one_line_with_failures_and_eta():
    stream = _Tty()
    progress = Progress(verbose=False, stream=stream)
    assert progress.tty
    from grader.results import Points

    class R:  # only what the progress line reads
        score = Points(20, 41)

    progress.on_event(Event(EventKind.GRADED, 1, 4, "alice", R(), 1.0, failing=1))
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r\x1b[K[1/4] ######.................. 1 below 100%  ETA 0:")
    assert text.endswith("alice\n")


# --- grader report -----------------------------------------------------------------------------

def test_report_rerenders_from_saved_json_in_a_subprocess(graded, tmp_path):
    _, out, _ = graded
    target = tmp_path / "preview"
    proc = subprocess.run([sys.executable, "-m", "grader", "report", str(out / "results"), "-o", str(target)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"Dashboard: {target / 'index.html'}" in proc.stdout
    # The batch made its exports from the reports it held; read back from the files, they are the same.
    for name in ("grades.csv", "junit.xml", *(f"gradescope/{i}.json" for i in CLASS_IDS)):
        assert (target / name).read_bytes() == (out / name).read_bytes(), name
    assert sorted(p.stem for p in target.glob("*.html")) == sorted(CLASS_IDS + ["index"])
    assert not (target / "results").exists()


def test_report_accepts_the_output_folder_and_reports_missing_results(graded, tmp_path):
    _, out, _ = graded
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "index.html").unlink()
    ok = CliRunner().invoke(main, ["report", str(copy), "--release-hidden"])
    assert ok.exit_code == 0, ok.output
    assert (copy / "index.html").is_file()
    bad = CliRunner().invoke(main, ["report", str(tmp_path / "nothing")])
    assert bad.exit_code == 2
    assert f"Error: no results folder at {tmp_path / 'nothing'}" in bad.output


def test_report_refuses_a_folder_a_grade_run_is_writing(graded, tmp_path):
    from grader.batch.recording import OutputLock

    _, out, _ = graded
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    with OutputLock(copy):
        busy = CliRunner().invoke(main, ["report", str(copy)])
    assert busy.exit_code == 2
    assert f"Error: {copy} is in use by another grader run (pid " in busy.output
    assert busy.output.rstrip().endswith("try again when it has finished")


@pytest.mark.slow
def test_a_grader_fault_on_one_submission_is_reported_not_recorded_and_retried(tmp_path, monkeypatch):
    from grader.grading.engine import Engine

    cls = tmp_path / "class"
    cls.mkdir()
    for name in ("additive", "sdpa"):
        shutil.copy(SAMPLES / "correct" / f"{name}.py", cls / f"{name}.py")
    out = tmp_path / "out"
    real_grade = Engine.grade

    def faulty(self, sub, **options):
        if options.get("student_id") == "sdpa":
            raise RuntimeError("simulated grader fault")
        return real_grade(self, sub, **options)

    monkeypatch.setattr(Engine, "grade", faulty)
    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "1")
    assert result.exit_code == 1
    assert "sdpa: NOT GRADED (RuntimeError: simulated grader fault)" in result.output
    assert "Error: 1 submission(s) could not be graded because of a grader fault" in result.output
    assert sorted(result_bytes(out)) == ["additive"]
    assert runs(out) == [(1, "complete", 1, 0)]

    monkeypatch.setattr(Engine, "grade", real_grade)
    retry = grade(cls, "-a", "masked-attention", "-o", out, "-j", "1")
    assert retry.exit_code == 0 and "2 submission(s): 1 graded, 1 reused" in retry.output
    assert sorted(result_bytes(out)) == ["additive", "sdpa"]


def test_a_fixed_hidden_case_regrades_everyone_and_says_why(tmp_path):
    """An instructor fixes a hidden case without changing the version: the rerun grades again and
    says what changed; the run after that reuses the new results."""
    assignment = tmp_path / "masked-attention"
    shutil.copytree(ROOT / "assignments" / "masked-attention", assignment,
                    ignore=shutil.ignore_patterns("__pycache__"))
    cls = tmp_path / "class"
    cls.mkdir()
    shutil.copy(SAMPLES / "correct" / "sdpa.py", cls / "ada.py")
    shutil.copy(SAMPLES / "buggy" / "no_scaling.py", cls / "ben.py")
    out = tmp_path / "out"
    assert grade(cls, "-a", assignment, "-o", out).exit_code == 0
    possible = json.loads((out / "results" / "ada.json").read_text())["score"]["possible"]

    hidden = assignment / "cases_hidden.py"
    text = hidden.read_text()
    fixed = text.replace('concept="causal-alignment", points=3, hidden=True', 'concept="causal-alignment", points=4, hidden=True', 1)
    assert fixed != text
    hidden.write_text(fixed)
    result = grade(cls, "-a", assignment, "-o", out)
    assert result.exit_code == 0, result.output
    assert "The cases of masked-attention changed since the last run: regrading 2." in result.output
    assert "2 submission(s): 2 graded, 0 reused" in result.output
    assert json.loads((out / "results" / "ada.json").read_text())["score"]["possible"] == possible + 1

    again = grade(cls, "-a", assignment, "-o", out)
    assert "Nothing to grade: all 2 submission(s) are unchanged" in again.output
    assert "changed since the last run" not in again.output

    spec = assignment / "spec.toml"
    spec.write_text(spec.read_text().replace('version = "', 'version = "9', 1))
    bumped = grade(cls, "-a", assignment, "-o", out)
    assert "The spec.toml of masked-attention changed since the last run: regrading 2." in bumped.output
