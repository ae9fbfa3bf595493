"""Babel extractors for what the standard Python and Jinja extractors cannot see.

* ``extract_spec``: an assignment's spec.toml: its title and each ``[[concepts]]`` entry's title,
  explanation and dashboard sentence (the report looks them up by their English text).
* ``extract_cases``: an assignment's case files: the ``title=`` of every ``@case(...)`` and the
  strings given to ``tr``, ``ntr`` and ``N_``.
* ``extract_notebook``: the markdown cells of a starter notebook, ``extract_markdown``: a README;
  one message per prose block (`grader.i18n.documents`).

babel.cfg at the repository root maps files to these (see docs/translating.md).
"""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Iterator
from typing import IO, Any

Extracted = Iterator[tuple[int, str, Any, list[str]]]


def extract_spec(fileobj: IO[bytes], keywords: Any, comment_tags: Any, options: dict) -> Extracted:
    spec = tomllib.loads(fileobj.read().decode("utf-8"))
    if spec.get("title"):
        yield 1, "N_", spec["title"], ["assignment title"]
    for table in spec.get("concepts") or []:
        cid = table.get("id", "?")
        for key in ("title", "explanation", "dashboard"):
            if table.get(key):
                yield 1, "N_", table[key], [f"concept {cid}: {key}"]


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def extract_cases(fileobj: IO[bytes], keywords: Any, comment_tags: Any, options: dict) -> Extracted:
    tree = ast.parse(fileobj.read().decode("utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == "case":
            for kw in node.keywords:
                if kw.arg == "title" and _literal(kw.value):
                    yield node.lineno, "N_", _literal(kw.value), ["case title"]
        elif name in ("tr", "N_") and node.args and _literal(node.args[0]):
            yield node.lineno, name, _literal(node.args[0]), []
        elif name == "ntr" and len(node.args) >= 2 and _literal(node.args[0]) and _literal(node.args[1]):
            yield node.lineno, name, (_literal(node.args[0]), _literal(node.args[1])), []


def extract_notebook(fileobj: IO[bytes], keywords: Any, comment_tags: Any, options: dict) -> Extracted:
    from grader.i18n.documents import markdown_blocks

    nb = json.loads(fileobj.read().decode("utf-8"))
    for n, cell in enumerate(nb.get("cells", []), 1):
        if cell.get("cell_type") == "markdown":
            for block, prose in markdown_blocks("".join(cell.get("source", ""))):
                if prose:
                    yield n, "N_", block, [f"markdown cell {n}"]


def extract_markdown(fileobj: IO[bytes], keywords: Any, comment_tags: Any, options: dict) -> Extracted:
    from grader.i18n.documents import code_comments, markdown_blocks

    for block, prose in markdown_blocks(fileobj.read().decode("utf-8")):
        if prose:
            yield 1, "N_", block, []
        elif block.lstrip().startswith("```"):
            for comment in code_comments(block):
                yield 1, "N_", comment, ["a comment in a code block"]
