"""`Sandbox`: the isolation level and the warm zygote, shared by every worker it opens.

Guarantees: a worker runs under exactly the plan chosen at start-up (`IsolationPlan`; one that
applies anything else is refused); the environment self-test has passed before the first
submission's worker opens (unless turned off); `close` (also run at exit) kills every worker and
the zygote and removes every scratch dir and cgroup. Opening a worker never raises for the
student's faults: those end up in its `LoadReport`. The grader never imports student code.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Any

from grader.i18n import tr
from grader.sandbox.errors import SandboxError
from grader.sandbox.host import isolation as plans
from grader.sandbox.host import selftest, zygote
from grader.sandbox.host.process import Reaper, WorkerProcess
from grader.sandbox.host.reports import LoadReport
from grader.sandbox.host.submission import Submission, main_name, write_files
from grader.sandbox.host.worker import Worker
from grader.sandbox.jail import cgroups
from grader.sandbox.limits import Budget, Limits
from grader.timings import mark

LINUX = sys.platform.startswith("linux")


_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_SEQ = itertools.count(1)


@atexit.register
def _close_all() -> None:
    for sb in list(_LIVE):
        sb.close()


class Sandbox:
    """Owns the warm zygote and the isolation level; opens one `Worker` per submission.

    Thread-safe: one Sandbox (one zygote) may serve several grading threads at once. Requests to
    the zygote go through a lock (held for the fork alone: the rest of a worker's start runs in the
    new processes); each Worker belongs to the thread that opened it.
    """

    def __init__(self, limits: Limits = Limits(), *, device: str = "cpu", use_zygote: bool = True,
                 isolation: str = "auto", warm_meta: bool = True, prestarted: zygote.Prestart | None = None,
                 self_test: bool = True, accept_isolation: str | None = None, budget: Budget | None = None,
                 resident_pages: bool = True):
        """isolation: "auto" (strongest available) or "process" (rlimits, RSS polling, killpg only).

        warm_meta: have the zygote run its first meta-device op before any worker starts (paid
        once, instead of in every worker whose code touches the meta device). Pass False when
        no case that will run uses the meta device (e.g. a public-only self-check); a worker that
        touches it anyway still works, only slower.

        prestarted: a zygote started earlier by ``grader.sandbox.host.zygote.prestart`` (by default the
        pending one for this device, if any, is adopted).

        self_test: run the environment self-test (``grader.sandbox.host.selftest``) in a real worker
        before returning; raises ``EnvironmentBroken`` where this machine's jail would fail
        correct code, or where a limit the level claims did not fire.

        accept_isolation: the weaker level (its name) an instructor accepts where the self-test
        proves less than the level claims; it is then the level every result records.
        budget: what all of this sandbox's workers may use at once (one cgroup over them all).
        resident_pages: the zygote makes every page its workers may read resident (False: one
        submission whose author runs code here anyway; the read set applies: jail/resident.py).
        """
        if isolation not in ("auto", "process"):
            raise ValueError(f"isolation must be 'auto' or 'process', not {isolation!r}")
        self.limits = limits
        self.device = device
        self._lock = threading.Lock()
        self._zlock: Any = contextlib.nullcontext()
        """Held around each zygote request; a process lock once `share_with_forks` is called."""
        self._owner = True
        """False in a forked grading process: its close() leaves the zygote to the parent."""
        self._workers: weakref.WeakSet[Worker] = weakref.WeakSet()
        self._closed = False
        self._zygote: zygote.Zygote | None = None
        self._reaper: Reaper | None = None
        forking = use_zygote and LINUX
        pre = prestarted
        if pre is None and forking:
            pre = zygote.take(device, resident_pages)
        elif pre is not None and not (forking and pre.env == zygote.child_env(device)
                                      and (pre.zygote.resident_pages or not resident_pages) and zygote.claim(pre)):
            raise ValueError("this prestarted zygote cannot be used here (another device, no zygote, "
                             "no resident pages, or another Sandbox adopted it)")
        probe: subprocess.Popen | None  # the jail probe, where there is one (Linux)
        if pre is not None:
            self._root, self._env, probe = pre.root, pre.env, pre.probe
            self._zygote = pre.zygote
        else:
            zygote.remove_stale()
            self._root = zygote.make_root()
            self._env = zygote.child_env(device)
            probe = zygote.start_probe(self._env, self._root) if LINUX else None
            if forking:
                try:
                    self._zygote = zygote.Zygote(self._env, self._root, warm_meta=warm_meta,
                                                 resident_pages=resident_pages)
                except BaseException:
                    if probe is not None:
                        probe.kill()
                        probe.wait()
                    shutil.rmtree(self._root, ignore_errors=True)
                    raise
        self._direct = False
        _LIVE.add(self)
        try:
            self._plan = plans.choose(isolation, probe, self._env, self._root, device)
            if budget is not None and self._plan.hierarchy is not None:  # the workers' cgroups below the batch's
                self._plan = dataclasses.replace(self._plan, hierarchy=cgroups.make_batch(self._plan.hierarchy, budget))
            self._batch = self._plan.hierarchy if budget is not None else None
            self._sys_path = plans.worker_sys_path(self._plan.read_paths)
            self.features: frozenset[str] = self._plan.features
            self.isolation: str = self._plan.name
            # As root with namespaces and cgroups, the zygote forks each worker straight into a new
            # PID namespace and supervises it itself: one fork of the torch image per submission
            # instead of two (supervisor + worker), the same jail (docs/performance.md).
            self._direct = (self._zygote is not None and {"namespaces", "cgroup"} <= self.features
                            and not self._plan.userns and os.geteuid() == 0)
            if self._zygote is not None:
                self._zygote.wait_ready(self.limits.start_timeout_s)
                mark("zygote.ready", **{f"zygote_{k}": v for k, v in self._zygote.times.items()})
                if warm_meta:
                    self._zygote.warm_meta(self.limits.start_timeout_s)
                kept = "landlock" in self.features and "error" not in self._zygote.resident  # jail/resident.py
                self._plan = dataclasses.replace(self._plan, resident=kept)
            self.limits_note = selftest.limits_note(self.features, self._plan.hierarchy, limits, chosen=isolation, budget=budget)
            """What bounds each worker's resources here, in plain words (every result records it)."""
            if self_test:
                proof = selftest.check(self, meta=warm_meta or self._zygote is None,
                                       hierarchy=self._plan.hierarchy)
                self.isolation = selftest.proven_level(self.features, proof, accept=accept_isolation)
                if proof.unproven:
                    self.limits_note = tr("{limits} limit not proven, accepted by the instructor",
                                          limits=", ".join(proof.unproven))
        except BaseException:
            self.close()
            raise

    # -- sharing with forked grading processes --
    def share_with_forks(self) -> None:
        """Call before forking grading processes that will open workers from this Sandbox: zygote
        requests are then serialised across processes too (each is a send and its reply)."""
        import multiprocessing

        self._zlock = multiprocessing.get_context("fork").Lock()

    def adopt_after_fork(self) -> None:
        """In a process forked after `share_with_forks`: start with no workers and no reaper of its
        own, and leave the zygote to the parent (close() here only cleans up this process's workers)."""
        self._lock = threading.Lock()
        self._workers = weakref.WeakSet()
        self._reaper = None
        self._owner = False
        _LIVE.discard(self)

    # -- zygote --
    def warm_meta(self) -> None:
        """Have the zygote warm the meta device now (no-op when it did already)."""
        if self._zygote is not None:
            with self._lock, self._zlock:
                if self._closed:
                    raise SandboxError("the sandbox is closed")
                self._zygote.warm_meta(self.limits.start_timeout_s)

    @property
    def uses_zygote(self) -> bool:
        return self._zygote is not None

    @property
    def zygote_pid(self) -> int | None:
        """The zygote's pid (None: no zygote, each worker is a fresh process)."""
        return self._zygote.pid if self._zygote is not None else None

    @property
    def page_cache(self) -> dict:
        """The read set all its workers may read, and whether its pages were made resident (empty: not kept to it)."""
        return dict(self._zygote.resident) if self._zygote is not None and self._plan.resident else {}

    @property
    def meta_warm(self) -> bool:
        """The zygote has run its first meta-device op (False without a zygote)."""
        return self._zygote is not None and self._zygote.meta_warm

    @property
    def forks_direct(self) -> bool:
        """The zygote forks each worker straight into its own PID namespace (no supervisor)."""
        return self._direct

    @property
    def root(self) -> str:
        """The folder holding this sandbox's workers' scratch dirs."""
        return self._root

    # -- workers --
    def open(self, sub: Submission, *, started: Worker | None = None) -> Worker:
        """Start a worker for `sub` and run its code units. Never raises for the student's faults.
        `started`: the worker `start(sub)` returned for this submission earlier."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if started is None:
            w = self._spawn_for(sub)
        else:
            w = started
            w.wait_started()
        if sub.error:
            w.load = LoadReport(ok=False, message=sub.error)
        else:
            w.load = w.run_units(list(sub.units))
        return w

    def start(self, sub: Submission) -> Worker:
        """Fork a worker for `sub` now and write it the request to load the submission, without
        waiting for either: it boots and loads while the caller grades another submission. Hand it
        to ``open(sub, started=...)`` (or close it)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        w = self._spawn_for(sub, wait=False)
        if not sub.error:
            w.load_early(list(sub.units))
        return w

    def _spawn_for(self, sub: Submission, *, wait: bool = True) -> Worker:
        return self._spawn(main=main_name(sub), files=dict(sub.files or {}), wait=wait)

    def _spawn(self, *, main: str = "submission.py", files: dict[str, bytes] | None = None,
               wait: bool = True) -> Worker:
        seq = next(_SEQ)
        scratch = tempfile.mkdtemp(dir=self._root, prefix=f"w{seq}-")
        write_files(scratch, files or {})
        made = cgroups.make(self._plan.hierarchy, seq, self.limits) if self._plan.hierarchy else []
        cfg = plans.worker_config(self._plan, self.limits, scratch=scratch, main=main, cgroups=made,
                                  sys_path=self._sys_path, device=self.device)
        h_ch, c_ch = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        h_st, c_st = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        proc = None
        sup_pid = None
        try:
            if self._zygote is not None:
                with self._lock, self._zlock:
                    if self._closed:
                        raise SandboxError("the sandbox is closed")
                    req = {"op": "spawn", "direct": True, "cfg": cfg} if self._direct else {"op": "spawn"}
                    reply = self._zygote.request(req, [c_st.fileno(), c_ch.fileno(), out_w, err_w])
                sup_pid = reply.get("pid")
                if not sup_pid:
                    raise SandboxError(f"the zygote could not start a worker: {reply}")
            else:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "grader.sandbox.child.supervisor", str(c_st.fileno()), str(c_ch.fileno())],
                    pass_fds=[c_st.fileno(), c_ch.fileno()], stdin=subprocess.DEVNULL, stdout=out_w,
                    stderr=err_w, env=self._env, cwd=scratch, start_new_session=True)
                sup_pid = proc.pid
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            for s in (h_ch, h_st):
                s.close()
            cgroups.remove_unused(made)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            for s in (c_ch, c_st):
                s.close()
            for fd in (out_w, err_w):
                os.close(fd)
        process = WorkerProcess(status=h_st, supervisor=None if self._direct else sup_pid, proc=proc,
                                cgroups=made, scratch=scratch, polled="rss" in self.features)
        w = Worker(self.limits, self.isolation, self.features, process=process, channel=h_ch,
                   out_fd=out_r, err_fd=err_r, hand_over=self._hand_to_reaper)
        with self._lock:
            self._workers.add(w)
            closed = self._closed
        if closed:  # close() ran meanwhile and did not see this one
            w.close()
            raise SandboxError("the sandbox is closed")
        if not self._direct:  # a direct worker got it with the spawn request
            h_st.sendall((json.dumps(cfg) + "\n").encode())
        if wait:
            w.wait_started()
        return w

    def _hand_to_reaper(self, job) -> bool:
        """Hand a killed worker's clean-up to the reaper thread; False: do it now (closed, or backlog)."""
        with self._lock:
            if self._closed:
                return False
            if self._reaper is None:
                self._reaper = Reaper()
            return self._reaper.put(job)

    def close(self) -> None:
        """Kill every worker and the zygote; remove scratch dirs and cgroups. Idempotent, thread-safe."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            reaper, self._reaper = self._reaper, None
        for w in workers:
            try:
                w.close()
            except Exception:  # noqa: BLE001 - another thread's worker may be closing too
                pass
        if reaper is not None:
            reaper.stop()
        if not self._owner:
            return
        if batch := getattr(self, "_batch", None):
            cgroups.remove_batch(batch)
        if self._zygote is not None:
            self._zygote.stop()
            self._zygote = None
        shutil.rmtree(self._root, ignore_errors=True)
        _LIVE.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def open_sandboxes() -> list[Sandbox]:
    """The Sandboxes of this process not closed yet (each is closed at exit)."""
    return list(_LIVE)
