"""A notebook's self-check calls, made no-ops before it is graded. Pure text in, text out.

The starter notebook has ``from grader import notebook`` and a ``notebook.check("causal_mask")``
cell after each function. In the jail the grader package is out of reach (importing it fails
with ModuleNotFoundError or PermissionError) and a check there would grade the notebook from
inside its own grading. So before a notebook runs, these statements are rewritten:

- ``from grader import notebook [as nb]``, ``import grader.notebook [as nb]``, ``from
  grader.notebook import check`` -> the bound names set to None;
- a call of a self-check (``notebook.check(...)``, ``nb.check(...)``, ``grader.notebook.check(...)``,
  ``check(...)`` when imported from grader.notebook) -> ``(None)``, with the call's line breaks kept.

Line numbers stay those of the student's cells (tracebacks point at the right line).
``!grader check`` lines are shell escapes: ``grader.submission.load.neutralise_magics`` already turns them
into ``pass``. A cell that does not parse is left alone (the worker reports its SyntaxError).
"""

from __future__ import annotations

import ast

_MODULE_NAMES = {"notebook"}
"""Names taken as ``grader.notebook`` even without a visible import (the import may be in a cell
that does not parse, or in a cell skipped by ``cell_tag``)."""
_PACKAGE_NAMES = {"grader"}


def _is_grader(module: str | None) -> bool:
    return module is not None and (module == "grader" or module.startswith("grader."))


class _Names:
    """What the notebook's imports bind: the package, the notebook module, its check function."""

    def __init__(self) -> None:
        self.package = set(_PACKAGE_NAMES)
        self.module = set(_MODULE_NAMES)
        self.function: set[str] = set()

    def learn(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "grader.notebook" and a.asname:
                        self.module.add(a.asname)
                    elif _is_grader(a.name):
                        self.package.add(a.asname or a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_grader(node.module):
                for a in node.names:
                    if node.module == "grader" and a.name == "notebook":
                        self.module.add(a.asname or a.name)
                    elif node.module == "grader.notebook" and a.name == "check":
                        self.function.add(a.asname or a.name)

    def is_check(self, call: ast.Call) -> bool:
        f = call.func
        if isinstance(f, ast.Name):
            return f.id in self.function
        if not (isinstance(f, ast.Attribute) and f.attr == "check"):
            return False
        v = f.value
        if isinstance(v, ast.Name):
            return v.id in self.module
        return (isinstance(v, ast.Attribute) and v.attr == "notebook" and isinstance(v.value, ast.Name)
                and v.value.id in self.package)


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset in the joined source of (1-based line, UTF-8 byte column)."""
    before = sum(len(line) + 1 for line in lines[: lineno - 1])
    return before + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", "replace"))


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    out = []
    for a in node.names:
        if a.name == "*":
            continue
        out.append(a.asname or (a.name.split(".")[0] if isinstance(node, ast.Import) else a.name))
    return out


def _edits(tree: ast.Module, names: _Names) -> list[tuple[ast.AST, str]]:
    """(node, replacement) for each grader import and outermost self-check call."""
    edits: list[tuple[ast.AST, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import) and any(_is_grader(a.name) for a in node.names):
            bound = _bound_names(node)
            edits.append((node, " = ".join(bound) + " = None" if bound else "pass"))
            return
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_grader(node.module):
            bound = _bound_names(node)
            edits.append((node, " = ".join(bound) + " = None" if bound else "pass"))
            return
        if isinstance(node, ast.Call) and names.is_check(node):
            edits.append((node, "(None)"))
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return edits


def _apply(source: str, edits: list[tuple[ast.AST, str]]) -> str:
    lines = source.split("\n")
    spans = []
    for node, text in edits:
        start = _offset(lines, node.lineno, node.col_offset)
        end = _offset(lines, node.end_lineno, node.end_col_offset)
        spans.append((start, end, text))
    for start, end, text in sorted(spans, reverse=True):
        breaks = source[start:end].count("\n")
        if breaks and text == "(None)":
            text = "(None" + "\n" * breaks + ")"
        elif breaks:
            text = text + "\n" * breaks  # a parenthesised import over several lines
        source = source[:start] + text + source[end:]
    return source


def neutralise_self_checks(sources: list[str]) -> list[str]:
    """The cells' code with grader imports and self-check calls made no-ops (same line count)."""
    trees = [_parse(s) for s in sources]
    names = _Names()
    for tree in trees:
        if tree is not None:
            names.learn(tree)
    out = []
    for source, tree in zip(sources, trees):
        edits = _edits(tree, names) if tree is not None else []
        out.append(_apply(source, edits) if edits else source)
    return out
