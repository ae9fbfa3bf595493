"""A batch's statistics for the terminal: mean and median percent, load failures, and the share of
students failing each concept."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from grader.results import GradeReport


@dataclass(frozen=True)
class ConceptRate:
    concept: str
    students: int
    """Students failing at least one case of this concept."""
    total: int

    @property
    def percent(self) -> float:
        return 100.0 * self.students / self.total if self.total else 0.0


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    failed_to_load: int
    concept_rates: list[ConceptRate]
    """Most failed first."""


def summarize(reports: list[GradeReport]) -> Summary:
    """Mean and median percent, load failures, and the share of students failing each concept."""
    percents = [r.score.percent for r in reports]
    counts: dict[str, int] = {}
    for r in reports:
        for c in r.concepts_failed():
            counts[c] = counts.get(c, 0) + 1
    rates = [ConceptRate(c, k, len(reports)) for c, k in counts.items()]
    rates.sort(key=lambda x: (-x.students, x.concept))
    return Summary(len(reports), statistics.fmean(percents) if percents else 0.0,
                   statistics.median(percents) if percents else 0.0,
                   sum(not r.load.ok for r in reports), rates)
