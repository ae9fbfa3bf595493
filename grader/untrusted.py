"""The one rule for text the grader did not write: what a submission prints, raises, returns or is named.

Worker text passes `text` once, where it enters the grader: every string the grader-side wire
decoder builds (messages, tracebacks, type and key names, returned strings) and the captured
output. A file or folder name passes `name` (decoded with ``surrogateescape`` by the OS layer,
shown escaped). After that the text is valid Unicode (no lone surrogates), holds no terminal
escapes and no control characters (newline and tab kept where lines are meant), no bidi overrides
and no XML-illegal non-characters, and is bounded in length.

The sinks do not rely on this alone: each escapes for itself (Jinja, CSV formulas, ElementTree,
Markdown, workflow commands, the terminal) and writes through `storable` / `json_text`, so a
report read back from an old or hand-edited file cannot break them either.

Pure and torch-free.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from typing import Any

MAX_TEXT = 64 << 10
"""Characters kept of one string from a worker (a message, a traceback, a returned str)."""
NAME_LIMIT = 300
"""Characters of a displayed file name (escapes included)."""

# CSI (colours, cursor moves, erase line), OSC (window titles, hyperlinks; ended by BEL or ST,
# or by nothing when cut off), 8-bit CSI, and any other two-byte ESC sequence.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x1b[@-_]?"
)
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 except tab and newline, DEL, C1, bidi marks/overrides/isolates (Trojan-source reordering) and
# the non-characters XML forbids. Lone surrogates are replaced, not removed (see _SURROGATE).
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"\r\n?|[\x0b\x0c\x85\u2028\u2029]")


def text(value: Any, limit: int | None = MAX_TEXT, *, multiline: bool = True) -> str:
    """`value` as safe text: surrogates -> U+FFFD, terminal escapes and control characters removed
    (with `multiline`, line breaks become ``\\n`` and tabs stay; without, both become a space),
    and at most `limit` characters plus a note saying how many were cut."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    if not (s.isascii() and s.isprintable()):  # the common case needs none of the passes below
        s = _SURROGATE.sub("\ufffd", s)
        s = _LINE_BREAKS.sub("\n", s)
        s = _CONTROL.sub("", _ANSI.sub("", s))
        if not multiline:
            s = s.replace("\n", " ").replace("\t", " ")
    if limit is not None and len(s) > limit:
        s = s[:limit] + f"… ({len(s) - limit} more characters not shown)"
    return s


def wire_text(value: str) -> str:
    """`text` for every string the grader-side wire decoder builds from a worker's reply."""
    return text(value)


def storable(value: Any) -> str:
    """A str any UTF-8 sink accepts (SQLite, a file): lone surrogates -> U+FFFD, nothing else changed."""
    s = value if isinstance(value, str) else str(value)
    return s if s.isascii() else _SURROGATE.sub("\ufffd", s)


def json_text(data: Any, *, indent: int | None = None) -> str:
    """Strict JSON (no NaN) of plain data, valid UTF-8 whatever strings it holds: a lone surrogate
    can only sit inside a JSON string, where U+FFFD replaces it."""
    return storable(json.dumps(data, ensure_ascii=False, allow_nan=False, indent=indent))


def json_rows(data: dict, rows: str) -> str:
    """`json_text` of a dict laid out one line per key and one per item of its list ``data[rows]``:
    readable and diffable item by item, and written by json's C encoder (``indent`` makes json
    fall back to its pure-Python encoder, several times slower, and puts every number of a list
    of numbers on a line of its own)."""
    fields = []
    for key, value in data.items():
        if key == rows and value:
            items = ",\n".join("    " + json_text(item) for item in value)
            fields.append(f"  {json_text(key)}: [\n{items}\n  ]")
        else:
            fields.append(f"  {json_text(key)}: {json_text(value)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def name(raw: str | bytes, limit: int = NAME_LIMIT) -> str:
    """A file or folder name for display: bytes that are not UTF-8 (``surrogateescape``) as ``\\xe9``,
    control, format and bidi characters as ``\\x1b`` / ``\\u202e``; everything else as it is."""
    s = os.fsdecode(raw) if isinstance(raw, bytes) else str(raw)
    if s.isascii() and s.isprintable():
        out = s
    else:
        out = "".join(_escape_char(ch) for ch in s)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _escape_char(ch: str) -> str:
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:  # one undecodable byte, as surrogateescape carries it
        return f"\\x{o - 0xDC00:02x}"
    if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        return f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return ch
