"""Diagnosis concepts: what an assignment declares in its spec.toml, and the built-in fallback.

Every failing case names one concept. An assignment declares its own in ``[[concepts]]`` tables of
spec.toml (id, title, explanation, dashboard sentence); the grader itself adds only the few it
names whatever the assignment (``CORE``: a missing entry point, a submission that cannot load, a
timeout, a crash, an exception no concept explains, a case that did not run). These last four are
outcomes rather than causes: they say what happened, never why. The vocabulary travels in the results JSON (``GradeReport.concepts``), so a
report re-rendered later uses the words it was graded with. Results written before concepts were
declared carry none: ``BUILTIN`` (the attention vocabulary of 0.2) names them.

Torch-free: finding and reading specs must stay cheap.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable

from grader.errors import AssignmentSpecError
from grader.results import Concept

CORE = ("signature", "load-error", "timeout", "crash", "exception", "not-run")
"""Concepts the grader names itself, for any assignment (an assignment may reword them)."""

KEYS = {"id", "title", "explanation", "dashboard"}


def builtin() -> dict[str, Concept]:
    """The attention vocabulary every result before per-assignment concepts was graded with."""
    from grader.assignment.builtin import CLASS_PHRASES, CONCEPTS, EXPLANATIONS

    return {cid: Concept(cid, title, EXPLANATIONS.get(cid, ""), CLASS_PHRASES.get(cid, ""))
            for cid, title in CONCEPTS.items()}


def core() -> dict[str, Concept]:
    known = builtin()
    return {cid: known[cid] for cid in CORE}


def parse(tables: Any, where: str) -> dict[str, Concept]:
    """``[[concepts]]`` of a spec -> id -> Concept (core concepts first, then the declared ones)."""
    if tables is None:
        return builtin()  # an assignment written before concepts were declared: the old vocabulary
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise AssignmentSpecError(f"{where}: `concepts` must be [[concepts]] tables")
    out: dict[str, Concept] = {}
    seen: set[str] = set()
    for n, t in enumerate(tables, 1):
        unknown = set(t) - KEYS
        missing = {"id", "title", "explanation"} - set(t)
        if unknown or missing:
            what = (f"unknown keys {sorted(unknown)}" if unknown else "") + \
                   ("; " if unknown and missing else "") + (f"missing {sorted(missing)}" if missing else "")
            raise AssignmentSpecError(f"{where}: [[concepts]] entry {n} ({t.get('id', '?')}): {what} "
                                      f"(keys: id, title, explanation, dashboard)")
        cid = str(t["id"])
        if cid in seen:
            raise AssignmentSpecError(f"{where}: concept {cid!r} is declared twice")
        seen.add(cid)
        out[cid] = Concept(cid, str(t["title"]), str(t["explanation"]), str(t.get("dashboard", "")))
    for cid, c in core().items():  # after the declared ones: the dashboard breaks ties in this order
        out.setdefault(cid, c)
    return out


def unknown(concept: str, vocabulary: Iterable[str], where: str) -> str:
    """The error for a concept an assignment did not declare, listing the valid ids."""
    return (f"{where}: unknown concept {concept!r}; this assignment declares: {', '.join(sorted(vocabulary))} "
            f"(add a [[concepts]] entry to spec.toml)")


def vocabulary(concepts: Iterable[Concept]) -> dict[str, Concept]:
    """A report's concepts by id, the built-in ones filling any gap (results older than 0.3 carry none)."""
    out = builtin()
    out.update({c.id: c for c in concepts})
    return out
