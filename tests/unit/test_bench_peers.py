"""What the speed benchmark hands nbgrader and otter (bench/peers.py, not installed): the students'
notebooks as they are by default, the concession only when asked, and otter's submissions built
like an `otter assign` course's (released notebook, student cells in place of the solution)."""

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import peers  # noqa: E402  (bench/ is not a package; a broken import must fail here, not skip)


def _cell(kind: str, src: str) -> dict:
    c = {"cell_type": kind, "metadata": {}, "source": src}
    if kind == "code":
        c.update(execution_count=3, outputs=[{"output_type": "stream", "name": "stdout", "text": "old"}])
    return c


STUDENT = {"cells": [_cell("markdown", "# HW3"), _cell("code", "!pip install torch"),
                     _cell("code", "%matplotlib inline\nimport torch"),
                     _cell("code", "def causal_mask(n, m=None):\n    return None")],
           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _sources(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"]]


def test_peers_get_the_notebook_as_it_is_by_default():
    nb = peers.peer_source(STUDENT, concede=False)
    assert _sources(nb) == _sources(STUDENT)
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in nb["cells"] if c["cell_type"] == "code")


def test_the_concession_comments_out_shell_and_magic_lines_only():
    nb = peers.peer_source(STUDENT, concede=True)
    assert _sources(nb)[1:] == ["# !pip install torch", "# %matplotlib inline\nimport torch",
                                "def causal_mask(n, m=None):\n    return None"]
    assert "!pip" in _sources(STUDENT)[1]  # the student's notebook itself is left alone


def test_otter_submission_is_the_released_notebook_with_the_student_cells(tmp_path):
    release = {"cells": [_cell("code", 'import otter\ngrader = otter.Notebook("hw3.ipynb")'),
                         _cell("code", peers.STUDENT_MARKER + "\n# BEGIN SOLUTION\npass\n# END SOLUTION"),
                         _cell("code", 'grader.check("q0_causal_square")'),
                         _cell("code", "# BEGIN SOLUTION\npass\n# END SOLUTION"),
                         _cell("code", 'grader.check("q1_causal_rect")'),
                         _cell("code", "grader.export(run_tests=True)")],
               "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "release.ipynb").write_text(json.dumps(release))
    nb_path = tmp_path / "doe_jane_1_attention.ipynb"
    nb_path.write_text(json.dumps(STUDENT))

    work, cmd = peers.otter_cmd(tmp_path, tmp_path / "autograder.zip", nb_path)

    sub = json.loads((work / "submission.ipynb").read_text())
    assert _sources(sub) == [_sources(release)[0], *_sources(STUDENT), 'grader.check("q0_causal_square")',
                             'grader.check("q1_causal_rect")', "grader.export(run_tests=True)"]
    assert sub["metadata"] == release["metadata"]
    assert cmd[1:4] == ["run", "-a", str(tmp_path / "autograder.zip")] and cmd[-1] == str(work / "submission.ipynb")


def test_peers_install_refuses_an_unknown_name_before_installing_anything(monkeypatch, capsys):
    import runpy

    import peers_install
    import pytest

    made = []
    monkeypatch.setattr(peers_install.subprocess, "run", lambda *a, **k: made.append(a))
    for argv, code in ((["--help"], 0), (["nbgrader", "bogus"], 2)):
        monkeypatch.setattr(sys, "argv", ["peers_install.py", *argv])
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(BENCH / "peers_install.py"), run_name="__main__")
        assert e.value.code == code
    assert made == []  # no virtualenv made, no pip run
    assert "unknown peer bogus (choose from nbgrader, otter)" in capsys.readouterr().err
