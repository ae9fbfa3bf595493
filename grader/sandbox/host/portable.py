"""`PortableSandbox`: workers that need only what every OS has — a spawned interpreter, pipes,
killing a process tree. Windows and macOS use it; on Linux it is chosen with ``--isolation
portable`` or ``GRADER_ISOLATION=portable``.

Each worker is a fresh ``python -m grader.sandbox.child.portable_worker`` (``subprocess``, never a fork
of the grader), talking the same data-only wire as every level over two pipes (``PipeChannel``),
its stdout and stderr captured on two more. What bounds it: wall-clock limits from outside (the
whole tree killed, ``PortableProcess``), its tree's resident memory polled against the limit
(psutil), bounded output and replies, rlimits where the OS has them. What does not: nothing is
hidden from it (it can read and write whatever the grader's user can, and reach the network), and
a process it detaches from its tree before the first look outlives it. For a student's own
self-check, not for grading other people's code on a shared machine (README, "Isolation by
platform").

A spare worker boots (imports torch) while the self-test runs, so the first submission's worker is
ready when the self-test ends; later ones boot while the one before is graded.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass

from grader.sandbox.errors import EnvironmentBroken, SandboxError
from grader.sandbox.host import selftest
from grader.sandbox.host.pipes import PipeChannel
from grader.sandbox.host.portable_process import PortableProcess, psutil
from grader.sandbox.host.reports import LoadReport
from grader.sandbox.host.submission import main_name, write_files
from grader.sandbox.host.worker import Worker
from grader.sandbox.limits import GiB, Limits
from grader.sandbox.wire import encode_frame

WINDOWS = sys.platform == "win32"
LEVEL = "portable"
"""The isolation level's name, as every result records it."""

_LIVE: weakref.WeakSet[PortableSandbox] = weakref.WeakSet()
_SEQ = itertools.count(1)


@atexit.register
def _close_all() -> None:
    for sb in list(_LIVE):
        sb.close()


class PortableWorker(Worker):
    """A `Worker` whose channel is pipes read by threads (`PipeChannel`); `first`: the frame written
    before any request, which gets no reply (the worker's configuration)."""

    def __init__(self, *args, first: bytes, **kwargs):
        self._first = first
        super().__init__(*args, **kwargs)

    def _open_channel(self, channel, out_fd: int, err_fd: int, process, tree_memory):
        requests, replies = channel
        return PipeChannel(requests, replies, out_fd, err_fd, self.limits, die=self._die, crashed=self._crashed,
                           dead=lambda: self._dead is not None, exited=process.exited, tree_memory=tree_memory,
                           first=self._first)


@dataclass
class _Booting:
    """A worker interpreter started and not yet given a submission."""

    popen: subprocess.Popen
    scratch: str
    requests: int
    replies: int
    out: int
    err: int


class PortableSandbox:
    """Opens one portable worker per submission; the same interface as ``Sandbox``. Thread-safe."""

    def __init__(self, limits: Limits = Limits(), *, device: str = "cpu", warm_meta: bool = True,
                 self_test: bool = True, accept_isolation: str | None = None):
        """warm_meta: the self-test also tries the meta device (each worker imports what it needs
        itself: there is no zygote to warm). accept_isolation: "portable" grades even where the
        memory poll was not seen to fire (psutil missing); that is then recorded."""
        self.limits = limits
        self.device = device
        self.features: frozenset[str] = frozenset({"rss"} | ({"rlimits"} if not WINDOWS else set()))
        self.isolation = LEVEL
        self.limits_note = (f"the portable level uses no cgroup: the worker's process tree is polled against "
                            f"{format(limits.memory_bytes / GiB, '.3g')} GiB of resident memory and killed at each "
                            f"time limit; there is no per-worker process or CPU cap")
        self._lock = threading.Lock()
        self._workers: weakref.WeakSet[Worker] = weakref.WeakSet()
        self._closed = False
        self._spares: list[_Booting] = []
        self._opened = 0
        self._root = tempfile.mkdtemp(prefix=f"grader-sbx-{os.getpid()}-")
        _LIVE.add(self)
        try:
            self._spares.append(self._boot())  # for the first submission, while the self-test runs
            if self_test:
                proof = selftest.check(self, meta=warm_meta)
                if proof.unproven:
                    self.isolation = self._accepted(proof, accept_isolation)
                    self.limits_note = "the memory limit was not proven, accepted by the instructor"
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _accepted(proof: selftest.Proof, accept: str | None) -> str:
        why = "; ".join(f"{k}: {v}" for k, v in proof.why.items())
        if accept == LEVEL:
            return f"{LEVEL} (accepted: memory limit not proven)"
        hint = "" if psutil is not None else " (install psutil)"
        raise EnvironmentBroken(f"the isolation level {LEVEL} claims a memory limit that did not fire in the "
                                f"self-test ({why}){hint}, so nothing was graded; to grade without it, pass "
                                f"--accept-isolation {LEVEL}")

    # -- what the grading code asks of any sandbox --
    uses_zygote = False
    zygote_pid = None
    meta_warm = False
    forks_direct = False

    @property
    def root(self) -> str:
        return self._root

    def warm_meta(self) -> None:
        """Nothing to warm: each worker is its own interpreter."""

    def share_with_forks(self) -> None:
        """Nothing is shared with forked grading processes but this object: each spawns its own workers."""

    def adopt_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._workers = weakref.WeakSet()
        self._spares = []
        _LIVE.add(self)

    # -- workers --
    def open(self, sub, *, started: Worker | None = None) -> Worker:
        """Start a worker for `sub` and run its code units. Never raises for the student's faults."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if started is None:
            w = self._spawn(sub)
        else:
            w = started
            w.wait_started()
        w.load = LoadReport(ok=False, message=sub.error) if sub.error else w.run_units(list(sub.units))
        return w

    def start(self, sub) -> Worker:
        """A worker for `sub`, its load request written at once, not waited for: it boots and
        loads while the caller grades another submission. Hand it to ``open(sub, started=...)``."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        w = self._spawn(sub, wait=False)
        if not sub.error:
            w.load_early(list(sub.units))
        return w

    def _spawn(self, sub, *, wait: bool = True) -> Worker:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            boot = self._spares.pop(0) if self._spares else None
            self._opened += 1
            more = self._opened >= 3  # a batch (the self-test, then two or more): keep one booting ahead
        if boot is None:
            boot = self._boot()
        if more:
            self._keep_spare()
        try:
            write_files(boot.scratch, dict(sub.files or {}))
        except BaseException:
            self._discard(boot)
            raise
        cfg = self._config(boot.scratch, main_name(sub))
        process = PortableProcess(boot.popen, boot.scratch)
        w = PortableWorker(self.limits, self.isolation, self.features, process=process,
                           channel=(boot.requests, boot.replies), out_fd=boot.out, err_fd=boot.err, hand_over=None,
                           first=encode_frame(cfg))
        with self._lock:
            self._workers.add(w)
            closed = self._closed
        if closed:
            w.close()
            raise SandboxError("the sandbox is closed")
        if wait:
            w.wait_started()
        return w

    def _keep_spare(self) -> None:
        def boot() -> None:
            try:
                spare = self._boot()
            except Exception:  # noqa: BLE001 - the next open boots one itself
                return
            with self._lock:
                if not self._closed and not self._spares:
                    self._spares.append(spare)
                    return
            self._discard(spare)

        with self._lock:
            if self._spares:
                return
        threading.Thread(target=boot, name="grader-portable-spare", daemon=True).start()

    def _config(self, scratch: str, main: str) -> dict:
        lim = self.limits
        return {"features": sorted(self.features - {"rss"}), "scratch": scratch, "main": main,
                "sys_path": worker_sys_path(), "cpu_seconds": int(2 * lim.submission_timeout_s) + 1,
                "max_file_bytes": lim.max_file_bytes,
                "address_space": max(3 * GiB, lim.memory_bytes + 3 * GiB // 2) if self.device == "cpu" else 0,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def _boot(self) -> _Booting:
        """Start a worker interpreter: it imports torch, then waits for its configuration."""
        seq = next(_SEQ)
        scratch = tempfile.mkdtemp(dir=self._root, prefix=f"w{seq}-")
        replies_r, replies_w = os.pipe()
        extra: dict = {}
        if sys.platform == "win32":
            import msvcrt

            handle = msvcrt.get_osfhandle(replies_w)
            os.set_handle_inheritable(handle, True)
            arg = str(handle)
            extra["startupinfo"] = subprocess.STARTUPINFO(lpAttributeList={"handle_list": [handle]})
            extra["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
        else:
            arg = str(replies_w)
            extra["pass_fds"] = (replies_w,)
            extra["start_new_session"] = True
        try:
            popen = subprocess.Popen([sys.executable, "-m", "grader.sandbox.child.portable_worker", arg],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=worker_env(self.device, scratch), cwd=scratch, close_fds=True, **extra)
        except BaseException:
            os.close(replies_r)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            os.close(replies_w)
        return _Booting(popen, scratch, requests=_own_fd(popen.stdin), replies=replies_r,
                        out=_own_fd(popen.stdout), err=_own_fd(popen.stderr))

    def _discard(self, boot: _Booting) -> None:
        proc = PortableProcess(boot.popen, boot.scratch)
        proc.kill()
        for fd in (boot.requests, boot.replies, boot.out, boot.err):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.remove_files()

    def close(self) -> None:
        """Kill every worker (and the spare); remove the scratch dirs. Idempotent, thread-safe."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            spares, self._spares = self._spares, []
        for w in workers:
            try:
                w.close()
            except Exception:  # noqa: BLE001 - another thread's worker may be closing too
                pass
        for boot in spares:
            self._discard(boot)
        shutil.rmtree(self._root, ignore_errors=True)
        _LIVE.discard(self)

    def __enter__(self) -> PortableSandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _own_fd(stream) -> int:
    """The fd under a Popen pipe, detached from its file object (the channel reads and writes it)."""
    fd = os.dup(stream.fileno())
    stream.close()
    return fd


def worker_env(device: str, scratch: str) -> dict[str, str]:
    """The worker's whole environment: what the OS needs to run Python (on Windows SYSTEMROOT and
    the like), one thread per library, the grader importable, HOME and the temp folder in its
    scratch dir."""
    import grader

    keep = ("SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "NUMBER_OF_PROCESSORS",
            "PROCESSOR_ARCHITECTURE") if WINDOWS else ()
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = os.environ.get("PATH", "") if WINDOWS else "/usr/local/bin:/usr/bin:/bin"
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1",
                "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(grader.__file__)))]
                                              + worker_sys_path()),
                "HOME": scratch, "USERPROFILE": scratch, "TMPDIR": scratch, "TEMP": scratch, "TMP": scratch})
    if not WINDOWS:
        env["LANG"] = "C.UTF-8"
    if device.startswith("cuda") and "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def worker_sys_path() -> list[str]:
    """The folders the worker imports from: this interpreter's, but not the current folder, the
    grader's own checkout or a test runner's folders (the worker sees the same modules a jailed
    worker does; nothing is hidden from its files, though)."""
    import grader

    own = {os.path.realpath(os.getcwd()), os.path.realpath(os.path.dirname(os.path.dirname(grader.__file__)))}
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    out = []
    for p in sys.path:
        if not p or not os.path.isabs(p) or not os.path.isdir(p):
            continue
        real = os.path.realpath(p)
        installed = any(real == x or real.startswith(x + os.sep) for x in prefixes)
        if real not in own and installed and p not in out:
            out.append(p)
    return out
