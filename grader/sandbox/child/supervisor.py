"""The supervisor process: forks the worker, reports its pid and exit status, and kills its leftovers.

``python -m grader.sandbox.child.supervisor STATUS_FD CHANNEL_FD`` (stdout/stderr are the output
pipes), or forked from the zygote. Process tree per submission (both start paths):

    supervisor "A"  (this module)
      - own session, PR_SET_CHILD_SUBREAPER, joins the worker's cgroups, unshares namespaces
      - forks the worker, reports its pid and exit status to the grader on the status socket
      - on "k" or EOF from the grader: SIGKILLs the worker and every orphan it adopted
    worker "B"  (PID 1 of a new PID namespace when available; ``grader.sandbox.child.server``)
      - fds: 0 = /dev/null, 1/2 = output pipes, 3 = channel; nothing else
      - jails itself (enter.enter_worker), clears the environment, then executes the student's code
        and answers frames on fd 3 (grader.sandbox.wire). Never pickles.

A worker forked straight from the zygote (``direct``) has no supervisor: the zygote does its part.
Everything here is untrusted once student code has run: the grader validates every frame.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback

# The server and the jail: both imported here, before the jail hides the grader's files.
from grader.sandbox.child import server
from grader.sandbox.child.server import CHANNEL_FD
from grader.sandbox.jail import enter, resident
from grader.sandbox.wire import write_all


def read_config(status: socket.socket) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = status.recv(65536)
        if not chunk:
            os._exit(0)
        buf += chunk
    return json.loads(buf)


def supervise(status_fd: int, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Run as the supervisor: never returns."""
    try:
        status = socket.socket(fileno=status_fd)
        cfg = read_config(status)
        enter.enter_supervisor(cfg)
    except BaseException as e:  # report and stop: the grader turns this into an operator error
        _send_status(status_fd, {"error": f"supervisor set-up failed: {e!r}"})
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_worker(cfg, channel_fd, out_fd, err_fd)
    for fd in (channel_fd, out_fd, err_fd):
        os.close(fd)
    _send_status(status_fd, {"pid": pid})
    _watch(status, pid)


def direct(cfg: dict, status_fd: int, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Run as a worker forked straight from the zygote into its own PID namespace, with the
    configuration the spawn request carried: the zygote reports its pid and exit status to the
    grader (on the status socket, which only the zygote uses), so it needs no supervisor."""
    try:
        os.close(status_fd)
        enter.enter_direct(cfg)
    except BaseException as e:
        os.write(err_fd, f"worker set-up failed: {e!r}\n".encode())
        os._exit(1)
    _run_worker(cfg, channel_fd, out_fd, err_fd)


def _run_worker(cfg: dict, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Become the worker and serve until the grader is done; never returns."""
    try:
        _become_worker(cfg, channel_fd, out_fd, err_fd)
    except BaseException:
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(70)
    os._exit(0)


def _send_status(fd: int, msg: dict) -> None:
    try:
        write_all(fd, (json.dumps(msg) + "\n").encode())
    except OSError:
        pass


def _watch(status: socket.socket, worker: int) -> None:
    exit_status: int | None = None
    killing = False
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    watched: list[socket.socket | int] = [status, wake_r]
    while exit_status is None:
        r, _, _ = select.select(watched, [], [], 0.5)
        if wake_r in r:
            try:
                os.read(wake_r, 512)
            except OSError:
                pass
        if status in r:
            try:
                data = status.recv(64)
            except OSError:
                data = b""
            if not data or b"k" in data:
                killing = True
                kill(worker)
                try:
                    _, exit_status = os.waitpid(worker, 0)
                except ChildProcessError:
                    break
        try:
            while True:
                p, st = os.waitpid(-1, os.WNOHANG)
                if p == 0:
                    break
                if p == worker:
                    exit_status = st
        except ChildProcessError:
            break
    sweep_orphans()
    _send_status(status.fileno(), exit_report(exit_status, killing))
    os._exit(0)


def exit_report(exit_status: int | None, killed_by_grader: bool) -> dict:
    """The status line the grader reads when a worker has been reaped (None: it was lost)."""
    if exit_status is None:
        return {"status": {"lost": True}}
    if os.WIFSIGNALED(exit_status):
        return {"status": {"signal": os.WTERMSIG(exit_status), "killed_by_grader": killed_by_grader}}
    return {"status": {"exit": os.WEXITSTATUS(exit_status)}}


def kill(pid: int) -> None:
    """SIGKILL `pid` if it still exists."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def children() -> list[int]:
    """This process's children (the zygote's and a supervisor's: adopted orphans too)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def sweep_orphans() -> None:
    """Kill and reap every process left behind (orphans are re-parented to us, the subreaper)."""
    for _ in range(10_000):
        for c in children():
            kill(c)
        try:
            p, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _become_worker(cfg: dict, channel_fd: int, out_fd: int, err_fd: int) -> None:
    # Move the inherited fds to 0..3 (via high numbers, so sources and targets cannot collide).
    layer = resident.LAYER_FD  # the zygote's Landlock layer, if any: the jail applies it, then closes it
    high = [os.dup(fd) for fd in (channel_fd, out_fd, err_fd) + ((layer,) if layer is not None else ())]
    high = [_fcntl_dup(fd, 100 + i) for i, fd in enumerate(high)]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(high[1], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], CHANNEL_FD)
    top = CHANNEL_FD
    if layer is not None:
        top = CHANNEL_FD + 1
        os.dup2(high[3], top, inheritable=False)
        resident.LAYER_FD = top
    os.closerange(top + 1, _max_fd())
    for fd in (0, 1, 2, CHANNEL_FD):
        os.set_inheritable(fd, fd != CHANNEL_FD)
    applied = enter.enter_worker(cfg)
    server.serve(cfg, applied)


def _fcntl_dup(fd: int, at_least: int) -> int:
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD, at_least)
    os.close(fd)
    return new


def _max_fd() -> int:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < 1 << 20 else 65536


def main(argv: list[str]) -> None:
    """``python -m grader.sandbox.child.supervisor STATUS_FD CHANNEL_FD`` (stdout/stderr are the output pipes)."""
    status_fd, channel_fd = int(argv[0]), int(argv[1])
    supervise(status_fd, channel_fd, os.dup(1), os.dup(2))


if __name__ == "__main__":
    main(sys.argv[1:])
