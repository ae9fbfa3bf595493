"""Every sample submission gets the same verdicts, messages and evidence from the portable worker
(a spawned interpreter over pipes: what Windows and macOS use) as from the default jailed level.

Run with ``-s`` to see the table: each sample, its verdict under both levels."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from grader.assignment.spec import load_assignment
from grader.authoring.validate import read_expectations
from grader.grading.engine import Engine, limits_for
from grader.grading.factory import sandbox_for as factory_sandbox_for
from grader.results import Outcome, to_dict

pytestmark = pytest.mark.slow  # every sample, graded twice, one fresh interpreter per portable worker

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = read_expectations(ROOT / "submissions")
TABLE: list[tuple[str, str, str]] = []


@pytest.fixture(scope="module")
def engines(sandbox_for):
    """engines(slug): an engine on the default sandbox and one on a portable sandbox, sharing the
    reference setups (made on first use: an assignment whose setup fails fails its own samples)."""
    opened, portable = {}, []

    def get(slug: str):
        if slug not in opened:
            a = load_assignment(slug)
            default = Engine(a, sandbox_for(limits_for(a)))
            default.prepare()
            box = factory_sandbox_for(limits_for(a), "cpu", isolation="portable")
            portable.append(box)
            other = Engine(a, box)
            other.share_setups_from(default)
            opened[slug] = (default, other)
        return opened[slug]

    yield get
    for box in portable:
        box.close()
    if TABLE:
        print("\n| sample | default | portable |\n|---|---|---|")
        for row in TABLE:
            print("| " + " | ".join(row) + " |")


def verdict(report) -> str:
    failed = [c.id for c in report.cases if c.outcome is not Outcome.PASSED]
    score = f"{report.score.earned:g}/{report.score.possible:g}"
    return f"{score}, all passed" if not failed else f"{score}, failed {len(failed)}: {', '.join(failed)}"


def comparable(report) -> list[str]:
    """Each case as the results JSON holds it (outcome, concept, message, evidence, points),
    without its duration."""
    return [json.dumps(to_dict(dataclasses.replace(c, duration_s=0.0)), sort_keys=True) for c in report.cases]


@pytest.mark.parametrize("sample", SAMPLES, ids=[str(s.path.relative_to(ROOT / "submissions")) for s in SAMPLES])
def test_portable_worker_grades_every_sample_like_the_default_level(sample, engines):
    default, portable = engines(sample.assignment)
    a = default.grade_path(sample.path)
    b = portable.grade_path(sample.path)
    TABLE.append((str(sample.path.relative_to(ROOT / "submissions")), verdict(a), verdict(b)))
    assert b.environment.isolation == "portable"
    assert a.environment.isolation != "portable"
    assert (b.load.ok, str(b.load.message), b.load.stdout, b.load.stderr) == \
        (a.load.ok, str(a.load.message), a.load.stdout, a.load.stderr)
    assert comparable(b) == comparable(a)
