"""Grading slots as forked processes: `-j N` on the CPU without one interpreter lock for all N.

With N slot threads in one process, every slot's grader-side work (decoding replies, comparing,
diagnosing) and the recording (ledger, JSON, HTML) share one GIL, and the slots wait for each
other (docs/performance.md has the measurement). So `run` forks
N grading processes from the grader once everything they share is ready: torch imported, the
reference setups computed (copy-on-write, never recomputed), the reference proven at 100 % and
the sandbox's zygote started. Each opens its own sandboxed workers through the shared zygote
(requests serialised by a process lock) and sends back plain JSON; this process records every
result, as with threads. A slot holds up to three submissions: it grades the first while the
second's worker is already starting (``Engine.start_worker``).

    grader (this process)                      slot process i (forked, trusted grader code)
      "k\n" (or "stop\n")  --- job pipe --->      Engine.grade(todo[k])  -> worker (jailed)
      tally.take(report)  <--- result pipe ---    {"i": k, "report": to_dict(report), ...}
                                                  {"i": k, "skipped": true} after a stop

Never pickles; only grader-built data crosses. A slot process that dies costs the submission it
was grading (an error, retried by the next run) and nothing else: the other slots take the rest,
including those it held but had not started.
Only for the CPU on Linux: a process that has initialised CUDA cannot be forked safely, and on
macOS forking a process that loaded torch's system frameworks is not safe either.

Why not ``concurrent.futures.ProcessPoolExecutor`` (fork context): a pool whose process dies
abruptly is broken, and every pending and later future raises ``BrokenProcessPool``, so one slot
killed by the kernel (out of memory while decoding a hostile reply, say) would cost the whole
batch instead of one submission; a pool decides which process runs a task, so a slot cannot
start the worker of the submission it will grade next while it grades this one; it pickles every
task and result, where this module sends line-delimited JSON built by the grader; and a first
Ctrl-C must let each slot finish the submission it is grading and report the rest as not started
(``stop``), which ``shutdown(cancel_futures=True)`` does not tell apart from a submission lost.
"""

from __future__ import annotations

import collections
import json
import os
import select
import signal
import threading
import time
import traceback
from typing import Any, Protocol

from grader.results import GradeReport, report_from_dict, to_dict
from grader.untrusted import json_text

_AHEAD = 3
"""Submissions handed to a slot at a time: the one it grades, the next (whose worker it starts
early) and one more, so that the next is there before the result that asks for it is read here."""


class ForkableSandbox(Protocol):
    """What the slots need of the sandbox their engine grades on (`grader.sandbox.Sandbox`)."""

    def share_with_forks(self) -> None: ...

    def adopt_after_fork(self) -> None: ...

    def close(self) -> None: ...


class SlotEngine(Protocol):
    """What a slot needs of `grader.grading.engine.Engine`."""

    def grade(self, sub: Any, *, student_id: str | None = None, worker: Any = None) -> GradeReport: ...

    def start_worker(self, sub: Any) -> Any: ...


class Taker(Protocol):
    """Where results go (`grader.batch.recording.Tally`)."""

    def take(self, key: Any, report: GradeReport | None, seconds: float, error: str,
             data: dict | None = None) -> None: ...


def run(engine: SlotEngine, sandbox: ForkableSandbox, todo: list, n: int, tally: Taker, stop: threading.Event,
        debug: bool) -> None:
    """Grade `todo` ((LedgerKey, LoadedSubmission) pairs) in `n` forked processes with `engine`, on
    `sandbox` (the one it grades on, shared with the forks); `tally.take` each result here, in
    order of completion. Returns when all are taken, or after `stop` is set and the submissions
    already handed out are finished."""
    sandbox.share_with_forks()
    procs: list[_Slot] = []
    for _ in range(n):
        procs.append(_fork(engine, sandbox, todo, debug,
                           inherited=[fd for p in procs for fd in (p.jobs, p.results)]))
    left = list(range(len(todo)))[::-1]  # to hand out, next last; a dead slot's unstarted ones go back

    def hand(p: _Slot) -> None:
        while left and not stop.is_set() and p.open and len(p.pending) < _AHEAD:
            p.send(left.pop())

    try:
        for p in procs:
            hand(p)
        while any(p.busy for p in procs):
            if stop.is_set():
                for p in procs:
                    p.stop()
            ready, _, _ = select.select([p.results for p in procs if p.busy], [], [], 0.1)
            for p in procs:
                if p.results not in ready:
                    continue
                for msg in p.read():
                    i = msg["i"]
                    p.pending.pop(i, None)
                    if msg.get("skipped"):  # handed out, not started before a stop
                        continue
                    # The next one first: the slot starts it while this result is recorded here.
                    hand(p)
                    data = msg.get("report")
                    report = report_from_dict(data) if data is not None else None
                    tally.take(todo[i][0], report, float(msg.get("seconds", 0.0)), str(msg.get("error", "")), data)
                if p.dead and p.pending:
                    # A slot grades its submissions in the order handed out: the first was running.
                    running, *unstarted = p.pending
                    tally.take(todo[running][0], None, 0.0, "the grading process for this submission died "
                               f"({p.exit_reason()}); it was not recorded and the next run grades it again")
                    p.pending.clear()
                    left.extend(reversed(unstarted))
                    for other in procs:
                        hand(other)
        # The slots still alive took over what dead ones would have graded; this is left only
        # when every slot process died.
        if left and not stop.is_set():
            for i in sorted(left):
                tally.take(todo[i][0], None, 0.0, "no grading process was left to grade it; the next run will")
    except BaseException:  # a second Ctrl-C, or an operator error while recording: stop them now
        for p in procs:
            p.terminate()
        raise
    finally:
        for p in procs:
            p.finish()


class _Slot:
    """This process's end of one slot process: the job pipe, the result pipe, what is in flight."""

    def __init__(self, pid: int, jobs: int, results: int):
        self.pid = pid
        self.jobs = jobs
        self.results = results
        self.pending: dict[int, None] = {}  # handed out, not answered; in the order handed out
        self.dead = False
        self._buf = b""
        self._status: int | None = None

    @property
    def busy(self) -> bool:
        return not self.dead and bool(self.pending)

    @property
    def open(self) -> bool:
        """Can be handed submissions: alive (as far as is known here) and its job pipe open."""
        return not self.dead and self.jobs >= 0

    def send(self, i: int) -> None:
        """Hand submission `i` over. A slot that has just died takes it too: its end of the result
        pipe is read to the end before it counts as dead, and then what it held goes back."""
        self.pending[i] = None
        try:
            os.write(self.jobs, f"{i}\n".encode())
        except OSError:
            pass

    def read(self) -> list[dict]:
        try:
            chunk = os.read(self.results, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            self.dead = True
            return []
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [json.loads(line) for line in lines if line]

    def close_jobs(self) -> None:
        """No more submissions: the slot process ends after those it has."""
        if self.jobs >= 0:
            os.close(self.jobs)
            self.jobs = -1

    def stop(self) -> None:
        """Finish the submission being graded, start none of those handed out after it."""
        if self.jobs >= 0 and not self.dead:
            try:
                os.write(self.jobs, b"stop\n")
            except OSError:
                pass
        self.close_jobs()

    def exit_reason(self) -> str:
        self._wait(0.5)
        st = self._status
        if st is None:
            return "still running"
        if os.WIFSIGNALED(st):
            return f"killed by signal {os.WTERMSIG(st)}"
        return f"exit code {os.WEXITSTATUS(st)}"

    def _wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while self._status is None:
            try:
                pid, st = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._status = 0
                return
            if pid:
                self._status = st
                return
            if time.monotonic() >= end:
                return
            time.sleep(0.005)

    def terminate(self) -> None:
        """Ask the slot process to stop now (it kills its workers and removes their cgroups)."""
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def finish(self) -> None:
        """End the slot process: let it finish (its workers' clean-up included), else kill it."""
        self.close_jobs()
        self._wait(60.0)
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait(10.0)
        os.close(self.results)


def _fork(engine: SlotEngine, sandbox: ForkableSandbox, todo: list, debug: bool, inherited: list[int]) -> _Slot:
    """Fork one slot process; `inherited`: the other slots' pipe ends, closed in the child (an
    inherited job pipe's write end would keep that slot from ever seeing its end)."""
    jobs_r, jobs_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the slot process: never returns into the caller's code
        code = 0
        try:
            for fd in [jobs_w, res_r] + inherited:
                os.close(fd)
            # Ctrl-C reaches the whole process group: the parent decides (finish, or kill us).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, _exit_now)
            sandbox.adopt_after_fork()
            _serve(engine, todo, jobs_r, res_w, debug)
        except BaseException:  # noqa: BLE001 - report nothing more: the parent sees the exit
            code = 1
        finally:
            try:
                sandbox.close()  # this process's workers only: the zygote is the parent's
            finally:
                os._exit(code)
    os.close(jobs_r)
    os.close(res_w)
    return _Slot(pid, jobs_w, res_r)


def grade_or_fault(engine: SlotEngine, key: Any, sub: Any, debug: bool,
              worker: Any = None) -> tuple[GradeReport | None, float, str]:
    """(report or None, seconds, error) for one submission, in a slot thread or process: a grader
    fault on one submission is its error message, never the end of the slot. `worker`: one
    ``engine.start_worker(sub)`` started for it."""
    t0 = time.perf_counter()
    try:
        return engine.grade(sub, student_id=key.student_id, worker=worker), time.perf_counter() - t0, ""
    except Exception as e:  # noqa: BLE001
        return None, time.perf_counter() - t0, f"{type(e).__name__}: {e}" + (
            ("\n" + traceback.format_exc()) if debug else "")


def _start_worker(engine: SlotEngine, sub: Any) -> Any:
    """The next submission's worker, started now; None (it starts when graded) if that fails."""
    try:
        return engine.start_worker(sub)
    except Exception:  # noqa: BLE001 - grading it later reports whatever is wrong
        return None


def _exit_now(signum: int, frame: Any) -> None:
    raise SystemExit(1)  # unwinds through the current grading, then the sandbox clean-up below


def _serve(engine: SlotEngine, todo: list, jobs: int, results: int, debug: bool) -> None:
    """Grade the submissions handed out, in order. While one is graded, the next one's worker is
    already forked and loading (``Engine.start_worker``): its start-up overlaps this grading."""
    queue: collections.deque[int] = collections.deque()
    buf = b""
    eof = stopping = False
    ahead: tuple[int, Any] | None = None  # (submission, its worker started early)

    def send(msg: dict) -> None:
        data = (json_text(msg) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(results, view):]

    try:
        while True:
            if not eof and (not queue or select.select([jobs], [], [], 0)[0]):
                chunk = os.read(jobs, 4096)
                eof = not chunk
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line == b"stop":
                        stopping = True
                    elif line:
                        queue.append(int(line))
            if stopping:
                for i in queue:
                    send({"i": i, "skipped": True})
                return
            if not queue:
                if eof:
                    return
                continue
            i = queue.popleft()
            worker = ahead[1] if ahead is not None and ahead[0] == i else None
            ahead = None
            if queue:
                ahead = (queue[0], _start_worker(engine, todo[queue[0]][1]))
            key, sub = todo[i]
            report, seconds, error = grade_or_fault(engine, key, sub, debug, worker)
            send({"i": i, "report": None if report is None else to_dict(report), "seconds": seconds, "error": error})
    finally:
        if ahead is not None and ahead[1] is not None:
            ahead[1].close()
