"""Reading submissions behind a boundary: every submission is read in a child process, one at a
time, with a deadline and a memory budget, so that no file a student hands in can stop, slow or
exhaust the process grading the class.

    grader (this module)  --request-->  reader process (grader.submission.intake_child, torch-free):
                                          RLIMIT_AS budget, load_submission
                          <--result---  a LoadedSubmission as data (JSON header + raw file bytes)

A submission that takes longer than `IntakeLimits.seconds` (the reader process is killed),
needs more than `IntakeLimits.memory_bytes` or crashes its reader gets a load error saying so;
everyone else is read as usual. The reader process is started once and reused while it stays
healthy (a submission costs a round trip, not a process); after a failure a fresh one reads the
next submission. It exits when the `Intake` closes or this process goes away.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass

from grader.i18n import Msg, tr
from grader.submission.ids import student_id
from grader.submission.load import MAX_TOTAL_BYTES, CodeUnit, LoadedSubmission

FRAME = struct.Struct(">II")
"""A frame: header length, payload length (big-endian u32), then the JSON header and the payload."""
MAX_REPLY_BYTES = 4 * MAX_TOTAL_BYTES + (16 << 20)
"""A reply is refused past this: files (`MAX_TOTAL_BYTES`) plus code as text and JSON escapes."""
_START_S = 30.0
"""Extra seconds before a reader process says it is reading: it starts and imports nbformat first."""


@dataclass(frozen=True)
class IntakeLimits:
    seconds: float = 30.0
    """Wall-clock time for reading one submission (a 20 MB notebook of code takes a few seconds)."""
    memory_bytes: int = 1 << 30
    """Address space of the process reading one submission (RLIMIT_AS)."""


class Intake:
    """Reads submissions, each in its own bounded child process. Thread-safe; a context manager."""

    def __init__(self, limits: IntakeLimits = IntakeLimits()):
        self.limits = limits
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._fresh = False

    def start(self) -> Intake:
        """Start the reader process now (it imports while the caller does other work)."""
        with self._lock:
            self._ensure()
        return self

    def load(self, path: str | os.PathLike, *, main_module: str | None = None, cell_tag: str | None = None,
             link_root: str | os.PathLike | None = None) -> LoadedSubmission:
        """`grader.submission.load.load_submission` of `path`, bounded. Never raises for bad student input."""
        shown = os.fspath(path)
        request = {"path": os.path.abspath(shown), "main_module": main_module, "cell_tag": cell_tag,
                   "link_root": None if link_root is None else os.path.abspath(os.fspath(link_root)),
                   "seconds": self.limits.seconds, "memory_bytes": self.limits.memory_bytes}
        with self._lock:
            digest = ""
            try:
                sock = self._ensure()
                started = time.monotonic() + self.limits.seconds + (_START_S if self._fresh else 0)
                _send(sock, request, b"")
                self._fresh = False
                header, payload = _recv(sock, started)
                deadline = time.monotonic() + self.limits.seconds  # the reading itself starts now
                while header.get("status") in ("reading", "digest"):
                    digest = str(header.get("sha256") or digest)
                    header, payload = _recv(sock, deadline)
            except TimeoutError:
                header, payload = {"status": "timeout"}, b""
            except (OSError, ValueError, EOFError) as e:
                header, payload = {"status": "crashed", "reason": f"{type(e).__name__}: {e}"}, b""
            if header.get("status") != "ok" or header.get("restart"):
                self._stop()  # a reader process that failed or grew is replaced for the next submission
            header.setdefault("sha256", digest)
        return _decoded(header, payload, shown, self.limits)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> Intake:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ensure(self) -> socket.socket:
        """The socket to a running reader process, started now if there is none."""
        if self._proc is not None and self._proc.poll() is None and self._sock is not None:
            return self._sock
        self._stop()
        mine, theirs = socket.socketpair()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "grader.submission.intake_child", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=env, close_fds=True)
        finally:
            theirs.close()
        self._sock, self._fresh = mine, True
        self._finalizer = weakref.finalize(self, _shut, self._proc, mine)
        return mine

    def _stop(self) -> None:
        if self._proc is not None:
            self._finalizer()
        self._proc = self._sock = None


def _shut(proc: subprocess.Popen, sock: socket.socket) -> None:
    """The reader process gone (also when an Intake is dropped unclosed, or at exit)."""
    sock.close()
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def load_bounded(path: str | os.PathLike, *, main_module: str | None = None, cell_tag: str | None = None,
                 link_root: str | os.PathLike | None = None, intake: Intake | None = None) -> LoadedSubmission:
    """One submission read behind the boundary: through `intake`, or a reader process of its own."""
    if intake is not None:
        return intake.load(path, main_module=main_module, cell_tag=cell_tag, link_root=link_root)
    with Intake() as own:
        return own.load(path, main_module=main_module, cell_tag=cell_tag, link_root=link_root)


# --- frames -------------------------------------------------------------------------------------

def _send(sock: socket.socket, header: dict, payload: bytes) -> None:
    head = json.dumps(header).encode("ascii")
    sock.sendall(FRAME.pack(len(head), len(payload)) + head + payload)


def _recv(sock: socket.socket, deadline: float) -> tuple[dict, bytes]:
    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    try:
        n_head, n_payload = FRAME.unpack(_exactly(sock, FRAME.size))
        if n_head + n_payload > MAX_REPLY_BYTES:
            raise ValueError(f"a reply of {n_head + n_payload} bytes")
        header = json.loads(_exactly(sock, n_head))
        return header, _exactly(sock, n_payload)
    except TimeoutError:
        raise TimeoutError from None


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError("the reader process exited")
        got += k
    return bytes(buf)


def encode(sub: LoadedSubmission) -> tuple[dict, bytes]:
    """A LoadedSubmission as a frame: what the reader process sends back."""
    names = list(sub.files)
    header = {"status": "ok", "id": sub.id, "path": sub.path, "kind": sub.kind, "sha256": sub.sha256,
              "units": [[u.label, u.cell, u.source] for u in sub.units],
              "files": [[rel, len(sub.files[rel])] for rel in names],
              "error": sub.error.to_list() if sub.error is not None else None}
    return header, b"".join(sub.files[rel] for rel in names)


def _decoded(header: dict, payload: bytes, path: str, limits: IntakeLimits) -> LoadedSubmission:
    kind = "folder" if os.path.isdir(path) else ("zip" if path.lower().endswith(".zip") else
                                                 "ipynb" if path.lower().endswith(".ipynb") else "py")
    if header.get("status") != "ok":
        reason = _failure(header, os.path.basename(os.path.normpath(path)), limits)
        return LoadedSubmission(id=student_id(path), path=path, kind=kind, sha256=str(header.get("sha256") or ""),
                                error=reason)
    files, at = {}, 0
    for rel, size in header["files"]:
        files[rel] = payload[at:at + size]
        at += size
    units = tuple(CodeUnit(label=label, cell=cell, source=source) for label, cell, source in header["units"])
    error = Msg.from_list(header["error"]) if header.get("error") is not None else None
    return LoadedSubmission(id=header["id"], path=path, kind=header["kind"], sha256=header["sha256"], units=units,
                            files=files, error=error)


def _failure(header: dict, name: str, limits: IntakeLimits) -> Msg:
    status = header.get("status")
    if status == "timeout":
        return tr("reading {name} took longer than {seconds} seconds, the limit for one submission; submit your "
                  "code without generated or pasted data", name=name, seconds=round(limits.seconds))
    if status == "memory":
        return tr("reading {name} needed more than {mb} MB of memory, the limit for one submission; submit your "
                  "code without generated or pasted data", name=name, mb=limits.memory_bytes >> 20)
    return tr("{name} could not be read: its reader stopped ({reason})", name=name,
              reason=str(header.get("reason") or "no reason given")[:200])
