"""The layout's rules that .importlinter cannot state: no module reaches for another module's
underscored names (tests included), and no module of the grader grows past ~400 lines.

The layers, the absence of import circles and the pure core are `lint-imports`' job (.ci/run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("grader", "reference", "bench", "tests", "assignments")
MAX_LINES = 400


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py")
                  if "__pycache__" not in p.parts and "out" not in p.relative_to(ROOT).parts[:2]
                  and "data" not in p.relative_to(ROOT).parts[1:2])


def _is_ours(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in OURS


def private_reaches(path: Path) -> list[str]:
    """`from ours import _name`, and `alias._name` where `alias` is a module of ours imported here."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if _is_ours(a.name)}
        elif isinstance(node, ast.ImportFrom) and (node.level or _is_ours(node.module)):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
                else:
                    aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from grader.batch.run import _hidden\nfrom grader import untrusted\nuntrusted._escape('x')\n"
                   "import grader.sandbox.jail.enter as j\nj._private()\nself_ok = object()._fine\n")
    assert private_reaches(bad) == ["line 1: from grader.batch.run import _hidden", "line 3: untrusted._escape",
                                    "line 5: j._private"]


@pytest.mark.parametrize("path", _python_files(*OURS), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_underscored_names(path):
    assert private_reaches(path) == []


def test_no_grader_module_is_over_the_size_limit():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in _python_files("grader")}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}
