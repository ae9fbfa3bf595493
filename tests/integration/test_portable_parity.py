"""The portable worker (a spawned interpreter over pipes: what Windows and macOS use) gives the same
verdicts, messages and evidence as the default jailed level, on a sample of every kind.

Each portable worker is a fresh interpreter that imports torch (seconds of CPU), so the portable
side grades one representative of each way a sample's report looks at the default level, not all
of them: `test_every_kind_of_report_has_a_representative` grades every sample at the default level
(test_samples.py's reports, shared) and fails when a sample's kind has none here.

Run with ``-s`` to see the table: each sample, its verdict under both levels."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from grader.authoring.validate import read_expectations
from grader.grading.engine import Engine, limits_for
from grader.grading.factory import sandbox_for as factory_sandbox_for
from grader.results import Outcome, to_dict

pytestmark = pytest.mark.slow  # a fresh interpreter per portable worker

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = read_expectations(ROOT / "submissions")
TABLE: list[tuple[str, str, str]] = []

# One sample per kind (below, `kind`), and those whose numbers could differ between two processes:
# scaled_dot_product_attention's kernels, half precision, autograd, generators and dropout.
REPRESENTATIVES = [
    "masked-attention/correct/correct_notebook.ipynb",
    "masked-attention/buggy/demo_cell_rebinds.ipynb",
    "masked-attention/buggy/untouched_starter.py",
    "masked-attention/buggy/mask_as_list.py",  # a list where a tensor was asked for
    "masked-attention/buggy/finfo_float32_min.py",  # float16 overflow
    "masked-attention/buggy/dropout_eval.py",
    "masked-attention/correct/sdpa.py",
    "masked-attention/correct/upcast_float32.py",
    "masked-loss-and-sampling/buggy/untouched_starter.py",
    "masked-loss-and-sampling/buggy/ignore_index_zero.py",
    "masked-loss-and-sampling/buggy/divide_by_zero_at_t0.py",
    "masked-loss-and-sampling/buggy/ignores_generator.py",
    "masked-loss-and-sampling/buggy/fp16_sum.py",
    "masked-loss-and-sampling/correct/gather_and_multinomial.py",
    "mha-kv-cache/correct/correct_notebook.ipynb",
    "mha-kv-cache/buggy/untouched_starter.py",
    "mha-kv-cache/buggy/frozen_mask.py",
    "mha-kv-cache/buggy/merge_no_transpose.py",  # the causality test's gradients
    "mha-kv-cache/buggy/kv_cat_wrong_dim.py",
    "mha-kv-cache/correct/sdpa.py",
]
BY_NAME = {str(s.path.relative_to(ROOT / "submissions")): s for s in SAMPLES}


def kind(report) -> tuple:
    """What the worker did for a sample, as its report shows: the assignment and file type, the
    outcomes its cases got, whether a traceback or a not-implemented case is among them, and what
    loading printed or raised."""
    evidence = [c.evidence for c in report.cases if c.evidence is not None]
    return (report.assignment.id, report.submission.kind,
            tuple(sorted({c.outcome.value for c in report.cases})), any(e.traceback for e in evidence),
            any(c.not_implemented for c in report.cases), bool(report.load.stdout), bool(report.load.stderr),
            bool(report.load.cell_errors))


@pytest.fixture(scope="module")
def portable_engine(sample_grades):
    """portable_engine(slug): an engine on a portable sandbox, sharing the default engine's
    reference setups (made on first use: an assignment whose setup fails fails its own samples)."""
    opened, boxes = {}, []

    def get(slug: str) -> Engine:
        if slug not in opened:
            default = sample_grades.engine(slug)
            default.prepare()
            box = factory_sandbox_for(limits_for(default.assignment), "cpu", isolation="portable")
            boxes.append(box)
            opened[slug] = Engine(default.assignment, box)
            opened[slug].share_setups_from(default)
        return opened[slug]

    yield get
    for box in boxes:
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


@pytest.mark.parametrize("name", REPRESENTATIVES)
def test_portable_worker_grades_the_sample_like_the_default_level(name, sample_grades, portable_engine):
    sample = BY_NAME[name]
    a = sample_grades.report(sample)
    b = portable_engine(sample.assignment).grade_path(sample.path)
    TABLE.append((name, verdict(a), verdict(b)))
    assert b.environment.isolation == "portable"
    assert a.environment.isolation != "portable"
    assert (b.load.ok, str(b.load.message), b.load.stdout, b.load.stderr) == \
        (a.load.ok, str(a.load.message), a.load.stdout, a.load.stderr)
    assert comparable(b) == comparable(a)


def test_every_kind_of_report_has_a_representative(sample_grades):
    """A sample added to expected.toml that the worker treats in a new way (a new kind) needs a
    representative above."""
    covered = {kind(sample_grades.report(BY_NAME[name])) for name in REPRESENTATIVES}
    missing = {}
    for name, sample in BY_NAME.items():
        missing.setdefault(kind(sample_grades.report(sample)), name)
    assert {k: n for k, n in missing.items() if k not in covered} == {}
