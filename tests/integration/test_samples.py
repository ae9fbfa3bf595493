"""The sample submissions are the grader's own proof: correct ones score 100 %, each buggy one
fails exactly the cases aimed at its bug, with the right concept."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.results import Outcome
from grader.authoring.validate import compare_to_expectation, read_expectations, under_seed

pytestmark = pytest.mark.slow  # full tier: every sample submission graded

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = read_expectations(ROOT / "submissions")


def test_every_sample_file_is_declared_and_every_declaration_exists():
    declared = {s.path.resolve() for s in SAMPLES}
    on_disk = {p.resolve() for p in (ROOT / "submissions").rglob("*") if p.suffix in (".py", ".ipynb")}
    assert declared == on_disk
    assert sum("correct" in s.path.parts for s in SAMPLES) >= 12
    assert sum("buggy" in s.path.parts for s in SAMPLES) >= 38


@pytest.mark.parametrize("sample", SAMPLES, ids=[str(s.path.relative_to(ROOT / "submissions")) for s in SAMPLES])
def test_sample_gets_its_declared_outcome(sample, sample_grades):
    report = sample_grades.report(sample)
    assert report.load.ok, str(report.load.message)
    assert compare_to_expectation(report, sample) == ""
    if not sample.fails:
        assert report.score.earned == report.score.possible
        assert report.score.display_percent() == "100%"
    else:
        assert report.score.earned < report.score.possible
        failing = [c for c in report.cases if c.outcome is not Outcome.PASSED]
        # A concept for every failure, except code not written yet, which gets none and no hint.
        assert all(str(c.message) and (c.concept or c.not_implemented) for c in failing)
        if "untouched_starter" in sample.path.name:
            assert all(c.not_implemented and str(c.message).startswith("Not implemented yet: ") for c in failing)
            assert len(failing) == len(report.cases) and report.concepts_failed() == []


def test_the_tutorial_styles_are_samples_with_exact_concepts():
    tutorial = [s for s in SAMPLES if s.path.name.startswith("tutorial_") and "buggy" in s.path.parts]
    assert {s.path.stem for s in tutorial} >= {"tutorial_001_finfo_min", "tutorial_001_published",
                                               "tutorial_002_additive_float32", "tutorial_002_published",
                                               "tutorial_003_published", "tutorial_003_kv_no_guard"}
    assert all(s.exact and s.concepts for s in tutorial)
    assert sum(s.exact for s in SAMPLES if "buggy" in s.path.parts) >= 30


@pytest.mark.parametrize("aid", ["masked-attention", "mha-kv-cache", "masked-loss-and-sampling"])
def test_every_sample_gets_its_declared_outcome_under_other_seeds(aid, sandbox_for):
    """A kit draws a seed of its own at each release: no verdict or diagnosis may hold for the
    assignment's seed only (`grader validate --seeds`)."""
    from grader.assignment.spec import load_assignment
    from grader.grading.engine import limits_for
    from grader.grading.factory import engine_for

    a = load_assignment(aid)
    engine = engine_for(a, sandbox_for(limits_for(a)), device="cpu")
    samples = [s for s in SAMPLES if s.assignment == aid]
    for seed in (1, 2):
        check = under_seed(a, engine, samples, ROOT / "submissions", seed)
        assert check.ok, check.detail
