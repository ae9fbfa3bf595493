"""What became of each case and of the whole submission: what the student's code did in a case
(an exception it raised, a timeout, a crash, a reply the grader cannot accept, a case not run), the
`CaseResult` built from that verdict, the score, and the `GradeReport` around them.

Pure: no sandbox, no files, no processes. The engine maps the sandbox's errors to these outcomes;
the cluster's crash reports build their results here too. What an exception says never decides the
outcome, only the concept it points to.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Protocol

import torch

from grader import __version__, untrusted
from grader.assignment import concepts as vocab
from grader.assignment.spec import Assignment
from grader.cases import CaseInstance, Setup, Verdict
from grader.checks.diagnose import concept_of_exception, not_implemented_message
from grader.errors import AssignmentSpecError
from grader.i18n import DEFAULT, Msg, message_of, tr
from grader.results import (AssignmentInfo, CaseResult, CellError, Environment, Evidence, GradeReport, LoadInfo,
                            Outcome, Points, SubmissionInfo)
from grader.submission.load import LoadedSubmission, unit_title


# --- what the student's code did in one case ----------------------------------------------------

@dataclass(frozen=True)
class CaseOutcome:
    """How one case ended, before it becomes a `CaseResult`."""

    outcome: Outcome
    verdict: Verdict


class Raised(Protocol):
    """An exception the student's code raised, as the worker reported it (``StudentError``)."""

    exc_type: str
    message: str
    traceback: str


_PLAIN_PYTHON_ERRORS = frozenset({"KeyError", "IndexError", "NameError", "AttributeError", "UnboundLocalError",
                                   "ZeroDivisionError", "AssertionError", "RecursionError", "ImportError",
                                   "ModuleNotFoundError"})
"""Exceptions about Python's own values, never about what a tensor holds: on the meta device they
show a bug of their own (a missing key, a bad index), not that the code read a meta tensor's values."""


def _raised_text(e: Raised) -> Msg:
    """What the student's code raised, said as itself: the exception and its text, no cause."""
    if e.message.strip():
        return tr("Your code raised {exc}: {detail}.", exc=e.exc_type, detail=short(e.message))
    return tr("Your code raised {exc}.", exc=e.exc_type)


def raised(a: Assignment, inst: CaseInstance, e: Raised, sub: LoadedSubmission,
           reference_runs: Callable[[], bool]) -> CaseOutcome:
    """The student's code raised `e` in case `inst`. A placeholder still raising NotImplementedError
    is named as such; a device case the trusted reference cannot get through either
    (`reference_runs`, asked only then) is inconclusive for everyone; otherwise raising is an
    error, with the concept the exception points to where the assignment declares it."""
    placeholder = not_implemented_message(e.exc_type, e.message, e.traceback, sub.units)
    if placeholder:
        return CaseOutcome(Outcome.ERROR, Verdict.not_implemented(placeholder))
    device_case = inst.case.concept == "device-placement"
    if device_case and not reference_runs():
        return CaseOutcome(Outcome.PASSED, Verdict.ok(tr(
            "Inconclusive on this device: the reference cannot make these calls here either; "
            "not counted against you.")))
    # An exception names a cause only when its text shows one (the case's `on_error`, PyTorch's
    # well-known errors, where declared); otherwise it is said as what it is. On the meta device
    # raising is itself the evidence (the reference gets through the same calls), unless what was
    # raised is a plain Python error, which shows a bug of its own.
    fallback = inst.case.concept if device_case and e.exc_type not in _PLAIN_PYTHON_ERRORS else "exception"
    concept = concept_of_exception(e.exc_type, e.message, fallback, inst.case.on_error)
    if concept not in a.concepts:
        concept = fallback
    if concept == "exception":
        said = _raised_text(e)
        return CaseOutcome(Outcome.ERROR, Verdict.fail(concept, said, Evidence(traceback=e.traceback)))
    rule = tr(a.concepts[concept].title)  # a catalog msgid: spec.toml's titles are extracted
    if device_case and concept == inst.case.concept \
            and concept_of_exception(e.exc_type, e.message, "", inst.case.on_error) != concept:
        # Nothing in the error points to a tensor on the wrong device (a meta tensor's values were
        # read, say): the device rule would be a cause the evidence does not show.
        said = _raised_text(e)
    elif e.message.strip():
        said = tr("Your code raised {exc}: {detail}. {rule}.", exc=e.exc_type, detail=short(e.message), rule=rule)
    else:
        said = tr("Your code raised {exc}. {rule}.", exc=e.exc_type, rule=rule)
    if device_case:
        said += tr(" The reference makes the same calls on these inputs without an error (meta tensors have "
                   "no values: steps such as .item(), .tolist() or `if mask.any():` cannot run on them).")
    return CaseOutcome(Outcome.ERROR, Verdict.fail(concept, said, Evidence(traceback=e.traceback)))


def timed_out(limit: Msg | str) -> CaseOutcome:
    """The worker ran past its time limit (`limit`: which one, as ``WorkerTimeout.text`` says it)."""
    return CaseOutcome(Outcome.TIMEOUT, Verdict.fail("timeout", tr(
        "Your code ran past the time limit ({detail}). Look for an endless loop or a very slow step.",
        detail=limit)))


def crashed(how: Msg | str) -> CaseOutcome:
    """The worker died (`how`: ``WorkerCrashed.text``)."""
    return CaseOutcome(Outcome.ERROR, Verdict.fail("crash", tr("The process running your code died: {detail}.",
                                                               detail=how)))


def refused_reply(detail: str) -> CaseOutcome:
    """The worker answered with something the grader refuses (a ``WireError``; the worker is killed)."""
    return CaseOutcome(Outcome.ERROR, Verdict.fail(
        "signature", tr("Your code returned something the grader cannot accept: {detail}.", detail=detail)))


def uses_of(inst: CaseInstance) -> tuple[str, ...]:
    """The entry points a case's crashes and time-outs count against ("" for a case naming none)."""
    return inst.case.uses or ("",)


def given_up(failures: dict[str, int], cap: int) -> dict[str, int]:
    """The entry points whose cases crashed or timed out more than `cap` times: their remaining
    cases are not run (each would cost a fresh worker and likely the same failure)."""
    return {name: n for name, n in failures.items() if n > cap}


def not_run_after_failures(entry_point: str, times: int) -> Verdict:
    if not entry_point:
        return Verdict.fail("not-run", tr("Not run: your code crashed or timed out {n} times in earlier cases.",
                                          n=times))
    return Verdict.fail("not-run", tr("Not run: cases calling {name} crashed or timed out {n} times; the cases of "
                                      "the other functions and classes still ran.", name=entry_point, n=times))


def not_run_past_deadline(seconds: float) -> Verdict:
    return Verdict.fail("not-run", tr("Not run: the whole submission ran past its time limit ({seconds} s).",
                                      seconds=int(seconds) if float(seconds).is_integer() else seconds))


def unreadable_value(e: Exception) -> CaseOutcome:
    """The case's check raised `e` on what the student's code returned, where the trusted
    reference's own results get through the same check: the student's case fails (a value of the
    right shape on the meta device, say, or a tensor whose values cannot be compared)."""
    return CaseOutcome(Outcome.ERROR, Verdict.fail("signature", tr(
        "What your code returned could not be checked ({exc}: {detail}). Return plain tensors of the "
        "expected shape and dtype, on the inputs' device.", exc=type(e).__name__, detail=short(str(e), 200))))


# --- results and the report ---------------------------------------------------------------


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


def environment_of(setups: Iterable[Setup], device: torch.device, isolation: str,
                   limits: Msg | str = "") -> Environment:
    """What a report records about the grading environment; `dtypes` are the floating dtypes of
    the setups' inputs; `limits`: the sandbox's ``limits_note``."""
    dtypes = sorted({str(t.dtype) for s in setups for t in s.inputs.values()
                     if isinstance(t, torch.Tensor) and t.is_floating_point()})
    return Environment(grader_version=__version__, torch_version=torch.__version__,
                       python_version=platform.python_version(), device=str(device),
                       isolation=isolation, dtypes=dtypes, limits=message_of(limits))


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


def total(results: list[CaseResult]) -> Points:
    """The submission's points: counts are stored, percentages derived."""
    earned = sum(r.points.earned for r in results)
    possible = sum(r.points.possible for r in results)
    # Parametrised cases split points into fractions; round away float noise so that a
    # submission passing everything shows exactly earned == possible.
    return Points(round(earned, 6), round(possible, 6))
