"""Batch grading on a Dask cluster (`grader grade --cluster`): one task per submission.

    instructor (grader.batch.run)                          each Dask worker process
    ledger hits skipped before submitting              GraderPlugin.setup: the assignment's files
    payload = the submission's bytes, name, kind  -->    -> Sandbox (own warm zygote) + Engine (setups once)
                                                       grade_remote: bytes -> private temp dir -> load
    record each result once, by ledger key        <--    -> Engine.grade -> to_dict(report): plain JSON data

The workers grade exactly as a local run does (same Sandbox, limits and Engine); the instructor's
process stays the only writer of the ledger, gradebook, reports and exports. A worker that dies
costs nothing: Dask runs its task again elsewhere. A task that killed `allowed-failures + 1` workers
comes back as `KilledWorker` and is recorded as that submission's crash. `distributed` is optional
(the `cluster` extra) and imported only here.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from grader.errors import GraderError

INSTALL_HINT = "pip install 'attention-grader[cluster]'"
NO_WORKERS_TIMEOUT_S = 300.0
"""How long a batch waits for the scheduler to have a worker (at the start, or after all died)."""
_MAX_ASSIGNMENT_BYTES = 20 << 20

try:
    from distributed.diagnostics.plugin import WorkerPlugin as _PluginBase
except ImportError:  # the plugin is only ever built where distributed is installed
    _PluginBase = object


# --- the --cluster value ------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterSpec:
    address: str
    """A scheduler address (tcp://host:port, tls://...), or "" for a LocalCluster."""
    local_workers: int = 0
    """For local:N: N worker processes with one thread each."""

    def __str__(self) -> str:
        return f"local:{self.local_workers}" if self.local_workers else self.address


def parse_spec(text: str) -> ClusterSpec:
    """`local:N` or a scheduler address; GraderError naming the extra when distributed is missing."""
    m = re.fullmatch(r"local:(\d+)", text.strip())
    if m:
        if int(m.group(1)) < 1:
            raise GraderError(f"--cluster {text}: a local cluster needs at least one worker (local:2)")
        spec = ClusterSpec("", int(m.group(1)))
    elif re.fullmatch(r"(tcp|tls|ucx|inproc)://[^\s/]+", text.strip()):
        spec = ClusterSpec(text.strip())
    else:
        raise GraderError(f"--cluster {text!r}: expected local:N or a scheduler address like "
                          "tcp://scheduler-host:8786")
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        raise GraderError(f"--cluster needs Dask's 'distributed' package, which is not installed ({e}); "
                          f"install the extra: {INSTALL_HINT}") from None
    return spec


def device_for(spec: ClusterSpec, name: str):
    """The batch's device. local:N runs here, so it resolves as a local run; a remote scheduler's
    workers are other machines: "auto" means CPU there, and "cuda" is checked against the workers."""
    from grader.device import resolve_device
    import torch

    if spec.local_workers or name == "cpu":
        return resolve_device(name)
    if name not in ("auto", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda; got {name!r}")
    return torch.device("cpu" if name == "auto" else "cuda")


# --- what travels with a task -------------------------------------------------------------------

def pack(sub, student_id: str) -> dict:
    """A loaded submission as plain data: its file's bytes (a folder: relative path -> bytes)."""
    from grader.submission.load import read_folder

    payload = {"student_id": student_id, "name": Path(sub.path).name, "kind": sub.kind, "sha256": sub.sha256,
               "data": None, "files": None, "error": sub.error}
    if sub.error is None:
        if sub.kind == "folder":
            payload["files"] = read_folder(sub.path)
        else:
            payload["data"] = Path(sub.path).read_bytes()
    return payload


def unpack(payload: dict, *, main_module: str, cell_tag: str | None):
    """The payload written into a private temp dir and loaded there, as `load_submission` loads a path."""
    from grader.submission.load import LoadedSubmission, load_submission

    name = payload["name"]
    if payload["error"] is not None:
        return LoadedSubmission(id=payload["student_id"], path=name, kind=payload["kind"],
                                sha256=payload["sha256"], error=payload["error"])
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"bad submission name {name!r}")
    tmp = tempfile.mkdtemp(prefix="grader-task-")
    try:
        path = os.path.join(tmp, name)
        if payload["files"] is not None:
            _write_tree(path, payload["files"])
        else:
            with open(path, "wb") as f:
                f.write(payload["data"])
        sub = load_submission(path, main_module=main_module, cell_tag=cell_tag)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if sub.sha256 != payload["sha256"]:
        raise ValueError(f"{name} arrived with sha256 {sub.sha256[:12]}, expected {payload['sha256'][:12]}")
    return sub


def _write_tree(root: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad path in submission: {rel!r}")
        path = os.path.join(root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _assignment_files(folder: Path) -> dict[str, bytes]:
    files, total = {}, 0
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and not any(part.startswith((".", "__pycache__")) for part in rel.split("/")):
            files[rel] = p.read_bytes()
            total += len(files[rel])
    if total > _MAX_ASSIGNMENT_BYTES:
        raise GraderError(f"the assignment folder {folder} is larger than {_MAX_ASSIGNMENT_BYTES >> 20} MB; "
                          "it is sent to every worker")
    return files


# --- worker side --------------------------------------------------------------------------------

def worker_gpus(dask_worker) -> int:
    """GPU tasks this worker can run at once: its GPU resource, at most one per thread."""
    return int(min(dask_worker.state.total_resources.get("GPU", 0), dask_worker.state.nthreads))


def worker_facts() -> dict:
    """What the instructor checks before grading (run on each worker with client.run)."""
    import grader
    import torch

    return {"grader": grader.__version__, "torch": torch.__version__}


class GraderPlugin(_PluginBase):
    """Per worker process: the assignment, one Sandbox (warm zygote) and one Engine for the whole run."""

    def __init__(self, name: str, files: dict[str, bytes], folder: str, device: str, ignore_sigint: bool):
        self.name, self.files, self.folder, self.device = name, files, folder, device
        self.ignore_sigint = ignore_sigint
        """local:N: Ctrl-C in the terminal reaches the worker processes too; only the instructor acts on it."""
        self.engine = None
        self.error = ""
        self._sandbox = None
        self._tmp = ""

    async def setup(self, worker) -> None:
        import asyncio
        import signal

        if self.ignore_sigint and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        import torch

        from grader.assignment.spec import load_assignment
        from grader.grading.engine import Engine, limits_for
        from grader.sandbox import Sandbox

        try:
            torch.set_num_threads(1)  # one task at a time per worker process, like one local slot
            _remove_stale_assignments()
            self._tmp = tempfile.mkdtemp(prefix=f"grader-assignment-{os.getpid()}-")
            root = os.path.join(self._tmp, self.folder)
            _write_tree(root, self.files)
            a = load_assignment(root)
            self._sandbox = Sandbox(limits_for(a), device=self.device)
            self.engine = Engine(a, self._sandbox, device=torch.device(self.device))
            self.engine.prepare()
        except Exception as e:  # noqa: BLE001 - reported to the instructor, who refuses to start
            self.error = f"{type(e).__name__}: {e}"
            self.teardown(None)

    def teardown(self, worker) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""


def _remove_stale_assignments() -> None:
    """Assignment copies left by worker processes that were killed (SIGKILL skips the plugin's teardown)."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        pid = name.split("-")[2] if name.startswith("grader-assignment-") else ""
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def plugin_state(name: str, dask_worker) -> dict:
    """The isolation level of a worker's sandbox for this run, or why it could not start."""
    plugin = dask_worker.plugins.get(name)
    if plugin is None:
        return {"error": "the grader plugin is not installed on this worker"}
    if plugin.engine is None:
        return {"error": plugin.error or "the sandbox is not ready"}
    return {"isolation": plugin.engine.sandbox.isolation}


def grade_remote(plugin_name: str, payload: dict) -> dict:
    """The task: grade one submission on this worker; {"report": canonical JSON} or {"error": why}."""
    import traceback

    from distributed import get_worker

    from grader.results import to_dict

    t0 = time.perf_counter()
    plugin = get_worker().plugins.get(plugin_name)
    engine = getattr(plugin, "engine", None)
    if engine is None:
        return {"error": f"the sandbox is not ready on this worker: {getattr(plugin, 'error', '') or 'no plugin'}"}
    try:
        a = engine.assignment
        sub = unpack(payload, main_module=a.main_module, cell_tag=a.cell_tag)
        report = engine.grade(sub, student_id=payload["student_id"])
        return {"report": to_dict(report), "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - a grader fault on one submission must not end the batch
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


# --- instructor side ----------------------------------------------------------------------------

class ClusterPool:
    """A connection to the cluster for one batch: checked workers, the plugin installed, tasks out."""

    def __init__(self, spec: ClusterSpec, assignment, device, *, debug: bool = False):
        self.spec, self.assignment, self.device, self.debug = spec, assignment, device, debug
        self.plugin_name = f"grader-{assignment.id}-{uuid.uuid4().hex[:12]}"
        self.isolation = ""
        self.workers = 0
        self._cluster = None
        self._scratch = ""
        """local:N: the workers' scratch folder, removed at the end."""
        self._client = None
        self._crash_engine = None
        self._slots_now, self._slots_at = 0, -1e9
        self._out: dict = {}
        """Futures sent and not yet collected -> (key, sub)."""

    def __enter__(self) -> "ClusterPool":
        try:
            self._connect()
            self._check_workers()
            self._install()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> None:
        import dask
        from distributed import Client, LocalCluster

        if self.spec.local_workers:
            # One task at a time per worker thread: a dying worker takes only the task it was running.
            self._scratch = tempfile.mkdtemp(prefix="grader-dask-")
            with dask.config.set({"distributed.scheduler.worker-saturation": 1.0,
                                  "temporary-directory": self._scratch}):
                self._cluster = LocalCluster(n_workers=self.spec.local_workers, threads_per_worker=1,
                                             processes=True, dashboard_address="127.0.0.1:0",
                                             local_directory=self._scratch,
                                             resources={"GPU": 1} if self.device.type == "cuda" else None)
            self._client = Client(self._cluster)
            return
        try:
            self._client = Client(self.spec.address, timeout=30)
        except (OSError, TimeoutError) as e:
            raise GraderError(f"cannot reach the Dask scheduler at {self.spec.address}: {e}; start one with "
                              "`dask scheduler` and workers with `dask worker ADDRESS`") from None

    def _check_workers(self) -> None:
        import grader

        client = self._client
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
        plugin = GraderPlugin(self.plugin_name, _assignment_files(a.dir), a.dir.name, str(self.device),
                              ignore_sigint=bool(self.spec.local_workers))
        self._client.register_plugin(plugin, name=self.plugin_name)
        states = self._client.run(plugin_state, self.plugin_name, on_error="return")
        failed = [f"{addr}: {s.get('error') if isinstance(s, dict) else s}" for addr, s in sorted(states.items())
                  if not isinstance(s, dict) or "error" in s]
        if failed:
            raise GraderError(f"the sandbox could not start on {len(failed)} worker(s): {'; '.join(failed)}")
        self.workers = len(states)
        self.isolation = ", ".join(sorted({s["isolation"] for s in states.values()}))

    def _gpu_slots(self) -> int:
        gpus = self._client.run(worker_gpus, on_error="ignore")
        return sum(gpus.values())

    def _slots(self) -> int:
        """Worker threads that may take a task now (GPU workers' GPUs for cuda), asked at most once a second."""
        now = time.monotonic()
        if now - self._slots_at > 1.0:
            self._slots_at = now
            self._slots_now = (self._gpu_slots() if self.device.type == "cuda"
                               else sum(self._client.nthreads().values()))
        return self._slots_now

    def grade(self, todo: list, stop: threading.Event) -> Iterator[tuple]:
        """Yield (key, report or None, seconds, error) per submission as they finish.

        A bounded window of tasks is out: three per worker thread, so that one task of a group is
        always waiting in the scheduler's queue (not on a worker: Dask counts a death against every
        task assigned to the dying worker, and with worker-saturation 1.0 a worker holds only the
        one it runs). GPU tasks are never queued there, so only one per GPU is out. After `stop` is
        set, nothing new is sent and what has not started is cancelled; what runs finishes.
        The caller dedupes by key.
        """
        from distributed import wait

        resources = {"GPU": 1} if self.device.type == "cuda" else None
        pending = collections.deque(todo)
        out = self._out
        idle_since = None
        stopped = False
        while out or (pending and not stop.is_set()):
            slots = self._slots()
            idle_since = None if slots else (idle_since or time.monotonic())
            if idle_since is not None and time.monotonic() - idle_since > NO_WORKERS_TIMEOUT_S:
                raise GraderError(f"the cluster at {self.spec} has had no worker for {NO_WORKERS_TIMEOUT_S:.0f} s; "
                                  "results so far are saved: run the same command again to grade the rest")
            window = max(slots, 1) if resources else 3 * max(slots, 1) + 2
            batch, payloads = [], []
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
                futures = self._client.map(grade_remote, [self.plugin_name] * len(batch), payloads, key=keys,
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
        running = {k for keys in self._client.processing().values() for k in keys}
        unstarted = [f for f in self._out if f.key not in running and not f.done()]
        self._client.cancel(unstarted)
        for f in unstarted:
            del self._out[f]

    def _collect(self, fut, key, sub) -> tuple:
        from distributed.scheduler import KilledWorker

        from grader.results import report_from_dict

        try:
            value = fut.result()
        except KilledWorker as e:
            return key, self._crash_report(key, sub, e), 0.0, ""
        except Exception as e:  # noqa: BLE001 - lost or cancelled: not recorded, retried next run
            return key, None, 0.0, f"{type(e).__name__}: {e}"
        if "error" in value:
            msg = value["error"] + ("\n" + value.get("traceback", "") if self.debug else "")
            return key, None, value.get("seconds", 0.0), msg
        return key, report_from_dict(value["report"]), value["seconds"], ""

    def _crash_report(self, key, sub, e):
        """Every case ERROR ("crash"): grading this submission killed its Dask worker every time."""
        import torch

        from grader.grading.engine import Engine, submission_info

        if self._crash_engine is None:
            self._crash_engine = Engine(self.assignment, _Isolation(self.isolation), device=self.device)
            if self.device.type == "cpu" or torch.cuda.is_available():
                self._crash_engine.prepare()  # for environment.dtypes, as in the workers' results
        tries = getattr(e, "allowed_failures", 0) + 1
        msg = (f"Grading this submission killed the grading process {tries} times (for example memory far past "
               "the limit), so none of its cases could be run.")
        info = submission_info(sub, key.student_id)
        return self._crash_engine.report_without_results(info, "crash", msg)

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


@dataclass(frozen=True)
class _Isolation:
    """Stands in for a Sandbox where an Engine only builds reports (the workers' isolation level)."""

    isolation: str
