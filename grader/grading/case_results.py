"""Results out of verdicts: one case's `CaseResult`, every case failed for one reason, and the
`GradeReport` around them. Pure: no sandbox, no files; the engine and the cluster's crash reports
build their results here.
"""

from __future__ import annotations

import dataclasses
import platform
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Iterable

import torch

from grader import __version__, untrusted
from grader.assignment import concepts as vocab
from grader.assignment.spec import Assignment
from grader.cases import CaseInstance, Setup, Verdict
from grader.errors import AssignmentSpecError
from grader.grading.scoring import total
from grader.i18n import DEFAULT, Msg, message_of, tr
from grader.results import (AssignmentInfo, CaseResult, CellError, Environment, GradeReport, LoadInfo, Outcome,
                            Points, SubmissionInfo)
from grader.submission.load import LoadedSubmission, unit_title


def case_result(a: Assignment, inst: CaseInstance, outcome: Outcome, v: Verdict,
                duration: float = 0.0) -> CaseResult:
    """One case's result. A failing verdict naming a concept the assignment does not declare (a
    shared check's "device-placement" for a meta tensor, in an assignment without it) fails with
    the case's own concept: what the student's value made a check say never stops their grading.
    AssignmentSpecError only where the case's own concept is undeclared too."""
    passed = outcome is Outcome.PASSED
    if not passed and v.concept is not None and v.concept not in a.concepts:
        if inst.case.concept not in a.concepts:
            raise AssignmentSpecError(vocab.unknown(v.concept, a.concepts,
                                                    f"{inst.case.where()}: case {inst.id!r} failed with"))
        v = dataclasses.replace(v, concept=inst.case.concept)
    concept = None if passed or v.placeholder else (v.concept or inst.case.concept)
    message = v.message
    if concept is not None and not str(message).strip():  # a check that named only a concept: its rule
        message = tr("{rule}.", rule=tr(a.concepts[concept].title))
    return CaseResult(
        id=inst.id, title=inst.case.title, outcome=outcome,
        points=Points(inst.points if passed else 0.0, inst.points), hidden=inst.case.hidden,
        concept=concept, message=message,
        evidence=v.evidence, duration_s=round(duration, 4))


def all_failed(a: Assignment, instances: Iterable[CaseInstance], concept: str,
               message: Msg | str) -> list[CaseResult]:
    """Every case failed for one reason (TIMEOUT for "timeout", ERROR otherwise): none of them ran.
    The first case says the reason; the others say only that they did not run, so a syntax error
    is read once, not once per case."""
    outcome = Outcome.TIMEOUT if concept == "timeout" else Outcome.ERROR
    rest = (tr("Not run: loading the file ran past its time limit.") if concept == "timeout"
            else tr("Not run: the file does not load."))
    return [case_result(a, i, outcome, Verdict.fail(concept, message if n == 0 else rest))
            for n, i in enumerate(instances)]


def environment_of(setups: Iterable[Setup], device: torch.device, isolation: str, limits: str = "") -> Environment:
    """What a report records about the grading environment; `dtypes` are the floating dtypes of
    the setups' inputs; `limits`: the sandbox's ``limits_note``."""
    dtypes = sorted({str(t.dtype) for s in setups for t in s.inputs.values()
                     if isinstance(t, torch.Tensor) and t.is_floating_point()})
    return Environment(grader_version=__version__, torch_version=torch.__version__,
                       python_version=platform.python_version(), device=str(device),
                       isolation=isolation, dtypes=dtypes, limits=limits)


def grade_report(a: Assignment, info: SubmissionInfo, results: list[CaseResult], load: LoadInfo,
                 environment: Environment, *, public_only: bool, lang: str = DEFAULT) -> GradeReport:
    """The report of one graded submission, stamped now (UTC, whole seconds); `lang`: the language
    the student's feedback was chosen in."""
    return GradeReport(
        submission=info, assignment=AssignmentInfo(a.id, a.version, a.title), score=total(results),
        cases=results, load=load, environment=environment,
        graded_at=datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        public_only=public_only, concepts=list(a.concepts.values()), lang=lang)


def unrun_report(a: Assignment, instances: Iterable[CaseInstance], info: SubmissionInfo, concept: str,
                 message: Msg | str, environment: Environment, *, public_only: bool = False,
                 lang: str = DEFAULT) -> GradeReport:
    """A submission none of whose cases could run still gets a report: score 0 and the reason."""
    return grade_report(a, info, all_failed(a, instances, concept, message), LoadInfo(ok=False, message=message_of(message)),
                        environment, public_only=public_only, lang=lang)


def submission_info(sub: LoadedSubmission, student_id: str | None = None) -> SubmissionInfo:
    """What a report records about the submission; the file name shown escaped (`untrusted.name`)."""
    return SubmissionInfo(id=student_id or sub.id, sha256=sub.sha256, filename=untrusted.name(Path(sub.path).name),
                          kind=sub.kind)


def labelled(e: CellError, sub: LoadedSubmission) -> CellError:
    """The cell error with the label the student finds the cell by ("code cell 5 (import torch)")."""
    unit = next((u for u in sub.units if u.cell is not None and u.cell == e.cell), None)
    return e if unit is None else dataclasses.replace(e, label=unit_title(unit))


def short(text: str, limit: int = 300) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
