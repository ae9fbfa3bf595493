"""grader.notebook: operator problems are one line, never a traceback (the grading itself is
covered with a real kernel in tests/integration/test_notebook_check.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import notebook

SAMPLE = Path(__file__).resolve().parents[2] / "submissions" / "masked-attention" / "correct" / "correct_notebook.ipynb"


def test_unknown_function_names_the_ones_with_public_cases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = Path(shutil.copy(SAMPLE, tmp_path / "attention.ipynb"))
    with pytest.raises(notebook.CheckError) as e:
        notebook.check("causl_mask", path=nb)
    assert str(e.value) == ("no public case checks 'causl_mask'; functions with public cases: causal_mask, "
                            "combine_masks, masked_attention, padding_mask. Or check the whole notebook: "
                            "notebook.check()")
    assert e.value._render_traceback_() == [f"\x1b[31mError:\x1b[0m {e.value}"]  # what IPython shows
    assert notebook.warm() == []  # nothing started for a typo


def test_missing_notebook_is_a_check_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRADER_NOTEBOOK", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # no Jupyter server to ask
    with pytest.raises(notebook.CheckError, match=r"^could not tell which notebook this is: there is none in .*; "
                                                  r"pass it"):
        notebook.check()
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")  # no kit here: the locale says which language
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(notebook.CheckError, match=r"^无法确定是哪个笔记本："):
        notebook.check()
