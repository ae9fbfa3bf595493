"""What a notebook cell may hold that must not run when it is graded, made no-ops first: its own
self-check calls (``neutralise_self_checks``), IPython magics and shell escapes
(``neutralise_magics``). Pure text in, text out; line numbers stay the student's.

The starter notebook has ``from grader import notebook`` and a ``notebook.check("causal_mask")``
cell after each function. In the jail the grader package is out of reach (importing it fails
with ModuleNotFoundError or PermissionError) and a check there would grade the notebook from
inside its own grading. So before a notebook runs, these statements are rewritten:

- ``from grader import notebook [as nb]``, ``import grader.notebook [as nb]``, ``from
  grader.notebook import check`` -> the bound names set to None;
- a call of a self-check (``notebook.check(...)``, ``nb.check(...)``, ``grader.notebook.check(...)``,
  ``check(...)`` when imported from grader.notebook) -> ``(None)``, with the call's line breaks kept.

Line numbers stay those of the student's cells (tracebacks point at the right line).
``!grader check`` lines are shell escapes: ``neutralise_magics`` (below) turns them into ``pass``. A cell that does not parse is left alone (the worker reports its SyntaxError).
"""

from __future__ import annotations

import ast
import re

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
        for node in _statements(tree):
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


def _statements(tree: ast.AST):
    """Every statement of `tree`, at any depth, without walking into expressions (an import is
    always a statement; a cell of 16,000 calls has ten times more expression nodes)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)))


def _parse(source: str) -> ast.Module | None:
    """None for code that does not parse. MemoryError is not caught: out of the intake's memory
    budget, the submission is refused as too large rather than run with its self-checks left in."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None


LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""A line break as Python's tokenizer counts them (what ``ast`` line numbers count): ``\\r\\n``,
an old-Mac ``\\r`` or ``\\n``; never form feeds or Unicode separators, which `str.splitlines` takes."""


def line_starts(source: str) -> list[int]:
    """Character offset where each line begins (index 0 is line 1)."""
    return [0] + [m.end() for m in LINE_BREAK.finditer(source)]


def _char_offsets(source: str, starts: list[int], points: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Character offset in `source` of each (1-based line, UTF-8 byte column) in `points`.

    One pass over the points in order, each line encoded once and walked forward from the last
    point on it, so many points on one long line cost that line's length, not points x length."""
    if source.isascii():  # a byte column is a character column
        return {(lineno, col): starts[lineno - 1] + col for lineno, col in points}
    out: dict[tuple[int, int], int] = {}
    line, encoded, byte_at, char_at = 0, b"", 0, 0
    for lineno, col in sorted(set(points)):
        if lineno != line:
            begin = starts[lineno - 1]
            end = starts[lineno] if lineno < len(starts) else len(source)
            line, encoded, byte_at, char_at = lineno, source[begin:end].encode("utf-8", "surrogatepass"), 0, begin
        char_at += len(encoded[byte_at:col].decode("utf-8", "surrogatepass"))
        byte_at = col
        out[(lineno, col)] = char_at
    return out


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    out = []
    for a in node.names:
        if a.name == "*":
            continue
        out.append(a.asname or (a.name.split(".")[0] if isinstance(node, ast.Import) else a.name))
    return out


_Edit = tuple[tuple[int, int], tuple[int, int], str]
"""A node's (line, byte column) start and end, and the text that replaces it."""


def _edit(node: ast.stmt | ast.expr, text: str) -> _Edit:
    if node.end_lineno is None or node.end_col_offset is None:
        # ast.parse gives every node both ends; only a node built by hand lacks them.
        raise ValueError(f"{type(node).__name__} at line {node.lineno} has no end position")
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), text


def _edits(tree: ast.Module, names: _Names) -> list[_Edit]:
    """An edit for each grader import and outermost self-check call."""
    edits: list[_Edit] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import) and any(_is_grader(a.name) for a in node.names):
            bound = _bound_names(node)
            edits.append(_edit(node, " = ".join(bound) + " = None" if bound else "pass"))
            return
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_grader(node.module):
            bound = _bound_names(node)
            edits.append(_edit(node, " = ".join(bound) + " = None" if bound else "pass"))
            return
        if isinstance(node, ast.Call) and names.is_check(node):
            edits.append(_edit(node, "(None)"))
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return edits


def _apply(source: str, edits: list[_Edit]) -> str:
    """`source` with each edit's node replaced by its text, keeping the node's line breaks.

    Linear in the source and the edits: line offsets found once, the pieces joined once."""
    starts = line_starts(source)
    points = [begin for begin, _, _ in edits] + [end for _, end, _ in edits]
    at = _char_offsets(source, starts, points)
    spans = sorted((at[begin], at[end], text) for begin, end, text in edits)
    pieces: list[str] = []
    done = 0
    for start, end, text in spans:
        if start < done:
            continue  # inside an edit already made (edits are outermost nodes, so never in practice)
        breaks = len(LINE_BREAK.findall(source, start, end))
        if breaks and text == "(None)":
            text = "(None" + "\n" * breaks + ")"
        elif breaks:
            text = text + "\n" * breaks  # a parenthesised import over several lines
        pieces += [source[done:start], text]
        done = end
    pieces.append(source[done:])
    return "".join(pieces)


def neutralise_self_checks(sources: list[str]) -> list[str]:
    """The cells' code with grader imports and self-check calls made no-ops (same line count).

    Only a cell whose text could hold one is parsed: a grader import names ``grader``, a call names
    ``check`` or a name imported from ``grader.notebook``. A notebook of student code alone is
    never parsed here (parsing megabytes of tiny statements costs hundreds of bytes each)."""
    trees: dict[int, ast.Module | None] = {i: _parse(s) for i, s in enumerate(sources) if "grader" in s}
    names = _Names()
    for tree in trees.values():
        if tree is not None:
            names.learn(tree)
    words = ("check", *sorted(names.function))
    for i, source in enumerate(sources):
        if i not in trees and (len(words) > _MAX_WORDS or any(w in source for w in words)):
            trees[i] = _parse(source)
    out = []
    for i, source in enumerate(sources):
        tree = trees.get(i)
        edits = _edits(tree, names) if tree is not None else []
        out.append(_apply(source, edits) if edits else source)
    return out


_MAX_WORDS = 20
"""More names bound to the self-check than this: every cell is parsed rather than searched once per name."""


# --- magics and shell escapes -----------------------------------------------------------------
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
"""Cell magics whose body is Python: keep the body, drop the magic line."""


def neutralise_magics(source: str) -> str:
    """IPython magics and shell escapes -> `pass` (same line count), so nothing of them runs.

    Lines are split as Python's tokenizer splits them (``\\r\\n``, ``\\r``, ``\\n``) and joined
    again with their own breaks; every test on a line is linear in its length."""
    if "%" not in source and "!" not in source:
        return source  # nothing to neutralise: no line-by-line pass over a cell of a million lines
    parts = LINE_BREAK.split(source)
    breaks = LINE_BREAK.findall(source)
    first = parts[0].lstrip()
    if first.startswith("%%"):
        magic = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        head = "pass  # cell magic %%" + magic + " not run"
        body = parts[1:] if magic in _PYTHON_CELL_MAGICS else ["# " + line for line in parts[1:]]
        return _join([head] + body, breaks)
    return _join([_neutralise_line(line) for line in parts], breaks)


def _neutralise_line(line: str) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith(("%", "!")):
        return f"{indent}pass  # magic not run"
    target = _magic_target(stripped)
    if target is not None:
        return f"{indent}{target} = None  # magic not run"
    return line


_TARGETS = re.compile(r"[A-Za-z_][\w.,\s]*")
"""What may stand left of ``= %magic`` / ``= !shell``: names, dots, commas and blanks. One character
class after a first letter, so a match is linear (no two quantifiers over the same characters)."""


def _magic_target(stripped: str) -> str | None:
    """``files`` for ``files = !ls`` or ``a, b = %who_ls``; None for any other line."""
    eq = stripped.find("=")
    if eq <= 0 or not stripped[eq + 1:].lstrip().startswith(("!", "%")):
        return None
    target = stripped[:eq].rstrip()
    return target if _TARGETS.fullmatch(target) else None


def _join(lines: list[str], breaks: list[str]) -> str:
    out = [lines[0]]
    for brk, line in zip(breaks, lines[1:]):
        out += [brk, line]
    return "".join(out)
