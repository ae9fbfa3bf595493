"""Set up and run the peers on the same notebooks: nbgrader 0.9.6 `autograde` and otter-grader 7.0.0
`otter run`, each from its own virtualenv (bench/peers_install.py), each with the same 8 checks
(bench/peer_checks.py).

The peers run the students' notebooks as they are, like ours: a kernel executes every cell, so the
`!pip install torch` line runs pip (torch is already there: "Requirement already satisfied"; pip
alone takes ~0.5-0.7 s here) and `%matplotlib inline` imports matplotlib (~0.5-0.6 s; installed in
their venvs, as on the students' machines).
Our grader reads the same cells and runs no shell line or magic. With `concede=True` (bench/run.py
--peer-concessions) their copies have those lines commented out instead, which makes them faster.
Either way they run 8 checks while our grader runs 32 case instances with diagnosis.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from peer_checks import CHECKS, PRELUDE
from peers_install import venv_dir

ASSIGNMENT = "hw3"


def peer_source(nb: dict, concede: bool) -> dict:
    """The student's notebook with outputs cleared and, with `concede`, shell and magic lines
    commented out (see module docstring)."""
    nb = json.loads(json.dumps(nb))
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        if concede:
            src = "".join(c["source"])
            src = re.sub(r"(?m)^(\s*)([!%])", r"\1# \2", src)
            c["source"] = src.splitlines(True)
        c["outputs"], c["execution_count"] = [], None
    return nb


def _env(name: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{venv_dir(name) / 'bin'}:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv_dir(name))
    env.pop("PYTHONPATH", None)
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    return env


def _cell(kind: str, src: str, **nbgrader) -> dict:
    """A master-notebook cell; `nbgrader` keyword arguments become its nbgrader metadata."""
    c = {"cell_type": kind, "metadata": {}, "source": src}
    if kind == "code":
        c.update(execution_count=None, outputs=[])
    if nbgrader:
        c["metadata"]["nbgrader"] = {"schema_version": 3, "locked": False, "solution": False, "grade": False,
                                     **nbgrader}
    return c


def _notebook(cells: list[dict]) -> dict:
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


# --- nbgrader ---------------------------------------------------------------------------------

def _nbg_master() -> dict:
    cells = [_cell("markdown", "# Homework 3: masked attention"),
             _cell("code", "import torch\n### BEGIN SOLUTION\n### END SOLUTION", grade_id="answer", solution=True),
             _cell("code", PRELUDE, grade_id="prelude", locked=True)]
    for i, (name, src) in enumerate(CHECKS):
        cells.append(_cell("code", src, grade_id=f"check_{i}_{name}", grade=True, locked=True, points=1))
    return _notebook(cells)


def nbgrader_setup(root: Path, notebooks: list[Path], log, *, concede: bool = False) -> list[str]:
    """A course folder with `hw3` released and `notebooks` submitted (one student each)."""
    if root.exists():
        shutil.rmtree(root)
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'bench'\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        "c.ExecutePreprocessor.timeout = 120\n")
    (root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(_nbg_master()))
    r = subprocess.run([str(venv_dir("nbgrader") / "bin" / "nbgrader"), "generate_assignment", ASSIGNMENT,
                        "--force"], cwd=root, env=_env("nbgrader"), capture_output=True, text=True)
    log.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed: {r.stderr[-800:]}")
    release = json.loads((root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    students = []
    for i, nb_path in enumerate(notebooks):
        student = f"s{i:03d}"
        nb = peer_source(json.loads(nb_path.read_text()), concede)
        cells = []
        for c in release["cells"]:
            meta = c.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade_id") == "answer":
                # the student's own cells replace the solution cell; the last code cell carries its id
                mine = [json.loads(json.dumps(x)) for x in nb["cells"]]
                last = max(j for j, x in enumerate(mine) if x["cell_type"] == "code")
                mine[last]["metadata"]["nbgrader"] = meta
                cells.extend(mine)
            else:
                cells.append(c)
        out = dict(release, cells=cells)
        d = root / "submitted" / student / ASSIGNMENT
        d.mkdir(parents=True)
        (d / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(out))
        (d / "timestamp.txt").write_text("2026-05-01 12:00:00.000000 UTC")
        students.append(student)
    return students


def nbgrader_scores(root: Path) -> tuple[None, dict[str, float]]:
    """student -> points (of 8) from the gradebook `nbgrader autograde` wrote."""
    py = venv_dir("nbgrader") / "bin" / "python"
    q = ("from nbgrader.api import Gradebook\nimport json\n"
         f"gb = Gradebook('sqlite:///{root}/gradebook.db')\n"
         "print(json.dumps({s.id: gb.find_submission('hw3', s.id).score for s in gb.students}))\ngb.close()")
    r = subprocess.run([str(py), "-c", q], cwd=root, env=_env("nbgrader"), capture_output=True, text=True)
    return None, (json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {})


# --- otter --------------------------------------------------------------------------------------

STUDENT_MARKER = "# the student's cells go here"


def _otter_master() -> dict:
    """An `otter assign` master notebook: one question per check, each check an OK-format test."""
    cells = [_cell("raw", f"# ASSIGNMENT CONFIG\nname: {ASSIGNMENT}\ngenerate: true\n"),
             _cell("markdown", "# Homework 3: masked attention")]
    for i, (name, src) in enumerate(CHECKS):
        cells += [_cell("raw", f"# BEGIN QUESTION\nname: q{i}_{name}\npoints: 1"),
                  _cell("code", (STUDENT_MARKER + "\n" if i == 0 else "") + "# BEGIN SOLUTION\npass\n# END SOLUTION"),
                  _cell("raw", "# BEGIN TESTS"),
                  _cell("code", f"exec({(PRELUDE + src)!r}, dict(globals()))"),
                  _cell("raw", "# END TESTS"),
                  _cell("raw", "# END QUESTION")]
    return _notebook(cells)


def otter_setup(root: Path, log) -> Path:
    """`otter assign` on a master notebook with the 8 checks: the autograder zip it generates, and
    the released student notebook (root/release.ipynb: otter's init cell, one `grader.check` cell
    per question, the export cell), into which each student's cells go (`otter_cmd`)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(_otter_master()))
    r = subprocess.run([str(venv_dir("otter") / "bin" / "otter"), "assign", "--no-run-tests", f"{ASSIGNMENT}.ipynb",
                        "dist"], cwd=root, env=_env("otter"), capture_output=True, text=True)
    log.write(r.stdout + r.stderr)
    zips = sorted((root / "dist" / "autograder").glob("*.zip"))
    if r.returncode != 0 or not zips:
        raise RuntimeError(f"otter assign failed: {r.stderr[-800:]}")
    shutil.copy(root / "dist" / "student" / f"{ASSIGNMENT}.ipynb", root / "release.ipynb")
    shutil.copy(zips[-1], root / "autograder.zip")
    return root / "autograder.zip"


def otter_cmd(root: Path, zip_path: Path, notebook: Path, *, concede: bool = False) -> tuple[Path, list[str]]:
    """A fresh folder holding `notebook` as an otter student submits it (the released notebook with
    the student's cells in place of the solution cells), and the `otter run` command grading it."""
    work = root / "runs" / notebook.stem
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    release = json.loads((root / "release.ipynb").read_text())
    mine = peer_source(json.loads(notebook.read_text()), concede)["cells"]
    cells = []
    for c in release["cells"]:
        src = "".join(c["source"])  # a list of lines or one string
        if c["cell_type"] == "code" and "BEGIN SOLUTION" in src:  # otter 7.0.0 leaves the markers in
            if STUDENT_MARKER in src:
                cells.extend(mine)
            continue
        cells.append(c)
    sub = work / "submission.ipynb"
    sub.write_text(json.dumps(dict(release, cells=cells)))
    return work, [str(venv_dir("otter") / "bin" / "otter"), "run", "-a", str(zip_path), "-o", str(work),
                  "--no-logo", str(sub)]


def otter_score(work: Path) -> float | None:
    """Fraction of the 8 tests passed, from otter's results.json (None when it produced none)."""
    res = work / "results.json"
    if not res.exists():
        return None
    d = json.loads(res.read_text())
    tests = [t for t in d.get("tests", []) if str(t.get("name", "")).startswith("q")]
    if not tests:
        return None
    return sum(t.get("score", 0) or 0 for t in tests) / max(1e-9, sum(t.get("max_score", 1) or 1 for t in tests))
