"""`Worker`: the grader's handle on one submission's jailed process, and the calls it serves.

Calls raise `SandboxError`s, never anything the student's code chose. After a timeout, a crash
or an invalid reply (`WireError`: the worker is killed too) the worker is dead: every later call
raises the same error. `close` returns once the worker and everything it started are gone and
its files removed; `retire` kills at once and leaves the waiting to the sandbox's reaper thread.
Handles (`Handle`) are only accepted by the worker that issued them.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from grader import untrusted
from grader.i18n import Msg, tr, verbatim
from grader.sandbox.errors import (
    DISK_ERRNOS,
    SandboxError,
    StudentError,
    CrashKind,
    WireError,
    WorkerCrashed,
    WorkerTimeout,
    crash,
    disk_message,
    load_failure_message,
)
from grader.sandbox.host.channel import Channel
from grader.sandbox.host.reports import (
    LoadReport,
    NameInfo,
    as_text,
    load_report,
    valid_type_name,
)
from grader.sandbox.limits import Limits
from grader.sandbox.wire import PREFIX, Handle, decode_frame, encode_frame

if TYPE_CHECKING:  # its module needs Linux's (resource, the jail): the portable worker has its own
    from grader.sandbox.host.process import WorkerProcess


class Worker:
    """One submission's jailed process. Calls raise `SandboxError`s; after a timeout, crash or
    invalid reply (WireError: the worker is killed too) it is dead."""

    def __init__(self, limits: Limits, isolation: str, features: frozenset[str], *, process: WorkerProcess,
                 channel: socket.socket, out_fd: int, err_fd: int,
                 hand_over: Callable[[Callable[[], None]], bool] | None):
        """features: the isolation plan's (the worker must apply exactly these); channel: the
        socket to the worker; hand_over(job): run a clean-up job on the reaper thread (False: not
        taken); None: clean up in place."""
        self.limits = limits
        self.isolation = isolation
        self._features = features
        self._hand_over = hand_over
        self.load: LoadReport = LoadReport(ok=False, message=verbatim("not loaded"))
        self._proc = process
        self._chan = self._open_channel(channel, out_fd, err_fd, process,
                                        process.tree_memory if "rss" in features else None)
        self._dead: SandboxError | None = None
        self._closed = False
        self._token = f"{os.getpid()}-{id(self)}"
        self.pid: int | None = None
        self._loading = False
        """The load request was written early (`load_early`): `run_units` only reads its reply."""

    def _open_channel(self, channel: Any, out_fd: int, err_fd: int, process: Any,
                      tree_memory: Callable[[], int] | None) -> Any:
        """The grader's end of the channel (a socket and two output pipes here)."""
        return Channel(channel, out_fd, err_fd, self.limits, die=self._die, crashed=self._crashed,
                       dead=lambda: self._dead is not None, tree_memory=tree_memory)

    @property
    def reply_cap(self) -> int | None:
        """Largest reply payload the current case can expect (set by the engine per case); a larger
        one is refused before it is read (never above ``limits.max_result_bytes``)."""
        return self._chan.reply_cap

    @reply_cap.setter
    def reply_cap(self, value: int | None) -> None:
        self._chan.reply_cap = value

    def memory_in_use(self) -> int:
        """Bytes the worker's process tree uses now (resident), as the memory poll sees them."""
        return self._proc.tree_memory()

    def lower_memory_poll(self, cap: int) -> None:
        """Poll this worker's memory against `cap` instead of the limit, every 10 ms (the
        self-test's proof)."""
        self._chan.memory_cap = cap
        self._chan.poll_interval = 0.01

    # -- start and load --
    def wait_started(self) -> None:
        """Wait for the worker to run and greet; raises SandboxError (and closes) when it does not
        or when it applied other isolation features than planned."""
        self._chan.deadline = time.monotonic() + self.limits.start_timeout_s
        line = self._proc.wait_started(self.limits.start_timeout_s)
        if line is None or "pid" not in line:
            self._proc.kill()
            raise SandboxError(f"the worker supervisor did not start: {line}")
        self.pid = int(line["pid"])
        try:
            self._usable()
            hello = self._decode(self._chan.hello(self.limits.start_timeout_s, "starting the worker"),
                                 "starting the worker")
        except SandboxError as e:
            self.close()
            raise SandboxError(f"the worker did not start ({e}); stderr: {self.output()[1][-2000:]}") from e
        applied = set(hello.get("applied") or [])
        expected = set(self._features) - {"rss"}
        if applied != expected:
            self.close()
            raise SandboxError(f"the worker applied {sorted(applied)} instead of {sorted(expected)}")
        self._chan.deadline = time.monotonic() + self.limits.submission_timeout_s

    def run_units(self, units: list) -> LoadReport:
        """Run the submission's code units (module body or cells); never raises for the student's faults."""
        phase = tr("loading the submission")
        try:
            if self._loading:  # written early (load_early): only its reply is left to read
                self._loading = False
                reply = self._reply(self.limits.import_timeout_s, phase)
            else:
                reply = self._request(load_msg(units), self.limits.import_timeout_s, phase)
        except (WorkerTimeout, WorkerCrashed, WireError) as e:
            return LoadReport(ok=False, message=load_failure_message(e), failure=e)
        return load_report(reply, self.limits)

    # -- public API --
    def output(self) -> tuple[str, str]:
        """Captured stdout and stderr (first `max_output_bytes` of each), never parsed; made safe
        by the untrusted-text rule (`grader.untrusted.text`)."""
        return self._chan.output()

    def describe(self, name: str) -> NameInfo:
        r = self._call({"op": "describe", "name": name}, tr("describing {names}", names=repr(name)))
        return NameInfo(name=name, kind=as_text(r.get("kind")), signature=r.get("signature"),
                        params=tuple(map(str, r.get("params") or [])),
                        available=tuple(map(str, r.get("available") or [])), type_name=valid_type_name(r.get("type")))

    def describe_all(self, names: list[str]) -> dict[str, NameInfo]:
        """describe() for several names in one round trip."""
        names = [str(n) for n in names]
        r = self._call(describe_msg(names), tr("describing {names}", names=", ".join(map(repr, names))))
        infos = r.get("infos")
        if type(infos) is not list or len(infos) != len(names) or any(type(i) is not dict for i in infos):
            raise WireError("describe_all reply does not match the names asked for")
        return {n: NameInfo(name=n, kind=as_text(i.get("kind")),
                            signature=i["signature"] if isinstance(i.get("signature"), str) else None,
                            params=tuple(map(str, i.get("params") or [])),
                            available=tuple(map(str, i.get("available") or [])),
                            type_name=valid_type_name(i.get("type")))
                for n, i in zip(names, infos)}

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._call({"op": "call", "name": name, "args": list(args), "kwargs": kwargs},
                          tr("calling {name}()", name=name))["value"]

    def call_within(self, timeout_s: float, name: str, *args: Any) -> Any:
        """``call`` with a time limit of its own instead of the per-call limit: for the grader's own
        code (the self-test's probe), whose first imports and ops in a fresh interpreter may take
        longer on a busy machine than a student's call is allowed."""
        return self._call({"op": "call", "name": name, "args": list(args), "kwargs": {}},
                          tr("calling {name}()", name=name), timeout_s)["value"]

    def call_method(self, handle: Handle, method: str, *args: Any, **kwargs: Any) -> Any:
        self._check_handle(handle)
        return self._call({"op": "call_method", "handle": handle, "method": method, "args": list(args),
                           "kwargs": kwargs}, tr("calling {name}()", name=handle.type_name + "." + method))["value"]

    def state_dict(self, handle: Handle) -> dict[str, Any]:
        self._check_handle(handle)
        value = self._call({"op": "state_dict", "handle": handle}, tr("reading state_dict()"))["value"]
        if type(value) is not dict:
            raise WireError("state_dict reply is not a dict")
        return value

    def load_state_dict(self, handle: Handle, state: dict) -> None:
        self._check_handle(handle)
        self._call({"op": "load_state_dict", "handle": handle, "state": dict(state)}, tr("loading a state_dict"))

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
                        "output_index": output_index}, tr("computing gradients of {what}", what=what))
        grads = r.get("grads")
        if type(grads) is not list or len(grads) != len(wrt):
            raise WireError("vjp reply has the wrong number of gradients")
        return r.get("value"), grads

    @property
    def alive(self) -> bool:
        return self._dead is None and not self._closed

    # -- what the worker left (read-only, for checks and tests) --
    @property
    def scratch(self) -> str:
        """The worker's scratch dir on this machine (removed once it is closed)."""
        return self._proc.scratch

    @property
    def cgroups(self) -> list[str]:
        """The worker's cgroup folders (removed once it is closed)."""
        return self._proc.cgroups

    @property
    def exit_report(self) -> dict | None:
        """How the worker ended (``{"status": {...}}``, as its supervisor reported it), once known."""
        return self._proc.exit_report

    @property
    def buffered_reply_bytes(self) -> int:
        """Bytes of a reply read from the worker and not yet handed over (0 between replies)."""
        return self._chan.buffered

    # -- end --
    def close(self) -> None:
        """Kill the worker and everything it started, and wait until all of it is gone and cleaned up."""
        if self._closed:
            return
        self._closed = True
        if self._dead is None:
            self._proc.kill()
        self._finish()

    def retire(self) -> None:
        """close() without the wait: the worker and everything it started are sent SIGKILL before
        this returns; reaping them, removing the cgroups and the scratch dir run on the sandbox's
        reaper thread (Sandbox.close() waits for that). Falls back to close() when there is none."""
        if self._closed:
            return
        if self._dead is not None or self._proc.supervised_here:
            self.close()
            return
        self._closed = True
        self._proc.signal_kill()
        if self._hand_over is None or not self._hand_over(self._reaped):
            self._proc.await_exit()
            self._finish()

    def _reaped(self) -> None:
        """On the reaper thread: the rest of retire()."""
        try:
            self._proc.await_exit()
        finally:
            self._finish()

    def _finish(self) -> None:
        self._proc.reap()
        self._proc.close_status()
        self._chan.close()
        self._proc.remove_files()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --
    def _check_handle(self, handle: Any) -> None:
        if type(handle) is not Handle or handle.worker != self._token:
            raise SandboxError("this handle does not belong to this worker")

    def _call(self, msg: dict, phase: Msg | str, timeout_s: float | None = None) -> dict:
        reply = self._request(msg, self.limits.call_timeout_s if timeout_s is None else timeout_s, phase)
        if not reply.get("ok"):
            err = reply.get("error")
            if type(err) is not dict:
                raise WireError("error reply without details")
            if err.get("errno") in DISK_ERRNOS:
                self._die(WorkerCrashed(CrashKind.DISK, disk_message(self.limits)), "disk")
            raise StudentError(as_text(err.get("type"))[:200], as_text(err.get("message")),
                               as_text(err.get("traceback")))
        return reply

    def load_early(self, units: list) -> None:
        """Write the request to load `units` now, before the worker has even greeted: it boots and
        loads while the caller grades another submission (``Sandbox.start``); `run_units` later
        reads its reply."""
        self._chan.send(request_frame(load_msg(units)))
        self._loading = True

    def call_no_wait(self, name: str, *args: Any) -> None:
        """Start a call and return at once; its reply is never read (the self-test's limit proof
        watches the cgroup's counters while it runs, then retires the worker)."""
        self._usable()
        self._chan.send(request_frame({"op": "call", "name": name, "args": list(args), "kwargs": {}}))

    def _request(self, msg: dict, timeout: float, phase: Msg | str) -> dict:
        """Send `msg` and return its reply: one request, one reply."""
        self._usable()
        self._chan.send(request_frame(msg))
        return self._reply(timeout, phase)

    def _reply(self, timeout: float, phase: Msg | str) -> dict:
        self._usable()
        return self._decode(self._chan.reply(timeout, phase), phase)

    def _usable(self) -> None:
        if self._closed:
            raise SandboxError("the worker is closed")
        if self._dead is not None:
            raise self._dead

    def _decode(self, frame: bytes, phase: Msg | str) -> dict:
        hlen, _ = PREFIX.unpack_from(frame)
        h0 = PREFIX.size
        header = frame[h0:h0 + hlen]
        payload = memoryview(frame)[h0 + hlen:]
        try:
            reply = decode_frame(header, payload, on_handle=lambda i, t: Handle(i, t, self._token),
                                 on_text=untrusted.wire_text)
        except WireError as e:
            self._die(WireError(f"invalid reply while {phase}: {e.message}"), "protocol")
        except Exception as e:  # e.g. a cuda tensor when this process has no CUDA
            self._die(WireError(f"invalid reply while {phase}: {e}"), "protocol")
        if type(reply.get("ok")) is not bool and reply.get("op") != "hello":
            self._die(WireError(f"reply without status while {phase}"), "protocol")
        return reply

    # -- death --
    def _die(self, error: SandboxError, reason: str):
        self._proc.kill()
        self._dead = error
        raise error

    def _crashed(self, phase: Msg | str):
        """The channel closed: find out how the worker died, then raise WorkerCrashed."""
        self._proc.kill()
        status = (self._proc.exit_report or {}).get("status", {})
        err = crash(status, oom_killed=self._proc.oom_killed(), limits=self.limits, phase=phase)
        self._dead = err
        raise err


# --- the requests, encoded the same way everywhere ------------------------------------------------

def request_frame(msg: dict) -> bytes:
    """A request as the grader sends it: grader values only, handles by id alone."""
    return encode_frame(msg, on_object=_refuse, handle_types=False)


def load_msg(units) -> dict:
    return {"op": "load", "units": [{"label": u.label, "cell": u.cell, "source": u.source} for u in units]}


def describe_msg(names: list[str]) -> dict:
    return {"op": "describe_all", "names": [str(n) for n in names]}


def _refuse(value: Any) -> Any:
    raise SandboxError(f"cannot send a {type(value).__name__} to the worker: only tensors, numbers, "
                       "strings, None, lists, tuples, str-keyed dicts and handles cross")
