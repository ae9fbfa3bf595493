"""Numbers, percentages and dates as the reader's locale writes them (Babel's CLDR data).

English keeps the grader's historical forms (``0.25``, ``83%``, the ISO timestamp), so English
reports do not change; other languages use their locale's patterns.
"""

from __future__ import annotations

import functools
import math
from datetime import datetime

from grader.i18n import DEFAULT, catalog_dir


LIST_SEPARATORS = {"zh-CN": "、"}
"""How a language separates the items of a list in running text (English: ", ")."""


def listing(items, lang: str) -> str:
    """`items` (names, coordinates) as a list in a sentence of `lang`: ``a, b, c`` / ``a、b、c``."""
    return LIST_SEPARATORS.get(lang, ", ").join(str(i) for i in items)


@functools.cache
def locale(lang: str):
    from babel import Locale

    return Locale.parse(catalog_dir(lang))


def decimal(x: float, lang: str, digits: int = 4) -> str:
    """`x` with up to `digits` significant digits (NaN and infinities spelled as in English)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    short = f"{x:.{digits}g}"
    if lang == DEFAULT or "e" in short:
        return short
    from babel.numbers import format_decimal

    return format_decimal(float(short), format="#,##0.######", locale=locale(lang))


def percent(value: float, lang: str) -> str:
    """A whole percentage (``value`` in 0..100) as the locale writes it: "83%" / "83%"."""
    if lang == DEFAULT:
        return f"{value:.0f}%"
    from babel.numbers import format_percent

    return format_percent(round(value) / 100, locale=locale(lang))


def timestamp(iso: str, lang: str) -> str:
    """An ISO 8601 UTC time as the locale's medium date and time ("2025年3月1日 14:05:09");
    the ISO text itself for English or when it does not parse."""
    if lang == DEFAULT:
        return iso
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    from babel.dates import format_datetime

    return format_datetime(when, format="medium", tzinfo=when.tzinfo, locale=locale(lang)) + " UTC"
