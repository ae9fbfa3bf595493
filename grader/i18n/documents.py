"""Whole documents a student reads, translated block by block: the kit's README (Markdown) and the
starter notebook's markdown cells. Each prose block is one catalog message; code blocks, and
blocks holding nothing but code (a heading such as "## `causal_mask`"), are kept as they are, but
for the comment ending a line of a code block (``grader check attention.py   # if you work in the
.py file``), which is a message of its own.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from grader.i18n import DEFAULT, translate

_CODE_SPAN = re.compile(r"`[^`]*`")
_COMMENT = re.compile(r"(?:^|\s)#\s+(?P<text>[^#`]*[A-Za-z]{2}[^#`]*?)\s*$")
"""A shell or Python comment closing a line of code, when it holds words."""


def code_comments(block: str) -> list[str]:
    """The comments of a fenced code block's lines (each a message to translate)."""
    return [m.group("text") for line in block.split("\n") if (m := _COMMENT.search(line))]


def _translate_comments(block: str, lang: str) -> str:
    def one(line: str) -> str:
        m = _COMMENT.search(line)
        return line[:m.start("text")] + translate(m.group("text"), lang) + line[m.end("text"):] if m else line

    return "\n".join(one(line) for line in block.split("\n"))


def markdown_blocks(text: str) -> list[tuple[str, bool]]:
    """(block, translatable) for each block of `text` between blank lines; a fenced code block is
    one untranslatable block however many blank lines it holds."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []
    fenced = False

    def close() -> None:
        if current:
            block = "\n".join(current)
            prose = _CODE_SPAN.sub("", block)
            blocks.append((block, not block.lstrip().startswith("```") and bool(re.search(r"[A-Za-z]{2}", prose))))
            current.clear()

    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            if not fenced:
                close()
            fenced = not fenced
            current.append(line)
            if not fenced:
                close()
            continue
        if not fenced and not line.strip():
            close()
            continue
        current.append(line)
    close()
    return blocks


def translate_markdown(text: str, lang: str) -> str:
    """`text` with each prose block in `lang` (English where the catalog has no entry)."""
    if lang == DEFAULT:
        return text
    out = [translate(block, lang) if prose else _translate_comments(block, lang) if block.lstrip().startswith("```")
           else block for block, prose in markdown_blocks(text)]
    return "\n\n".join(out) + ("\n" if text.endswith("\n") else "")


def translate_notebook(nb: dict[str, Any], lang: str) -> dict[str, Any]:
    """A copy of notebook JSON `nb` whose markdown cells are in `lang`; code cells untouched."""
    nb = copy.deepcopy(nb)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", ""))
            done = translate_markdown(source, lang)
            cell["source"] = done.splitlines(keepends=True)
    return nb
