"""Every bundled assignment gives students both starters: the .py and a notebook that match."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent for p in (ROOT / "assignments").glob("*/spec.toml"))


def _defined(source: str) -> dict[str, str]:
    """Top-level functions and classes: name -> their source, docstrings included."""
    tree = ast.parse(source)
    return {n.name: ast.get_source_segment(source, n) or "" for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("folder", ASSIGNMENTS, ids=[p.name for p in ASSIGNMENTS])
def test_the_notebook_starter_defines_what_the_py_starter_does_with_a_check_cell_each(folder):
    spec = tomllib.loads((folder / "spec.toml").read_text("utf-8"))
    stem = Path(spec["main_module"]).stem
    py = (folder / "starter" / f"{stem}.py").read_text("utf-8")
    notebook = nbformat.read(folder / "starter" / f"{stem}.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    in_notebook: dict[str, str] = {}
    for source in code:
        in_notebook.update(_defined(source))
    assert in_notebook == _defined(py)  # the same stubs, docstrings and all
    for entry in spec["entry_points"]:
        assert f'notebook.check("{entry["name"]}")' in code, entry["name"]
    assert "notebook.check()" in code
