"""Grade one loaded submission: run every case against a sandboxed worker, never against student
code in this process.

Setups (inputs and reference results) do not depend on the submission, so one ``Engine`` computes
each once and reuses it for every submission of a batch. A worker that times out or dies costs the
case it was running; a fresh worker runs the rest (up to ``max_restarts``).
"""

from __future__ import annotations

import dataclasses
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from grader import __version__
from grader.assignments import Assignment
from grader.cases import CaseInstance, Setup, SetupContext, Verdict
from grader.checks.diagnose import (concept_of_exception, find_rebinding, is_meta_inconclusive,
                                    not_implemented_message, wrong_kind_message)
from grader.load import LoadedSubmission, load_submission, unit_title
from grader.results import (
    CONCEPTS, AssignmentInfo, CaseResult, CellError, Environment, Evidence, GradeReport, LoadInfo, Outcome, Points,
    SubmissionInfo,
)
from grader.errors import AssignmentSpecError
from grader.sandbox import (Limits, OffPlan, Sandbox, SandboxError, StudentError, WireError, WorkerCrashed,
                            WorkerTimeout)
from grader.scoring import total
from grader.student import Student


def limits_for(assignment: Assignment) -> Limits:
    """The sandbox limits an assignment's spec.toml asks for ([limits] table), over the defaults."""
    known = {f.name for f in dataclasses.fields(Limits)}
    unknown = sorted(set(assignment.limits) - known)
    if unknown:
        raise AssignmentSpecError(f"{assignment.dir / 'spec.toml'}: unknown limits {', '.join(unknown)}; "
                                  f"known: {', '.join(sorted(known))}")
    return Limits(**assignment.limits)


@dataclass(frozen=True)
class _Outcome:
    outcome: Outcome
    verdict: Verdict


class Engine:
    def __init__(self, assignment: Assignment, sandbox: Sandbox, *, public_only: bool = False,
                 device: torch.device | str = "cpu", max_restarts: int = 6):
        self.assignment = assignment
        self.sandbox = sandbox
        self.public_only = public_only
        self.device = torch.device(device)
        # Six: code that hangs on every float16 call times out in the six float16 cases of
        # masked-attention and still gets the rest graded (submission_timeout_s bounds the total).
        self.max_restarts = max_restarts
        self.instances = assignment.instances(public_only=public_only)
        self._setups: dict[str, Setup] = {}
        self._environment: Environment | None = None
        self._plan: dict[str, list[bytes]] = {}
        """Case instance id -> the request frames the trusted reference made in it (see learn_calls)."""
        self._plan_stops: dict[str, int] = {}
        """Case instance id -> how many of its planned requests to send ahead (a submission left the
        plan there); the rest of it, and the cases after it, are sent once it has run."""

    # --- reference side (once per batch) ---------------------------------------------------

    def setup(self, inst: CaseInstance) -> Setup:
        s = self._setups.get(inst.id)
        if s is None:
            ctx = SetupContext(inst.generator(self.assignment.seed), inst.param, self.device)
            s = self._setups[inst.id] = inst.case.setup(ctx)
        return s

    def share_setups_from(self, other: "Engine") -> None:
        """Reuse another engine's computed setups (same assignment): one reference computation per batch."""
        if other.assignment is not self.assignment:
            raise ValueError("engines grade different assignments")
        self._setups = other._setups
        self._plan = other._plan
        self._plan_stops = other._plan_stops

    def prepare(self) -> None:
        """Compute every case's inputs and reference results now (before forking workers)."""
        for inst in self.instances:
            self.setup(inst)

    def learn_calls(self, solution: LoadedSubmission) -> None:
        """Grade `solution` (the trusted reference, as a submission) and keep, for each case it passes,
        the request frames it made. Every later submission's worker is then sent those frames ahead
        (``Worker.send_ahead``), so that its calls cost one round trip instead of one each. A case
        needs its inputs only, never the student's answers, to know its calls, as long as the
        answers are right. Requests are matched byte for byte; a submission that leaves the plan is
        moved to a fresh worker that repeats the requests made so far (``_leave_plan``), so reports
        are the same as without a plan. Nothing is learned when the solution does not load."""
        self._plan = {}  # none while the solution itself is graded
        learned: dict[str, list[bytes]] = {}
        worker = self.sandbox.open(solution)
        try:
            if worker.load.ok:
                worker.record = []
                _, worker = self._run_cases(solution, worker, learn=learned)
        finally:
            worker.close()  # all of it gone before a batch forks its slot processes
        self._plan = learned

    def environment(self) -> Environment:
        """What every report records about the grading environment; fixed once every setup exists."""
        if self._environment is not None:
            return self._environment
        dtypes = sorted({str(t.dtype) for s in self._setups.values() for t in s.inputs.values()
                         if isinstance(t, torch.Tensor) and t.is_floating_point()})
        env = Environment(grader_version=__version__, torch_version=torch.__version__,
                          python_version=platform.python_version(), device=str(self.device),
                          isolation=self.sandbox.isolation, dtypes=dtypes)
        if all(i.id in self._setups for i in self.instances):
            self._environment = env
        return env

    # --- one submission ---------------------------------------------------------------------

    def grade_path(self, path: Path, *, student_id: str | None = None) -> GradeReport:
        sub = load_submission(path, main_module=self.assignment.main_module, cell_tag=self.assignment.cell_tag)
        return self.grade(sub, student_id=student_id)

    def start_worker(self, sub: LoadedSubmission):
        """A worker for `sub`, forked and loading now (``Sandbox.start``), to pass to ``grade`` later:
        it boots while another submission is graded. None when none is needed or none can start."""
        start = getattr(self.sandbox, "start", None)
        if start is None or sub.error:
            return None
        try:
            return start(sub, describe=[ep.name for ep in self.assignment.entry_points])
        except SandboxError:
            return None  # grade() starts one the usual way, and reports what goes wrong

    def grade(self, sub: LoadedSubmission, *, student_id: str | None = None, worker=None) -> GradeReport:
        """`worker`: from ``start_worker(sub)``; otherwise one is started here."""
        info = SubmissionInfo(id=student_id or sub.id, sha256=sub.sha256, filename=Path(sub.path).name, kind=sub.kind)
        if sub.error:
            if worker is not None:
                _retire(worker)
            return self.report_without_results(info, "load-error", sub.error)
        worker = self.sandbox.open(sub) if worker is None else self.sandbox.open(sub, started=worker)
        try:
            if not worker.load.ok:
                concept = "timeout" if "time" in worker.load.message.lower() else "load-error"
                results = self._all_failed(concept, worker.load.message)
            else:
                results, worker = self._run_cases(sub, worker)
            stdout, stderr = worker.output()
            load = LoadInfo(ok=worker.load.ok, message=worker.load.message,
                            cell_errors=[_labelled(e, sub) for e in worker.load.cell_errors],
                            stdout=stdout, stderr=stderr)
        finally:
            _retire(worker)
        return self._report(info, results, load)

    def _run_cases(self, sub: LoadedSubmission, worker, learn: dict[str, list[bytes]] | None = None,
                   ) -> tuple[list[CaseResult], object]:
        """Run every case; returns the results and the worker alive at the end (for its output).
        `learn`: record each passed case's request frames into it (the worker's `record` is on)."""
        missing = self._missing_names(worker, sub)
        sent: dict[int, int] = {}  # instance index -> frames of its plan sent ahead to this worker
        plan_from: int | None = 0
        results: list[CaseResult] = []
        restarts = 0
        deadline = time.monotonic() + self.sandbox.limits.submission_timeout_s
        for n, inst in enumerate(self.instances):
            absent = [name for name in inst.case.uses if name in missing]
            if absent:
                results.append(self._result(inst, Outcome.ERROR, Verdict.fail("signature", missing[absent[0]])))
                continue
            if restarts > self.max_restarts:
                results.append(self._result(inst, Outcome.ERROR, Verdict.fail(
                    "crash", f"Not run: your code crashed or timed out {restarts} times in this submission.")))
                continue
            if time.monotonic() > deadline:
                results.append(self._result(inst, Outcome.TIMEOUT, Verdict.fail(
                    "timeout", "Not run: the whole submission ran past its time limit.")))
                continue
            if plan_from is not None and n >= plan_from and not getattr(worker, "queued", 0):
                plan_from = self._send_plan(worker, n, missing, sent)
            t0 = time.perf_counter()
            made = getattr(worker, "record", None)
            first = len(made) if made is not None else 0
            try:
                done = self._run_one(inst, worker, sub)
            except OffPlan:  # a request other than the next one sent ahead
                self._stop_plan_at(inst, len(made) - first)
                worker = self._leave_plan(sub, worker, made[:first])
                sent.clear()
                plan_from = n + 1
                done = self._run_one(inst, worker, sub)
            else:
                died = done.outcome is Outcome.TIMEOUT or done.verdict.concept == "crash"  # restarted below
                if not died and sent.get(n, 0) > len(made or ()) - first:  # fewer calls than sent ahead
                    self._stop_plan_at(inst, len(made) - first)
                    worker = self._leave_plan(sub, worker, made)
                    sent.clear()
                    plan_from = n + 1
            results.append(self._result(inst, done.outcome, done.verdict, time.perf_counter() - t0))
            if learn is not None and done.outcome is Outcome.PASSED:
                learn[inst.id] = worker.record[first:]
            if done.outcome is Outcome.TIMEOUT or done.verdict.concept == "crash":
                _retire(worker)
                restarts += 1
                worker = self.sandbox.open(sub)
                learn = None  # (learning: the reference itself failed; learn nothing more)
                sent.clear()
                plan_from = n + 1
        return results, worker

    # --- the call plan: requests sent ahead (see learn_calls) -------------------------------

    def _send_plan(self, worker, start: int, missing: dict[str, str], sent: dict[int, int]) -> int | None:
        """Send ahead, in one write, the learned requests of the cases from `start` on, up to the
        first case known to leave its plan (only the calls before that point are sent). Returns the
        first case not sent (None: all were)."""
        if not self._plan or not hasattr(worker, "send_ahead"):
            return None
        frames: list[bytes] = []
        after: int | None = None
        for i in range(start, len(self.instances)):
            inst = self.instances[i]
            if any(name in missing for name in inst.case.uses):
                continue
            cut = self._plan_stops.get(inst.id, 0 if inst.id not in self._plan else None)
            planned = self._plan.get(inst.id, [])[:cut]
            frames += planned
            sent[i] = len(planned)
            if cut is not None:
                after = i + 1
                break
        if frames:
            if worker.record is None:
                worker.record = []
            worker.send_ahead(frames)
        return after

    def _stop_plan_at(self, inst: CaseInstance, calls: int) -> None:
        """This case left its plan after `calls` requests: from now on only those are sent ahead."""
        self._plan_stops[inst.id] = min(calls, self._plan_stops.get(inst.id, calls))

    def _leave_plan(self, sub: LoadedSubmission, worker, made: list[bytes]):
        """The worker has run calls sent ahead that the cases did not make, which a straight run
        would not have. A fresh worker makes again exactly the requests made so far (in one write)
        and grading goes on with it, so every result is the one a straight run gives."""
        _retire(worker)
        fresh = self.sandbox.open(sub)
        if fresh.load.ok and made:
            try:
                fresh.replay(made, self.sandbox.limits.call_timeout_s)
            except SandboxError:
                pass  # it died: the case about to run reports how
        fresh.record = list(made)
        return fresh

    def _run_one(self, inst: CaseInstance, worker, sub: LoadedSubmission) -> _Outcome:
        try:
            v = inst.case.check_fn(Student(worker), self.setup(inst), inst.param)
            return _Outcome(Outcome.PASSED if v.passed else Outcome.FAILED, v)
        except StudentError as e:
            placeholder = not_implemented_message(e.exc_type, e.message, e.traceback, sub.units)
            if placeholder:
                return _Outcome(Outcome.ERROR, Verdict.not_implemented(placeholder))
            if inst.case.concept == "device-placement" and is_meta_inconclusive(e.message):
                return _Outcome(Outcome.PASSED, Verdict.ok(
                    "Inconclusive on the meta device (a data-dependent step such as .item()); not counted against you."))
            concept = concept_of_exception(e.exc_type, e.message, inst.case.concept, inst.case.on_error)
            return _Outcome(Outcome.ERROR, Verdict.fail(
                concept, f"Your code raised {e.exc_type}" + (f": {_short(e.message)}" if e.message.strip() else "")
                + f". {CONCEPTS[concept]}.",
                Evidence(traceback=e.traceback)))
        except WorkerTimeout as e:
            return _Outcome(Outcome.TIMEOUT, Verdict.fail(
                "timeout", f"Your code ran past the time limit ({e}). Look for an endless loop or a very slow step."))
        except WorkerCrashed as e:
            return _Outcome(Outcome.ERROR, Verdict.fail("crash", f"The process running your code died: {e}."))
        except WireError as e:
            return _Outcome(Outcome.ERROR, Verdict.fail(
                "signature", f"Your code returned something the grader cannot accept: {e}."))

    def _missing_names(self, worker, sub: LoadedSubmission) -> dict[str, str]:
        """Entry point -> message, for entry points the submission lacks or defines as the wrong kind."""
        eps = self.assignment.entry_points
        try:
            infos = worker.describe_all([ep.name for ep in eps]) if eps else {}
        except SandboxError as e:
            return {ep.name: f"Could not inspect '{ep.name}': {e}" for ep in eps}
        out: dict[str, str] = {}
        for ep in eps:
            info = infos[ep.name]
            if info.kind == ep.kind:
                continue
            found = ", ".join(info.available) or "nothing callable"
            if info.kind == "missing":
                out[ep.name] = (f"Your submission defines no '{ep.name}'; found: {found}. "
                                f"Define {ep.signature}.")
            else:
                out[ep.name] = wrong_kind_message(ep.name, ep.kind, ep.signature, info.kind,
                                                  getattr(info, "type_name", ""), find_rebinding(sub.units, ep.name))
        return out

    # --- building results -------------------------------------------------------------------

    def _result(self, inst: CaseInstance, outcome: Outcome, v: Verdict, duration: float = 0.0) -> CaseResult:
        passed = outcome is Outcome.PASSED
        return CaseResult(
            id=inst.id, title=inst.case.title, outcome=outcome,
            points=Points(inst.points if passed else 0.0, inst.points), hidden=inst.case.hidden,
            concept=None if passed or v.placeholder else (v.concept or inst.case.concept), message=v.message,
            evidence=v.evidence, duration_s=round(duration, 4))

    def report_without_results(self, info: SubmissionInfo, concept: str, message: str) -> GradeReport:
        """A submission none of whose cases could run still gets a report: score 0 and the reason."""
        return self._report(info, self._all_failed(concept, message), LoadInfo(ok=False, message=message))

    def _all_failed(self, concept: str, message: str) -> list[CaseResult]:
        outcome = Outcome.TIMEOUT if concept == "timeout" else Outcome.ERROR
        return [self._result(i, outcome, Verdict.fail(concept, message)) for i in self.instances]

    def _report(self, info: SubmissionInfo, results: list[CaseResult], load: LoadInfo) -> GradeReport:
        a = self.assignment
        return GradeReport(
            submission=info, assignment=AssignmentInfo(a.id, a.version, a.title), score=total(results),
            cases=results, load=load, environment=self.environment(),
            graded_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            public_only=self.public_only)


def _labelled(e: CellError, sub: LoadedSubmission) -> CellError:
    """The cell error with the label the student finds the cell by ("code cell 5 (import torch)")."""
    unit = next((u for u in sub.units if u.cell is not None and u.cell == e.cell), None)
    return e if unit is None else dataclasses.replace(e, label=unit_title(unit))


def _retire(worker) -> None:
    """Kill the worker now; its clean-up may finish on the sandbox's reaper thread."""
    retire = getattr(worker, "retire", None)
    (retire or worker.close)()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
