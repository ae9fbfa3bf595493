"""Pairs of submissions ranked by the evidence that they share work: the same code (fingerprints,
the starter's own and the class's most common ones left out) and bitwise-identical wrong outputs
on the same cases (`grader.results.Evidence.output_digest`).

Evidence, never a verdict: common code, a shared classic mistake or a study group can explain
either; the report shows what matched so that a person can judge. An identical wrong output
counts for less the more submissions gave it (a classic mistake gives the same bits everywhere).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from grader.results import GradeReport, Outcome
from grader.similarity.fingerprint import Fingerprints

COMMON_SHARE = 0.5
"""A fingerprint found in more than this share of the batch (and in more than 3 submissions) is
the class's common code, like the starter's: not counted."""
MIN_CODE = 0.25
"""Pairs whose code matches less than this share (of the smaller one) are not listed for their code;
pairs whose `Pair.strength` is below it are not listed at all."""
MAX_OUTPUT_GROUP = 20
"""A wrong output given by more submissions than this is a common mistake: it pairs no one."""


@dataclass(frozen=True)
class Document:
    """One submission as the similarity report sees it."""

    student_id: str
    units: list[str]
    """Its code, unit by unit (a notebook's code cells, a file), already capped in length."""
    labels: list[str]
    """What each unit is ("attention.py", "code cell 3")."""
    prints: Fingerprints


@dataclass(frozen=True)
class SharedOutput:
    case_id: str
    case_title: str
    hidden: bool
    given_by: int
    """How many submissions of the batch gave this exact wrong output on this case."""


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    code_a: float
    """Share of a's counted fingerprints that are also in b's code (0..1)."""
    code_b: float
    lines_a: frozenset[tuple[int, int]] = frozenset()
    """(unit, line) of a's code that matched b's."""
    lines_b: frozenset[tuple[int, int]] = frozenset()
    shared_outputs: list[SharedOutput] = field(default_factory=list)

    @property
    def code(self) -> float:
        return max(self.code_a, self.code_b)

    @property
    def output_weight(self) -> float:
        """Each identical wrong output counts 1 / (number of others who gave it)."""
        return sum(1.0 / (s.given_by - 1) for s in self.shared_outputs)

    @property
    def strength(self) -> float:
        """What the pairs are ranked by (0..1): the larger of the code share and of the output
        evidence (two wrong outputs that only this pair gave count as fully as identical code)."""
        return max(self.code, min(1.0, self.output_weight / 2))


def _counted(docs: list[Document], starter: set[int]) -> dict[str, set[int]]:
    seen: dict[int, int] = defaultdict(int)
    for d in docs:
        for h in d.prints.hashes:
            seen[h] += 1
    limit = max(3, COMMON_SHARE * len(docs))
    common = {h for h, n in seen.items() if n > limit}
    return {d.student_id: d.prints.hashes - starter - common for d in docs}


def _lines_by_hash(doc: Document) -> dict[int, frozenset[tuple[int, int]]]:
    """Each hash of `doc` -> the (unit, line) places it covers."""
    return {h: frozenset(line for place in places for line in place) for h, places in doc.prints.spans.items()}


def _lines(lines_by_hash: dict[int, frozenset[tuple[int, int]]], hashes: set[int]) -> frozenset[tuple[int, int]]:
    return frozenset().union(*(lines_by_hash[h] for h in hashes if h in lines_by_hash))


def code_pairs(docs: list[Document], starter: set[int]) -> dict[tuple[str, str], Pair]:
    """Every pair whose counted code matches at least `MIN_CODE` of the smaller one."""
    counted = _counted(docs, starter)
    by_hash: dict[int, list[str]] = defaultdict(list)
    for sid, hashes in counted.items():
        for h in hashes:
            by_hash[h].append(sid)
    shared: dict[tuple[str, str], int] = defaultdict(int)
    for ids in by_hash.values():
        for a, b in itertools.combinations(sorted(ids), 2):
            shared[(a, b)] += 1
    docs_by_id = {d.student_id: d for d in docs}
    lines: dict[str, dict[int, frozenset[tuple[int, int]]]] = {}  # student id -> _lines_by_hash, when first needed
    out = {}
    for (a, b), n in shared.items():
        na, nb = len(counted[a]), len(counted[b])
        if n / max(1, min(na, nb)) < MIN_CODE:
            continue
        both = counted[a] & counted[b]
        for sid in (a, b):
            if sid not in lines:
                lines[sid] = _lines_by_hash(docs_by_id[sid])
        out[(a, b)] = Pair(a, b, code_a=n / na, code_b=n / nb, lines_a=_lines(lines[a], both),
                           lines_b=_lines(lines[b], both))
    return out


def output_pairs(reports: list[GradeReport]) -> dict[tuple[str, str], list[SharedOutput]]:
    """Pairs that gave the same wrong output (digest) on the same case, with how many others did."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    cases = {}
    for r in reports:
        for c in r.cases:
            if c.outcome is Outcome.FAILED and c.evidence.output_digest:
                groups[(c.id, c.evidence.output_digest)].append(r.submission.id)
                cases[c.id] = c
    out: dict[tuple[str, str], list[SharedOutput]] = defaultdict(list)
    for (cid, _), ids in groups.items():
        if not 2 <= len(set(ids)) <= MAX_OUTPUT_GROUP:
            continue
        c = cases[cid]
        for a, b in itertools.combinations(sorted(set(ids)), 2):
            out[(a, b)].append(SharedOutput(cid, c.title, c.hidden, len(ids)))
    return out


def ranked_pairs(docs: list[Document], starter: set[int], reports: list[GradeReport]) -> list[Pair]:
    """Every pair with code or output evidence, the strongest first."""
    pairs = code_pairs(docs, starter)
    for key, outputs in output_pairs(reports).items():
        p = pairs.get(key) or Pair(key[0], key[1], 0.0, 0.0)
        pairs[key] = Pair(p.a, p.b, p.code_a, p.code_b, p.lines_a, p.lines_b, shared_outputs=outputs)
    listed = [p for p in pairs.values() if p.strength >= MIN_CODE]
    return sorted(listed, key=lambda p: (-p.strength, -p.output_weight, p.a, p.b))
