"""Naming a mistake from precomputed hypotheses: the rule every diagnosis of the bundled assignments uses."""

from __future__ import annotations

import torch

from grader.checks.hypotheses import concept_of, matching_mistake

REF = torch.tensor([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], dtype=torch.float64)
ZERO_FILL = torch.tensor([[0.3, 0.3, 0.4], [0.2, 0.2, 0.6]], dtype=torch.float64)
WRONG_SCALE = torch.tensor([[0.1, 0.2, 0.7], [0.05, 0.05, 0.9]], dtype=torch.float64)
MISTAKES = {"mask-fill-value": ZERO_FILL, "scaling/d": WRONG_SCALE}


def test_the_reproduced_mistake_is_named_and_a_right_or_unrelated_result_is_not():
    assert matching_mistake(WRONG_SCALE + 1e-4, REF, MISTAKES, tol=1e-3) == "scaling/d"
    assert concept_of("scaling/d") == "scaling"
    assert matching_mistake(REF, REF, MISTAKES, tol=1e-3) is None
    assert matching_mistake(torch.full_like(REF, 1 / 3), REF, MISTAKES, tol=1e-3) is None


def test_a_mistake_that_gives_the_reference_on_these_inputs_is_never_named():
    """On inputs where the bug changes nothing, naming it would blame a right answer."""
    harmless = {"mask-fill-value": REF + 1e-3}
    assert matching_mistake(REF + 1e-3, REF, harmless, tol=1e-3) is None
    assert matching_mistake(REF + 1e-3, REF, harmless, tol=1e-3, apart=0.5) == "mask-fill-value"


def test_only_the_compared_cells_and_the_finite_ones_count():
    got = ZERO_FILL.clone()
    got[1] = 7.0  # a row the case does not grade
    rows = torch.tensor([[True], [False]])
    assert matching_mistake(got, REF, MISTAKES, tol=1e-3) is None
    assert matching_mistake(got, REF, MISTAKES, tol=1e-3, where=rows) == "mask-fill-value"
    got[1] = float("nan")
    assert matching_mistake(got, REF, MISTAKES, tol=1e-3) is None
    assert matching_mistake(got, REF, MISTAKES, tol=1e-3, finite_only=True) == "mask-fill-value"


def test_only_and_shapes_limit_what_is_tried():
    assert matching_mistake(ZERO_FILL, REF, MISTAKES, tol=1e-3, only=("scaling/d",)) is None
    assert matching_mistake(ZERO_FILL[:1], REF[:1], MISTAKES, tol=1e-3) is None  # shapes differ: no match
    near = {"a": ZERO_FILL, "b": ZERO_FILL + 5e-4}
    assert matching_mistake(ZERO_FILL, REF, near, tol=1e-3) == "a"
    assert matching_mistake(ZERO_FILL, REF, near, tol=1e-3, only=("b", "a")) == "b"


def test_the_distance_from_the_reference_scales_with_how_close_the_student_is():
    """A bfloat16 output 5e-3 from a mistake is that mistake only if the mistake is 10x farther
    from the reference."""
    close = {"m": REF + 0.04}
    got = REF + 0.04 + 5e-3
    assert matching_mistake(got, REF, close, tol=3e-2, apart=1.0, apart_from_student=1.0) == "m"
    assert matching_mistake(got, REF, close, tol=3e-2, apart=1.0) is None


def test_a_mistake_a_quarter_away_is_named_at_half_precision_tolerance():
    """Scores divided by d instead of sqrt(d) give weights 0.27 from the reference at d = 16; a
    bfloat16 output sits ~5e-3 from that model. The half-precision tolerance 3e-2 must not hide it."""
    wrong = {"scaling/d": REF + 0.27}
    got = REF + 0.27 + 5e-3
    assert matching_mistake(got, REF, wrong, tol=3e-2) == "scaling/d"
    assert matching_mistake(got, REF, wrong, tol=3e-2, apart=10.0) is None  # the old rule hid it
    assert matching_mistake(REF + 0.03, REF, {"m": REF + 0.05}, tol=3e-2) is None  # 0.05 away: too close to call
