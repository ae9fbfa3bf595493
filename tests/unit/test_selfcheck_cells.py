"""grader.submission.selfcheck_cells: a notebook's own self-check calls never run when it is graded."""

from __future__ import annotations

import ast

import nbformat

from grader.submission.load import load_submission
from grader.submission.selfcheck_cells import neutralise_self_checks


def test_starter_style_import_and_check_cells():
    cells = ["import torch\nfrom grader import notebook", 'notebook.check("causal_mask")', "x = 1"]
    assert neutralise_self_checks(cells) == ["import torch\nnotebook = None", "(None)", "x = 1"]


def test_aliases_and_other_import_forms():
    cells = ["import grader.notebook as nb\nfrom grader.notebook import check as c\nimport grader",
             "nb.check()\nc('masked_attention')\ngrader.notebook.check(path='a.ipynb')"]
    out = neutralise_self_checks(cells)
    assert out[0] == "nb = None\nc = None\ngrader = None"
    assert out[1] == "(None)\n(None)\n(None)"


def test_result_kept_in_a_name_and_a_multi_line_call_keep_line_numbers():
    src = 'r = notebook.check(\n    "causal_mask",\n)\nprint(r)\nz = 1 / 0'
    out = neutralise_self_checks([src])[0]
    assert out == "r = (None\n\n)\nprint(r)\nz = 1 / 0"
    ast.parse(out)
    assert out.count("\n") == src.count("\n")


def test_inside_a_block_and_beside_other_statements():
    src = "if True:\n    x = 1; notebook.check('f')\n    from grader import (\n        notebook,\n    )\ny = 2"
    out = neutralise_self_checks([src])[0]
    ast.parse(out)
    assert "check" not in out and "grader" not in out
    assert out.count("\n") == src.count("\n") and out.endswith("y = 2")


def test_student_code_is_untouched():
    cells = ["def check(x):\n    return x\n\ncheck(1)", "import graderx\nfrom mygrader import notebook2",
             "obj.check()", "def f(:\n  notebook.check()"]
    assert neutralise_self_checks(cells) == cells


def test_non_ascii_columns():
    src = 's = "ü€"; notebook.check("masked_attention")  # é'
    assert neutralise_self_checks([src]) == ['s = "ü€"; (None)  # é']


def test_load_submission_neutralises_checks_and_shell_lines(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from grader import notebook"),
                nbformat.v4.new_code_cell("def f():\n    return 1"),
                nbformat.v4.new_code_cell('notebook.check("f")\n!grader check attention.ipynb')]
    path = tmp_path / "attention.ipynb"
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    sub = load_submission(path)
    assert [u.source for u in sub.units] == ["notebook = None", "def f():\n    return 1",
                                            "(None)\npass  # magic not run"]
