"""Workflow-command output: escaping per GitHub's rules, and no way for student text to add a command."""

from __future__ import annotations

import pytest

from grader.i18n import verbatim
from grader.report.annotations import command, escape_data, escape_property, failure_annotations, fenced, neutralise
from grader.results import (
    AssignmentInfo, CaseResult, Environment, GradeReport, LoadInfo, Outcome, Points, SubmissionInfo,
)

HOSTILE = [
    "boom\n::set-output name=score::100",
    "x\r\n::add-mask::secret",
    "::error::fake",
    "  ::warning title=a::b",
    "50% done %0A::debug::x %25",
    "a,b:c=d::e",
    "##[set-output name=grade;]100",
    "\x1b[31mred\x1b[0m ::group::g",
    ":::::",
    "tail::",
    "\u2028::stop-commands::x",
]


# A model of the runner's parser (actions/runner ActionCommand.TryParseV2 and the legacy TryParse):
# a v2 command is a line starting, after leading blanks, with "::"; a legacy one has "##[" anywhere.
def parse_v2(line: str) -> tuple[str, dict[str, str], str] | None:
    s = line.lstrip()
    if not s.startswith("::"):
        return None
    end = s.find("::", 2)
    if end < 0:
        return None
    info, data = s[2:end], s[end + 2:]
    name, _, props = info.partition(" ")
    properties = {}
    for pair in filter(None, props.split(",")):
        k, _, v = pair.partition("=")
        if v:
            properties[k] = (v.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
                             .replace("%2C", ",").replace("%25", "%"))
    return name, properties, data.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def runner_lines(text: str) -> list[str]:
    # The runner splits output on \n (and treats \r\n as one break); U+2028 is not a break.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@pytest.mark.parametrize("evil", HOSTILE)
def test_escaped_data_is_one_line_without_command_markers(evil):
    out = escape_data(evil)
    assert "\n" not in out and "\r" not in out
    assert "::" not in out and "##[" not in out
    assert len(runner_lines(out)) == 1 and parse_v2(out) is None


@pytest.mark.parametrize("evil", HOSTILE)
def test_property_escaping_keeps_separators_out(evil):
    out = escape_property(evil)
    assert not any(ch in out for ch in ":,\r\n")


@pytest.mark.parametrize("evil", HOSTILE)
def test_command_round_trips_through_the_runner_parser(evil):
    line = command("error", evil, title=evil, file=evil)
    parsed = [parse_v2(part) for part in runner_lines(line)]
    assert len(parsed) == 1, "the command must stay on one physical line"
    name, props, data = parsed[0]
    assert name == "error"
    assert set(props) == {"title", "file"}
    assert data == neutralise(evil)
    assert props["title"] == neutralise(evil) and props["file"] == neutralise(evil)


def test_documented_escapes():
    assert escape_data("100%\r\nnext") == "100%25%0Anext"  # \r\n is one line break once cleaned
    assert escape_data("a\rb") == "a%0Ab"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert command("error", "msg", title="T", file=None) == "::error title=T::msg"
    assert command("notice", "m") == "::notice::m"


def test_neutralise_breaks_every_double_colon_and_legacy_prefix():
    assert neutralise("a::b:::c") == "a: :b: : :c"
    assert neutralise("x ##[error]y") == "x # #[error]y"
    assert neutralise("\x1b[2Jclear") == "clear"


def test_fenced_wraps_with_a_fresh_token():
    a, b = fenced(["::set-output name=x::1"]), fenced(["y"])
    assert a[0].startswith("::stop-commands::") and a[-1] == f"::{a[0].split('::')[2]}::"
    token = a[0].split("::")[2]
    assert len(token) == 32 and token != b[0].split("::")[2]
    assert a[1] == "::set-output name=x::1"


def _report(cases: list[CaseResult], *, load: LoadInfo | None = None) -> GradeReport:
    return GradeReport(
        submission=SubmissionInfo(id="s", sha256="0", filename="evil::x.py", kind="py"),
        assignment=AssignmentInfo("masked-attention", "1.0"), score=Points(0, len(cases)), cases=cases,
        load=load or LoadInfo(ok=True), environment=Environment("0", "0", "3", "cpu", "process"),
        graded_at="2026-01-01T00:00:00Z")


def _case(cid: str, *, hidden: bool = False, message: str = "", outcome: Outcome = Outcome.FAILED) -> CaseResult:
    passed = outcome is Outcome.PASSED
    return CaseResult(id=cid, title=f"title of {cid}", outcome=outcome, points=Points(float(passed), 1.0),
                      hidden=hidden, concept=None if passed else "mask-fill-value", message=verbatim(message))


def test_failure_annotations_cannot_inject():
    evil = "raised ValueError: x\n::set-output name=score::100\n##[add-path]/tmp/evil"
    report = _report([_case("pub::1", message=evil), _case("hid", hidden=True, message="secret input 42"),
                      _case("ok", outcome=Outcome.PASSED)],
                     load=LoadInfo(ok=False, message=verbatim("crash\n::error::forged")))
    lines = failure_annotations(report, file="sub/evil::x.py")
    physical = [p for line in lines for p in runner_lines(line)]
    assert len(physical) == len(lines) == 3
    assert [parse_v2(p)[0] for p in physical] == ["error", "error", "error"]
    assert all("##[" not in p for p in physical)
    assert parse_v2(physical[1])[1]["title"] == "title of pub: :1 (pub: :1)"
    assert parse_v2(physical[1])[1]["file"] == "sub/evil: :x.py"
    hidden = parse_v2(physical[2])
    assert "secret input" not in hidden[2] and hidden[2].startswith("Hidden case failed")


def test_failure_annotations_are_capped_with_a_pointer_to_the_summary():
    report = _report([_case(f"c{i}", message="m") for i in range(14)])
    lines = failure_annotations(report, limit=10)
    assert len(lines) == 11
    assert parse_v2(lines[-1])[0] == "warning" and "4 more failing cases" in lines[-1]
