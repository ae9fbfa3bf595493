"""Sample declarations: "at least these concepts", "exactly these", and failures down to one parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.results import (AssignmentInfo, CaseResult, Environment, GradeReport, LoadInfo, Outcome, Points,
                            SubmissionInfo)
from grader.authoring.validate import SampleExpectation, compare_to_expectation, read_expectations


def report(*cases: tuple[str, str, str | None]) -> GradeReport:
    """cases: (id, outcome, concept)."""
    rs = [CaseResult(id=i, title=i, outcome=Outcome(o), points=Points(float(o == "passed"), 1.0), hidden=False,
                     concept=c, message="" if o == "passed" else "m") for i, o, c in cases]
    return GradeReport(SubmissionInfo("s", "0", "s.py", "py"), AssignmentInfo("a", "1"), Points(0, len(rs)), rs,
                       LoadInfo(ok=True), Environment("0", "0", "3", "cpu", "process"), "2026-01-01T00:00:00Z")


def expect(fails, concepts, exact=False) -> SampleExpectation:
    return SampleExpectation(Path("s.py"), "a", frozenset(fails), frozenset(concepts), exact)


R = report(("a", "passed", None), ("b[x]", "failed", "causal-leak"), ("b[y]", "passed", None),
           ("c", "failed", "padding-broadcast"))


def test_at_least_the_declared_concepts():
    assert compare_to_expectation(R, expect(["b", "c"], ["causal-leak"])) == ""


def test_exact_refuses_a_concept_that_was_not_declared():
    problem = compare_to_expectation(R, expect(["b", "c"], ["causal-leak"], exact=True))
    assert problem == "concepts flagged but not declared (exact = true): padding-broadcast"
    assert compare_to_expectation(R, expect(["b", "c"], ["causal-leak", "padding-broadcast"], exact=True)) == ""


def test_a_parameter_in_fails_says_exactly_which_instances_fail():
    assert compare_to_expectation(R, expect(["b[x]", "c"], ["causal-leak"])) == ""
    problem = compare_to_expectation(R, expect(["b[x]", "b[y]", "c"], ["causal-leak"]))
    assert problem == "b: failed b[x]; declared b[x], b[y]"


def test_a_failure_without_a_concept_is_allowed_only_for_code_not_written_yet():
    stub = report(("a", "error", None))
    assert stub.cases[0].not_implemented
    assert compare_to_expectation(stub, expect(["a"], [], exact=True)) == ""
    wrong = report(("a", "failed", None))
    assert compare_to_expectation(wrong, expect(["a"], [])) == "failed without a concept: a"


def test_unknown_keys_in_expected_toml_are_refused(tmp_path):
    (tmp_path / "expected.toml").write_text('["x.py"]\nassignment = "a"\nconcept = ["typo"]\n')
    with pytest.raises(ValueError, match=r"unknown keys \['concept'\]"):
        read_expectations(tmp_path)


@pytest.mark.parametrize("entry", ['["/etc/passwd"]', '["../outside.py"]', '["a/../../outside.py"]', '["linked/x.py"]'])
def test_a_sample_path_outside_the_folder_is_refused(tmp_path, entry):
    from grader.errors import GraderError

    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "linked").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "subs" / "expected.toml").write_text(f'{entry}\nassignment = "a"\n')
    with pytest.raises(GraderError, match=r"a sample's path must be relative and inside"):
        read_expectations(tmp_path / "subs")


@pytest.mark.parametrize("text, says", [("[x.py\n", "expected.toml: "), ('"x.py" = 3\n', "expected a table"),
                                        ('["x.py"]\nassignment = 3\n', "assignment must be text"),
                                        ('["x.py"]\nassignment = "a"\nfails = "c1"\n', "fails and concepts lists")])
def test_a_malformed_expected_toml_is_a_clear_error(tmp_path, text, says):
    from grader.errors import GraderError

    (tmp_path / "expected.toml").write_text(text)
    with pytest.raises(GraderError, match=says):
        read_expectations(tmp_path)
