"""Making untrusted text safe to show: terminal escapes, control characters, length, CSV, Markdown.

Student output and exception messages reach the reports verbatim otherwise. HTML escaping is
left to Jinja's autoescape; these helpers remove what escaping cannot (ANSI colour codes,
bidi overrides, NUL bytes that break XML) and neutralise spreadsheet formulas.
"""

from __future__ import annotations

import math
import re

# CSI (colours, cursor moves), OSC (window titles, hyperlinks) and two-byte ESC sequences.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b[@-_]?"
)
# C0/C1 controls except tab and newline, DEL, bidi overrides/isolates (Trojan-source style
# reordering), lone surrogates and the XML-illegal non-characters.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")

DEFAULT_LIMIT = 8000
"""Characters of one block of student output shown in a report."""


def clean(text: str | None) -> str:
    """Strip ANSI escapes and control characters; keep tabs and newlines (``\\r`` becomes one)."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _ANSI.sub("", text))


def truncate(text: str, limit: int = DEFAULT_LIMIT) -> tuple[str, int]:
    """Return (the first `limit` characters, how many were left out)."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clean_block(text: str | None, limit: int = DEFAULT_LIMIT) -> str:
    """`clean` then `truncate`, with a plain note saying how much was cut."""
    kept, cut = truncate(clean(text), limit)
    if cut:
        kept += f"\n… ({cut} more characters not shown)"
    return kept


def one_line(text: str | None, limit: int = 300) -> str:
    """A cleaned, single-line, bounded version of `text` (for table cells and attributes)."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def csv_cell(text: str) -> str:
    """Neutralise a spreadsheet formula: a cell starting with = + - @ (or tab/CR) gets a leading '."""
    text = one_line(text, limit=10_000)
    return "'" + text if text.startswith(_CSV_FORMULA_START) else text


def md_escape(text: str | None, limit: int = 300) -> str:
    """Text safe inside a GitHub-flavoured Markdown table cell: no HTML, no markup, no `|` breaks."""
    flat = one_line(text, limit)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


def fmt_num(x: float | int | None, digits: int = 4) -> str:
    """A short human form of a number: NaN, ±∞ and None spelled out."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def fmt_points(x: float) -> str:
    """Points as written on a grade sheet: 2, 1.5, 0.33."""
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")
