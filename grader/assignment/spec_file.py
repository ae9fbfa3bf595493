"""``spec.toml`` -> `SpecFile`: every key of every table typed, and none the grader does not know.

An instructor's typo (``limts``, ``explanaton``) or a wrong type (``seed = "12"``) is an
`AssignmentSpecError` naming the file, the table and the key, with the known keys and a guess at
the one meant, instead of a key silently ignored or a ``KeyError`` far from the file. Keys that
may be absent are None here; what an assignment needs to load (``id``, ``version``) is checked by
`grader.assignment.spec.load_assignment`, so a kit's ``[kit]`` table reads without them.

Torch-free: finding and reading specs stays cheap.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import AssignmentSpecError
from grader.i18n import LANGUAGES, normalise
from grader.results import Concept

KIT_TABLE = "kit"
"""The table ``grader release`` writes into a kit's spec.toml (what the kit leaves out)."""
ENTRY_KINDS = ("function", "class")


@dataclass(frozen=True)
class EntryPoint:
    """One ``[[entry_points]]`` table: what the submission must define."""

    name: str
    kind: str
    """"function" or "class"."""
    signature: str


@dataclass(frozen=True)
class Requirement:
    """One ``[[requirements]]`` table: a statement of the README and the public cases that try it."""

    id: str
    readme: str
    """The README's own words (tests/unit/test_requirements.py finds them there)."""
    cases: tuple[str, ...]


@dataclass(frozen=True)
class KitInfo:
    """A kit's ``[kit]`` table: what its spec.toml says about the cases that are not in it, and its starters."""

    hidden_cases: int
    hidden_points: float
    submission: str
    """The starter .py file name (the assignment's main module)."""
    starters: dict[str, str] = field(default_factory=dict)
    """Starter file name -> ``code_fingerprint`` as released: tells an untouched starter from work."""


@dataclass(frozen=True)
class SpecFile:
    """An assignment's spec.toml as written (None: the key is absent)."""

    path: Path
    id: str | None = None
    version: str | None = None
    """Text; a number (``version = 1.0``) is read as its text."""
    title: str | None = None
    seed: int | None = None
    """None: the seed kept in ``seed.secret`` (`grader.assignment.seed`)."""
    main_module: str | None = None
    cell_tag: str | None = None
    reference: str | None = None
    lang: str | None = None
    """One of `grader.i18n.LANGUAGES` (``zh_CN`` and ``zh-Hans`` read as ``zh-CN``)."""
    limits: dict[str, int | float] = field(default_factory=dict)
    """The ``[limits]`` table; its names are fields of ``grader.sandbox.Limits``, checked where the
    sandbox's limits are built (``grader.grading.engine.limits_for``)."""
    entry_points: tuple[EntryPoint, ...] = ()
    concepts: tuple[Concept, ...] | None = None
    """The ``[[concepts]]`` tables; None when there are none (an assignment older than them)."""
    requirements: tuple[Requirement, ...] = ()
    kit: KitInfo | None = None
    """The ``[kit]`` table: set in a student kit only."""


TOP_KEYS = ("id", "version", "title", "seed", "main_module", "cell_tag", "reference", "lang", "limits",
            "entry_points", "concepts", "requirements", KIT_TABLE)


def read_spec(folder: Path) -> SpecFile:
    """The spec.toml of an assignment folder, checked key by key (no case is imported)."""
    path = folder / "spec.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise AssignmentSpecError(f"{path}: {e}") from e
    return parse_spec(data, path)


def parse_spec(data: Mapping[str, Any], path: Path) -> SpecFile:
    top = _Table(data, path, "the top table", TOP_KEYS)
    seed = top.integer("seed", "a non-negative integer")
    if seed is not None and seed < 0:
        raise top.wrong("seed", "a non-negative integer")
    lang = top.text("lang")
    if lang is not None and normalise(lang) is None:
        raise AssignmentSpecError(f"{path}: lang = {lang!r} is not a language the grader speaks; use one of: "
                                  f"{', '.join(LANGUAGES)}")
    concepts = top.tables("concepts")
    kit = top.table(KIT_TABLE)
    return SpecFile(
        path=path, id=top.text("id"), version=top.version(), title=top.text("title"), seed=seed,
        main_module=top.text("main_module"), cell_tag=top.text("cell_tag"), reference=top.text("reference"),
        lang=normalise(lang) if lang is not None else None,
        limits=_limits(top),
        entry_points=tuple(_entry_point(t) for t in top.tables("entry_points") or []),
        concepts=None if concepts is None else tuple(_concept(t) for t in concepts),
        requirements=tuple(_requirement(t) for t in top.tables("requirements") or []),
        kit=None if kit is None else _kit(kit),
    )


def _limits(top: _Table) -> dict[str, int | float]:
    table = top.table("limits")
    if table is None:
        return {}
    return {key: table.need_number(key) for key in table.data}


def _entry_point(t: _Table) -> EntryPoint:
    kind = t.need_text("kind")
    if kind not in ENTRY_KINDS:
        raise t.wrong("kind", " or ".join(repr(k) for k in ENTRY_KINDS))
    return EntryPoint(t.need_text("name"), kind, t.need_text("signature"))


def _concept(t: _Table) -> Concept:
    return Concept(t.need_text("id"), t.need_text("title"), t.need_text("explanation"), t.text("dashboard") or "")


def _requirement(t: _Table) -> Requirement:
    return Requirement(t.need_text("id"), t.need_text("readme"), t.need_texts("cases"))


def _kit(t: _Table) -> KitInfo:
    starters = t.table("starters")
    return KitInfo(hidden_cases=t.integer("hidden_cases") or 0, hidden_points=float(t.number("hidden_points") or 0.0),
                   submission=t.text("submission") or "",
                   starters={} if starters is None else {k: starters.need_text(k) for k in starters.data})


TABLE_KEYS: dict[str, tuple[str, ...] | None] = {
    "limits": None,  # any name: see SpecFile.limits
    "entry_points": ("name", "kind", "signature"),
    "concepts": ("id", "title", "explanation", "dashboard"),
    "requirements": ("id", "readme", "cases"),
    KIT_TABLE: ("hidden_cases", "hidden_points", "submission", "starters"),
    "starters": None,  # [kit.starters]: file name -> fingerprint
}
"""The keys each (array of) table(s) may hold; None: any key."""


def unknown_key(path: Path | str, key: str, where: str, known: tuple[str, ...] | list[str]) -> AssignmentSpecError:
    """The error for a key no one reads: the file, the table, a guess and the keys that are known."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return AssignmentSpecError(f"{path}: unknown key {key!r} in {where}; {guess}known: {', '.join(sorted(known))}")


class _Table:
    """One table of spec.toml being read: typed getters, and no key in it that the grader ignores."""

    def __init__(self, data: Mapping[str, Any], path: Path, where: str, known: tuple[str, ...] | None):
        """``known``: the keys it may hold (None: any, e.g. ``[kit.starters]``'s file names)."""
        self.data, self.path, self.where = data, path, where
        for key in data:
            if known is not None and key not in known:
                raise unknown_key(path, key, where, known)

    def wrong(self, key: str, expected: str) -> AssignmentSpecError:
        return AssignmentSpecError(f"{self.path}: {key} in {self.where} must be {expected}, got {self.data[key]!r}")

    def missing(self, key: str) -> AssignmentSpecError:
        return AssignmentSpecError(f"{self.path}: missing required key {key!r} in {self.where}")

    def _get(self, key: str, ok: tuple[type, ...], expected: str) -> Any:
        value = self.data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, ok)):  # TOML true is no number
            raise self.wrong(key, expected)
        return value

    def text(self, key: str) -> str | None:
        return self._get(key, (str,), "text (a quoted string)")

    def integer(self, key: str, expected: str = "an integer") -> int | None:
        return self._get(key, (int,), expected)

    def number(self, key: str) -> int | float | None:
        return self._get(key, (int, float), "a number")

    def version(self) -> str | None:
        value = self._get("version", (str, int, float), 'text, e.g. "1.0"')
        return None if value is None else str(value)

    def need_text(self, key: str) -> str:
        value = self.text(key)
        if value is None:
            raise self.missing(key)
        return value

    def need_number(self, key: str) -> int | float:
        value = self.number(key)
        if value is None:
            raise self.missing(key)
        return value

    def need_texts(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            raise self.missing(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.wrong(key, 'a list of text, e.g. ["case_a", "case_b"]')
        return tuple(value)

    def table(self, key: str) -> _Table | None:
        """The sub-table ``[key]`` (None when absent), its keys checked against `TABLE_KEYS`."""
        value = self.data.get(key)
        if value is None:
            return None
        name = key if self.where == "the top table" else f"{self.where[1:-1]}.{key}"
        if not isinstance(value, dict):
            raise self.wrong(key, f"a [{name}] table")
        return _Table(value, self.path, f"[{name}]", TABLE_KEYS[key])

    def tables(self, key: str) -> list[_Table] | None:
        """The array of tables ``[[key]]`` (None when absent), each checked against `TABLE_KEYS`."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise self.wrong(key, f"[[{key}]] tables")
        out = []
        for n, t in enumerate(value, 1):
            label = f" ({t['id']})" if isinstance(t.get("id"), str) else f" ({t['name']})" if isinstance(
                t.get("name"), str) else ""
            out.append(_Table(t, self.path, f"[[{key}]] entry {n}{label}", TABLE_KEYS[key]))
        return out
