"""`grader release A --gradescope`: the autograder.zip, laid out as Gradescope lays it out under a
temporary root, grades a correct, a buggy, a crashing and an unloadable upload into results.json
files that follow Gradescope's documented fields."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec import load_assignment
from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: grades real submissions (tens of seconds)

ROOT = Path(__file__).resolve().parents[2]
SUBS = ROOT / "submissions" / "masked-attention"
FULL = load_assignment(ROOT / "assignments" / "masked-attention")
HIDDEN_IDS = {i.id for i in FULL.instances() if i.case.hidden}
POSSIBLE = FULL.possible()

# Gradescope's autograder specification: the results.json fields and the values they take.
TOP_FIELDS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
              "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
               "tags", "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}


def check_gradescope_schema(d: dict) -> None:
    assert set(d) <= TOP_FIELDS, set(d) - TOP_FIELDS
    assert "leaderboard" not in d
    assert isinstance(d["score"], (int, float))
    assert d["output_format"] in FORMATS and d.get("test_output_format", "text") in FORMATS
    assert d["visibility"] in VISIBILITY and d["stdout_visibility"] in VISIBILITY
    assert isinstance(d["output"], str)
    for t in d["tests"]:
        assert set(t) <= TEST_FIELDS, set(t) - TEST_FIELDS
        assert isinstance(t["name"], str) and t["name"]
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["status"] in ("passed", "failed")
        assert t["visibility"] in VISIBILITY
        assert isinstance(t["output"], str)
        assert all(isinstance(tag, str) for tag in t.get("tags", []))


class _Scripts(HTMLParser):
    """Collects what in the HTML could run or load: script tags, event handlers, external URLs."""

    def __init__(self):
        super().__init__()
        self.bad: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "link"):
            self.bad.append(tag)
        for k, v in attrs:
            if k.startswith("on") or (k in ("src", "href") and v and re.match(r"\s*(javascript|https?):", v)):
                self.bad.append(f"{tag} {k}={v}")


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gradescope")
    r = CliRunner().invoke(main, ["release", "masked-attention", "--gradescope", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"{len(HIDDEN_IDS)} hidden cases inside, shown after_published" in r.output
    assert "never to students" in r.output
    return out / "autograder.zip"


def test_zip_holds_what_gradescope_runs(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
        config = json.loads(z.read("autograder.json"))
        wheel = next(n for n in names if n.startswith("wheel/") and n.endswith(".whl"))
        with zipfile.ZipFile(z.open(wheel)) as w:
            packaged = {n.split("/")[0] for n in w.namelist()}
    assert {"setup.sh", "run_autograder", "autograder.json",
            "assignment/masked-attention/cases_hidden.py", "assignment/masked-attention/spec.toml"} <= names
    assert not any("__pycache__" in n for n in names)
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert {"grader", "reference"} <= packaged  # the instructor's grader carries the reference
    assert config == {"assignment": "assignment/masked-attention", "hidden_visibility": "after_published",
                      "lang": None, "assignment_version": "1.0"}
    # setup.sh: the CPU build of torch from its own index, before the grader (whose torch>=2.4 is then met)
    torch_line = next(line for line in setup.splitlines() if "torch==" in line)
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line
    assert setup.index(torch_line) < setup.index(f"pip install {wheel}")
    assert setup.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in setup
    assert "AUTOGRADER_ROOT" in run and "results/results.json" in run
    for script in (setup, run):
        proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert proc.returncode == 0, proc.stderr
        if shutil.which("shellcheck"):
            proc = subprocess.run(["shellcheck", "-"], input=script, text=True, capture_output=True)
            assert proc.returncode == 0, proc.stdout


def _crashing(tmp: Path) -> Path:
    """A correct submission whose masked_attention then segfaults the worker."""
    src = (SUBS / "correct" / "einsum.py").read_text()
    (tmp / "crashing").mkdir()
    path = tmp / "crashing" / "attention.py"
    path.write_text(src + "\n\nimport ctypes\n\n\ndef masked_attention(*args, **kwargs):\n"
                          "    return ctypes.string_at(0)\n")
    return path


def _unloadable(tmp: Path) -> Path:
    (tmp / "unloadable").mkdir()
    path = tmp / "unloadable" / "attention.py"
    path.write_text("def causal_mask(q_len, kv_len:\n    return None\n")
    return path


def _run(autograder_zip: Path, root: Path, upload: Path) -> dict:
    """Lay out the zip as Gradescope does and run run_autograder on `upload`."""
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(autograder_zip) as z:
        z.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    if upload.is_dir():
        shutil.copytree(upload, root / "submission", dirs_exist_ok=True)
    else:
        shutil.copy(upload, root / "submission" / upload.name)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    check_gradescope_schema(d)
    return d


def test_run_autograder_on_four_uploads(autograder_zip, tmp_path):
    uploads = {"correct": SUBS / "correct" / "correct_notebook.ipynb",
               "buggy": SUBS / "buggy" / "zero_fill.py",
               "crashing": _crashing(tmp_path),
               "unloadable": _unloadable(tmp_path)}
    got = {k: _run(autograder_zip, tmp_path / f"root-{k}", v) for k, v in uploads.items()}

    ok = got["correct"]
    assert ok["score"] == pytest.approx(POSSIBLE) and all(t["status"] == "passed" for t in ok["tests"])
    assert ok["output_format"] == "html" and ok["test_output_format"] == "text"
    assert len(ok["tests"]) == len(FULL.instances())
    for d in got.values():
        for t, inst in zip(d["tests"], FULL.instances()):
            assert t["name"].endswith(f"({inst.id})")
            assert t["visibility"] == ("after_published" if inst.id in HIDDEN_IDS else "visible")
            assert t["max_score"] == inst.points

    bug = got["buggy"]
    assert 0 < bug["score"] < POSSIBLE
    failed = [t for t in bug["tests"] if t["status"] == "failed"]
    assert failed and all(t["score"] == 0 for t in failed)
    assert any(t["tags"] == ["mask-fill-value"] for t in failed)
    hidden_failed = [t for t in failed if t["visibility"] == "after_published"]
    assert hidden_failed and all("Hidden case: details are not shown." in t["output"] for t in hidden_failed)
    html = bug["output"]
    assert 'class="grader-check"' in html and "mask-fill-value" in html
    parser = _Scripts()
    parser.feed(html)
    assert parser.bad == []
    articles = {m.group(1): m.group(0) for m in re.finditer(r'<article [^>]*data-case-id="([^"]+)".*?</article>',
                                                              html, re.S)}
    hidden_shown = [a for cid, a in articles.items() if cid in HIDDEN_IDS]
    assert hidden_shown  # hidden cases: title and outcome only, never their evidence
    assert all("hidden-note" in a and "<figure" not in a and "<svg" not in a for a in hidden_shown)
    assert any("<figure" in a for cid, a in articles.items() if cid not in HIDDEN_IDS)

    crash = got["crashing"]
    assert 0 < crash["score"] < POSSIBLE  # the mask cases still pass: a crash costs its own cases
    assert any(t["status"] == "failed" and t["tags"] == ["crash"] for t in crash["tests"])

    bad = got["unloadable"]
    assert bad["score"] == 0 and all(t["status"] == "failed" for t in bad["tests"])
    assert "We could not load your submission" in bad["output"] and "SyntaxError" in bad["output"]


def test_grader_fault_still_writes_a_result(autograder_zip, tmp_path):
    """The grader itself failing (here: the assignment folder is gone) is still a result, not a
    missing file: score 0 and a message that says the fault is not the student's."""
    root = tmp_path / "root"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(autograder_zip) as z:
        z.extractall(root / "source")
    shutil.rmtree(root / "source" / "assignment")
    (root / "submission" / "attention.py").write_text("x = 1\n")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0
    d = json.loads((root / "results" / "results.json").read_text())
    check_gradescope_schema(d)
    assert d["score"] == 0 and "fault in the grader, not in your code" in d["output"]
    assert d["tests"][0]["visibility"] == "hidden" and "AssignmentSpecError" in d["tests"][0]["output"]
    assert "Traceback" in proc.stderr

    # and with no Python that can start the grader at all, the shell still leaves a result
    (root / "results" / "results.json").unlink()
    env["AUTOGRADER_PYTHON"] = str(tmp_path / "no-such-python")
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, timeout=60)
    d = json.loads((root / "results" / "results.json").read_text())
    check_gradescope_schema(d)
    assert d["score"] == 0 and "fault in the grader" in d["output"]
