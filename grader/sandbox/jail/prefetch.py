"""The fixed part of the workers' read set, prepared by a helper process while the zygote imports torch.

Most of the read set (``grader.sandbox.jail.resident``) does not depend on what the zygote
imports: the standard library, torch's package and those of the distributions torch requires, and
the folders PYTHONPATH adds, all found without importing anything (``importlib.util.find_spec``,
the installed metadata). Scanning them, reading their every page (``pagein``) and making their
Landlock rules is most of what the read set costs. `start`, called in the zygote before it imports
torch (one thread: the fork is safe), forks a helper that does this at a lower CPU priority, beside
the zygote's import and warm-up; `Prefetch.collect` takes that part and its ruleset (the fd,
passed over a socket) back, and the zygote adds what its imports added before its first worker
(``resident.prepare``). Any failure: None, and the zygote builds it all itself.

Standard library only: imported by the zygote.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import struct

try:
    from grader.sandbox.jail import landlock, pagein, resident
except ImportError:  # beside jail.py, run as a script
    import landlock  # type: ignore[no-redef,import-not-found]
    import pagein  # type: ignore[no-redef,import-not-found]
    import resident  # type: ignore[no-redef,import-not-found]

NICE = 10
"""The helper's CPU priority below the zygote's: it takes the CPU the imports leave idle first."""
_HEADER = struct.Struct("!Q")


class Prefetch:
    """The zygote's end of a running helper."""

    def __init__(self, pid: int, sock: socket.socket, pages: bool):
        self.pid, self.sock, self.pages = pid, sock, pages

    def collect(self, timeout: float = 120.0) -> tuple[resident.ReadSet, int] | None:
        """The fixed part (its files made resident where asked: `ReadSet.read_already`) and its
        ruleset's fd, once the helper is done; None where it failed (it is reaped either way)."""
        self.sock.settimeout(timeout)
        fd = -1
        try:
            msg, fds, _, _ = socket.recv_fds(self.sock, _HEADER.size, 1)
            fd = fds[0] if fds else -1
            while len(msg) < _HEADER.size:
                more = self.sock.recv(_HEADER.size - len(msg))
                if not more:
                    raise OSError("the read-set helper ended early")
                msg += more
            (n,) = _HEADER.unpack(msg)
            data = bytearray()
            while len(data) < n:
                more = self.sock.recv(min(1 << 20, n - len(data)))
                if not more:
                    raise OSError("the read-set helper ended early")
                data += more
            rs = resident.ReadSet.from_json(json.loads(data))
            if fd < 0:
                raise OSError("no ruleset from the read-set helper")
        except (OSError, ValueError, KeyError, TypeError):
            if fd >= 0:
                os.close(fd)
            return None
        finally:
            self.sock.close()
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        if self.pages:
            rs.read_already = set(rs.files)
        return rs, fd


def start(hidden: tuple[str, ...], libraries: tuple[str, ...], pages: bool,
          close: tuple[int, ...] = ()) -> Prefetch | None:
    """Fork the helper (call it before importing anything that starts threads; `close`: fds the
    helper closes first, the zygote's control socket); None where it cannot start."""
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        mine.close()
        theirs.close()
        return None
    if pid == 0:
        try:
            mine.close()
            for fd in close:
                os.close(fd)
            _helper(theirs, hidden, libraries, pages)
        finally:
            os._exit(0)
    theirs.close()
    return Prefetch(pid, mine, pages)


def _helper(sock: socket.socket, hidden: tuple[str, ...], libraries: tuple[str, ...], pages: bool) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: dies with the zygote
        os.nice(NICE)
    except (OSError, AttributeError):
        pass
    rs = resident.ReadSet.fixed(hidden, libraries)
    if pages:
        pagein.make_resident(rs)
    fd = landlock.ruleset(resident.layer_rules(rs), resident.READ)
    data = json.dumps(rs.to_json()).encode()
    socket.send_fds(sock, [_HEADER.pack(len(data))], [fd])
    sock.sendall(data)
