"""Grade one loaded submission: run every case against a sandboxed worker, never against student
code in this process.

Setups (inputs and reference results) do not depend on the submission, so one ``Engine`` computes
each once and reuses it for every submission of a batch. A worker that times out or dies costs the
case it was running; a fresh worker runs the rest (up to ``max_restarts``).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from grader import __version__
from grader.assignment.spec import Assignment
from grader.cases import CaseInstance, Setup, SetupContext, Verdict
from grader import untrusted
from grader.assignment import concepts as vocab
from grader.checks.diagnose import (concept_of_exception, find_rebinding, not_implemented_message,
                                    wrong_kind_message)
from grader.submission.load import LoadedSubmission, load_submission, unit_title
from grader.grading.reference_run import NotInReference, ReferenceWorker
from grader.results import (
    AssignmentInfo, CaseResult, CellError, Environment, Evidence, GradeReport, LoadInfo, Outcome, Points,
    SubmissionInfo,
)
from grader.errors import AssignmentSpecError, GraderError
from grader.sandbox import (Limits, OffPlan, Sandbox, SandboxError, StudentError, WireError, WorkerCrashed,
                            WorkerTimeout)
from grader.grading.scoring import total
from grader.grading.proxy import Student


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
        plan there); the rest of it is made the straight way."""
        self._reference_runs: dict[str, bool] = {}
        """Case instance id -> whether the trusted reference gets through the case's calls (see
        `reference_runs`); filled when first needed."""
        self._stored = assignment.stored is not None
        if self._stored:  # a student kit: the reference ran at release time, its results are here
            from grader.grading import stored

            self._setups, self._reference_runs = stored.read(assignment.stored)
            missing = [i.id for i in self.instances if i.id not in self._setups]
            if missing:
                raise AssignmentSpecError(f"{assignment.stored}: no stored setup for {', '.join(missing[:5])}; "
                                          "the kit is older than its cases: release it again")
            self._setups = {k: _on(v, self.device) for k, v in self._setups.items()}

    # --- reference side (once per batch) ---------------------------------------------------

    def setup(self, inst: CaseInstance) -> Setup:
        s = self._setups.get(inst.id)
        if s is None:
            ctx = SetupContext(inst.generator(self.assignment.seed), inst.param, self.device)
            try:
                s = self._setups[inst.id] = inst.case.setup(ctx)
            except GraderError:
                raise
            except Exception as e:  # the author's code: name the case, file and line
                raise self.author_error(inst, e, "setup") from e
        return s

    def author_error(self, inst: CaseInstance, e: BaseException, stage: str) -> AssignmentSpecError:
        """An exception in an instructor's case (not the student's, not the sandbox's), blamed on the case:
        its id, and the file and line of the assignment's innermost frame."""
        import traceback

        root = os.path.realpath(self.assignment.dir)
        mine = [f for f in traceback.extract_tb(e.__traceback__)
                if os.path.realpath(f.filename).startswith(root + os.sep)]
        at = f"{mine[-1].filename}, line {mine[-1].lineno}" if mine else inst.case.where()
        return AssignmentSpecError(f"case {inst.id!r} of {self.assignment.id} ({at}): its {stage} raised "
                                   f"{type(e).__name__}: {_short(str(e))}. This is the assignment's code, not the "
                                   "student's: fix the case")

    def share_setups_from(self, other: "Engine") -> None:
        """Reuse another engine's computed setups (same assignment): one reference computation per batch."""
        if other.assignment is not self.assignment:
            raise ValueError("engines grade different assignments")
        self._setups = other._setups
        self._plan = other._plan
        self._plan_stops = other._plan_stops
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
        self._plan = {}  # none while the solution itself is graded
        learned: dict[str, list[bytes]] = {}
        worker = self.sandbox.open(solution)
        try:
            if worker.load.ok:
                worker.record = []
                results, worker = self._run_cases(solution, worker, learn=learned)
            else:
                results = self._all_failed("load-error", worker.load.message)
        finally:
            worker.close()  # all of it gone before a batch forks its slot processes
        self._plan = learned
        return results

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
        info = submission_info(sub, student_id)
        if sub.error:
            if worker is not None:
                _retire(worker)
            return self.report_without_results(info, "load-error", untrusted.text(sub.error, 4000))
        worker = self.sandbox.open(sub) if worker is None else self.sandbox.open(sub, started=worker)
        output = _Output()
        try:
            if not worker.load.ok:
                # Decided by what ended loading (the sandbox's own exception), never by its wording.
                concept = "timeout" if isinstance(worker.load.failure, WorkerTimeout) else "load-error"
                results = self._all_failed(concept, worker.load.message)
            else:
                results, worker = self._run_cases(sub, worker, output=output)
            (stdout, stderr), (hidden_out, hidden_err) = output.split(worker)
            load = LoadInfo(ok=worker.load.ok, message=worker.load.message,
                            cell_errors=[_labelled(e, sub) for e in worker.load.cell_errors],
                            stdout=stdout, stderr=stderr, hidden_stdout=hidden_out, hidden_stderr=hidden_err)
        finally:
            _retire(worker)
        return self._report(info, results, load)

    def _run_cases(self, sub: LoadedSubmission, worker, learn: dict[str, list[bytes]] | None = None,
                   output: "_Output | None" = None) -> tuple[list[CaseResult], object]:
        """Run every case; returns the results and the worker alive at the end (for its output).
        `learn`: record each passed case's request frames into it (the worker's `record` is on).
        `output`: marked before the first hidden case's inputs go to a worker."""
        missing = self._missing_names(worker, sub)
        sent: dict[int, int] = {}  # instance index -> frames of its plan sent ahead to this worker
        plan_from: int | None = 0
        results: list[CaseResult] = []
        restarts = 0
        deadline = time.monotonic() + self.sandbox.limits.submission_timeout_s

        def send(worker, n: int) -> None:
            """Send case `n`'s planned requests (with the public ones after it), marking the output
            first when a hidden case's inputs are about to go."""
            nonlocal plan_from
            if self.instances[n].case.hidden and output is not None:
                output.mark(worker)
            plan_from = self._send_plan(worker, n, missing, sent)

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
            if inst.case.hidden and output is not None:
                output.mark(worker)
            if plan_from is not None and n >= plan_from and not getattr(worker, "queued", 0):
                send(worker, n)
            t0 = time.perf_counter()
            made = getattr(worker, "record", None)
            first = len(made) if made is not None else 0

            def next_case(worker=worker, n=n, first=first) -> None:
                # Case n has made every planned call and the worker holds nothing more: the next
                # case's requests go now, so the worker runs them while this process compares.
                nxt = n + 1
                if (plan_from == nxt and nxt < len(self.instances) and worker.queued == 0
                        and self._plan_complete(n) and len(worker.record) - first == sent.get(n)
                        and restarts <= self.max_restarts and time.monotonic() <= deadline):
                    send(worker, nxt)

            try:
                done = self._run_one(inst, worker, sub, on_call=next_case if sent.get(n) else None)
            except OffPlan:  # a request other than the next one sent ahead
                self._stop_plan_at(inst, len(made) - first)
                worker = self._leave_plan(sub, worker, made[:first])
                sent.clear()
                plan_from = n + 1
                done = self._run_one(inst, worker, sub)
            else:
                died = _died(done, worker)  # restarted below
                if not died and sent.get(n, 0) > len(made or ()) - first:  # fewer calls than sent ahead
                    self._stop_plan_at(inst, len(made) - first)
                    worker = self._leave_plan(sub, worker, made)
                    sent.clear()
                    plan_from = n + 1
            results.append(self._result(inst, done.outcome, done.verdict, time.perf_counter() - t0))
            if learn is not None and done.outcome is Outcome.PASSED:
                learn[inst.id] = worker.record[first:]
            if _died(done, worker):
                _retire(worker)
                restarts += 1
                worker = self.sandbox.open(sub)
                learn = None  # (learning: the reference itself failed; learn nothing more)
                sent.clear()
                plan_from = n + 1
        return results, worker

    # --- the call plan: requests sent ahead (see learn_calls) -------------------------------

    def _send_plan(self, worker, n: int, missing: dict[str, str], sent: dict[int, int]) -> int | None:
        """Send ahead, in one write, the learned requests of case `n` and, while the cases are
        public, of the cases after it, up to the first case known to leave its plan (only its calls
        before that point are sent). A hidden case's requests go only once it starts, one case at
        a time: the worker's channel is readable by the student's code, which must never hold the
        inputs of a hidden case that has not started (a public case's are the student's anyway:
        ``grader check`` runs them). Returns the next case to send for (None: none is left)."""
        if not self._plan or not hasattr(worker, "send_ahead"):
            return None
        frames: list[bytes] = []
        after: int | None = None
        for i in range(n, len(self.instances)):
            inst = self.instances[i]
            if i > n and inst.case.hidden:
                after = i
                break
            if any(name in missing for name in inst.case.uses):
                continue
            cut = self._plan_stops.get(inst.id, 0 if inst.id not in self._plan else None)
            planned = self._plan.get(inst.id, [])[:cut]
            frames += planned
            sent[i] = len(planned)
            if cut is not None or inst.case.hidden:
                after = i + 1
                break
        if frames:
            if worker.record is None:
                worker.record = []
            worker.send_ahead(frames)
        return after if after is not None and after < len(self.instances) else None

    def _plan_complete(self, n: int) -> bool:
        """Case `n` has a learned plan that no submission has left: all of its calls are planned."""
        inst = self.instances[n]
        return inst.id in self._plan and inst.id not in self._plan_stops

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

    def _run_one(self, inst: CaseInstance, worker, sub: LoadedSubmission, on_call=None) -> _Outcome:
        """`on_call`: called after each of the case's calls returns (see `_Calls`)."""
        worker.reply_cap = reply_cap(self.setup(inst))
        try:
            v = inst.case.check_fn(Student(worker if on_call is None else _Calls(worker, on_call)),
                                   self.setup(inst), inst.param)
            return _Outcome(Outcome.PASSED if v.passed else Outcome.FAILED, v)
        except StudentError as e:
            placeholder = not_implemented_message(e.exc_type, e.message, e.traceback, sub.units)
            if placeholder:
                return _Outcome(Outcome.ERROR, Verdict.not_implemented(placeholder))
            # What the exception says never decides the outcome: a device case the trusted reference
            # cannot get through either is inconclusive for everyone; otherwise raising is an error.
            device_case = inst.case.concept == "device-placement"
            if device_case and not self.reference_runs(inst):
                return _Outcome(Outcome.PASSED, Verdict.ok(
                    "Inconclusive on this device: the reference cannot make these calls here either; "
                    "not counted against you."))
            concept = concept_of_exception(e.exc_type, e.message, inst.case.concept, inst.case.on_error)
            if concept not in self.assignment.concepts:  # PyTorch's well-known errors: only where declared
                concept = inst.case.concept
            return _Outcome(Outcome.ERROR, Verdict.fail(
                concept, f"Your code raised {e.exc_type}" + (f": {_short(e.message)}" if e.message.strip() else "")
                + f". {self.assignment.concepts[concept].title}."
                + (" The reference makes the same calls on these inputs without an error (meta tensors have "
                   "no values: steps such as .item() or `if mask.any():` cannot run on them)." if device_case else ""),
                Evidence(traceback=e.traceback)))
        except WorkerTimeout as e:
            return _Outcome(Outcome.TIMEOUT, Verdict.fail(
                "timeout", f"Your code ran past the time limit ({e}). Look for an endless loop or a very slow step."))
        except WorkerCrashed as e:
            return _Outcome(Outcome.ERROR, Verdict.fail("crash", f"The process running your code died: {e}."))
        except WireError as e:
            return _Outcome(Outcome.ERROR, Verdict.fail(
                "signature", f"Your code returned something the grader cannot accept: {e}."))
        except (SandboxError, OffPlan, GraderError):
            raise
        except Exception as e:  # the case's check itself failed: the author's mistake
            raise self.author_error(inst, e, "check") from e

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
                inst.case.check_fn(Student(ReferenceWorker(reference)), self.setup(inst), inst.param)
                known = True
            except NotInReference:
                known = True
            except Exception:  # noqa: BLE001 - the reference itself cannot run this case here
                known = False
            self._reference_runs[inst.id] = known
        return known

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
        if not passed and v.concept is not None and v.concept not in self.assignment.concepts:
            raise AssignmentSpecError(vocab.unknown(v.concept, self.assignment.concepts,
                                                    f"{inst.case.where()}: case {inst.id!r} failed with"))
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
            public_only=self.public_only, concepts=list(a.concepts.values()))


def _on(s: Setup, device: torch.device) -> Setup:
    """A stored (CPU) setup moved to the device the kit grades on."""
    if device.type == "cpu":
        return s

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x if x.device.type == "meta" else x.to(device)
        if isinstance(x, dict):
            return {k: move(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(move(v) for v in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: move(getattr(x, f.name)) for f in dataclasses.fields(x)
                                             if f.init})
        return x

    return Setup(move(s.inputs), move(s.expected), move(s.extra))


REPLY_FLOOR = 16 << 20
"""The smallest reply cap: room for a correct implementation's own extras (a registered mask
buffer of a few MiB in a state_dict, say) whatever the case's size."""


def reply_cap(setup: Setup) -> int:
    """The largest reply a case's calls may return: 8x the bytes of its inputs and expected results,
    and at least `REPLY_FLOOR`. A reply beyond it is refused before the grader reads it, so a
    submission cannot grow the grader's memory (each slot's) by answering with hundreds of MiB."""
    return max(REPLY_FLOOR, 8 * _tensor_bytes((setup.inputs, setup.expected, setup.extra)))


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.nelement() * value.element_size()
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def _died(done: "_Outcome", worker) -> bool:
    """The case ended with its worker gone (timed out, crashed, or killed for an invalid reply):
    the next case needs a fresh one."""
    return (done.outcome is Outcome.TIMEOUT or done.verdict.concept == "crash"
            or getattr(worker, "alive", True) is False)


class _Calls:
    """A worker as a case's check uses it, calling `after` each time one of its calls returns: the
    engine sends the next case's planned requests once this case has made all of its own, while
    this process compares the replies. The worker still never holds requests of a case other than
    the one it runs (it has answered all of this one's)."""

    def __init__(self, worker, after) -> None:
        self._worker, self._after = worker, after

    def _then(self, value):
        self._after()
        return value

    def call(self, *args, **kwargs):
        return self._then(self._worker.call(*args, **kwargs))

    def call_method(self, *args, **kwargs):
        return self._then(self._worker.call_method(*args, **kwargs))

    def state_dict(self, *args, **kwargs):
        return self._then(self._worker.state_dict(*args, **kwargs))

    def load_state_dict(self, *args, **kwargs):
        return self._then(self._worker.load_state_dict(*args, **kwargs))

    def vjp(self, *args, **kwargs):
        return self._then(self._worker.vjp(*args, **kwargs))


def submission_info(sub: LoadedSubmission, student_id: str | None = None) -> SubmissionInfo:
    """What a report records about the submission; the file name shown escaped (`untrusted.name`)."""
    return SubmissionInfo(id=student_id or sub.id, sha256=sub.sha256, filename=untrusted.name(Path(sub.path).name),
                          kind=sub.kind)


class _Output:
    """What the submission printed, split where the first hidden case's inputs were about to go to
    its worker: before that the student may see it; after it, it may quote hidden inputs, so it is
    kept for the instructor only (``LoadInfo.hidden_stdout``)."""

    def __init__(self) -> None:
        self._worker: object | None = None
        self._before: tuple[str, str] | None = None

    def mark(self, worker) -> None:
        if self._before is None:
            self._worker, self._before = worker, worker.output()

    def split(self, worker) -> tuple[tuple[str, str], tuple[str, str]]:
        """((stdout, stderr) the student may see, (stdout, stderr) for the instructor only)."""
        now = worker.output()
        if self._before is None:
            return now, ("", "")
        if worker is not self._worker:  # a fresh worker after the mark: all of it came after
            return self._before, now
        after = tuple(n[len(os.path.commonprefix([b, n])):] for b, n in zip(self._before, now))
        return self._before, after  # type: ignore[return-value]


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
