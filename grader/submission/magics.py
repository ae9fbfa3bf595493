"""IPython magics and shell escapes in a notebook cell, made no-ops before it is graded. Pure text
in, text out, linear in the cell's length; line numbers stay the student's."""

from __future__ import annotations

import re

from grader.submission.selfcheck_cells import LINE_BREAK

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
