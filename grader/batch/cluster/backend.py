"""The cluster back-end (`grader grade --cluster`): the instructor's connection to a Dask cluster
for one batch. Workers checked (same grader version, GPUs for cuda), the grader plugin installed on
each, a bounded window of tasks out, and each finished task turned back into a report (or a grader
error, or a crash report when the submission killed its workers every time), handed to the `Tally`
once per ledger key, whatever Dask re-runs."""

from __future__ import annotations

import collections
import contextlib
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from grader.assignment.spec import Assignment
from grader.batch.cluster.payload import assignment_files, job_mismatch, pack
from grader.batch.cluster.spec import ClusterSpec, security_for
from grader.batch.cluster.worker import GraderPlugin, grade_remote, plugin_state, worker_facts, worker_gpus
from grader.batch.config import Event, EventKind, Ready, Todo
from grader.batch.recording import Tally
from grader.errors import GraderError
from grader.i18n import choose, tr
from grader.records.ledger import LedgerKey
from grader.results import Environment, GradeReport, report_from_dict
from grader.submission.load import LoadedSubmission

if TYPE_CHECKING:
    from distributed import Client, Future, LocalCluster

    from grader.grading.engine import Engine
    from grader.sandbox import Sandbox
    from grader.sandbox.host.portable import PortableSandbox

NO_WORKERS_TIMEOUT_S = 300.0
"""How long a batch waits for the scheduler to have a worker (at the start, or after all died)."""

Result = tuple[LedgerKey, GradeReport | None, float, str]
"""One submission's end: its key, the report (None: a grader error), seconds, the error."""


def _seconds(value: dict) -> float:
    try:
        return max(0.0, float(value.get("seconds", 0.0)))
    except (TypeError, ValueError):
        return 0.0


class ClusterBackend:
    """The run's slots are the cluster's worker threads: a connection for one batch (checked
    workers, the plugin installed, tasks out); each key is recorded once, whatever Dask re-runs."""

    def __init__(self, spec: ClusterSpec, assignment: Assignment, device: torch.device, *, debug: bool = False,
                 lang: str | None = None, accept_isolation: str | None = None):
        self.spec, self.assignment, self.device, self.debug = spec, assignment, device, debug
        self.lang = lang
        """The students' feedback language the reports record (``--lang``)."""
        self.accept_isolation = accept_isolation
        self.plugin_name = f"grader-{assignment.id}-{uuid.uuid4().hex[:12]}"
        self.isolation = ""
        self.workers = 0
        self._cluster: LocalCluster | None = None
        self._scratch = ""
        """local:N: the workers' scratch folder, removed at the end."""
        self._client: Client | None = None
        self._crash_environment: Environment | None = None
        """The environment crash reports record, computed once (the reference setups give its dtypes)."""
        self._slots_now, self._slots_at = 0, -1e9
        self._out: dict[Future, tuple[LedgerKey, LoadedSubmission]] = {}
        """Futures sent and not yet collected -> (key, sub)."""
        self._local: Engine | None = None
        """The engine (on `_local_sandbox`, of this machine) that regrades a result a worker got wrong."""
        self._local_sandbox: Sandbox | PortableSandbox | None = None
        self.notices: list[str] = []
        """Said to the instructor as they happen: results refused and graded again here."""

    @contextlib.contextmanager
    def start(self, total: int, stop: threading.Event) -> Iterator[Ready]:
        try:
            try:
                self._connect()
                self._check_workers()
                self._install()
                yield Ready(self.isolation, f"{self.isolation} on {self.workers} Dask worker(s) at {self.spec}",
                            self.workers)
            finally:
                self.close()
        finally:
            stop.set()

    def grade(self, todo: Todo, tally: Tally, stop: threading.Event) -> None:
        recorded: set[LedgerKey] = set()
        for key, report, seconds, error in self._results(todo, stop):
            while self.notices:  # a worker's result refused and graded again here
                tally.on_event(Event(EventKind.WARNING, tally.done, tally.total, key.student_id,
                                     message=self.notices.pop(0)))
            if key in recorded:  # Dask may re-run a task whose worker died after it finished
                continue
            if report is not None:
                recorded.add(key)
            tally.take(key, report, seconds, error)

    @property
    def client(self) -> Client:
        """The connection to the scheduler, between `_connect` and `close`."""
        if self._client is None:
            raise RuntimeError("the cluster back-end is not connected (outside `start`)")
        return self._client

    def _connect(self) -> None:
        import dask
        from distributed import Client, LocalCluster

        security = security_for(self.spec)
        if self.spec.local_workers:
            # One task at a time per worker thread: a dying worker takes only the task it was running.
            self._scratch = tempfile.mkdtemp(prefix="grader-dask-")
            with dask.config.set({"distributed.scheduler.worker-saturation": 1.0,
                                  "temporary-directory": self._scratch}):
                self._cluster = LocalCluster(n_workers=self.spec.local_workers, threads_per_worker=1,
                                             processes=True, dashboard_address="127.0.0.1:0", host="127.0.0.1",
                                             protocol="tcp://" if security is None else "tls://", security=security,
                                             local_directory=self._scratch,
                                             resources={"GPU": 1} if self.device.type == "cuda" else None)
            self._client = Client(self._cluster, security=security)
            return
        try:
            self._client = Client(self.spec.address, timeout=30, security=security)
        except (OSError, TimeoutError) as e:
            raise GraderError(f"cannot reach the Dask scheduler at {self.spec.address}: {e}; start one with "
                              "`dask scheduler` and workers with `dask worker ADDRESS` (docs/cluster.md)") from None

    def _check_workers(self) -> None:
        import grader

        client = self.client
        try:
            client.wait_for_workers(1, timeout=NO_WORKERS_TIMEOUT_S)
        except TimeoutError:
            raise GraderError(f"no worker joined the scheduler at {self.spec} within {NO_WORKERS_TIMEOUT_S:.0f} s; "
                              f"start some with `dask worker {self.spec}`") from None
        facts = client.run(worker_facts, on_error="return")
        bad = []
        for addr, f in sorted(facts.items()):
            if isinstance(f, BaseException):
                bad.append(f"{addr} cannot run the grader ({f})")
            elif f["grader"] != grader.__version__:
                bad.append(f"{addr} has grader {f['grader']}")
        if bad:
            raise GraderError(f"the workers must run the same grader version as this machine "
                              f"({grader.__version__}): {'; '.join(bad)}; install attention-grader=="
                              f"{grader.__version__} on them (see docs/cluster.md)")
        if self.device.type == "cuda" and not self._gpu_slots():
            raise GraderError("--device cuda: no worker advertises a GPU; start GPU workers with "
                              "`dask worker ADDRESS --resources GPU=1` (one per GPU)")

    def _install(self) -> None:
        a = self.assignment
        plugin = GraderPlugin(self.plugin_name, assignment_files(a.dir), a.dir.name, str(self.device),
                              ignore_sigint=bool(self.spec.local_workers), lang=self.lang,
                              accept_isolation=self.accept_isolation)
        self.client.register_plugin(plugin, name=self.plugin_name)
        states = self.client.run(plugin_state, self.plugin_name, on_error="return")
        failed = [f"{addr}: {s.get('error') if isinstance(s, dict) else s}" for addr, s in sorted(states.items())
                  if not isinstance(s, dict) or "error" in s]
        if failed:
            raise GraderError(f"the sandbox could not start on {len(failed)} worker(s): {'; '.join(failed)}")
        self.workers = len(states)
        self.isolation = ", ".join(sorted({s["isolation"] for s in states.values()}))

    def _gpu_slots(self) -> int:
        gpus = self.client.run(worker_gpus, on_error="ignore")
        return sum(gpus.values())

    def _slots(self) -> int:
        """Worker threads that may take a task now (GPU workers' GPUs for cuda), asked at most once a second."""
        now = time.monotonic()
        if now - self._slots_at > 1.0:
            self._slots_at = now
            self._slots_now = (self._gpu_slots() if self.device.type == "cuda"
                               else sum(self.client.nthreads().values()))
        return self._slots_now

    def _results(self, todo: Todo, stop: threading.Event) -> Iterator[Result]:
        """Yield (key, report or None, seconds, error) per submission as they finish.

        A bounded window of tasks is out: three per worker thread, so that one task of a group is
        always waiting in the scheduler's queue (not on a worker: Dask counts a death against every
        task assigned to the dying worker, and with worker-saturation 1.0 a worker holds only the
        one it runs). GPU tasks are never queued there, so only one per GPU is out. After `stop` is
        set, nothing new is sent and what has not started is cancelled; what runs finishes.
        `grade` dedupes by key.
        """
        from distributed import wait

        resources = {"GPU": 1} if self.device.type == "cuda" else None
        pending = collections.deque(todo)
        out = self._out
        idle_since: float | None = None
        stopped = False
        while out or (pending and not stop.is_set()):
            slots = self._slots()
            idle_since = None if slots else (idle_since or time.monotonic())
            if idle_since is not None and time.monotonic() - idle_since > NO_WORKERS_TIMEOUT_S:
                raise GraderError(f"the cluster at {self.spec} has had no worker for {NO_WORKERS_TIMEOUT_S:.0f} s; "
                                  "results so far are saved: run the same command again to grade the rest")
            window = max(slots, 1) if resources else 3 * max(slots, 1) + 2
            batch: Todo = []
            payloads: list[dict] = []
            while pending and not stop.is_set() and len(out) + len(batch) < window:
                key, sub = pending.popleft()
                try:
                    payloads.append(pack(sub, key.student_id))
                    batch.append((key, sub))
                except OSError as e:  # changed or removed since it was loaded: retried next run
                    yield key, None, 0.0, f"cannot read {sub.path} again: {e.strerror or e}"
            if batch:
                # One graph per top-up, one task group ("grade") for all: the scheduler sees a group
                # larger than the cluster and queues it as root tasks instead of assigning it eagerly.
                keys = [("grade", key.student_id, uuid.uuid4().hex[:8]) for key, _ in batch]
                futures = self.client.map(grade_remote, [self.plugin_name] * len(batch), payloads, key=keys,
                                           pure=False, resources=resources)
                out.update(zip(futures, batch))
            if stop.is_set() and not stopped:
                stopped = True
                self._cancel_unstarted()
            try:
                done = wait(list(out), timeout=0.5, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                continue
            for fut in done:
                key, sub = out.pop(fut)
                yield self._collect(fut, key, sub)

    def _cancel_unstarted(self) -> None:
        running = {k for keys in self.client.processing().values() for k in keys}
        unstarted = [f for f in self._out if f.key not in running and not f.done()]
        self.client.cancel(unstarted)
        for f in unstarted:
            del self._out[f]

    def _collect(self, fut: Future, key: LedgerKey, sub: LoadedSubmission) -> Result:
        from distributed.scheduler import KilledWorker

        try:
            value = fut.result()
        except KilledWorker as e:
            return key, self._crash_report(key, sub, e), 0.0, ""
        except Exception as e:  # noqa: BLE001 - lost or cancelled: not recorded, retried next run
            return key, None, 0.0, f"{type(e).__name__}: {e}"
        if not isinstance(value, dict):
            value = {"report": value}
        if "error" in value:
            msg = str(value["error"]) + ("\n" + str(value.get("traceback", "")) if self.debug else "")
            return key, None, _seconds(value), msg
        try:
            report = report_from_dict(value["report"])
            problem = job_mismatch(report, key, sub, self.assignment)
        except Exception as e:  # noqa: BLE001 - whatever a worker sends back is data to check
            report, problem = None, f"it is not a result ({type(e).__name__}: {e})"
        if problem:
            return self._regrade_here(fut, key, sub, problem)
        return key, report, _seconds(value), ""

    def _regrade_here(self, fut: Future, key: LedgerKey, sub: LoadedSubmission, problem: str) -> Result:
        """A worker's result that is not the job it was sent: refused, and the submission graded
        again on this machine (its own sandbox, after the same checks), reported as a notice."""
        where = ", ".join(sorted(self.client.who_has(fut).get(fut.key, ()))) or "a worker"
        self.notices.append(f"the result {where} returned for {key.student_id} was refused ({problem}); "
                            f"{key.student_id} was graded again on this machine")
        t0 = time.perf_counter()
        report = self._local_engine().grade(sub, student_id=key.student_id)
        return key, report, time.perf_counter() - t0, ""

    def _local_engine(self) -> Engine:
        if self._local is None:
            from grader.grading.engine import limits_for
            from grader.grading.factory import batch_engines, sandbox_for

            sandbox = sandbox_for(limits_for(self.assignment), str(self.device),
                                  accept_isolation=self.accept_isolation)
            try:
                self._local = batch_engines(self.assignment, sandbox, self.device, 1, lang=self.lang)[0]
            except BaseException:
                sandbox.close()
                raise
            self._local_sandbox = sandbox
        return self._local

    def _crash_report(self, key: LedgerKey, sub: LoadedSubmission, e: Exception) -> GradeReport:
        """Every case ERROR ("crash"): grading this submission killed its Dask worker every time."""
        from grader.grading.outcomes import environment_of, submission_info, unrun_report
        from grader.grading.setups import compute_setup

        instances = self.assignment.instances()
        if self._crash_environment is None:
            setups = []
            if self.device.type == "cpu" or torch.cuda.is_available():  # for environment.dtypes, as in the workers' results
                setups = [compute_setup(self.assignment, i, self.device) for i in instances]
            self._crash_environment = environment_of(setups, self.device, self.isolation)
        tries = getattr(e, "allowed_failures", 0) + 1
        msg = tr("Grading this submission killed the grading process {n} times (for example memory far past the "
                 "limit), so none of its cases could be run.", n=tries)
        info = submission_info(sub, key.student_id)
        return unrun_report(self.assignment, instances, info, "crash", msg, self._crash_environment,
                            lang=choose(self.lang, self.assignment.lang))

    def close(self) -> None:
        """Cancel what is still out, remove the plugin (closing the workers' sandboxes), disconnect."""
        client, self._client = self._client, None
        if client is not None:
            if self._out:
                try:
                    client.cancel(list(self._out), force=True)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
                self._out.clear()
            if self.workers and client.status == "running":
                try:
                    client.unregister_worker_plugin(self.plugin_name)
                except Exception:  # noqa: BLE001 - a worker that is gone needs no teardown
                    pass
            client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = ""
        if self._local_sandbox is not None:
            self._local_sandbox.close()
            self._local_sandbox = self._local = None
