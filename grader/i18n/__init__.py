"""Student feedback in more than one language: gettext catalogs, language choice, locale formats.

What the grader says to a student is written in English in the code and marked for extraction:
``tr("{what} has shape {actual}, expected {expected}.", what=..., actual=..., expected=...)``
keeps the English msgid and its named arguments (a `Msg`), so results store language-neutral
messages and a report renders them later in any language; ``N_("...")`` marks a fixed string
(a case title, a concept's words) that is looked up by its English text when shown. Translations
live in ``grader/i18n/locales/<ll_CC>/LC_MESSAGES/grader.po`` (see docs/translating.md), read
once per process on first use; a string without a translation falls back to English.

Code tokens, function names, dtypes and shapes are arguments or stay inside the msgid unchanged.
"""

from __future__ import annotations

import gettext as stdlib_gettext
import io
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

DEFAULT = "en"
LANGUAGES = ("en", "zh-CN")
"""What ``--lang`` accepts; the first is the language the code is written in."""
DOMAIN = "grader"
LOCALES = Path(__file__).parent / "locales"

Arg = Union[str, int, float, None, "Msg"]


def catalog_dir(lang: str) -> str:
    """``zh-CN`` -> ``zh_CN`` (gettext's folder name)."""
    return lang.replace("-", "_")


def normalise(lang: str | None) -> str | None:
    """A language tag or POSIX locale (``zh_CN.UTF-8``, ``zh-Hans``, ``en_GB``) -> one of
    `LANGUAGES`, or None when it names none of them (``C``, ``POSIX``, ``fr_FR``)."""
    if not lang:
        return None
    tag = lang.split(".")[0].split("@")[0].replace("_", "-").lower()
    if tag == "zh" or tag.startswith(("zh-cn", "zh-hans", "zh-sg")):
        return "zh-CN"
    if tag == "en" or tag.startswith("en-"):
        return "en"
    return None


def from_environment(env: Mapping[str, str] | None = None) -> str | None:
    """The language the process locale asks for (``LC_ALL``, then ``LC_MESSAGES``, then ``LANG``,
    as POSIX orders them; ``LANGUAGE`` first, as GNU gettext does), or None."""
    env = os.environ if env is None else env
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(var)
        if value:
            # LANGUAGE may list several ("zh_CN:en"); the first we support wins.
            for item in value.split(":"):
                found = normalise(item)
                if found:
                    return found
            if var != "LANGUAGE":
                return None  # set but unsupported (C, fr_FR): English, not a later variable
    return None


def choose(option: str | None, assignment_default: str | None = None,
           env: Mapping[str, str] | None = None) -> str:
    """``--lang`` if given, else the assignment's ``lang`` (spec.toml), else the locale, else English."""
    for candidate in (option, assignment_default):
        found = normalise(candidate)
        if found:
            return found
    return from_environment(env) or DEFAULT


# --- catalogs ------------------------------------------------------------------------------

ASSIGNMENT_DOMAIN = "assignment"
"""An assignment's own catalog: ``<assignment>/locales/<ll_CC>/LC_MESSAGES/assignment.po`` (its case
titles and messages and its spec.toml's words: kept with the assignment, so a kit ships only the
public part of it)."""

_loaded: dict[str, stdlib_gettext.NullTranslations] = {}
"""Language -> the grader's catalog with every added assignment catalog merged in (read once)."""
_assignment_locales: list[Path] = []


def po_path(lang: str, locales: Path = LOCALES, domain: str = DOMAIN) -> Path:
    return locales / catalog_dir(lang) / "LC_MESSAGES" / f"{domain}.po"


def read_catalog(path: Path, lang: str):
    """A .po file compiled in memory (``babel.support.Translations``); fuzzy entries left out."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from babel.support import Translations

    with path.open("rb") as f:
        catalog = read_po(f, locale=catalog_dir(lang))
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    return Translations(fp=buf, domain=DOMAIN)


def add_assignment_locales(folder: Path) -> None:
    """Make an assignment's ``locales/`` folder part of every language's catalog (once per folder;
    catalogs already read get its entries merged in, so a Jinja environment holding one sees them)."""
    folder = folder.resolve()
    if folder in _assignment_locales or not folder.is_dir():
        return
    _assignment_locales.append(folder)
    for lang, t in _loaded.items():
        _merge(t, folder, lang)


def _merge(t: stdlib_gettext.NullTranslations, folder: Path, lang: str) -> None:
    path = po_path(lang, folder, ASSIGNMENT_DOMAIN)
    if lang != DEFAULT and path.is_file() and hasattr(t, "merge"):
        t.merge(read_catalog(path, lang))


def translations(lang: str) -> stdlib_gettext.NullTranslations:
    """The compiled catalogs of `lang` (the grader's and the added assignments'), read from their .po
    files once per process (English: none needed)."""
    lang = normalise(lang) or DEFAULT
    found = _loaded.get(lang)
    if found is None:
        if lang == DEFAULT:
            found = stdlib_gettext.NullTranslations()
        else:
            path = po_path(lang)
            if path.is_file():
                found = read_catalog(path, lang)
            else:
                from babel.support import Translations

                found = Translations()
            for folder in _assignment_locales:
                _merge(found, folder, lang)
        _loaded[lang] = found
    return found


def translate(text: str, lang: str) -> str:
    """`text` (an English msgid) in `lang`; `text` itself when the catalog has no translation."""
    if not text or lang == DEFAULT:
        return text
    return translations(lang).gettext(text)


def translate_plural(singular: str, plural: str, n: int, lang: str) -> str:
    return translations(lang).ngettext(singular, plural, n)


def N_(text: str) -> str:
    """Mark `text` for extraction without translating it now: it is translated, by its English
    text, where it is shown (case titles, concept words)."""
    return text


# --- messages ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One translatable sentence (or a piece of student text kept verbatim)."""

    msgid: str
    """The English text with ``{name}`` placeholders; with ``verbatim``, the text itself."""
    args: dict[str, Arg] = field(default_factory=dict)
    plural: str = ""
    """The English plural form, for ``ntr`` (the count is the argument ``n``)."""
    verbatim: bool = False
    """Not to translate: student text, an exception message, a path."""


@dataclass(frozen=True)
class Msg:
    """A message kept as msgids and arguments; ``str()`` is the English text.

    ``+`` joins messages (and plain strings, kept verbatim) into one."""

    parts: tuple[Part, ...]

    def __str__(self) -> str:
        return self.render(DEFAULT)

    def __add__(self, other: Msg | str) -> Msg:
        return Msg(self.parts + as_msg(other).parts)

    def __radd__(self, other: str) -> Msg:
        return Msg(as_msg(other).parts + self.parts)

    def __bool__(self) -> bool:
        return any(p.msgid for p in self.parts)

    def render(self, lang: str) -> str:
        return "".join(_render_part(p, lang) for p in self.parts)

    def to_list(self) -> list[dict[str, Any]]:
        """The JSON form kept in results: ``[{"msgid": ..., "args": {...}}, {"text": ...}]``."""
        return [_part_dict(p) for p in self.parts]

    @staticmethod
    def from_list(items: Iterable[Mapping[str, Any]]) -> Msg:
        return Msg(tuple(_part_from(d) for d in items))


def tr(msgid: str, **args: Any) -> Msg:
    """A translatable message: `msgid` is English with ``{name}`` placeholders filled from `args`
    (numbers are formatted for the reader's locale, `Msg` arguments translated too; anything else,
    such as a torch.device, is kept as its text)."""
    return Msg((Part(msgid, _plain_args(args)),))


def ntr(singular: str, plural: str, n: int, **args: Any) -> Msg:
    """A message with a count ``{n}``: "1 hidden case" / "3 hidden cases" (and one form in Chinese)."""
    return Msg((Part(singular, _plain_args({"n": n, **args}), plural=plural),))


def _plain_args(args: Mapping[str, Any]) -> dict[str, Arg]:
    return {k: v if v is None or isinstance(v, (str, int, float, Msg)) else str(v) for k, v in args.items()}


EMPTY = Msg(())
"""No message (a passed case's): renders as "" in every language, and is false."""


def english(text: str) -> Msg:
    """Plain English text as a message, looked up by that text when shown: translated where a
    catalog has it (a string marked with ``N_``), else shown as it is. What a message that no one
    wrote with ``tr`` becomes, and the plain ``message`` of results written before schema 2."""
    return Msg((Part(text),)) if text else EMPTY


def message_of(value: Msg | str) -> Msg:
    """`value` as a `Msg`: a plain string is `english` (for APIs that accept either)."""
    return value if isinstance(value, Msg) else english(value)


def verbatim(text: str) -> Msg:
    """Text shown as it is in every language (student output, exception text, file names)."""
    return Msg((Part(text, verbatim=True),))


def as_msg(value: Msg | str | None) -> Msg:
    if isinstance(value, Msg):
        return value
    return verbatim(value or "")


def join(items: Iterable[Msg | str], sep: Msg | str = " ") -> Msg:
    out: tuple[Part, ...] = ()
    for i, item in enumerate(items):
        if i:
            out += as_msg(sep).parts
        out += as_msg(item).parts
    return Msg(out)


def render(value: Msg | str | None, lang: str) -> str:
    """A `Msg` in `lang`; a plain string looked up by its English text (titles marked with ``N_``)."""
    if isinstance(value, Msg):
        return value.render(lang)
    return translate(value or "", lang)


def _render_part(p: Part, lang: str) -> str:
    if p.verbatim:
        return p.msgid
    if p.plural:
        n = p.args.get("n")
        template = translate_plural(p.msgid, p.plural, int(n) if isinstance(n, (int, float)) else 0, lang)
    else:
        template = translate(p.msgid, lang)
    if not p.args:
        return template
    values = {str(k): _format_arg(v, lang) for k, v in p.args.items()}
    if set(_FIELD_NAMES.findall(template)) <= set(values):
        return fill(template, values, cjk=lang in CJK_LANGUAGES)
    # A broken translation must never lose the message: fall back to the English text.
    return fill(p.msgid, values)


_FIELD = re.compile(r"\{\{|\}\}|\{(\w+)\}")
_FIELD_NAMES = re.compile(r"\{(\w+)\}")


CJK_LANGUAGES = ("zh-CN",)
"""Languages written without spaces between words, where code sits between spaces (`fill`)."""
_HAN = re.compile(r"[\u3400-\u9fff]")
_HAN_OR_CLOSING = re.compile(r"[\u3400-\u9fff）」』]")
_LATIN_START = re.compile(r"[A-Za-z0-9_(\[`'\"<.+\-−]")
_LATIN_END = re.compile(r"[A-Za-z0-9_)\]`'\">.%]")


def fill(template: str, values: Mapping[str, str], *, cjk: bool = False) -> str:
    """``{name}`` placeholders of `template` replaced by `values` (``{{`` and ``}}`` are braces).

    Never ``str.format``: a message read back from a results file is data, and a placeholder such
    as ``{x.__class__}`` or ``{x[0]}`` must stay text instead of reaching into an argument's
    attributes; a placeholder without a value stays as written.

    With `cjk` (a Chinese template), a value meets the text around it as Chinese typesetting wants
    whatever the translator assumed it would hold: code gets a space against a Han character
    (``调用 f() 时``), Chinese loses the one between it and Han (``f 的梯度是``, not ``梯度 是``).
    """
    out: list[str] = []
    pos = 0
    for m in _FIELD.finditer(template):
        out.append(template[pos:m.start()])
        pos = m.end()
        token = m.group(0)
        if token in ("{{", "}}"):
            out.append(token[0])
            continue
        value = values.get(m.group(1), token)
        if cjk and value and value != token:
            before = "".join(out)[-2:]
            after = template[pos:pos + 2]
            if _HAN.match(value[0]) and before[-1:] == " " and _HAN.match(before[:1] or "x"):
                out[-1] = out[-1][:-1] if out[-1].endswith(" ") else out[-1]
            elif _LATIN_START.match(value[0]) and before and _HAN.match(before[-1]):
                value = " " + value
            if _HAN_OR_CLOSING.match(value[-1]) and after[:1] == " " and _HAN.match(after[1:2] or "x"):
                pos += 1
            elif _LATIN_END.match(value[-1]) and after and _HAN.match(after[0]):
                value += " "
        out.append(value)
    out.append(template[pos:])
    return "".join(out)


def _format_arg(v: Arg, lang: str) -> str:
    if isinstance(v, Msg):
        return v.render(lang)
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float) and lang != DEFAULT:
        from grader.i18n.formats import decimal

        return decimal(v, lang)
    return str(v)


def _arg_json(v: Arg) -> Any:
    if isinstance(v, Msg):
        return {"msg": v.to_list()}
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN or infinity: "nan", "inf", "-inf" read back as text
    return v


def _arg_from(v: Any) -> Arg:
    if isinstance(v, dict) and "msg" in v:
        return Msg.from_list(v["msg"])
    return v


def _part_dict(p: Part) -> dict[str, Any]:
    if p.verbatim:
        return {"text": p.msgid}
    d: dict[str, Any] = {"msgid": p.msgid}
    if p.plural:
        d["plural"] = p.plural
    if p.args:
        d["args"] = {k: _arg_json(v) for k, v in p.args.items()}
    return d


def _part_from(d: Mapping[str, Any]) -> Part:
    if "text" in d:
        return Part(str(d["text"]), verbatim=True)
    return Part(str(d["msgid"]), {k: _arg_from(v) for k, v in (d.get("args") or {}).items()},
                plural=str(d.get("plural", "")))
