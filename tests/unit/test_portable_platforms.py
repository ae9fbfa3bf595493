"""The portable worker's Windows branches, driven on Linux with stand-ins for what only Windows has
(``msvcrt``, ``_winapi``), where a stand-in can behave as the real thing is documented to. This is a
simulation: none of it ran on Windows. What it cannot reach (``subprocess.STARTUPINFO`` with a
handle list, TerminateProcess's exit code) is named in the tests of the branches around it."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import select
import struct
import sys
import termios
import types

import pytest

from grader.sandbox.child import portable_worker
from grader.sandbox.errors import WorkerCrashed
from grader.sandbox.host import portable, portable_process
from grader.sandbox.limits import Limits


def _peek_named_pipe(handle: int, size: int = 0) -> tuple[int, int]:
    """``_winapi.PeekNamedPipe(handle, 0)`` on a POSIX pipe: (bytes available, bytes left in the
    message: 0 for a byte pipe), without consuming them; BrokenPipeError (ERROR_BROKEN_PIPE) once the
    writer is gone and nothing is left."""
    assert size == 0
    available = struct.unpack("i", fcntl.ioctl(handle, termios.FIONREAD, b"\0\0\0\0"))[0]
    if not available:
        p = select.poll()
        p.register(handle, select.POLLIN)
        if any(ev & select.POLLHUP for _, ev in p.poll(0)):
            raise BrokenPipeError(109, "The pipe has been ended")
    return available, 0


@pytest.fixture
def windows(monkeypatch):
    """sys.platform "win32", with stand-in msvcrt (a handle is the fd itself) and _winapi modules;
    `calls` records msvcrt's."""
    calls: list[tuple] = []
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.get_osfhandle = lambda fd: fd
    msvcrt.open_osfhandle = lambda handle, flags: calls.append(("open_osfhandle", handle, flags)) or handle
    msvcrt.setmode = lambda fd, mode: calls.append(("setmode", fd, mode))
    winapi = types.ModuleType("_winapi")
    winapi.PeekNamedPipe = _peek_named_pipe
    monkeypatch.setitem(sys.modules, "msvcrt", msvcrt)
    monkeypatch.setitem(sys.modules, "_winapi", winapi)
    monkeypatch.setattr(os, "O_BINARY", 0x8000, raising=False)
    monkeypatch.setattr(sys, "platform", "win32")
    return calls


def _pipes_as_on_windows():
    """A fresh copy of grader.sandbox.host.pipes, its platform branch taken as on Windows."""
    spec = importlib.util.find_spec("grader.sandbox.host.pipes")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _channel(pipes, limits: Limits):
    """A PipeChannel over four real pipes, the worker's ends returned beside it."""
    ends = [os.pipe() for _ in range(4)]  # requests, replies, stdout, stderr: (read, write)
    for r, _ in ends:
        os.set_blocking(r, True)  # Windows' anonymous pipes block: only a peek may find them empty

    def die(error: Exception, reason: str):
        raise error

    def crashed(phase):
        raise AssertionError(f"the channel closed while {phase}")

    channel = pipes.PipeChannel(ends[0][1], ends[1][0], ends[2][0], ends[3][0], limits, die=die,
                                crashed=crashed, dead=lambda: False, exited=lambda: False, tree_memory=None)
    return channel, {"requests": ends[0][0], "replies": ends[1][1], "out": ends[2][1], "err": ends[3][1]}


def test_output_is_read_by_peeking_then_reading_until_the_pipe_breaks(windows):
    pipes = _pipes_as_on_windows()
    assert "select" not in pipes.__dict__  # the Windows branch was taken
    channel, worker = _channel(pipes, Limits())
    os.write(worker["out"], "printed ü\n".encode())
    os.write(worker["err"], b"warned\n")
    assert channel.output() == ("printed ü\n", "warned\n")  # what the pipes held, read at once
    for name in ("out", "err", "replies", "requests"):
        os.close(worker[name])
    channel.close()


def test_a_flood_of_output_kills_the_windows_worker_too(windows):
    pipes = _pipes_as_on_windows()
    channel, worker = _channel(pipes, Limits(kill_output_bytes=1000))
    os.write(worker["out"], b"x" * 4096)
    with pytest.raises(WorkerCrashed, match="printed more than"):
        channel.reply(5.0, "running a case")
    for fd in worker.values():
        os.close(fd)
    channel.close()


def test_the_worker_makes_its_reply_handle_an_fd_and_both_pipes_binary(windows):
    r, w = os.pipe()
    saved = os.dup(0)
    try:
        assert portable_worker.reply_pipe(str(w)) == w
        requests = portable_worker.request_pipe()
        assert windows == [("open_osfhandle", w, os.O_WRONLY), ("setmode", w, os.O_BINARY),
                           ("setmode", requests, os.O_BINARY)]
        assert os.read(0, 1) == b""  # student code reading stdin gets end of file
        os.close(requests)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)
        os.close(w)


def test_the_windows_worker_sets_no_rlimits(windows, monkeypatch):
    monkeypatch.setitem(sys.modules, "resource", None)  # Windows has no resource module
    assert portable_worker.apply_rlimits({"cpu_seconds": 5, "max_file_bytes": 1 << 20, "address_space": 0}) == []


def test_the_windows_environment_keeps_what_python_needs_there(monkeypatch, tmp_path):
    monkeypatch.setattr(portable, "WINDOWS", True)
    monkeypatch.setenv("SYSTEMROOT", r"C:\Windows")
    monkeypatch.setenv("PATH", r"C:\Python311;C:\Windows\system32")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    env = portable.worker_env("cpu", str(tmp_path))
    assert env["SYSTEMROOT"] == r"C:\Windows" and env["PATH"] == r"C:\Python311;C:\Windows\system32"
    assert "LANG" not in env and "SECRET_TOKEN" not in env
    assert env["USERPROFILE"] == env["TEMP"] == env["TMP"] == str(tmp_path)


class _Popen:
    """What PortableProcess asks of its Popen, for an interpreter that ends when killed: its pid is
    past the kernel's pid_max, so no process (or group) has it."""

    def __init__(self, exit_code: int):
        self.returncode: int | None = None
        self.pid = int(open("/proc/sys/kernel/pid_max").read()) + 1
        self._exit_code = exit_code

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.returncode = self._exit_code

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


@pytest.mark.parametrize("killed, rc, report", [
    (True, 1, {"status": {}}),  # TerminateProcess's exit code is ours: it says nothing of the worker
    (False, 3, {"status": {"exit": 3}}),  # the student's exit(3)
    (False, 0, {"status": {"exit": 0}}),
])
def test_how_a_windows_worker_ended(monkeypatch, tmp_path, killed, rc, report):
    monkeypatch.setattr(portable_process, "WINDOWS", True)
    popen = _Popen(rc)
    proc = portable_process.PortableProcess(popen, str(tmp_path))  # type: ignore[arg-type]
    if killed:
        proc.kill()
    else:
        popen.returncode = rc
    assert proc.exited() and proc.exit_report == report
