"""One portable worker's process, seen from the grader: its pid, its memory, killing its tree.

Needs only what every OS has, through psutil: the worker's tree is listed by parent pid (every
process seen while polling is remembered, so one that its parent left behind is still killed),
its memory is the resident set of the whole tree, and the kill is SIGKILL (TerminateProcess on
Windows) of every process of it, plus its process group on POSIX. The same interface as
``grader.sandbox.host.process.WorkerProcess``, which ``grader.sandbox.host.worker.Worker`` drives.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

try:
    import psutil
except ImportError:  # memory is then not polled (the self-test says so and stops)
    psutil = None

WINDOWS = sys.platform == "win32"


if sys.platform == "win32":
    def _kill_group(pid: int) -> None:
        """Windows has no process groups to kill: the tree walk above killed each process it saw."""
else:
    def _kill_group(pid: int) -> None:
        """The worker's session (``start_new_session``): what it started and the tree walk missed."""
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


class PortableProcess:
    """The OS side of one portable worker: the interpreter's Popen, its tree and scratch dir."""

    def __init__(self, popen: subprocess.Popen, scratch: str):
        self._popen = popen
        self._scratch = scratch
        self._lock = threading.Lock()
        self._seen: dict[int, Any] = {}
        """Every process of the tree seen so far (psutil.Process: its start time guards against a reused pid)."""
        self._killed_running = False
        self._root = None
        if psutil is not None:
            try:
                self._root = psutil.Process(popen.pid)
            except psutil.Error:
                pass

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def supervised_here(self) -> bool:
        """Closing waits here for the interpreter (there is no reaper thread for portable workers)."""
        return True

    @property
    def exit_report(self) -> dict | None:
        """How the worker ended, in the supervisor's terms (``{"status": {...}}``), once it has."""
        rc = self._popen.returncode
        if rc is None:
            return None
        if WINDOWS and self._killed_running:  # TerminateProcess left an exit code of our choosing
            return {"status": {}}  # "the worker stopped": Windows tells no more
        if rc < 0:  # POSIX: the status itself says how it ended, even when the kill came after
            return {"status": {"signal": -rc, "killed_by_grader": self._killed_running}}
        return {"status": {"exit": rc}}

    @property
    def cgroups(self) -> list[str]:
        return []

    @property
    def scratch(self) -> str:
        return self._scratch

    def wait_started(self, timeout: float) -> dict | None:
        """The interpreter runs from the moment Popen returned; its greeting comes on the channel."""
        return {"pid": self._popen.pid}

    def exited(self) -> bool:
        return self._popen.poll() is not None

    def _tree(self) -> list:
        """The worker and every descendant alive now (remembered for the kill)."""
        if self._root is None:
            return []
        try:
            procs = [self._root] + self._root.children(recursive=True)
        except psutil.Error:
            procs = []
        with self._lock:
            for p in procs:
                self._seen.setdefault(p.pid, p)
        return procs

    def tree_memory(self) -> int:
        """Bytes resident in the worker and its descendants (0 where psutil cannot tell)."""
        total = 0
        for p in self._tree():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        return total

    def oom_killed(self) -> bool:
        return False

    def kill(self) -> None:
        """Kill the worker and everything it started, and wait for the interpreter to end."""
        self.signal_kill()
        self.await_exit()

    def signal_kill(self) -> None:
        """Kill every process of the tree (those seen before too); no wait."""
        if self._popen.poll() is None:
            self._killed_running = True
        self._tree()
        with self._lock:
            procs = list(self._seen.values())
        for p in procs:
            try:
                p.kill()
            except Exception:  # noqa: BLE001 - gone already, or its pid reused (psutil refuses)
                pass
        _kill_group(self._popen.pid)
        try:
            self._popen.kill()
        except OSError:
            pass

    def await_exit(self) -> None:
        """Until the interpreter has ended (killed again when slow), then a last sweep of its tree."""
        try:
            self._popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.signal_kill()
            self._popen.wait()
        with self._lock:
            procs = list(self._seen.values())
        for p in procs:
            try:
                p.kill()
            except Exception:  # noqa: BLE001
                pass

    def reap(self) -> None:
        self.await_exit()

    def close_status(self) -> None:
        pass

    def remove_files(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
