"""Grader side of the sandbox: choose the isolation level, start workers, enforce limits, validate replies.

The grader never imports student code. It talks to each worker over a dedicated socket (never the
worker's stdout) in wire frames, with every deadline enforced here: a worker past its time is
killed with SIGKILL together with everything it started.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import errno
import itertools
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable

from grader import untrusted
from grader.results import CellError
from grader.sandbox import jail, prestart, selftest
from grader.sandbox.errors import OffPlan, SandboxError, StudentError, WireError, WorkerCrashed, WorkerTimeout
from grader.sandbox.wire import (MAX_HEADER_BYTES, PREFIX, Handle, check_prefix, decode_frame,
                                 encode_frame)

LINUX = sys.platform.startswith("linux")
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Every limit applied to one submission's worker."""

    import_timeout_s: float = 60.0
    """Wall clock for running all code units (the notebook's cells / the module body)."""
    call_timeout_s: float = 10.0
    """Wall clock for one call (function, method, state_dict, vjp)."""
    submission_timeout_s: float = 300.0
    """Wall clock for the worker's whole life; RLIMIT_CPU is twice this."""
    memory_bytes: int = 2 * GiB
    max_pids: int = 64
    """Processes and threads (cgroup pids.max)."""
    max_file_bytes: int = 16 << 20
    max_output_bytes: int = 64 << 10
    """Captured stdout / stderr kept per stream."""
    kill_output_bytes: int = 8 << 20
    """Total output past which the worker is killed."""
    max_result_bytes: int = 64 << 20
    """Largest reply payload accepted from a worker; the engine lowers it per case to what the case
    can expect (``Worker.reply_cap``)."""
    scratch_bytes: int = 64 << 20
    """Bytes the worker may write (its scratch dir is a tmpfs of this size, with namespaces)."""
    scratch_files: int = 4096
    """Files and folders the worker may create in its scratch dir (with namespaces)."""
    cpu_quota: float = 1.0
    """CPUs a worker and everything it starts may use at once (cgroup cpu quota, where available)."""
    start_timeout_s: float = 120.0
    """Worker start-up (a fresh process imports torch); not charged to the student."""


@dataclass(frozen=True)
class NameInfo:
    name: str
    kind: str
    """"function", "class", "missing" or "other"."""
    signature: str | None
    params: tuple[str, ...] = ()
    available: tuple[str, ...] = ()
    """Top-level functions and classes the submission defines (for "did you mean" messages)."""
    type_name: str = ""
    """The value's type ("torch.Tensor"), for saying what a name is instead of a function."""


@dataclass(frozen=True)
class LoadReport:
    ok: bool
    """False when nothing can be graded (crash, timeout, or no unit ran and nothing was defined)."""
    message: str = ""
    cell_errors: list[CellError] = field(default_factory=list)
    failure: SandboxError | None = None
    """The WorkerTimeout / WorkerCrashed that ended loading, if any."""
    defined: tuple[str, ...] = ()


_LIVE: "weakref.WeakSet[Sandbox]" = weakref.WeakSet()
_SEQ = itertools.count(1)


@atexit.register
def _close_all() -> None:
    for sb in list(_LIVE):
        sb.close()


_child_env = prestart.child_env


class Sandbox:
    """Owns the warm zygote and the isolation level; opens one `Worker` per submission.

    Thread-safe: one Sandbox (one zygote) may serve several grading threads at once. Requests to
    the zygote go through a lock (a spawn is ~1 ms there: the rest of a worker's start runs in the
    new processes); each Worker belongs to the thread that opened it.
    """

    def __init__(self, limits: Limits = Limits(), *, device: str = "cpu", use_zygote: bool = True,
                 isolation: str = "auto", warm_meta: bool = True, prestarted: "prestart.Prestart | None" = None,
                 self_test: bool = True):
        """isolation: "auto" (strongest available) or "process" (rlimits, RSS polling, killpg only).

        warm_meta: have the zygote run its first meta-device op before any worker starts (~1 s
        once, instead of ~2 s in every worker whose code touches the meta device). Pass False when
        no case that will run uses the meta device (e.g. a public-only self-check); a worker that
        touches it anyway still works, only slower.

        prestarted: a zygote started earlier by ``grader.sandbox.prestart.prestart`` (by default the
        pending one for this device, if any, is adopted).

        self_test: run the environment self-test (``grader.sandbox.selftest``) in a real worker
        before returning; raises ``EnvironmentBroken`` where this machine's jail would fail
        correct code.
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
        self._workers: "weakref.WeakSet[Worker]" = weakref.WeakSet()
        self._closed = False
        self._zygote: prestart.Zygote | None = None
        self._reaper: _Reaper | None = None
        zygote = use_zygote and LINUX
        pre = prestarted
        if pre is None and zygote:
            pre = prestart.take(device)
        elif pre is not None and not (zygote and pre.env == _child_env(device) and prestart.claim(pre)):
            raise ValueError("this prestarted zygote cannot be used here (another device, no zygote, "
                             "or another Sandbox adopted it)")
        if pre is not None:
            self._root, self._env, probe = pre.root, pre.env, pre.probe
            self._zygote = pre.zygote
        else:
            prestart.remove_stale()
            self._root = prestart.make_root()
            self._env = _child_env(device)
            probe = prestart.start_probe(self._env, self._root) if LINUX else None
            if zygote:
                try:
                    self._zygote = prestart.Zygote(self._env, self._root, warm_meta=warm_meta)
                except BaseException:
                    if probe is not None:
                        probe.kill()
                        probe.wait()
                    shutil.rmtree(self._root, ignore_errors=True)
                    raise
        self._direct = False
        _LIVE.add(self)
        try:
            self._plan = self._choose(isolation, probe)
            self._sys_path = _worker_sys_path(self._plan["read_paths"])
            self.features: frozenset[str] = frozenset(self._plan["features"])
            order = ["namespaces", "uid", "landlock", "seccomp", "cgroup", "rss", "rlimits"]
            base = [] if "namespaces" in self.features else ["process"]
            self.isolation: str = "+".join(base + [f for f in order if f in self.features])
            # As root with namespaces and cgroups, the zygote forks each worker straight into a new
            # PID namespace and supervises it itself: one fork of the torch image per submission
            # instead of two (supervisor + worker). Same jail; opening and retiring a worker took
            # 19 -> 13.5 ms of CPU.
            self._direct = (self._zygote is not None and {"namespaces", "cgroup"} <= self.features
                            and not self._plan["userns"] and os.geteuid() == 0)
            if self._zygote is not None:
                self._zygote.wait_ready(self.limits.start_timeout_s)
                if warm_meta:
                    self._zygote.warm_meta(self.limits.start_timeout_s)
            if self_test:
                selftest.check(self, meta=warm_meta or self._zygote is None)
        except BaseException:
            self.close()
            raise

    # -- level --
    def _choose(self, isolation: str, probe_proc: subprocess.Popen | None) -> dict:
        feats = {"rlimits"}
        plan: dict[str, Any] = {"features": feats, "cgroup_bases": None, "hide": [],
                                "read_paths": [], "cover": [], "landlock_abi": 0, "userns": False}
        if isolation == "process" or not LINUX:
            # No namespaces, uid, Landlock or cgroups; the system-call filter still, where Linux has it.
            if LINUX and prestart.probe_result(probe_proc or prestart.start_probe(self._env, self._root)).get("seccomp"):
                feats.add("seccomp")
            elif probe_proc is not None:
                probe_proc.kill()
                probe_proc.wait()
            feats.add("rss")
            return plan
        # jail.py runs as a script (standard library only, ~50 ms), started with the zygote.
        probe = prestart.probe_result(probe_proc or prestart.start_probe(self._env, self._root))
        if probe.get("namespaces"):
            feats.add("namespaces")
            plan["userns"] = bool(probe.get("userns"))
        plan["read_paths"], plan["cover"] = jail.worker_paths()
        if probe.get("root"):
            hide = jail.hidden_ancestors(plan["read_paths"])
            if not hide or "namespaces" in feats:
                feats.add("uid")
                plan["hide"] = hide  # masked in the worker; the read paths below them are bound back
        if probe.get("landlock", 0) >= 1:
            feats.add("landlock")
            plan["landlock_abi"] = probe["landlock"]
        if probe.get("seccomp"):
            feats.add("seccomp")
        mem, pids = jail.cgroup_base("memory"), jail.cgroup_base("pids")
        if mem and pids:
            feats.add("cgroup")
            plan["cgroup_bases"] = (mem, pids, jail.cgroup_base("cpu"))
        else:
            feats.add("rss")
        return plan

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

    def _stop_zygote(self) -> None:
        if self._zygote is not None:
            self._zygote.stop()
            self._zygote = None

    @property
    def uses_zygote(self) -> bool:
        return self._zygote is not None

    # -- workers --
    def open(self, sub, *, started: "Worker | None" = None) -> "Worker":
        """Start a worker for `sub` and run its code units. Never raises for the student's faults.
        `started`: the worker `start(sub)` returned for this submission earlier."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if started is None:
            w = self._spawn_for(sub)
        else:
            w = started
            w._start()
        if getattr(sub, "error", None):
            w.load = LoadReport(ok=False, message=sub.error)
        else:
            w.load = w._run_units(list(sub.units))
        return w

    def start(self, sub, describe: list[str] = ()) -> "Worker":
        """Fork a worker for `sub` now and send it, ahead, the request to load the submission (and
        to describe `describe`), without waiting for any of it: it boots and loads while the caller
        grades another submission. Hand it to ``open(sub, started=...)`` (or close it)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        w = self._spawn_for(sub, wait=False)
        if not getattr(sub, "error", None):
            w.send_ahead([_request_frame(_load_msg(sub.units))]
                         + ([_request_frame(_describe_msg(describe))] if describe else []))
        return w

    def _spawn_for(self, sub, *, wait: bool = True) -> "Worker":
        return self._spawn(main=_main_name(sub), files=dict(getattr(sub, "files", {}) or {}), wait=wait)

    def _spawn(self, *, main: str = "submission.py", files: dict[str, bytes] | None = None,
               wait: bool = True) -> "Worker":
        seq = next(_SEQ)
        scratch = tempfile.mkdtemp(dir=self._root, prefix=f"w{seq}-")
        _write_files(scratch, files or {})
        cgroups = self._make_cgroups(seq)
        plan, lim = self._plan, self.limits
        cfg = {
            "features": sorted(plan["features"] - {"rss"}), "scratch": scratch, "main": main,
            "hide": plan["hide"], "read_paths": plan["read_paths"], "cover": plan["cover"],
            "scratch_bytes": lim.scratch_bytes, "scratch_inodes": lim.scratch_files,
            "landlock_abi": plan["landlock_abi"], "userns": plan["userns"], "cgroups": cgroups,
            "cpu_seconds": int(2 * lim.submission_timeout_s) + 1, "max_file_bytes": lim.max_file_bytes,
            "sys_path": self._sys_path,
            "address_space": (max(3 * GiB, lim.memory_bytes + 3 * GiB // 2)
                              if "rss" in self.features and self.device == "cpu" else 0),
            "nproc": 0, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
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
                    [sys.executable, "-m", "grader.sandbox.worker", str(c_st.fileno()), str(c_ch.fileno())],
                    pass_fds=[c_st.fileno(), c_ch.fileno()], stdin=subprocess.DEVNULL, stdout=out_w,
                    stderr=err_w, env=self._env, cwd=scratch, start_new_session=True)
                sup_pid = proc.pid
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            for s in (h_ch, h_st):
                s.close()
            _remove_cgroup_dirs(cgroups)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            for s in (c_ch, c_st):
                s.close()
            for fd in (out_w, err_w):
                os.close(fd)
        w = Worker(self, scratch=scratch, cgroups=cgroups, channel=h_ch, status=h_st, out_fd=out_r,
                   err_fd=err_r, supervisor=None if self._direct else sup_pid, proc=proc)
        with self._lock:
            self._workers.add(w)
            closed = self._closed
        if closed:  # close() ran meanwhile and did not see this one
            w.close()
            raise SandboxError("the sandbox is closed")
        if not self._direct:  # a direct worker got it with the spawn request
            h_st.sendall((json.dumps(cfg) + "\n").encode())
        if wait:
            w._start()
        return w

    def _make_cgroups(self, seq: int) -> list[str]:
        if not self._plan["cgroup_bases"]:
            return []
        mem_base, pids_base, cpu_base = self._plan["cgroup_bases"]
        name = f"grader-{os.getpid()}-{seq}"
        mem, pids = os.path.join(mem_base, name), os.path.join(pids_base, name)
        os.mkdir(mem)
        os.mkdir(pids)
        made = [mem, pids]
        if cpu_base:
            cpu = os.path.join(cpu_base, name)
            os.mkdir(cpu)
            made.append(cpu)
            period = 100_000
            _write(os.path.join(cpu, "cpu.cfs_period_us"), str(period))
            _write(os.path.join(cpu, "cpu.cfs_quota_us"), str(max(1000, int(period * self.limits.cpu_quota))))
        _write(os.path.join(mem, "memory.limit_in_bytes"), str(self.limits.memory_bytes))
        try:
            _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(self.limits.memory_bytes))
        except OSError:
            pass
        _write(os.path.join(pids, "pids.max"), str(self.limits.max_pids))
        return made

    def _retire(self, w: "Worker") -> bool:
        """Hand a killed worker's clean-up to the reaper thread; False: do it now (closed, or backlog)."""
        with self._lock:
            if self._closed:
                return False
            if self._reaper is None:
                self._reaper = _Reaper()
            return self._reaper.put(w)

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
        self._stop_zygote()
        shutil.rmtree(self._root, ignore_errors=True)
        _LIVE.discard(self)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _worker_sys_path(readable: list[str]) -> list[str]:
    """The worker's sys.path: this process's folders that the worker may read (all but the grader's
    own where nothing is hidden from it: the "process" level)."""
    if readable:
        return [p for p in jail.library_path() if os.path.isdir(p)
                and any(p == r or jail.below(p, r) for r in readable)]
    secret, checkout = jail.grader_paths()
    mine = secret + ([checkout] if checkout else [])
    return [p for p in jail.library_path() if os.path.isdir(p)
            and not any(p == m or jail.below(p, m) for m in mine)]


def _request_frame(msg: dict) -> bytes:
    """A request as the grader sends it: grader values only, handles by id alone (so that frames
    sent ahead and the requests that take them compare byte for byte)."""
    return encode_frame(msg, on_object=_refuse, handle_types=False)


def _load_msg(units) -> dict:
    return {"op": "load", "units": [{"label": u.label, "cell": u.cell, "source": u.source} for u in units]}


def _describe_msg(names: list[str]) -> dict:
    return {"op": "describe_all", "names": [str(n) for n in names]}


def dotted_type_name(value: object) -> str:
    """A type's dotted name as the worker reported it; anything else (a forged reply) becomes ""."""
    return value if isinstance(value, str) and re.fullmatch(r"[A-Za-z_][\w.]{0,79}", value) else ""


def _main_name(sub) -> str:
    if getattr(sub, "kind", "") == "ipynb":
        return os.path.basename(getattr(sub, "path", "submission.ipynb"))
    units = getattr(sub, "units", ())
    if units and units[0].cell is None:
        return os.path.basename(units[0].label)
    return "submission.py"


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _write_files(scratch: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        norm = os.path.normpath(rel)
        if os.path.isabs(norm) or norm.startswith("..") or "\x00" in norm:
            raise SandboxError(f"refusing to write {rel!r} outside the scratch dir")
        dest = os.path.join(scratch, norm)
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
        except OSError as e:  # the message names the submission's path, never the host's scratch dir
            why = e.strerror or type(e).__name__
            raise SandboxError(f"cannot write the submission's file {rel!r}: {why}") from None


class Worker:
    """One submission's jailed process. Calls raise `SandboxError`s; after a timeout, crash or
    invalid reply (WireError: the worker is killed too) it is dead."""

    def __init__(self, sandbox: Sandbox, *, scratch: str, cgroups: list[str], channel: socket.socket,
                 status: socket.socket, out_fd: int, err_fd: int, supervisor: int | None,
                 proc: subprocess.Popen | None):
        self._sb = sandbox
        self.limits = sandbox.limits
        self.isolation = sandbox.isolation
        self.load: LoadReport = LoadReport(ok=False, message="not loaded")
        self._scratch = scratch
        self._cgroups = cgroups
        self._ch = channel
        self._ch.setblocking(False)
        self._st = status
        self._fds = {"out": out_fd, "err": err_fd}
        for fd in self._fds.values():
            os.set_blocking(fd, False)
        self._kept = {"out": bytearray(), "err": bytearray()}
        self._total_out = 0
        self._sup = supervisor
        self._proc = proc
        self._pid: int | None = None
        self._status_buf = b""
        self._exit: dict | None = None
        self._dead: SandboxError | None = None
        self._kill_reason: str | None = None
        self._closed = False
        self._deadline = time.monotonic() + self.limits.start_timeout_s
        self._token = f"{os.getpid()}-{id(self)}"
        self.pid: int | None = None
        self._out = bytearray()  # request bytes not yet written to the channel
        self._in = bytearray()  # the reply frame being read (never more than one frame)
        self._sent: collections.deque[bytes] = collections.deque()  # requests whose replies are not yet read
        self.record: list[bytes] | None = None
        """When a list: every request frame sent is appended to it (to learn a call plan)."""
        self.reply_cap: int | None = None
        """Largest reply payload the current case can expect (set by the engine per case); a larger
        one is refused before it is read (never above ``limits.max_result_bytes``)."""

    # -- start and load --
    def _start(self) -> None:
        self._deadline = time.monotonic() + self.limits.start_timeout_s
        line = self._status_line(self.limits.start_timeout_s)
        if line is None or "pid" not in line:
            self._kill(None)
            raise SandboxError(f"the worker supervisor did not start: {line}")
        self._pid = self.pid = int(line["pid"])
        try:
            hello = self._request(None, self.limits.start_timeout_s, "starting the worker")
        except SandboxError as e:
            self.close()
            raise SandboxError(f"the worker did not start ({e}); stderr: {self.output()[1][-2000:]}") from e
        applied = set(hello.get("applied") or [])
        expected = set(self._sb.features) - {"rss"}
        if applied != expected:
            self.close()
            raise SandboxError(f"the worker applied {sorted(applied)} instead of {sorted(expected)}")
        self._deadline = time.monotonic() + self.limits.submission_timeout_s

    def _run_units(self, units: list) -> LoadReport:
        msg = _load_msg(units)
        try:
            reply = self._request(msg, self.limits.import_timeout_s, "loading the submission")
        except (WorkerTimeout, WorkerCrashed, WireError) as e:
            return LoadReport(ok=False, message=_load_failure_message(e), failure=e)
        if not reply.get("ok"):
            err = reply.get("error") or {}
            return LoadReport(ok=False, message=f"{err.get('type')}: {err.get('message')}")
        raw = [e for e in reply.get("cell_errors", []) if type(e) is dict]
        if any(e.get("errno") in DISK_ERRNOS for e in raw):
            crash = WorkerCrashed("disk", _disk_message(self.limits))
            return LoadReport(ok=False, message=_load_failure_message(crash), failure=crash)
        errors = [CellError(cell=e.get("cell"), error=str(e.get("error")), traceback=str(e.get("traceback")))
                  for e in raw]
        defined = tuple(str(x) for x in reply.get("defined", []))
        ok = bool(reply.get("completed")) or bool(defined)
        message = ""
        if errors:
            where = ", ".join(f"cell {e.cell}" if e.cell else "the module" for e in errors)
            message = f"{len(errors)} unit(s) raised while loading ({where}); grading went on."
            if not ok:
                message = f"The submission failed to load: {errors[0].error}"
        return LoadReport(ok=ok, message=message, cell_errors=errors, defined=defined)

    # -- public API --
    def output(self) -> tuple[str, str]:
        """Captured stdout and stderr (first `max_output_bytes` of each), never parsed; made safe
        by the untrusted-text rule (`grader.untrusted.text`)."""
        self._drain_output()
        return tuple(untrusted.text(self._kept[k].decode("utf-8", "replace"), None) for k in ("out", "err"))

    def describe(self, name: str) -> NameInfo:
        r = self._call({"op": "describe", "name": name}, "describing " + repr(name))
        return NameInfo(name=name, kind=_s(r.get("kind")), signature=r.get("signature"),
                        params=tuple(map(str, r.get("params") or [])),
                        available=tuple(map(str, r.get("available") or [])), type_name=dotted_type_name(r.get("type")))

    def describe_all(self, names: list[str]) -> dict[str, NameInfo]:
        """describe() for several names in one round trip."""
        names = [str(n) for n in names]
        r = self._call(_describe_msg(names), "describing " + ", ".join(map(repr, names)))
        infos = r.get("infos")
        if type(infos) is not list or len(infos) != len(names) or any(type(i) is not dict for i in infos):
            raise WireError("describe_all reply does not match the names asked for")
        return {n: NameInfo(name=n, kind=_s(i.get("kind")),
                            signature=i["signature"] if isinstance(i.get("signature"), str) else None,
                            params=tuple(map(str, i.get("params") or [])),
                            available=tuple(map(str, i.get("available") or [])),
                            type_name=dotted_type_name(i.get("type")))
                for n, i in zip(names, infos)}

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._call({"op": "call", "name": name, "args": list(args), "kwargs": kwargs},
                          f"calling {name}()")["value"]

    def call_method(self, handle: Handle, method: str, *args: Any, **kwargs: Any) -> Any:
        self._check_handle(handle)
        return self._call({"op": "call_method", "handle": handle, "method": method, "args": list(args),
                           "kwargs": kwargs}, f"calling {handle.type_name}.{method}()")["value"]

    def state_dict(self, handle: Handle) -> dict[str, Any]:
        self._check_handle(handle)
        value = self._call({"op": "state_dict", "handle": handle}, "reading state_dict()")["value"]
        if type(value) is not dict:
            raise WireError("state_dict reply is not a dict")
        return value

    def load_state_dict(self, handle: Handle, state: dict) -> None:
        self._check_handle(handle)
        self._call({"op": "load_state_dict", "handle": handle, "state": dict(state)}, "loading a state_dict")

    def vjp(self, target: str | tuple[Handle, str], args: Any, kwargs: dict | None = None, *,
            wrt: list[int], cotangent: Any, output_index: int | None = None) -> tuple[Any, list]:
        """Compute (out * cotangent).sum().backward() in the worker; grads of args[i] for i in wrt."""
        if isinstance(target, tuple):
            self._check_handle(target[0])
            tgt: Any = (target[0], str(target[1]))
            what = f"{target[0].type_name}.{target[1]}"
        else:
            tgt, what = str(target), str(target)
        r = self._call({"op": "vjp", "target": tgt, "args": list(args), "kwargs": dict(kwargs or {}),
                        "wrt": [int(i) for i in wrt], "cotangent": cotangent,
                        "output_index": output_index}, f"computing gradients of {what}")
        grads = r.get("grads")
        if type(grads) is not list or len(grads) != len(wrt):
            raise WireError("vjp reply has the wrong number of gradients")
        return r.get("value"), grads

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._closed

    def close(self) -> None:
        """Kill the worker and everything it started, and wait until all of it is gone and cleaned up."""
        if self._closed:
            return
        self._closed = True
        if self._dead is None:
            self._kill(None)
        self._finish()

    def retire(self) -> None:
        """close() without the wait: the worker and everything it started are sent SIGKILL before
        this returns; reaping them, removing the cgroups and the scratch dir run on the sandbox's
        reaper thread (Sandbox.close() waits for that). Falls back to close() when there is none."""
        if self._closed:
            return
        if self._dead is not None or self._proc is not None:
            self.close()
            return
        self._closed = True
        self._signal_kill()
        if not self._sb._retire(self):
            self._await_exit()
            self._finish()

    def _reaped(self) -> None:
        """On the reaper thread: the rest of retire()."""
        try:
            self._await_exit()
        finally:
            self._finish()

    def _finish(self) -> None:
        self._reap()
        for s in (self._ch, self._st):
            s.close()
        self._drain_output()
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._remove_cgroups()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --
    def _check_handle(self, handle: Any) -> None:
        if type(handle) is not Handle or handle.worker != self._token:
            raise SandboxError("this handle does not belong to this worker")

    def _call(self, msg: dict, phase: str) -> dict:
        reply = self._request(msg, self.limits.call_timeout_s, phase)
        if not reply.get("ok"):
            err = reply.get("error")
            if type(err) is not dict:
                raise WireError("error reply without details")
            if err.get("errno") in DISK_ERRNOS:
                self._die(WorkerCrashed("disk", _disk_message(self.limits)), "disk")
            raise StudentError(_s(err.get("type"))[:200], _s(err.get("message")), _s(err.get("traceback")))
        return reply

    def send_ahead(self, frames: Iterable[bytes]) -> None:
        """Queue request frames before the calls that will make them (a call plan): the worker runs
        them in order, back to back, and their replies wait here. The next request must then be the
        first queued frame, byte for byte, and takes its reply without a round trip; any other
        request raises `OffPlan` before anything is sent (the worker has already run queued calls
        that a straight run would not have made, so the caller starts a fresh worker)."""
        if self._closed or self._dead is not None:
            return
        for frame in frames:
            self._out += frame
            self._sent.append(frame)
        try:  # as much as the socket takes now: the worker starts on it at once
            del self._out[:self._ch.send(self._out)]
        except OSError:
            pass  # full (the rest goes while waiting for a reply), or closed (found out then)

    @property
    def queued(self) -> int:
        """Frames sent ahead and not yet taken by a request."""
        return len(self._sent)

    def replay(self, frames: list[bytes], timeout: float) -> None:
        """Run these requests again, in one write, and drop their replies: brings a fresh worker to
        the state another one reached by making them."""
        self.send_ahead(frames)
        while self._sent:
            self._next_frame(timeout, "repeating earlier calls", owed_after=len(self._sent) - 1)
            self._sent.popleft()

    def _request(self, msg: dict | None, timeout: float, phase: str) -> dict:
        """Send `msg` (None: just wait for the hello) and return its reply."""
        if self._closed:
            raise SandboxError("the worker is closed")
        if self._dead is not None:
            raise self._dead
        if msg is None:  # the hello comes before the replies to anything sent ahead
            return self._decode(self._next_frame(timeout, phase, owed_after=len(self._sent)), phase)
        frame = _request_frame(msg)
        if not self._sent:
            self._out += frame
            self._sent.append(frame)
        elif self._sent[0] != frame:
            raise OffPlan(phase)
        if self.record is not None:
            self.record.append(frame)
        reply = self._next_frame(timeout, phase, owed_after=len(self._sent) - 1)
        self._sent.popleft()
        return self._decode(reply, phase)

    def _next_frame(self, timeout: float, phase: str, owed_after: int) -> bytes:
        """The next reply frame (prefix included), writing queued requests while waiting for it.
        `owed_after`: replies still owed once this one is read (more bytes than that are an error)."""
        now = time.monotonic()
        limit_at = now + timeout
        deadline = min(limit_at, self._deadline)
        next_poll = now + 0.1
        need: tuple[int, int] | None = None
        while True:
            if need is None and len(self._in) >= PREFIX.size:
                try:
                    need = check_prefix(bytes(self._in[:PREFIX.size]), max_header=MAX_HEADER_BYTES,
                                        max_payload=self._reply_limit())
                except WireError as e:
                    self._die(WireError(f"invalid reply while {phase}: {e}"), "protocol")
            if need is not None and len(self._in) == PREFIX.size + need[0] + need[1]:
                frame = bytes(self._in)
                self._in.clear()
                if owed_after <= 0 and self._more_waiting():  # no other request is owed a reply
                    self._die(WireError(f"unexpected extra bytes while {phase}"), "protocol")
                return frame
            now = time.monotonic()
            if now >= deadline:
                seconds = timeout if limit_at <= self._deadline else self.limits.submission_timeout_s
                which = phase if limit_at <= self._deadline else f"{phase} (whole-submission limit)"
                self._die(WorkerTimeout(which, seconds), "timeout")
            if "rss" in self._sb.features and now >= next_poll:
                next_poll = now + 0.1
                if _tree_rss(self._sup) > self.limits.memory_bytes:
                    self._die(WorkerCrashed("memory", _memory_message(self.limits, phase)), "memory")
            rl = [self._ch] + [fd for fd in self._fds.values() if fd >= 0]
            out = self._out
            r, w, _ = select.select(rl, [self._ch] if out else [], [], min(0.1, max(0.0, deadline - now)))
            for fd in r:
                if fd is not self._ch:
                    self._read_output(fd)
            if w and out:
                try:
                    n = self._ch.send(out)
                    del out[:n]
                except BlockingIOError:
                    pass
                except OSError:
                    self._crashed(phase)
            if self._ch in r:
                # No further than this frame: what the worker sends beyond it stays in the socket
                # (bounded by the kernel), never piles up here.
                want = PREFIX.size + (need[0] + need[1] if need is not None else 0) - len(self._in)
                try:
                    chunk = self._ch.recv(min(1 << 20, want))
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self._crashed(phase)
                self._in += chunk

    def _reply_limit(self) -> int:
        cap = self.limits.max_result_bytes
        return cap if self.reply_cap is None else min(cap, self.reply_cap)

    def _more_waiting(self) -> bool:
        """Bytes on the channel that no request is waiting for (a worker writing to it itself)."""
        try:
            return bool(self._ch.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:
            return False

    def _decode(self, frame: bytes, phase: str) -> dict:
        hlen, _ = PREFIX.unpack_from(frame)
        h0 = PREFIX.size
        header = frame[h0:h0 + hlen]
        payload = memoryview(frame)[h0 + hlen:]
        try:
            reply = decode_frame(header, payload, on_handle=lambda i, t: Handle(i, t, self._token),
                                 device_map=_device_map, on_text=untrusted.wire_text)
        except WireError as e:
            self._die(WireError(f"invalid reply while {phase}: {e.message}"), "protocol")
        except Exception as e:  # e.g. a cuda tensor when this process has no CUDA
            self._die(WireError(f"invalid reply while {phase}: {e}"), "protocol")
        if type(reply.get("ok")) is not bool and reply.get("op") != "hello":
            self._die(WireError(f"reply without status while {phase}"), "protocol")
        return reply

    # -- output --
    def _read_output(self, fd: int) -> None:
        name = "out" if fd == self._fds["out"] else "err"
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os.close(fd)
            self._fds[name] = -1
            return
        kept = self._kept[name]
        room = self.limits.max_output_bytes - len(kept)
        if room > 0:
            kept += data[:room]
        self._total_out += len(data)
        if self._total_out > self.limits.kill_output_bytes and self._dead is None:
            self._die(WorkerCrashed("output", f"the submission printed more than "
                                    f"{self.limits.kill_output_bytes >> 20} MiB of output"), "output")

    def _drain_output(self) -> None:
        for _ in range(256):
            fds = [fd for fd in self._fds.values() if fd >= 0]
            if not fds:
                return
            r, _, _ = select.select(fds, [], [], 0)
            if not r:
                return
            for fd in r:
                try:
                    self._read_output(fd)
                except WorkerCrashed:
                    return

    # -- death --
    def _die(self, error: SandboxError, reason: str):
        self._kill_reason = reason
        self._kill(reason)
        self._dead = error
        raise error

    def _crashed(self, phase: str):
        """The channel closed: find out how the worker died, then raise WorkerCrashed."""
        self._kill("eof")
        st = (self._exit or {}).get("status", {})
        if self._oom_killed():
            err = WorkerCrashed("memory", _memory_message(self.limits, phase))
        elif "signal" in st:
            sig = st["signal"]
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            if sig == signal.SIGXCPU:
                err = WorkerCrashed("signal", f"the worker used up its CPU time while {phase}")
            else:
                err = WorkerCrashed("signal", f"the worker was killed by {name} while {phase}")
        elif "exit" in st:
            err = WorkerCrashed("exit", f"the submission's process exited (exit code {st['exit']}) while "
                                f"{phase}; code that calls os._exit() or exit() stops its own grading")
        else:
            err = WorkerCrashed("exit", f"the worker stopped while {phase}")
        self._dead = err
        raise err

    def _oom_killed(self) -> bool:
        for path in self._cgroups:
            try:
                with open(os.path.join(path, "memory.oom_control")) as f:
                    for line in f:
                        if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                            return True
            except OSError:
                continue
        return False

    def _kill(self, reason: str | None) -> None:
        """Kill the worker and everything it started; wait for the supervisor's report."""
        self._signal_kill()
        self._await_exit()

    def _signal_kill(self) -> None:
        """SIGKILL the worker (the PID 1 of its namespace) and every process in its cgroups; no wait."""
        try:
            self._st.sendall(b"k")
        except OSError:
            pass
        if self._pid and self._exit is None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._sweep_cgroups(rounds=1)

    def _await_exit(self) -> None:
        """Until the supervisor reports the worker's end (else kill it and its tree by force)."""
        self._sweep_cgroups()
        if self._exit is None:
            line = self._status_line(3.0)
            while line is not None and "status" not in line:
                line = self._status_line(3.0)
        if self._exit is None:
            self._kill_supervisor()
            self._sweep_cgroups()
            if "rss" in self._sb.features or not self._cgroups:
                _kill_tree(self._sup)

    def _status_line(self, timeout: float) -> dict | None:
        end = time.monotonic() + timeout
        while b"\n" not in self._status_buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self._st], [], [], left)
            if not r:
                return None
            try:
                chunk = self._st.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._status_buf += chunk
        line, _, self._status_buf = self._status_buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if isinstance(msg, dict) and "status" in msg:
            self._exit = msg
        return msg if isinstance(msg, dict) else None

    def _kill_supervisor(self) -> None:
        if self._sup:
            try:
                os.kill(self._sup, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def _sweep_cgroups(self, rounds: int = 100) -> None:
        for path in self._cgroups:
            for i in range(rounds):
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        pids = [int(x) for x in f.read().split()]
                except OSError:
                    break
                pids = [p for p in pids if p != self._sup]
                if not pids:
                    break
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                if i + 1 < rounds:
                    time.sleep(0.005)

    def _remove_cgroups(self) -> None:
        for path in self._cgroups:
            for _ in range(200):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self._sweep_cgroups()
                    time.sleep(0.01)


def _remove_cgroup_dirs(paths: list[str]) -> None:
    for path in paths:
        try:
            os.rmdir(path)
        except OSError:
            pass


class _Reaper:
    """A thread that finishes retired workers' clean-up (Worker.retire), off the grading path."""

    MAX_BACKLOG = 8

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="grader-sandbox-reaper", daemon=True)
        self._thread.start()

    def put(self, w: "Worker") -> bool:
        if self._q.qsize() >= self.MAX_BACKLOG:
            return False
        self._q.put(w)
        return True

    def _run(self) -> None:
        while True:
            w = self._q.get()
            if w is None:
                return
            try:
                w._reaped()
            except Exception:  # noqa: BLE001 - one worker's clean-up must not stop the others'
                pass

    def stop(self) -> None:
        """Finish every retired worker's clean-up, then end the thread."""
        self._q.put(None)
        self._thread.join()


def _refuse(value: Any) -> Any:
    raise SandboxError(f"cannot send a {type(value).__name__} to the worker: only tensors, numbers, "
                       "strings, None, lists, tuples, str-keyed dicts and handles cross")


def _device_map(device: str) -> str:
    return device


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else str(v))


DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _disk_message(limits: Limits) -> str:
    return (f"your code wrote more than its files may hold ({limits.scratch_bytes >> 20} MiB and "
            f"{limits.scratch_files} files in all, {limits.max_file_bytes >> 20} MiB in one file), "
            "so it was stopped")


def _memory_message(limits: Limits, phase: str) -> str:
    return f"the worker went over its memory limit of {limits.memory_bytes / GiB:.2g} GiB while {phase}"


def _load_failure_message(e: SandboxError) -> str:
    if isinstance(e, WorkerTimeout):
        return (f"Loading the submission took longer than {e.seconds:g} s. Move long-running code "
                "(training loops, demos) out of the top level or behind `if __name__ == \"__main__\":`.")
    return f"The submission could not be loaded: {e}"


descendants = prestart.descendants


def _tree_rss(root: int | None) -> int:
    if not root or not os.path.isdir("/proc"):
        return 0
    # PSS, not RSS: forked processes share torch's pages, which RSS would count once per process.
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in [root] + descendants(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * page
            except (OSError, ValueError, IndexError):
                continue
        except (ValueError, IndexError):
            continue
    return total


def _kill_tree(root: int | None) -> None:
    if not root or not os.path.isdir("/proc"):
        return
    for _ in range(5):
        pids = descendants(root)
        if not pids:
            return
        for p in pids:
            try:
                os.killpg(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
