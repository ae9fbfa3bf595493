"""Grade one loaded submission: run every case against a sandboxed worker, never against student
code in this process.

Setups (inputs and reference results) do not depend on the submission, so one ``Engine`` computes
each once and reuses it for every submission of a batch. A worker that times out or dies costs the
case it was running; a fresh worker runs the rest. An entry point whose cases crash or time out
more than ``Limits.max_restarts`` times has its remaining cases not run; the other entry points'
cases still run. What the student's
code did becomes an outcome in `grader.grading.student_outcomes`, results are built in
`grader.grading.case_results`, setups in `grader.grading.setups`, the requests sent ahead in
`grader.grading.request_plan`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection
from pathlib import Path
from collections.abc import Callable

import torch

from grader.assignment.signatures import call_defaults
from grader.assignment.spec import Assignment
from grader.assignment.spec_file import unknown_key
from grader.cases import CaseInstance, Setup, Verdict
from grader.errors import AssignmentSpecError, GraderError
from grader.grading.case_results import (all_failed, case_result, environment_of, grade_report, labelled,
                                         submission_info, unrun_report)
from grader.grading.output_digest import DigestingCalls, output_digest
from grader.grading.output_split import OutputSplit
from grader.grading.protocols import GradingSandbox, GradingWorker
from grader.grading.proxy import Student
from grader.grading.reference_run import NotInReference, ReferenceWorker
from grader.grading.request_plan import CallPlan, NotifyingCalls
from grader.grading.setups import author_error, compute_setup, on_device, reply_cap
from grader.grading.student_outcomes import (CaseOutcome, died, given_up, missing_entry_points, not_run_after_failures,
                                             not_run_past_deadline, raised, unreadable_value, uses_of, worker_failed)
from grader.i18n import Msg, choose
from grader.results import CaseResult, Environment, GradeReport, LoadInfo, Outcome, SubmissionInfo
from grader.sandbox import (Limits, OffPlan, SandboxError, StudentError, WireError, WorkerCrashed,
                            WorkerTimeout)
from grader.submission.intake import Intake
from grader.submission.load import LoadedSubmission


def limits_for(assignment: Assignment) -> Limits:
    """The sandbox limits an assignment's spec.toml asks for ([limits] table), over the defaults."""
    known = [f.name for f in dataclasses.fields(Limits)]
    for key in assignment.limits:
        if key not in known:
            raise unknown_key(assignment.dir / "spec.toml", key, "[limits]", known)
    return Limits(**assignment.limits)


class Engine:
    """Grades submissions of one assignment on one sandbox; engines of a batch share their setups
    and call plan (`share_setups_from`)."""

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
        self.intake = Intake()
        """Reads the submissions `grade_path` is given, behind the boundary (its process starts on first use)."""
        self.plan = CallPlan()
        """The requests each case makes, learned from the trusted reference (see learn_calls)."""
        self._reference_runs: dict[str, bool] = {}
        """Case instance id -> whether the trusted reference gets through the case's calls (see
        `reference_runs`); filled when first needed."""
        self._stored = assignment.stored is not None
        if self._stored:  # a student kit: the reference ran at release time, its results are here
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
        self.plan = CallPlan(other.plan.requests, other.plan.stops)
        self._reference_runs = other._reference_runs

    def prepare(self) -> None:
        """Compute every case's inputs and reference results now (before forking workers)."""
        for inst in self.instances:
            self.setup(inst)

    def learn_calls(self, solution: LoadedSubmission) -> list[CaseResult]:
        """Grade `solution` (the trusted reference, as a submission) and keep, for each case it passes,
        the request frames it made. Every later submission's worker is then sent those frames ahead
        (``Worker.send_ahead``), so that its calls cost one round trip instead of one each. A case
        needs its inputs only, never the student's answers, to know its calls, as long as the
        answers are right. Requests are matched byte for byte; a submission that leaves the plan is
        moved to a fresh worker that repeats the requests made so far (``_leave_plan``), so reports
        are the same as without a plan. Nothing is learned when the solution does not load.

        Returns the solution's case results: a batch checks that the trusted reference scores
        100 % in this machine's real jail before it grades anyone."""
        self.plan.requests = {}  # none while the solution itself is graded
        learned: dict[str, list[bytes]] = {}
        worker = self.sandbox.open(solution)
        try:
            if worker.load.ok:
                worker.record = []
                results, worker = self._run_cases(solution, worker, learn=learned)
            else:
                results = all_failed(self.assignment, self.instances, "load-error", worker.load.message)
        finally:
            worker.close()  # all of it gone before a batch forks its slot processes
        self.plan.requests = learned
        return results

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
            return self.sandbox.start(sub, describe=[ep.name for ep in self.assignment.entry_points])
        except SandboxError:
            return None  # grade() starts one the usual way, and reports what goes wrong

    def grade(self, sub: LoadedSubmission, *, student_id: str | None = None,
              worker: GradingWorker | None = None) -> GradeReport:
        """`worker`: from ``start_worker(sub)``; otherwise one is started here."""
        info = submission_info(sub, student_id)
        if sub.error:
            if worker is not None:
                worker.retire()
            return self.report_without_results(info, "load-error", sub.error)
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
            worker.retire()
        return self._report(info, results, load)

    def _run_cases(self, sub: LoadedSubmission, worker: GradingWorker, learn: dict[str, list[bytes]] | None = None,
                   output: OutputSplit | None = None) -> tuple[list[CaseResult], GradingWorker]:
        """Run every case; returns the results and the worker alive at the end (for its output).
        `learn`: record each passed case's request frames into it (the worker's `record` is on).
        `output`: marked before the first hidden case's inputs go to a worker."""
        missing = missing_entry_points(self.assignment, worker, sub)
        sent: dict[int, int] = {}  # instance index -> frames of its plan sent ahead to this worker
        plan_from: int | None = 0 if self.plan.requests else None  # None: nothing (more) to send ahead
        results: list[CaseResult] = []
        failures: dict[str, int] = {}  # entry point -> cases using it that crashed or timed out
        cap = self.sandbox.limits.max_restarts
        deadline = time.monotonic() + self.sandbox.limits.submission_timeout_s

        def send(worker, n: int) -> None:
            """Send case `n`'s planned requests (with the public ones after it), marking the output
            first when a hidden case's inputs are about to go."""
            nonlocal plan_from
            if self.instances[n].case.hidden and output is not None:
                output.mark(worker)
            plan_from = self.plan.send(worker, self.instances, n, {**missing, **given_up(failures, cap)}, sent)

        for n, inst in enumerate(self.instances):
            absent = [name for name in inst.case.uses if name in missing]
            if absent:
                results.append(case_result(self.assignment, inst, Outcome.ERROR, Verdict.fail("signature", missing[absent[0]])))
                continue
            over = [name for name in uses_of(inst) if name in given_up(failures, cap)]
            if over:
                results.append(case_result(self.assignment, inst, Outcome.ERROR, not_run_after_failures(
                    over[0], failures[over[0]])))
                continue
            if time.monotonic() > deadline:
                results.append(case_result(self.assignment, inst, Outcome.TIMEOUT, not_run_past_deadline(
                    self.sandbox.limits.submission_timeout_s)))
                continue
            if inst.case.hidden and output is not None:
                output.mark(worker)
            if plan_from is not None and n >= plan_from and not worker.queued:
                send(worker, n)
            t0 = time.perf_counter()
            made = worker.record
            first = len(made) if made is not None else 0

            def next_case(worker=worker, n=n, first=first) -> None:
                # Case n has made every planned call and the worker holds nothing more: the next
                # case's requests go now, so the worker runs them while this process compares.
                nxt = n + 1
                if (plan_from == nxt and nxt < len(self.instances) and worker.queued == 0
                        and self.plan.complete(self.instances[n]) and len(worker.record) - first == sent.get(n)
                        and not set(uses_of(self.instances[nxt])) & set(given_up(failures, cap))
                        and time.monotonic() <= deadline):
                    send(worker, nxt)

            try:
                done = self.run_case(inst, worker, sub, on_call=next_case if sent.get(n) else None)
            except OffPlan:  # a request other than the next one sent ahead
                self.plan.stop_at(inst, len(made) - first)
                worker = self._leave_plan(sub, worker, made[:first])
                sent.clear()
                plan_from = n + 1
                done = self.run_case(inst, worker, sub)
            else:
                gone = died(done, worker)  # restarted below
                if not gone and sent.get(n, 0) > len(made or ()) - first:  # fewer calls than sent ahead
                    self.plan.stop_at(inst, len(made) - first)
                    worker = self._leave_plan(sub, worker, made)
                    sent.clear()
                    plan_from = n + 1
            results.append(case_result(self.assignment, inst, done.outcome, done.verdict, time.perf_counter() - t0))
            if learn is not None and done.outcome is Outcome.PASSED:
                learn[inst.id] = worker.record[first:]
            if died(done, worker):
                worker.retire()
                for name in uses_of(inst):
                    failures[name] = failures.get(name, 0) + 1
                worker = self.sandbox.open(sub)
                learn = None  # (learning: the reference itself failed; learn nothing more)
                sent.clear()
                plan_from = n + 1
        return results, worker

    # --- leaving the call plan (see learn_calls) ---------------------------------------------

    def _leave_plan(self, sub: LoadedSubmission, worker: GradingWorker, made: list[bytes]) -> GradingWorker:
        """The worker has run calls sent ahead that the cases did not make, which a straight run
        would not have. A fresh worker makes again exactly the requests made so far (in one write)
        and grading goes on with it, so every result is the one a straight run gives."""
        worker.retire()
        fresh = self.sandbox.open(sub)
        if fresh.load.ok and made:
            try:
                fresh.replay(made, self.sandbox.limits.call_timeout_s)
            except SandboxError:
                pass  # it died: the case about to run reports how
        fresh.record = list(made)
        return fresh

    def run_case(self, inst: CaseInstance, worker: GradingWorker, sub: LoadedSubmission,
                 on_call: Callable[[], None] | None = None) -> CaseOutcome:
        """Run one case's check against `worker`: its outcome and verdict. The student's exceptions,
        timeouts and crashes are verdicts; the case's own exceptions are the author's
        (AssignmentSpecError). `on_call`: called after each of the case's calls returns
        (see `NotifyingCalls`)."""
        worker.reply_cap = reply_cap(self.setup(inst))
        calls = DigestingCalls(worker if on_call is None else NotifyingCalls(worker, on_call))
        try:
            v = inst.case.check_fn(Student(calls, self.defaults), self.setup(inst), inst.param)
            if not v.passed:  # the similarity report compares wrong outputs by this digest
                v = dataclasses.replace(v, evidence=dataclasses.replace(
                    v.evidence, output_digest=output_digest(calls.returned)))
            return CaseOutcome(Outcome.PASSED if v.passed else Outcome.FAILED, v)
        except StudentError as e:
            return raised(self.assignment, inst, e, sub, lambda: self.reference_runs(inst))
        except (WorkerTimeout, WorkerCrashed, WireError) as e:
            return worker_failed(e)
        except (SandboxError, OffPlan, GraderError):
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
                inst.case.check_fn(Student(ReferenceWorker(reference), self.defaults), self.setup(inst), inst.param)
                known = True
            except NotInReference:
                known = True
            except Exception:  # noqa: BLE001 - the reference itself cannot run this case here
                known = False
            self._reference_runs[inst.id] = known
        return known

    # --- building results -------------------------------------------------------------------

    def report_without_results(self, info: SubmissionInfo, concept: str, message: Msg | str) -> GradeReport:
        """A submission none of whose cases could run still gets a report: score 0 and the reason."""
        return unrun_report(self.assignment, self.instances, info, concept, message, self.environment(),
                            public_only=self.public_only, lang=self.lang)

    def _report(self, info: SubmissionInfo, results: list[CaseResult], load: LoadInfo) -> GradeReport:
        return grade_report(self.assignment, info, results, load, self.environment(), public_only=self.public_only,
                            lang=self.lang)
