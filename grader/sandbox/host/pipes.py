"""`PipeChannel`: frames to and from a portable worker over plain pipes, read by threads.

The same contract as ``grader.sandbox.host.channel.Channel`` (frames under deadlines, reply caps
checked before a payload is read, bounded output capture, memory polled while waiting), for a
worker whose channel is two pipes (requests in, replies out) beside its stdout and stderr. It
needs no ``select``, which on Windows works on sockets only: each pipe has a thread of its own.

- Replies are read on demand: the grader asks its reader thread for at most the bytes of the
  frame it is waiting for, so nothing beyond that frame is read (what the worker writes past it
  stays in the pipe), and a payload over the cap is refused before any of it is read.
- Requests are written by a writer thread, so a worker that stops reading can never block the
  grader past its deadline.
- Output is read by one thread per stream as it comes, and at once when asked for (only what
  the pipe holds, under a lock: what the worker printed before its reply is all there); the first
  `max_output_bytes` are kept, and past `kill_output_bytes` reading stops (the worker then blocks
  on the full pipe) and the grader kills it at its next look.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from grader import untrusted
from grader.i18n import Msg, tr
from grader.sandbox.errors import CrashKind, SandboxError, WireError, WorkerCrashed, WorkerTimeout, memory_message
from grader.sandbox.limits import Limits
from grader.sandbox.wire import MAX_HEADER_BYTES, PREFIX, check_prefix

CHUNK = 1 << 20
"""The most bytes of a reply one read asks for."""


class _Reader:
    """Reads of one pipe made on demand by a thread: `read(n, timeout)` returns at most `n` bytes,
    b"" at end of file, or None when nothing came in time (that read stays pending, and the next
    call returns what it brings)."""

    def __init__(self, fd: int, name: str):
        self._fd = fd
        self._want: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._got: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            n = self._want.get()
            if n is None:
                return
            try:
                data = os.read(self._fd, n)
            except OSError:
                data = b""
            self._got.put(data)
            if not data:
                return

    def read(self, n: int, timeout: float) -> bytes | None:
        if not self._pending:
            self._want.put(n)
            self._pending = True
        try:
            data = self._got.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        self._pending = False
        return data

    def stop(self, timeout: float) -> bool:
        """End the thread (once no read is pending, or the pending one returned); True when it did."""
        if not self._pending:
            self._want.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()


class _Writer:
    """Writes queued bytes to one pipe on a thread; `broken` once a write failed (the worker died)."""

    def __init__(self, fd: int, name: str):
        self._fd = fd
        self._q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.broken = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data = self._q.get()
            if data is None:
                return
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                self.broken = True
                return

    def write(self, data: bytes) -> None:
        self._q.put(data)

    def stop(self, timeout: float) -> bool:
        self._q.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()


if sys.platform == "win32":
    import _winapi
    import msvcrt

    def _prepare(fd: int) -> None:
        pass

    def _read_now(fd: int) -> bytes | None:
        """What the pipe holds now, without waiting (None: nothing; b"": end of file)."""
        try:
            # With size 0 it answers (available, left in message); either shape has "available" second to last.
            n = _winapi.PeekNamedPipe(msvcrt.get_osfhandle(fd), 0)[-2]
        except OSError:
            return b""
        return os.read(fd, min(n, 1 << 16)) if n else None

    def _wait_readable(fd: int) -> None:
        time.sleep(0.002)  # anonymous pipes cannot be waited on without reading them
else:
    import select

    def _prepare(fd: int) -> None:
        os.set_blocking(fd, False)

    def _read_now(fd: int) -> bytes | None:
        """What the pipe holds now, without waiting (None: nothing; b"": end of file)."""
        try:
            return os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _wait_readable(fd: int) -> None:
        select.select([fd], [], [], 1.0)


class _OutputPump:
    """One output stream, read as it comes by a thread, and by `drain` at once: every read takes
    only what the pipe holds, under one lock, so once the worker has replied, `drain` has all it
    printed before that. Keeps the first `keep` bytes; stops reading once all streams together
    passed `kill_at` bytes (`flooded`)."""

    def __init__(self, fd: int, name: str, *, keep: int, total: list[int], kill_at: int, lock: threading.Lock):
        self._fd = fd
        self._keep = keep
        self._total = total
        self._kill_at = kill_at
        self._lock = lock
        self.kept = bytearray()
        self.flooded = False
        self.eof = False
        _prepare(fd)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not (self.eof or self.flooded):
            _wait_readable(self._fd)
            self.drain()

    def drain(self) -> None:
        """Take what the pipe holds now."""
        with self._lock:
            while not (self.eof or self.flooded):
                data = _read_now(self._fd)
                if data is None:
                    return
                if not data:
                    self.eof = True
                    return
                room = self._keep - len(self.kept)
                if room > 0:
                    self.kept += data[:room]
                self._total[0] += len(data)
                if self._total[0] > self._kill_at:
                    self.flooded = True

    def text(self) -> str:
        with self._lock:
            return self.kept.decode("utf-8", "replace")

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


class PipeChannel:
    """The grader's end of a portable worker: request pipe, reply pipe, stdout and stderr."""

    def __init__(self, requests_fd: int, replies_fd: int, out_fd: int, err_fd: int, limits: Limits, *,
                 die: Callable[[SandboxError, str], NoReturn], crashed: Callable[[Msg | str], NoReturn],
                 dead: Callable[[], bool], exited: Callable[[], bool],
                 tree_memory: Callable[[], int] | None, first: bytes = b""):
        """die(error, reason): kill the worker and raise `error`; crashed(phase): the channel closed;
        dead(): the worker died already; exited(): its process has ended; tree_memory: the
        worker's memory use, polled while waiting (None: not polled); first: written before any
        request, with no reply owed (the worker's configuration)."""
        self.limits = limits
        self.memory_cap = limits.memory_bytes
        self.poll_interval = 0.1
        self._die = die
        self._dead = dead
        self._crashed = crashed
        self._exited = exited
        self._tree_memory = tree_memory
        self._fds = [requests_fd, replies_fd, out_fd, err_fd]
        self._writer = _Writer(requests_fd, "grader-worker-requests")
        if first:
            self._writer.write(first)
        self._replies = _Reader(replies_fd, "grader-worker-replies")
        lock = threading.Lock()
        total = [0]
        self._out = {name: _OutputPump(fd, f"grader-worker-{name}", keep=limits.max_output_bytes, total=total,
                                       kill_at=limits.kill_output_bytes, lock=lock)
                     for name, fd in (("out", out_fd), ("err", err_fd))}
        self._in = bytearray()  # the reply frame being read (never more than one frame)
        self._owed = 0  # requests written (or waiting to be) whose replies are not yet read
        self.deadline = time.monotonic() + limits.start_timeout_s
        """When the whole submission's time is up (monotonic clock)."""
        self.reply_cap: int | None = None
        """Largest reply payload the current case can expect; never above ``limits.max_result_bytes``."""

    # -- requests and replies --
    def send(self, frame: bytes) -> None:
        """Write a request frame (on the writer thread); its reply is owed from now on."""
        self._owed += 1
        self._writer.write(frame)

    @property
    def buffered(self) -> int:
        """Bytes of a reply read and not yet handed over (0 between frames)."""
        return len(self._in)

    def hello(self, timeout: float, phase: Msg | str) -> bytes:
        """The worker's first frame: it comes before the reply to a request written early."""
        return self._next_frame(timeout, phase, owed_after=self._owed)

    def reply(self, timeout: float, phase: Msg | str) -> bytes:
        """The reply to the oldest request whose reply is owed."""
        reply = self._next_frame(timeout, phase, owed_after=self._owed - 1)
        self._owed -= 1
        return reply

    def _next_frame(self, timeout: float, phase: Msg | str, owed_after: int) -> bytes:
        """The next reply frame (prefix included). `owed_after`: replies still owed once this one
        is read (bytes beyond it then are an error)."""
        now = time.monotonic()
        limit_at = now + timeout
        deadline = min(limit_at, self.deadline)
        next_poll = now + self.poll_interval
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
                if owed_after <= 0 and self._more_waiting():
                    self._die(WireError(f"unexpected extra bytes while {phase}"), "protocol")
                return frame
            now = time.monotonic()
            if now >= deadline:
                seconds = timeout if limit_at <= self.deadline else self.limits.submission_timeout_s
                which = phase if limit_at <= self.deadline else tr("{phase} (whole-submission limit)", phase=phase)
                self._die(WorkerTimeout(which, seconds), "timeout")
            if self._tree_memory is not None and now >= next_poll:
                next_poll = now + self.poll_interval
                if self._tree_memory() > self.memory_cap:
                    self._die(WorkerCrashed(CrashKind.MEMORY, memory_message(self.limits, phase)), "memory")
            self._check_output()
            if self._writer.broken:
                self._crashed(phase)
            want = PREFIX.size + (need[0] + need[1] if need is not None else 0) - len(self._in)
            chunk = self._replies.read(min(CHUNK, want), min(self.poll_interval, max(0.0, deadline - now)))
            if chunk is None:
                if self._exited():  # nothing came and the worker is gone (a child may hold the pipe)
                    self._crashed(phase)
                continue
            if not chunk:
                self._crashed(phase)
            self._in += chunk

    def _reply_limit(self) -> int:
        cap = self.limits.max_result_bytes
        return cap if self.reply_cap is None else min(cap, self.reply_cap)

    def _more_waiting(self) -> bool:
        """Bytes on the reply pipe that no request is waiting for (a worker writing to it itself).
        The one-byte read stays pending when nothing is there: it becomes the next frame's first."""
        chunk = self._replies.read(1, 0.0)
        if chunk:
            self._in += chunk
            return True
        return False

    # -- output --
    def _check_output(self) -> None:
        if any(p.flooded for p in self._out.values()) and not self._dead():
            self._die(WorkerCrashed(CrashKind.OUTPUT, tr("the submission printed more than {mib} MiB of output",
                                                 mib=self.limits.kill_output_bytes >> 20)), "output")

    def output(self) -> tuple[str, str]:
        """Captured stdout and stderr (first `max_output_bytes` of each), made safe by the
        untrusted-text rule (`grader.untrusted.text`)."""
        self.drain_output()
        return (untrusted.text(self._out["out"].text(), None), untrusted.text(self._out["err"].text(), None))

    def drain_output(self) -> None:
        """Read what the worker has written so far, without waiting."""
        for pump in self._out.values():
            pump.drain()

    def close(self) -> None:
        """Stop the threads and close the pipes (the worker is dead by now). A pipe whose thread is
        still blocked in a read (a process the worker started still holds its other end) is left
        open: closing it under the thread could hand its number, and the read, to another file."""
        stopped = [self._writer.stop(1.0), self._replies.stop(1.0)]
        stopped += [p.join(1.0) for p in self._out.values()]
        for fd, ok in zip(self._fds, stopped):
            if ok:
                try:
                    os.close(fd)
                except OSError:
                    pass
