"""CONTRIBUTING.md describes the code as it is: its package tree is the one .ci/tree.py writes."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tree_module():
    spec = importlib.util.spec_from_file_location("ci_tree", ROOT / ".ci" / "tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_tree_in_contributing_is_the_codes():
    tree = _tree_module()
    assert tree.in_contributing() == tree.tree(), "the code changed: run `python .ci/tree.py --write`"


def test_every_package_says_what_it_holds():
    tree = _tree_module()
    for line in tree.tree().splitlines():
        if line.strip().startswith(("grader/", "reference/")):
            name, _, summary = line.strip().partition("  ")
            assert len(summary.split()) >= 4, f"{name}: its __init__.py docstring should say what the package holds"
