"""The channel to one worker: request and reply frames under deadlines, and its captured output.

Guarantees, whatever the worker does:

- no read goes past the frame being waited for, and a reply larger than ``reply_cap`` is refused
  from its prefix, before it is read; bytes no request is owed are a protocol error;
- no wait outlasts its deadline (the call's, or the whole submission's, whichever comes first);
- stdout and stderr are read while waiting: the first ``max_output_bytes`` of each are kept,
  and more than ``kill_output_bytes`` in all kills the worker;
- replies are read in the order the requests were written (a load request may be written
  before the worker has greeted: its reply comes after the hello).

Every fault goes to the owner's ``die`` (kill the worker, then raise) or ``crashed`` (the channel
closed: find out how it died, then raise): neither returns.
"""

from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Callable
from typing import NoReturn

from grader import untrusted
from grader.i18n import Msg, tr
from grader.sandbox.errors import (
    CrashKind,
    SandboxError,
    WireError,
    WorkerCrashed,
    WorkerTimeout,
    memory_message,
)
from grader.sandbox.limits import Limits
from grader.sandbox.wire import MAX_HEADER_BYTES, PREFIX, check_prefix


class Channel:
    def __init__(self, channel: socket.socket, out_fd: int, err_fd: int, limits: Limits, *,
                 die: Callable[[SandboxError, str], NoReturn], crashed: Callable[[Msg | str], NoReturn],
                 dead: Callable[[], bool], tree_memory: Callable[[], int] | None):
        """die(error, reason): kill the worker and raise `error`; crashed(phase): the channel closed;
        dead(): the worker died already; tree_memory: the worker's memory use, polled while
        waiting (None: a cgroup limits it)."""
        self.limits = limits
        self.memory_cap = limits.memory_bytes
        """The polled memory cap (the self-test's proof lowers it for its worker alone)."""
        self.poll_interval = 0.1
        """Seconds between two looks at the worker's memory use (with ``tree_memory``)."""
        self._die = die
        self._dead = dead
        self._crashed = crashed
        self._tree_memory = tree_memory
        self._ch = channel
        self._ch.setblocking(False)
        self._fds = {"out": out_fd, "err": err_fd}
        for fd in self._fds.values():
            os.set_blocking(fd, False)
        self._kept = {"out": bytearray(), "err": bytearray()}
        self._total_out = 0
        self._out = bytearray()  # request bytes not yet written to the channel
        self._in = bytearray()  # the reply frame being read (never more than one frame)
        self._owed = 0  # requests written (or waiting to be) whose replies are not yet read
        self.deadline = time.monotonic() + limits.start_timeout_s
        """When the whole submission's time is up (monotonic clock)."""
        self.reply_cap: int | None = None
        """Largest reply payload the current case can expect; never above ``limits.max_result_bytes``."""

    # -- requests and replies --
    def send(self, frame: bytes) -> None:
        """Write a request frame (as much as the socket takes now, the rest while waiting for a
        reply); its reply is owed from now on."""
        self._out += frame
        self._owed += 1
        try:  # as much as the socket takes now: the worker starts on it at once
            del self._out[:self._ch.send(self._out)]
        except OSError:
            pass  # full (the rest goes while waiting for a reply), or closed (found out then)

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
        """The next reply frame (prefix included), writing what is left of the request while waiting for it.
        `owed_after`: replies still owed once this one is read (more bytes than that are an error)."""
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
                if owed_after <= 0 and self._more_waiting():  # no other request is owed a reply
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
            rl = [self._ch] + [fd for fd in self._fds.values() if fd >= 0]
            out = self._out
            r, w, _ = select.select(rl, [self._ch] if out else [], [], min(self.poll_interval, max(0.0, deadline - now)))
            for fd in r:
                if isinstance(fd, int):  # not the channel: stdout or stderr
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

    # -- output --
    def output(self) -> tuple[str, str]:
        """Captured stdout and stderr (first `max_output_bytes` of each), never parsed; made safe
        by the untrusted-text rule (`grader.untrusted.text`)."""
        self.drain_output()
        out, err = (untrusted.text(self._kept[k].decode("utf-8", "replace"), None) for k in ("out", "err"))
        return out, err

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
        if self._total_out > self.limits.kill_output_bytes and not self._dead():
            self._die(WorkerCrashed(CrashKind.OUTPUT, tr("the submission printed more than {mib} MiB of output",
                                                 mib=self.limits.kill_output_bytes >> 20)), "output")

    def drain_output(self) -> None:
        """Read what the worker has written so far, without waiting."""
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

    def close(self) -> None:
        """Close the socket, keep what output is left, close the pipes."""
        self._ch.close()
        self.drain_output()
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
