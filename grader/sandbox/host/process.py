"""One worker's processes, seen from the grader: its pid, its end, killing it, cleaning up after it.

The supervisor (or, for a worker forked straight into its namespace, the zygote) reports on the
status socket, one JSON line each: ``{"pid": n}`` once the worker runs, ``{"status": {...}}``
once it has been reaped. Writing "k" (or closing the socket) asks for the kill. Killing here never
relies on the worker's cooperation: SIGKILL to its pid, to everything in its cgroups and, without
cgroups, to every descendant of the supervisor. `clean_up` leaves nothing behind: no process, no
cgroup, no scratch dir.

Also here: a process tree through psutil (`descendants`, `tree_rss`, `kill_tree`, `dead`), on every
platform: used where no cgroup holds a worker (the "rss" feature: its memory is polled every
`Channel.poll_interval` while it runs, and at the end every descendant is killed), by the zygote's
stop and by the clean-up of a killed grader's leftovers; so the memory limit and the final kill
hold where there is no /proc (macOS) too. psutil replaced reading /proc by hand because on Linux it
costs the same on that polled path: a loop in one process (a tree of 6 processes, 148 visible,
100 polls, best of 3, load average 14 on 2 cores) took 9.12 ms CPU per poll reading /proc by hand
(PSS from smaps_rollup) and 9.19 ms through psutil (``memory_full_info().pss``, which reads the
same file), the tree alone 5.1 and 5.6 ms. psutil is imported on first use, so the zygote's early,
torch-free start does not wait for it (its import: 30-180 ms on that loaded machine).

And the `Reaper`, the thread that finishes killed workers' clean-up off the grading path (jobs run
in order; one job's failure never stops the others; `stop` returns once every job handed over
has run).
"""

from __future__ import annotations

import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from grader.sandbox.jail import cgroups as cg


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


# --- a process tree (psutil) --------------------------------------------------------------------

PSS = sys.platform.startswith("linux")
"""Count a process's proportional share of its pages (Linux's PSS), not its resident set: a
zygote's forks share torch's pages, which RSS would count once per process and so kill correct
code. Elsewhere there is no zygote (each worker is a fresh process) and RSS is what there is."""


def alive(pid: int) -> bool:
    """A process `pid` exists (a zombie included)."""
    import psutil

    return psutil.pid_exists(pid)


def dead(pid: str) -> bool:
    """`pid` (text, from a folder's or a cgroup's name) names no running process."""
    return pid.isdigit() and not alive(int(pid))


def descendants(root: int) -> list[int]:
    """Every process `root` started, and those they started, that this process can see."""
    import psutil

    try:
        return [p.pid for p in psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss(root: int | None) -> int:
    """Bytes of memory `root` and its descendants use (PSS on Linux where readable, else RSS)."""
    if not root:
        return 0
    import psutil

    total = 0
    for pid in [root] + descendants(root):
        try:
            p = psutil.Process(pid)
            if PSS:
                try:
                    total += p.memory_full_info().pss
                    continue
                except psutil.AccessDenied:
                    pass
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def kill_tree(root: int | None) -> None:
    """SIGKILL every descendant of `root` (and its process group), a few rounds for late forks."""
    if not root:
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


# --- the reaper ---------------------------------------------------------------------------------

class Reaper:
    """A thread that finishes retired workers' clean-up (Worker.retire), off the grading path."""

    MAX_BACKLOG = 8

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="grader-sandbox-reaper", daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], None]) -> bool:
        """Run `job` on the thread; False (nothing queued) when the backlog is full."""
        if self._q.qsize() >= self.MAX_BACKLOG:
            return False
        self._q.put(job)
        return True

    def _run(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # noqa: BLE001 - one worker's clean-up must not stop the others'
                pass

    def stop(self) -> None:
        """Finish every retired worker's clean-up, then end the thread."""
        self._q.put(None)
        self._thread.join()
