"""Concepts come from the assignment's spec.toml, travel in the results JSON, and old results
without them still render with the built-in vocabulary."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.assignment.spec import load_assignment
from grader.cli.app import main
from grader.errors import AssignmentSpecError
from grader.results import Concept, report_from_dict, to_dict

DATA = Path(__file__).parent.parent / "data" / "results"

SPEC = '''id = "toy"
version = "1"
seed = 1

[[entry_points]]
name = "f"
kind = "function"
signature = "f(x)"

[[concepts]]
id = "loss-padding"
title = "Padding counts in neither the sum nor the count"
explanation = "Only real tokens are averaged. Padding is left out of both."
dashboard = "averaged over padding"
'''

CASES = '''from grader.cases import Setup, Verdict, case


@case("probe", title="probe", concept="{concept}", hidden=False, uses=("f",))
def probe(ctx):
    return Setup(inputs={{}})


@probe.check
def _(student, s, param):
    return Verdict.ok()
'''


def toy(tmp_path: Path, concept: str, spec: str = SPEC) -> Path:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "spec.toml").write_text(spec)
    (folder / "cases_public.py").write_text(CASES.format(concept=concept))
    return folder


def test_a_declared_concept_is_the_assignments_own(tmp_path):
    a = load_assignment(toy(tmp_path, "loss-padding"))
    assert a.concepts["loss-padding"].dashboard == "averaged over padding"
    assert {"signature", "load-error", "timeout", "crash"} <= set(a.concepts)  # the grader's own
    assert "softmax-axis" not in a.concepts  # no attention vocabulary leaks into a loss assignment


def test_an_unknown_concept_names_the_case_its_file_and_line_and_lists_the_valid_ids(tmp_path):
    with pytest.raises(AssignmentSpecError) as e:
        load_assignment(toy(tmp_path, "loss-pad"))
    msg = str(e.value)
    assert "cases_public.py:4: case 'probe': unknown concept 'loss-pad'" in msg
    assert "declares: crash, exception, load-error, loss-padding, not-run, signature, timeout" in msg


def test_a_concept_entry_without_an_explanation_is_refused(tmp_path):
    spec = SPEC.replace('explanation = "Only real tokens are averaged. Padding is left out of both."\n', "")
    with pytest.raises(AssignmentSpecError, match=r"spec.toml: missing required key 'explanation' in "
                                                  r"\[\[concepts\]\] entry 1 \(loss-padding\)$"):
        load_assignment(toy(tmp_path, "loss-padding", spec))


def test_bundled_assignments_declare_their_concepts():
    a = load_assignment("masked-attention")
    assert a.concepts["softmax-axis"].title == "The softmax runs over keys (the last dimension)"
    assert "kv-cache-growth" not in a.concepts  # not a masked-attention concept


def _rerender(tmp_path: Path, report_dict: dict) -> str:
    results = tmp_path / "results"
    results.mkdir()
    (results / "ada.json").write_text(json.dumps(report_dict))
    r = CliRunner().invoke(main, ["report", str(results), "-o", str(tmp_path / "out")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return "".join(p.read_text() for p in sorted((tmp_path / "out").rglob("*.html")))


def test_report_rerenders_with_the_concepts_the_results_carry(tmp_path):
    old = report_from_dict(json.loads((DATA / "ada_zero_fill.json").read_text()))
    assert old.concepts == []
    words = Concept("mask-fill-value", "Hidden cells hold minus infinity (course wording)",
                    "Course explanation one. Course explanation two.", "used a finite fill (course wording)")
    new = replace(old, concepts=[words])
    assert report_from_dict(json.loads(json.dumps(to_dict(new)))).concepts == [words]
    html = _rerender(tmp_path, to_dict(new))
    assert "Hidden cells hold minus infinity (course wording)" in html
    assert "Course explanation one." in html and "used a finite fill (course wording)" in html


def test_old_results_without_concepts_fall_back_to_the_built_in_vocabulary(tmp_path):
    html = _rerender(tmp_path, json.loads((DATA / "ada_zero_fill.json").read_text()))
    assert "Masked scores must be -inf (or finfo(dtype).min) before the softmax" in html
