"""grader.submission.neutralise: a notebook's own self-check calls never run when it is graded."""

from __future__ import annotations

import ast

import nbformat

from grader.submission.load import load_submission
from grader.submission.neutralise import neutralise_self_checks


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


def test_old_mac_and_windows_line_breaks_are_counted_as_the_tokenizer_counts_them():
    for brk in ("\r", "\r\n"):
        src = brk.join(["from grader import notebook", "x = 1", "notebook.check('f')", "y = 2", ""])
        out = neutralise_self_checks([src])[0]
        assert out == brk.join(["notebook = None", "x = 1", "(None)", "y = 2", ""])
        multi = brk.join(["r = notebook.check(", "  'f')", "z = 1"])
        assert neutralise_self_checks([multi])[0].splitlines() == ["r = (None", ")", "z = 1"]


def test_a_form_feed_is_no_line_break():
    src = "x = 1;\x0cnotebook.check('f')\nnotebook.check('g')"  # splitlines() sees three lines; Python two
    assert neutralise_self_checks([src]) == ["x = 1;\x0c(None)\n(None)"]


def test_many_calls_on_one_long_line_with_non_ascii_text():
    src = "s = 'é'; " + "notebook.check('f'); " * 2000
    out = neutralise_self_checks([src])[0]
    assert out == "s = 'é'; " + "(None); " * 2000 and ast.parse(out)


def test_thousands_of_calls_keep_every_line():
    src = "from grader import notebook\n" + "notebook.check('causal_mask')\n" * 16_000
    out = neutralise_self_checks([src])[0]
    assert out == "notebook = None\n" + "(None)\n" * 16_000


def test_a_cell_without_grader_or_check_is_never_parsed(monkeypatch):
    from grader.submission import neutralise

    parsed = []
    monkeypatch.setattr(neutralise, "_parse", lambda s: parsed.append(s) or ast.parse(s))
    cells = ["x = 1\n" * 1000, "from grader.notebook import check as ok", "ok()", "y = 2"]
    assert neutralise_self_checks(cells) == [cells[0], "ok = None", "(None)", "y = 2"]
    assert parsed == [cells[1], cells[2]]
