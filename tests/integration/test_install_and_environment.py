"""The grader as a new user installs it (a wheel in a fresh virtualenv under /tmp) and the
environment self-test that refuses to grade wrong."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec import load_assignment
from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: builds a wheel into a fresh virtualenv; subprocess runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"
ASSIGNMENT = ROOT / "assignments" / "masked-attention"
HOSTILE = ROOT / "tests" / "data" / "hostile"
LINUX = sys.platform.startswith("linux")
FULL = round(load_assignment("masked-attention").possible())


def outer_site_dirs() -> list[str]:
    """The site-packages folders this interpreter imports from, whichever kind of environment it is:
    system Python, a conda env, or a virtualenv (whose own site-packages `--system-site-packages`
    would not see: that flag reaches the base interpreter's, not this venv's)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


@pytest.fixture(scope="module")
def wheel_venv():
    """A virtualenv under /tmp with the grader installed from its wheel, and torch and the other
    dependencies taken from this interpreter's environment, so nothing is downloaded.

    The outer folders are listed in a .pth file of the new venv: they come after its own
    site-packages (the wheel's grader wins), and the .pth files inside them are not run, so an
    editable install of the checkout out there stays invisible."""
    tmp = Path(tempfile.mkdtemp(prefix="grader-venv-", dir="/tmp"))
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), str(ROOT)], check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True)
        python = str(tmp / "venv" / "bin" / "python")
        inner = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
        Path(inner, "outer-environment.pth").write_text("".join(f"{d}\n" for d in outer_site_dirs()))
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-index", *map(str, (tmp / "dist").glob("*.whl"))], check=True, capture_output=True)
        yield tmp / "venv"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_STEP_SUMMARY")}


def ci(venv: Path, submission: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "grader"), "ci", str(submission), "-a", str(ASSIGNMENT)],
                          capture_output=True, text=True, env=_env(), cwd=venv.parent, timeout=300)


@pytest.mark.skipif(not LINUX, reason="the jail is Linux's")
def test_a_wheel_in_a_venv_under_tmp_grades_correct_code_fully_and_hides_the_reference(wheel_venv):
    out = subprocess.run([str(wheel_venv / "bin" / "python"), "-c", "import grader; print(grader.__file__)"],
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir(), env=_env()).stdout
    assert out.startswith(str(wheel_venv))  # the wheel's grader, not the checkout's
    good = ci(wheel_venv, SAMPLES / "correct" / "einsum.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert f"scored {FULL}/{FULL} (100%)" in good.stdout
    cheat = ci(wheel_venv, HOSTILE / "imports_reference.py")
    assert cheat.returncode == 1
    assert f"scored 0/{FULL}" in cheat.stdout
    assert "No module named 'reference'" in cheat.stdout + cheat.stderr or "load-error" in cheat.stdout


@pytest.mark.skipif(not LINUX or os.geteuid() != 0, reason="needs the uid drop (root) to make a folder unreadable")
def test_ci_refuses_to_grade_where_the_jail_would_fail_correct_code(tmp_path):
    private = tempfile.mkdtemp(prefix="grader-private-", dir="/tmp")  # mode 0700: not for uid 65534
    Path(private, "course_helpers.py").write_text("X = 1\n")  # something to import there
    try:
        env = {**os.environ, "PYTHONPATH": private}
        env.pop("GITHUB_STEP_SUMMARY", None)
        proc = subprocess.run([sys.executable, "-m", "grader", "ci", str(SAMPLES / "correct" / "einsum.py"),
                               "-a", "masked-attention", "--junit", str(tmp_path / "junit.xml")],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    finally:
        shutil.rmtree(private)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and f"the folder {private} on sys.path cannot be read" in errors[0]
    assert "nothing was graded" in errors[0]
    assert not (tmp_path / "junit.xml").exists()


def test_grade_refuses_when_the_reference_fails_in_the_jail(tmp_path, monkeypatch):
    from grader.grading import factory
    from grader.results import CaseResult, Outcome, Points

    def failing(engine):
        return [CaseResult(id="causal_square", title="t", outcome=Outcome.ERROR, points=Points(0, 1),
                           hidden=False, concept="load-error", message="ModuleNotFoundError: torch.fx")]

    monkeypatch.setattr(factory, "reference_results", failing)
    (tmp_path / "in").mkdir()
    shutil.copy(SAMPLES / "correct" / "einsum.py", tmp_path / "in" / "alice.py")
    res = CliRunner().invoke(main, ["grade", str(tmp_path / "in"), "-a", "masked-attention",
                                    "-o", str(tmp_path / "out"), "-j", "1"])
    assert res.exit_code == 2, res.output
    assert "the trusted reference fails 1 of 1 cases in this machine's sandbox" in res.output
    assert "causal_square: ModuleNotFoundError: torch.fx" in res.output
    assert not list((tmp_path / "out").glob("**/alice*.html"))


def test_an_oversized_reply_costs_its_own_cases_only(tmp_path):
    """A reply far beyond what the case expects is refused before the grader reads it,
    the worker is replaced, and the other functions are still graded."""
    sub = tmp_path / "huge.py"
    sub.write_text((SAMPLES / "correct" / "einsum.py").read_text()
                   + "\n\ndef padding_mask(lengths, max_len, side='right'):\n    return torch.zeros(60 << 18)\n")
    res = CliRunner().invoke(main, ["ci", str(sub), "-a", "masked-attention", "--junit", str(tmp_path / "j.xml")])
    assert res.exit_code == 1, res.output
    assert "a reply of 60.0 MiB where at most 16.0 MiB is expected" in res.output
    score = next(line for line in res.output.splitlines() if "scored" in line)
    got = int(score.split("scored ")[1].split("/")[0])
    assert FULL // 2 <= got < FULL, score  # only the padding-mask cases are lost
