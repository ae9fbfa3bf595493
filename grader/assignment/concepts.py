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

import functools
from collections.abc import Iterable

from grader.errors import AssignmentSpecError
from grader.results import Concept

CORE = ("signature", "load-error", "timeout", "crash", "exception", "not-run")
"""Concepts the grader names itself, for any assignment (an assignment may reword them)."""

def builtin() -> dict[str, Concept]:
    """The attention vocabulary every result before per-assignment concepts was graded with (a
    fresh dict each call; its Concepts are frozen)."""
    return dict(_builtin())


@functools.cache
def _builtin() -> dict[str, Concept]:
    from grader.assignment.builtin import CLASS_PHRASES, CONCEPTS, EXPLANATIONS

    return {cid: Concept(cid, title, EXPLANATIONS.get(cid, ""), CLASS_PHRASES.get(cid, ""))
            for cid, title in CONCEPTS.items()}


def core() -> dict[str, Concept]:
    known = builtin()
    return {cid: known[cid] for cid in CORE}


def vocabulary_of(declared: tuple[Concept, ...] | None, where: str) -> dict[str, Concept]:
    """spec.toml's ``[[concepts]]`` (`SpecFile.concepts`) -> id -> Concept: the declared ones, then
    the core ones it does not reword."""
    if declared is None:
        return builtin()  # an assignment written before concepts were declared: the old vocabulary
    out: dict[str, Concept] = {}
    for c in declared:
        if c.id in out:
            raise AssignmentSpecError(f"{where}: concept {c.id!r} is declared twice")
        out[c.id] = c
    for cid, core_concept in core().items():  # after the declared ones: the dashboard breaks ties in this order
        out.setdefault(cid, core_concept)
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
