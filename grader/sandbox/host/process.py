"""One worker's processes, seen from the grader: its pid, its end, killing it, cleaning up after it.

The supervisor (or, for a worker forked straight into its namespace, the zygote) reports on the
status socket, one JSON line each: ``{"pid": n}`` once the worker runs, ``{"status": {...}}``
once it has been reaped. Writing "k" (or closing the socket) asks for the kill. Killing here never
relies on the worker's cooperation: SIGKILL to its pid, to everything in its cgroups and, without
cgroups, to every descendant of the supervisor. `clean_up` leaves nothing behind: no process, no
cgroup, no scratch dir.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import time

from grader.sandbox.jail import cgroups as cg
from grader.sandbox.proctree import kill_tree, tree_rss


class WorkerProcess:
    """The OS side of one worker: status socket, pids, cgroups and scratch dir."""

    def __init__(self, *, status: socket.socket, supervisor: int | None, proc: subprocess.Popen | None,
                 cgroups: list[str], scratch: str, polled: bool):
        """supervisor: its pid (None: the zygote supervises); proc: the supervisor's Popen when this
        process started it; polled: no cgroup holds the worker ("rss"), so its tree is watched by pid."""
        self._st = status
        self._sup = supervisor
        self._proc = proc
        self._cgroups = cgroups
        self._scratch = scratch
        self._polled = polled
        self._pid: int | None = None
        self._status_buf = b""
        self._exit: dict | None = None

    @property
    def supervised_here(self) -> bool:
        """This process started the supervisor (no zygote): closing waits for it."""
        return self._proc is not None

    @property
    def exit_report(self) -> dict | None:
        """The status line reporting the worker's end (``{"status": {...}}``), once read."""
        return self._exit

    @property
    def cgroups(self) -> list[str]:
        return list(self._cgroups)

    @property
    def scratch(self) -> str:
        return self._scratch

    def wait_started(self, timeout: float) -> dict | None:
        """The first status line: ``{"pid": n}`` once the worker runs (else an error report, or
        None when nothing came in time)."""
        line = self.status_line(timeout)
        if line is not None and "pid" in line:
            self._pid = int(line["pid"])
        return line

    def tree_memory(self) -> int:
        """Bytes the supervisor and everything below it use (for "rss" polling)."""
        return tree_rss(self._sup)

    def oom_killed(self) -> bool:
        return cg.oom_killed(self._cgroups)

    def kill(self) -> None:
        """Kill the worker and everything it started; wait for the supervisor's report."""
        self.signal_kill()
        self.await_exit()

    def signal_kill(self) -> None:
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
        cg.sweep(self._cgroups, spare=self._sup, rounds=1)

    def await_exit(self) -> None:
        """Until the supervisor reports the worker's end (else kill it and its tree by force)."""
        cg.sweep(self._cgroups, spare=self._sup)
        if self._exit is None:
            line = self.status_line(3.0)
            while line is not None and "status" not in line:
                line = self.status_line(3.0)
        if self._exit is None:
            self._kill_supervisor()
            cg.sweep(self._cgroups, spare=self._sup)
            if self._polled or not self._cgroups:
                kill_tree(self._sup)

    def status_line(self, timeout: float) -> dict | None:
        """The next JSON line on the status socket (None: none in time, or not a JSON object)."""
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

    def reap(self) -> None:
        """Wait for the supervisor this process started (if it did)."""
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def close_status(self) -> None:
        self._st.close()

    def remove_files(self) -> None:
        """Remove the cgroups (killing anything left in them) and the scratch dir."""
        cg.remove(self._cgroups, spare=self._sup)
        shutil.rmtree(self._scratch, ignore_errors=True)
