"""Pure scoring: case results -> total points. Counts are stored; percentages are derived."""

from __future__ import annotations

from grader.results import CaseResult, Points


def total(results: list[CaseResult]) -> Points:
    earned = sum(r.points.earned for r in results)
    possible = sum(r.points.possible for r in results)
    # Parametrised cases split points into fractions; round away float noise so that a
    # submission passing everything shows exactly earned == possible.
    return Points(round(earned, 6), round(possible, 6))
