"""What the student's code did, as a case's outcome: an exception it raised, a timeout, a crash,
a reply the grader cannot accept, or entry points it lacks or defines as the wrong kind. What an
exception says never decides the outcome, only the concept it points to."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from grader.assignment.spec import Assignment
from grader.cases import CaseInstance, Verdict
from grader.checks.diagnose import (concept_of_exception, find_rebinding, not_implemented_message,
                                    wrong_kind_message)
from grader.grading.case_results import short
from grader.grading.protocols import GradingWorker
from grader.i18n import Msg, tr, verbatim
from grader.results import Evidence, Outcome
from grader.sandbox import SandboxError, StudentError, WireError, WorkerCrashed, WorkerTimeout
from grader.submission.load import LoadedSubmission


@dataclass(frozen=True)
class CaseOutcome:
    """How one case ended, before it becomes a `CaseResult`."""

    outcome: Outcome
    verdict: Verdict


def raised(a: Assignment, inst: CaseInstance, e: StudentError, sub: LoadedSubmission,
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
    # raising is itself the evidence: the reference gets through the same calls.
    fallback = inst.case.concept if device_case else "exception"
    concept = concept_of_exception(e.exc_type, e.message, fallback, inst.case.on_error)
    if concept not in a.concepts:
        concept = fallback
    if concept == "exception":
        said = (tr("Your code raised {exc}: {detail}.", exc=e.exc_type, detail=short(e.message)) if e.message.strip()
                else tr("Your code raised {exc}.", exc=e.exc_type))
        return CaseOutcome(Outcome.ERROR, Verdict.fail(concept, said, Evidence(traceback=e.traceback)))
    rule = tr(a.concepts[concept].title)  # a catalog msgid: spec.toml's titles are extracted
    if device_case and concept == inst.case.concept \
            and concept_of_exception(e.exc_type, e.message, "", inst.case.on_error) != concept:
        # Nothing in the error points to a tensor on the wrong device (a meta tensor's values were
        # read, say): the device rule would be a cause the evidence does not show.
        said = tr("Your code raised {exc}: {detail}.", exc=e.exc_type, detail=short(e.message)) \
            if e.message.strip() else tr("Your code raised {exc}.", exc=e.exc_type)
    elif e.message.strip():
        said = tr("Your code raised {exc}: {detail}. {rule}.", exc=e.exc_type, detail=short(e.message), rule=rule)
    else:
        said = tr("Your code raised {exc}. {rule}.", exc=e.exc_type, rule=rule)
    if device_case:
        said += tr(" The reference makes the same calls on these inputs without an error (meta tensors have "
                   "no values: steps such as .item(), .tolist() or `if mask.any():` cannot run on them).")
    return CaseOutcome(Outcome.ERROR, Verdict.fail(concept, said, Evidence(traceback=e.traceback)))


def worker_failed(e: WorkerTimeout | WorkerCrashed | WireError) -> CaseOutcome:
    """The worker ran past its time limit, died, or answered with something the grader refuses."""
    if isinstance(e, WorkerTimeout):
        return CaseOutcome(Outcome.TIMEOUT, Verdict.fail("timeout", tr(
            "Your code ran past the time limit ({detail}). Look for an endless loop or a very slow step.",
            detail=e.text)))
    if isinstance(e, WorkerCrashed):
        return CaseOutcome(Outcome.ERROR, Verdict.fail("crash", tr("The process running your code died: {detail}.",
                                                                   detail=e.text)))
    return CaseOutcome(Outcome.ERROR, Verdict.fail(
        "signature", tr("Your code returned something the grader cannot accept: {detail}.", detail=str(e))))


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


def died(done: CaseOutcome, worker: GradingWorker) -> bool:
    """The case ended with its worker gone (timed out, crashed, or killed for an invalid reply):
    the next case needs a fresh one."""
    return done.outcome is Outcome.TIMEOUT or done.verdict.concept == "crash" or not worker.alive


def missing_entry_points(a: Assignment, worker: GradingWorker, sub: LoadedSubmission) -> dict[str, Msg]:
    """Entry point -> message, for entry points the submission lacks or defines as the wrong kind."""
    eps = a.entry_points
    try:
        infos = worker.describe_all([ep.name for ep in eps]) if eps else {}
    except SandboxError as e:
        return {ep.name: tr("Could not inspect '{name}': {detail}", name=ep.name, detail=str(e)) for ep in eps}
    out: dict[str, Msg] = {}
    for ep in eps:
        info = infos[ep.name]
        if info.kind == ep.kind:
            continue
        found = verbatim(", ".join(info.available)) if info.available else tr("nothing callable")
        if info.kind == "missing":
            out[ep.name] = tr("Your submission defines no '{name}'; found: {found}. Define {signature}.",
                              name=ep.name, found=found, signature=ep.signature)
        else:
            out[ep.name] = wrong_kind_message(ep.name, ep.kind, ep.signature, info.kind,
                                              info.type_name, find_rebinding(sub.units, ep.name))
    return out
