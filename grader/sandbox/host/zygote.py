"""Start the sandbox's zygote before this process imports torch. Torch-free: standard library only.

A cold ``grader check`` pays ``import torch`` twice, once here and once in the zygote. On two
cores the two imports can run side by side, but only if the zygote is started *before* this
process imports torch::

    from grader.sandbox.host.zygote import prestart
    prestart("cpu")                    # first thing; returns at once
    ...                                # import torch, load the assignment and the submission
    sandbox = Sandbox(limits, device="cpu", warm_meta=False)   # adopts the zygote started above

``Sandbox(...)`` adopts a pending prestart made for the same device (it waits for the zygote's
ready message there, with its own ``Limits.start_timeout_s``); nothing else changes: the zygote,
its environment and the isolation level are exactly those of a zygote the Sandbox starts itself.
A prestart that no Sandbox adopts is stopped at exit (and the zygote exits on its own when this
process dies: its control socket reaches EOF).

Also home to the pieces of the zygote's start that the Sandbox shares: the child environment, the
clean-up of stale scratch roots and cgroups, and the ``Zygote`` handle.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence

from grader.sandbox.errors import SandboxError
from grader.sandbox.host.process import dead, descendants
from grader.sandbox.jail import enter

LINUX = sys.platform.startswith("linux")


def child_env(device: str) -> dict[str, str]:
    """The whole environment of the zygote (a large batch's adds `HUGE_HEAP`), the jail probe and fresh workers."""
    import grader

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1",
           "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(grader.__file__)))}
    if device.startswith("cuda") and "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def added_libraries() -> list[str]:
    """The folders on a worker's sys.path that the zygote's does not have: those PYTHONPATH and
    .pth files add outside the interpreter's installation (not the grader's own checkout). The
    zygote lets its workers read them whole (``grader.sandbox.jail.resident``)."""
    import grader
    from grader.sandbox.jail.paths import library_path

    pkg = os.path.dirname(os.path.realpath(grader.__file__))
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    out = []
    for p in library_path():
        real = os.path.realpath(p)
        if real == os.path.dirname(pkg) or enter.below(real, pkg) or enter.below(pkg, real):
            continue
        if not any(real == pre or enter.below(real, pre) for pre in prefixes) and os.path.isdir(real):
            out.append(real)
    return out


def remove_stale() -> None:
    """Scratch roots left by a grader that was killed (SIGKILL skips clean-up); its cgroups are
    removed once the sandbox has found its cgroup hierarchy (`grader.sandbox.host.isolation.choose`)."""
    tmp = tempfile.gettempdir()
    try:
        for name in os.listdir(tmp):
            if name.startswith("grader-sbx-") and dead(name.split("-")[2]):
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
    except OSError:
        pass


def make_root() -> str:
    root = tempfile.mkdtemp(prefix=f"grader-sbx-{os.getpid()}-")
    os.chmod(root, 0o711)
    return root


def start_probe(env: dict[str, str], root: str) -> subprocess.Popen:
    """The jail probe (jail/enter.py as a script: standard library only), started, not awaited."""
    return subprocess.Popen([sys.executable, "-I", enter.__file__], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root)


def probe_result(proc: subprocess.Popen) -> dict:
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {}
    try:
        return json.loads(out) if proc.returncode == 0 else {}
    except ValueError:
        return {}


HUGE_HEAP = {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
"""Added to the environment of a zygote started with ``huge_heap``: its heap (~190 MB once torch is
imported) in transparent huge pages, so that every fork copies, and every worker's exit unmaps,
one entry per 2 MiB instead of one per 4 KiB page (~8 ms of CPU less a submission, fork and exit). Python objects go
through malloc (pymalloc's own arenas are 1 MiB each, too small for a huge page) and glibc's malloc
asks for huge pages; a C library or kernel without them ignores it. It makes the zygote's import
of torch ~0.25 s slower, which only a large batch repays (docs/performance.md)."""


class Zygote:
    """The zygote process (``python -m grader.sandbox.child.zygote``) and the grader's end of its socket.

    Not thread-safe by itself: the Sandbox serialises requests under its lock.
    """

    def __init__(self, env: dict[str, str], root: str, *, warm_meta: bool, resident_pages: bool = True,
                 huge_heap: bool = False):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        debug = os.environ.get("GRADER_SANDBOX_DEBUG")
        argv = [sys.executable, "-m", "grader.sandbox.child.zygote", str(child.fileno())]
        if warm_meta:
            argv.append("--warm-meta")
        if not resident_pages:
            argv.append("--no-resident-pages")
        for folder in added_libraries():
            argv += ["--library", folder]
        try:
            self.proc = subprocess.Popen(
                argv, pass_fds=[child.fileno()], env={**env, **HUGE_HEAP} if huge_heap else env, cwd=root,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None if debug else subprocess.DEVNULL,
                start_new_session=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.sock: socket.socket | None = parent
        self.pid = self.proc.pid
        self.meta_warm = warm_meta
        self.resident_pages = resident_pages
        """The zygote makes every page its workers may read resident (False: the read set only)."""
        self.ready = False
        self.times: dict[str, float] = {}
        """When the zygote started, had imported torch and had warmed up (its ready message)."""
        self.resident: dict = {}
        """What the zygote made resident for its workers' reads (``grader.sandbox.jail.resident``):
        files, bytes, read_bytes, seconds; or an error, and then its workers go without that layer."""

    def wait_ready(self, timeout: float) -> None:
        """Block until the zygote has imported torch (and warmed what it was asked to)."""
        if self.ready:
            return
        if self.sock is None:
            raise SandboxError("the sandbox zygote was stopped")
        self.sock.settimeout(timeout)
        try:
            ready = json.loads(self.sock.recv(4096) or b"{}")
        except (OSError, ValueError):
            ready = {}
        finally:
            if self.sock is not None:
                self.sock.settimeout(None)
        if not ready.get("ready"):
            raise SandboxError("the sandbox zygote did not start")
        resident = ready.get("resident")
        self.resident = resident if type(resident) is dict else {"error": "none"}
        self.ready = True
        times = ready.get("times")
        if isinstance(times, dict):
            self.times = {k: float(v) for k, v in times.items() if isinstance(v, (int, float))}

    def request(self, msg: dict, fds: Sequence[int] = (), timeout: float | None = None) -> dict:
        """One request and its reply (the caller holds the Sandbox's lock)."""
        if self.sock is None:
            raise SandboxError("the sandbox zygote was stopped")
        data = json.dumps(msg).encode()
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.send(data)
        self.sock.settimeout(timeout)
        try:
            return json.loads(self.sock.recv(4096) or b"{}")
        except (OSError, ValueError):
            return {}
        finally:
            self.sock.settimeout(None)

    def warm_meta(self, timeout: float) -> None:
        """Ask the zygote to run its first meta-device op now (its imports, paid once)."""
        if self.meta_warm:
            return
        reply = self.request({"op": "warm_meta"}, timeout=timeout)
        if not reply.get("ok"):
            raise SandboxError(f"the sandbox zygote could not warm the meta device: {reply}")
        resident = reply.get("resident")
        self.resident = resident if type(resident) is dict else {"error": "none"}
        self.meta_warm = True

    def stop(self) -> None:
        """Close the socket and SIGKILL the zygote; kill anything still below it. Never waits for a
        graceful exit (the zygote has nothing to flush: it ends with os._exit(0) anyway)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc.returncode is not None:
            return
        left = descendants(self.pid) if LINUX else []
        try:
            os.killpg(self.pid, signal.SIGKILL)  # its own session and group (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass
        # Supervisors die with it (PR_SET_PDEATHSIG) and workers with them; kill them here as well,
        # so that nothing depends on that: each is in its own session.
        for p in left:
            for kill in (os.killpg, os.kill):
                try:
                    kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Prestart:
    """A zygote (and the jail probe) started early; adopted by the next matching ``Sandbox``."""

    def __init__(self, device: str, *, warm_meta: bool = False, resident_pages: bool = True,
                 huge_heap: bool = False):
        self.device = device
        # The zygote never touches a device: only its environment depends on the device (CUDA's
        # CUDA_VISIBLE_DEVICES, when set). "auto" guesses CUDA when that variable is set.
        self.env = child_env("cuda" if device == "auto" and "CUDA_VISIBLE_DEVICES" in os.environ else device)
        remove_stale()
        self.root = make_root()
        self.probe = start_probe(self.env, self.root)
        try:
            self.zygote = Zygote(self.env, self.root, warm_meta=warm_meta, resident_pages=resident_pages,
                                 huge_heap=huge_heap)
        except BaseException:
            self.probe.kill()
            self.probe.wait()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.adopted = False

    def close(self) -> None:
        """Stop what was started (when no Sandbox adopted it). Idempotent."""
        if self.adopted:
            return
        self.adopted = True
        self.zygote.stop()
        if self.probe.returncode is None:
            self.probe.kill()
        self.probe.wait()
        shutil.rmtree(self.root, ignore_errors=True)


_LOCK = threading.Lock()
_PENDING: list[Prestart] = []


def prestart(device: str = "cpu", *, warm_meta: bool = False, resident_pages: bool = True,
             huge_heap: bool = False) -> Prestart | None:
    """Start the zygote (and the jail probe) now, in the background; returns in a few ms.

    Call it first thing, before anything imports torch. ``device``: the device the Sandbox will
    be made for ("cpu", "cuda", "cuda:1", or "auto" when it is not known yet: a Sandbox whose
    zygote would have the same environment adopts it). ``warm_meta``: also run the zygote's meta-device
    warm-up; a Sandbox that asks for it later gets it either way. ``resident_pages``: as the
    Sandbox's (only a Sandbox that does without them adopts a zygote started without). ``huge_heap``:
    the zygote's heap in huge pages (`HUGE_HEAP`: for a large batch). Returns None where there
    is no zygote (not Linux) or it cannot be started (the Sandbox then starts its own and reports
    any error).
    """
    if not LINUX:
        return None
    try:
        p = Prestart(device, warm_meta=warm_meta, resident_pages=resident_pages, huge_heap=huge_heap)
    except Exception:  # noqa: BLE001 - the Sandbox will try again and report
        return None
    with _LOCK:
        _PENDING.append(p)
    return p


def take(device: str, resident_pages: bool = True) -> Prestart | None:
    """A pending prestart whose zygote is the one a Sandbox for `device` would start (the same
    environment, its pages made resident where `resident_pages` asks), now owned by the caller."""
    env = child_env(device)
    with _LOCK:
        for p in _PENDING:
            if p.env == env and p.zygote.proc.poll() is None and (p.zygote.resident_pages or not resident_pages):
                _PENDING.remove(p)
                p.adopted = True
                return p
    return None


def claim(p: Prestart) -> bool:
    """Take `p` for the caller; False when it was adopted or closed already."""
    with _LOCK:
        if p.adopted:
            return False
        if p in _PENDING:
            _PENDING.remove(p)
        p.adopted = True
        return True


def discard(p: Prestart | None) -> None:
    """Stop ``p`` unless a Sandbox adopted it: for callers that may end before making one."""
    if p is None:
        return
    with _LOCK:
        if p.adopted:
            return
        if p in _PENDING:
            _PENDING.remove(p)
    p.close()


@atexit.register
def _close_pending() -> None:
    with _LOCK:
        pending = list(_PENDING)
        _PENDING.clear()
    for p in pending:
        p.close()
