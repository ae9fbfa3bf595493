import dataclasses
import json

from grader.results import (
    AssignmentInfo, CaseResult, CellError, Environment, Evidence, GradeReport, Heatmap, LoadInfo,
    Outcome, Points, SubmissionInfo, report_from_dict, to_dict,
)


def _report() -> GradeReport:
    case = CaseResult(
        id="causal_square", title="Causal mask", outcome=Outcome.FAILED, points=Points(0, 2),
        hidden=False, concept="mask-fill-value", message="Masked scores must be -inf.",
        evidence=Evidence(max_abs_error=float("nan"), allowed_error=1e-5, first_bad_index=[0, 0, 1, 2],
                          heatmaps=[Heatmap("batch 0, head 0", [[1.0, 0.0]], [[0.5, 0.5]], [[True, False]])]),
    )
    return GradeReport(
        submission=SubmissionInfo("alice", "ab" * 32, "alice.py", "py"),
        assignment=AssignmentInfo("masked-attention", "1.0"),
        score=Points(0, 2), cases=[case],
        load=LoadInfo(ok=True, cell_errors=[CellError(3, "ValueError: x", "tb")]),
        environment=Environment("0.1.0", "2.13.0", "3.11", "cpu", "process"),
        graded_at="2026-11-29T10:00:00Z",
    )


def test_round_trip_through_json_keeps_every_field_including_nan():
    report = _report()
    text = json.dumps(to_dict(report), allow_nan=False)
    back = report_from_dict(json.loads(text))
    assert back.cases[0].evidence.max_abs_error != back.cases[0].evidence.max_abs_error  # NaN survives
    assert to_dict(back) == to_dict(report)
    assert back.cases[0].outcome is Outcome.FAILED


def test_percent_never_shows_100_unless_earned():
    assert Points(999, 1000).display_percent() == "99%"
    assert Points(1000, 1000).display_percent() == "100%"
    assert Points(1, 1000).display_percent() == "1%"
    assert Points(0, 10).display_percent() == "0%"


def test_unknown_schema_version_is_refused():
    d = to_dict(_report())
    d["schema_version"] = 99
    try:
        report_from_dict(d)
    except ValueError as e:
        assert "99" in str(e)
    else:
        raise AssertionError("schema 99 accepted")


def test_evidence_keeps_only_what_a_case_filled_and_reads_back_the_same():
    passed = CaseResult(id="basic", title="Basic", outcome=Outcome.PASSED, points=Points(1, 1), hidden=False,
                        concept=None, message="")
    report = dataclasses.replace(_report(), cases=[passed, _report().cases[0],
                                                   dataclasses.replace(passed, evidence=Evidence(row_sums=[], notes=[]))])
    d = json.loads(json.dumps(to_dict(report), allow_nan=False))
    assert d["cases"][0]["evidence"] == {}  # a passed case fills nothing
    assert set(d["cases"][1]["evidence"]) == {"max_abs_error", "allowed_error", "first_bad_index", "heatmaps"}
    assert d["cases"][2]["evidence"] == {"row_sums": []}  # an empty list where the default is None is kept
    assert report_from_dict(d).cases[2].evidence.row_sums == []
    assert report_from_dict(d).cases[0].evidence == Evidence()
    assert to_dict(report_from_dict(d)) == to_dict(report)


def test_a_result_written_with_every_evidence_key_reads_the_same():
    """Results written before the evidence left its unfilled keys out hold every key, as null or []."""
    full = to_dict(_report())
    full["cases"][0]["evidence"] = {**{f.name: None for f in dataclasses.fields(Evidence)},
                                    "heatmaps": [], "notes": [], "notes_i18n": [], **full["cases"][0]["evidence"]}
    assert to_dict(report_from_dict(full)) == to_dict(_report())  # (NaN evidence: compared as JSON)
