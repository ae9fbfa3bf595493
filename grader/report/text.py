"""Making untrusted text safe to show: terminal escapes, control characters, length, CSV, Markdown.

Student output and exception messages reach the reports verbatim otherwise. HTML escaping is
left to Jinja's autoescape; these helpers remove what escaping cannot (ANSI colour codes,
bidi overrides, NUL bytes that break XML) and neutralise spreadsheet formulas.
"""

from __future__ import annotations

import re

from grader import untrusted
from grader.i18n import DEFAULT, ntr
from grader.i18n.formats import decimal

_CSV_FORMULA_START = ("=", "+", "-", "@", "|", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")
# What GitHub turns into a notification, a link or a picture in Markdown: @mentions (and e-mail
# addresses), :emoji: codes, #123 / GH-123 references, scheme:// and www. links. A zero-width space
# after the trigger character keeps the text readable and inert.
_MD_LIVE = re.compile(r"([@:#])(?=\S)|(?<=\bGH)(-)(?=\d)|\b(www)(?=\.)", re.IGNORECASE)
_ZWSP = "\u200b"

DEFAULT_LIMIT = 8000
"""Characters of one block of student output shown in a report."""


def clean(text: str | None) -> str:
    """The untrusted-text rule (`grader.untrusted.text`) without a length limit: surrogates
    replaced, ANSI escapes and control characters removed; tabs and newlines kept (``\\r`` becomes one)."""
    return untrusted.text(text, None)


def truncate(text: str, limit: int = DEFAULT_LIMIT) -> tuple[str, int]:
    """Return (the first `limit` characters, how many were left out)."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clean_block(text: str | None, limit: int = DEFAULT_LIMIT, lang: str = DEFAULT) -> str:
    """`clean` then `truncate`, with a plain note (in `lang`) saying how much was cut."""
    kept, cut = truncate(clean(text), limit)
    if cut:
        kept += "\n" + ntr("… ({n} more character not shown)", "… ({n} more characters not shown)", cut).render(lang)
    return kept


def one_line(text: str | None, limit: int = 300) -> str:
    """A cleaned, single-line, bounded version of `text` (for table cells and attributes)."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def csv_cell(text: str) -> str:
    """Neutralise a spreadsheet formula: a cell starting with = + - @ | (or tab/CR) gets a leading '."""
    text = one_line(text, limit=10_000)
    return "'" + text if text.startswith(_CSV_FORMULA_START) else text


def md_escape(text: str | None, limit: int = 300) -> str:
    """Text safe inside a GitHub-flavoured Markdown table cell: no HTML, no markup, no `|` breaks,
    and no live @mention, :emoji:, issue reference or bare link."""
    flat = one_line(text, limit)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    flat = _MD_SPECIAL.sub(r"\\\1", flat)
    return _MD_LIVE.sub(lambda m: m.group(0) + _ZWSP, flat)


def fmt_num(x: float | int | None, digits: int = 4) -> str:
    """A short human form of a number: NaN, ±∞ and None spelled out."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return decimal(x, DEFAULT, digits)


def fmt_points(x: float) -> str:
    """Points as written on a grade sheet: 2, 1.5, 0.33."""
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")
