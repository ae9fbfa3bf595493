"""Grade one loaded submission: run every case against a sandboxed worker, never against student
code in this process.

For each case: run it; on a crash, restart. A worker that times out or dies costs the case it was
running, and a fresh worker runs the rest. An entry point whose cases crash or time out more than
``Limits.max_restarts`` times has its remaining cases not run (the other entry points' cases still
run); past ``Limits.submission_timeout_s`` no further case starts. Setups (inputs and reference
results) do not depend on the submission, so one ``Engine`` computes each once and reuses it for
every submission of a batch (`grader.grading.setups`); what each case became is built in
`grader.grading.outcomes`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch

from grader.assignment.signatures import call_defaults
from grader.assignment.spec import Assignment
from grader.assignment.spec_file import unknown_key
from grader.cases import CaseInstance, CheckFn, Setup, Verdict
from grader.checks.diagnose import find_rebinding, wrong_kind_message
from grader.errors import AssignmentSpecError, GraderError
from grader.grading.outcomes import (CaseOutcome, all_failed, case_result, crashed, environment_of, given_up,
                                     grade_report, labelled, not_run_after_failures, not_run_past_deadline, raised,
                                     refused_reply, submission_info, timed_out, unreadable_value, unrun_report,
                                     uses_of)
from grader.grading.output_digest import DigestingCalls, output_digest
from grader.grading.protocols import GradingSandbox, GradingWorker
from grader.grading.proxy import Student
from grader.grading.reference_run import NotInReference, ReferenceWorker
from grader.grading.setups import author_error, compute_setup, on_device, reply_cap
from grader.i18n import Msg, choose, tr, verbatim
from grader.results import CaseResult, Environment, GradeReport, LoadInfo, Outcome, SubmissionInfo
from grader.sandbox import Limits, SandboxError, StudentError, WireError, WorkerCrashed, WorkerTimeout
from grader.submission.intake import Intake
from grader.submission.load import LoadedSubmission


def limits_for(assignment: Assignment) -> Limits:
    """The sandbox limits an assignment's spec.toml asks for ([limits] table), over the defaults."""
    fields = {f.name: f for f in dataclasses.fields(Limits)}
    values: dict[str, Any] = {}  # numbers (spec_file checks that); a whole number where Limits says int
    for key, value in assignment.limits.items():
        if key not in fields:
            raise unknown_key(assignment.dir / "spec.toml", key, "[limits]", list(fields))
        if fields[key].type in (int, "int") and not isinstance(value, int):
            raise AssignmentSpecError(f"{assignment.dir / 'spec.toml'}: {key} in [limits] must be a whole number, "
                                      f"got {value!r}")
        values[key] = value
    return Limits(**values)


class Engine:
    """Grades submissions of one assignment on one sandbox; engines of a batch share their setups
    (`share_setups_from`)."""

    def __init__(self, assignment: Assignment, sandbox: GradingSandbox, *, public_only: bool = False,
                 device: torch.device | str = "cpu", lang: str | None = None,
                 only: Collection[str] | None = None, setups: dict[str, Setup] | None = None):
        """Built by `grader.grading.factory`. ``lang``: the language recorded for the students'
        feedback (``--lang``); default: the assignment's ``lang``, else the locale
        (`grader.i18n.choose`). ``only``: run just these case instance ids. ``setups``: reference
        results computed already (``factory.reference_setups``)."""
        self.assignment = assignment
        self.lang = choose(lang, assignment.lang)
        self.sandbox = sandbox
        self.public_only = public_only
        self.device = torch.device(device)
        self.instances = [i for i in assignment.instances(public_only=public_only) if only is None or i.id in only]
        self.defaults = call_defaults(assignment.entry_points)
        """The entry points' documented defaults: a case's call leaves out arguments equal to them."""
        self.setups: dict[str, Setup] = dict(setups or {})
        """Case instance id -> its setup, computed once (`setup`), shared by engines of one batch."""
        self._environment: Environment | None = None
        self._reply_caps: dict[str, int] = {}
        """Case instance id -> the largest reply its calls may return (`reply_cap` of its setup)."""
        self.intake = Intake()
        """Reads the submissions `grade_path` is given, behind the boundary (its process starts on first use)."""
        self._reference_runs: dict[str, bool] = {}
        """Case instance id -> whether the trusted reference gets through the case's calls (see
        `reference_runs`); filled when first needed."""
        self.on_step: Callable[[str | Msg | None, float, str], None] | None = None
        """Told what runs now, its time limit in seconds and the feedback's language: loading the
        code, then each case by its title, then None (``grader check``'s progress line)."""
        self._stored = assignment.stored is not None
        if assignment.stored is not None:  # a student kit: the reference ran at release time, its results are here
            from grader.grading import stored

            self.setups, self._reference_runs = stored.read(assignment.stored)
            missing = [i.id for i in self.instances if i.id not in self.setups]
            if missing:
                raise AssignmentSpecError(f"{assignment.stored}: no stored setup for {', '.join(missing[:5])}; "
                                          "the kit is older than its cases: release it again")
            self.setups = {k: on_device(v, self.device) for k, v in self.setups.items()}

    # --- reference side (once per batch) ---------------------------------------------------

    def setup(self, inst: CaseInstance) -> Setup:
        s = self.setups.get(inst.id)
        if s is None:
            s = self.setups[inst.id] = compute_setup(self.assignment, inst, self.device)
        return s

    def share_setups_from(self, other: Engine) -> None:
        """Reuse another engine's computed setups (same assignment): one reference computation per batch."""
        if other.assignment is not self.assignment:
            raise ValueError("engines grade different assignments")
        self.setups = other.setups
        self._reference_runs = other._reference_runs

    def prepare(self) -> None:
        """Compute every case's inputs and reference results now (before forking workers)."""
        for inst in self.instances:
            self.setup(inst)

    def environment(self) -> Environment:
        """What every report records about the grading environment; fixed once every setup exists."""
        if self._environment is not None:
            return self._environment
        env = environment_of(self.setups.values(), self.device, self.sandbox.isolation, self.sandbox.limits_note)
        if all(i.id in self.setups for i in self.instances):
            self._environment = env
        return env

    # --- one submission ---------------------------------------------------------------------

    def grade_path(self, path: Path, *, student_id: str | None = None) -> GradeReport:
        sub = self.intake.load(path, main_module=self.assignment.main_module, cell_tag=self.assignment.cell_tag)
        return self.grade(sub, student_id=student_id)

    def start_worker(self, sub: LoadedSubmission):
        """A worker for `sub`, forked and loading now (``Sandbox.start``), to pass to ``grade`` later:
        it boots while another submission is graded. None when none is needed or none can start."""
        if sub.error:
            return None
        try:
            return self.sandbox.start(sub)
        except SandboxError:
            return None  # grade() starts one the usual way, and reports what goes wrong

    def grade(self, sub: LoadedSubmission, *, student_id: str | None = None,
              worker: GradingWorker | None = None, wait_for_exit: bool = False) -> GradeReport:
        """`worker`: from ``start_worker(sub)``; otherwise one is started here. `wait_for_exit`:
        return only once the last worker is gone and cleaned up (``close``), not handed to the
        sandbox's reaper thread (``retire``): before a batch forks its slot processes."""
        info = submission_info(sub, student_id)
        if sub.error:
            if worker is not None:
                _end(worker, wait_for_exit)
            return self.report_without_results(info, "load-error", sub.error)
        self._step(tr("loading your code"), self.sandbox.limits.import_timeout_s)
        worker = self.sandbox.open(sub) if worker is None else self.sandbox.open(sub, started=worker)
        output = OutputSplit()
        try:
            if not worker.load.ok:
                # Decided by what ended loading (the sandbox's own exception), never by its wording.
                concept = "timeout" if isinstance(worker.load.failure, WorkerTimeout) else "load-error"
                results = all_failed(self.assignment, self.instances, concept, worker.load.message)
            else:
                results, worker = self._run_cases(sub, worker, output=output)
            (stdout, stderr), (hidden_out, hidden_err) = output.split(worker)
            load = LoadInfo(ok=worker.load.ok, message=worker.load.message,
                            cell_errors=[labelled(e, sub) for e in worker.load.cell_errors],
                            stdout=stdout, stderr=stderr, hidden_stdout=hidden_out, hidden_stderr=hidden_err)
        finally:
            self._step(None, 0.0)
            _end(worker, wait_for_exit)
        return self._report(info, results, load)

    def _step(self, what: str | Msg | None, limit_s: float) -> None:
        if self.on_step is not None:
            self.on_step(what, limit_s, self.lang)

    def _run_cases(self, sub: LoadedSubmission, worker: GradingWorker,
                   output: OutputSplit) -> tuple[list[CaseResult], GradingWorker]:
        """For each case: run it; on a crash, restart. Returns the results and the worker alive at
        the end (for its output); `output` is marked before the first hidden case runs."""
        missing = missing_entry_points(self.assignment, worker, sub)
        failures: dict[str, int] = {}  # entry point -> cases using it that crashed or timed out
        deadline = time.monotonic() + self.sandbox.limits.submission_timeout_s
        results: list[CaseResult] = []
        for inst in self.instances:
            not_run = self._not_run(inst, missing, failures, deadline)
            if not_run is not None:
                results.append(not_run)
                continue
            if inst.case.hidden:
                output.mark(worker)
            self._step(inst.case.title, self.sandbox.limits.call_timeout_s)
            t0 = time.perf_counter()
            done = self.run_case(inst, worker, sub)
            results.append(case_result(self.assignment, inst, done.outcome, done.verdict, time.perf_counter() - t0))
            if died(done, worker):
                worker.retire()
                for name in uses_of(inst):
                    failures[name] = failures.get(name, 0) + 1
                worker = self.sandbox.open(sub)
        return results, worker

    def _not_run(self, inst: CaseInstance, missing: dict[str, Msg], failures: dict[str, int],
                 deadline: float) -> CaseResult | None:
        """The result of a case that does not run: an entry point it uses is missing, or its cases
        crashed or timed out more than ``max_restarts`` times, or the submission's time is up.
        None: it runs."""
        absent = [name for name in inst.case.uses if name in missing]
        if absent:
            return case_result(self.assignment, inst, Outcome.ERROR, Verdict.fail("signature", missing[absent[0]]))
        over = given_up(failures, self.sandbox.limits.max_restarts)
        given = [name for name in uses_of(inst) if name in over]
        if given:
            return case_result(self.assignment, inst, Outcome.ERROR, not_run_after_failures(given[0], failures[given[0]]))
        if time.monotonic() > deadline:
            return case_result(self.assignment, inst, Outcome.TIMEOUT,
                               not_run_past_deadline(self.sandbox.limits.submission_timeout_s))
        return None

    def run_case(self, inst: CaseInstance, worker: GradingWorker, sub: LoadedSubmission) -> CaseOutcome:
        """Run one case's check against `worker`: its outcome and verdict. The student's exceptions,
        timeouts and crashes are verdicts; the case's own exceptions are the author's
        (AssignmentSpecError)."""
        cap = self._reply_caps.get(inst.id)
        if cap is None:
            cap = self._reply_caps[inst.id] = reply_cap(self.setup(inst))
        worker.reply_cap = cap
        calls = DigestingCalls(worker)
        try:
            v = check_of(inst)(Student(calls, self.defaults), self.setup(inst), inst.param)
            if not v.passed:  # the similarity report compares wrong outputs by this digest
                v = dataclasses.replace(v, evidence=dataclasses.replace(
                    v.evidence, output_digest=output_digest(calls.returned)))
            return CaseOutcome(Outcome.PASSED if v.passed else Outcome.FAILED, v)
        except StudentError as e:
            return raised(self.assignment, inst, e, sub, lambda: self.reference_runs(inst))
        except WorkerTimeout as e:
            return timed_out(e.text)
        except WorkerCrashed as e:
            return crashed(e.text)
        except WireError as e:
            return refused_reply(str(e))
        except (SandboxError, GraderError):
            raise
        except Exception as e:  # the check raised: on the student's values, or on any (the author's mistake)
            if self.reference_runs(inst):
                return unreadable_value(e)
            raise author_error(self.assignment, inst, e, "check") from e

    def reference_runs(self, inst: CaseInstance) -> bool:
        """Whether the trusted reference gets through `inst`'s calls on its inputs: the case's check
        run in this process against ``reference`` (`grader.grading.reference_run`), once per case. True also
        when the reference does not provide the case's entry points (nothing to compare with: the
        student's exception counts)."""
        known = self._reference_runs.get(inst.id)
        if known is None and self._stored:
            known = True  # not recorded at release: the student's exception counts
        if known is None:
            import importlib

            reference = importlib.import_module(self.assignment.reference)
            try:
                check_of(inst)(Student(ReferenceWorker(reference), self.defaults), self.setup(inst), inst.param)
                known = True
            except NotInReference:
                known = True
            except Exception:  # noqa: BLE001 - the reference itself cannot run this case here
                known = False
            self._reference_runs[inst.id] = known
        return known

    def learn_reference_runs(self, reference_results: list[CaseResult]) -> None:
        """What grading the reference in the jail showed: a case it passed with nothing to say got
        through its calls (a call that raised would have made it fail or be inconclusive), so
        `reference_runs` need not replay it in this process. Replaying a meta-device case here
        would pay the first meta op's one-off cost (~1 s) in the first engine that asks."""
        for r in reference_results:
            if r.outcome is Outcome.PASSED and not r.message:
                self._reference_runs.setdefault(r.id, True)

    # --- building results -------------------------------------------------------------------

    def report_without_results(self, info: SubmissionInfo, concept: str, message: Msg | str) -> GradeReport:
        """A submission none of whose cases could run still gets a report: score 0 and the reason."""
        return unrun_report(self.assignment, self.instances, info, concept, message, self.environment(),
                            public_only=self.public_only, lang=self.lang)

    def _report(self, info: SubmissionInfo, results: list[CaseResult], load: LoadInfo) -> GradeReport:
        return grade_report(self.assignment, info, results, load, self.environment(), public_only=self.public_only,
                            lang=self.lang)


def check_of(inst: CaseInstance) -> CheckFn:
    """The case's check (a case without one is refused when its assignment loads)."""
    if inst.case.check_fn is None:
        raise AssignmentSpecError(f"case {inst.id!r} ({inst.case.where()}) has no check")
    return inst.case.check_fn


def _end(worker: GradingWorker, wait: bool) -> None:
    """Kill the worker; with `wait`, return once it is gone and cleaned up."""
    if wait:
        worker.close()
    else:
        worker.retire()


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


class OutputSplit:
    """What a submission printed, split where the first hidden case was about to run: before that
    the student may see it; after it, it may quote hidden inputs, so it is kept for the instructor
    only (``LoadInfo.hidden_stdout``). Marks a worker's output once (``mark``), then splits
    (``split``)."""

    def __init__(self) -> None:
        self._worker: object | None = None
        self._before: tuple[str, str] | None = None

    def mark(self, worker: GradingWorker) -> None:
        if self._before is None:
            self._worker, self._before = worker, worker.output()

    def split(self, worker: GradingWorker) -> tuple[tuple[str, str], tuple[str, str]]:
        """((stdout, stderr) the student may see, (stdout, stderr) for the instructor only)."""
        now = worker.output()
        if self._before is None:
            return now, ("", "")
        if worker is not self._worker:  # a fresh worker after the mark: all of it came after
            return self._before, now
        after = tuple(n[len(os.path.commonprefix([b, n])):] for b, n in zip(self._before, now))
        return self._before, after  # type: ignore[return-value]
