"""The warm zygote: ``python -m grader.sandbox.child.zygote CTL_FD [--warm-meta] [--no-resident-pages]``.

Started by exec (never by forking the grader) with a cleared environment. It imports torch and
this package only, stays single-threaded and never touches CUDA; the few CPU tensor ops it runs
to warm up (``grader.sandbox.child.warmup``) run on one thread, so that forking it is safe (a fork after a
multi-threaded OpenMP region deadlocks). It is driven over an
inherited SOCK_SEQPACKET socketpair: each "spawn" message carries four fds (status, channel,
stdout, stderr) and gets back the supervisor's pid. EOF on the socket (the grader closed it or
died) kills every child and ends the zygote. A "warm_meta" message (or ``--warm-meta``, before
the ready message) runs the first meta-device op here, once, so that workers do not each pay it.
``--no-resident-pages``: the workers' read set without making its pages resident (one submission,
``grader.sandbox.jail.resident``).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
from typing import Any


def main(ctl_fd: int, warm_meta: bool = False, libraries: tuple[str, ...] = (), pages: bool = True) -> None:
    # No cyclic collection while importing torch (and sympy for the meta warm-up): the
    # imports make ~1e6 objects and little garbage, and each collection would walk the growing heap
    # (docs/performance.md, Sandbox). Everything is frozen below, before the first fork.
    gc.disable()
    import time

    started = time.time()
    from grader.sandbox.jail import prefetch, resident

    resident.record_opens()
    # The fixed part of the workers' read set, prepared by a helper beside the imports (forked
    # now, while this process has one thread).
    early = prefetch.start(_hidden(), libraries, pages, close=(ctl_fd,))
    import torch

    imported = time.time()

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    from grader.sandbox.child import warmup

    warmup.warm_ops()
    # Even unwarmed, a worker's first meta op then imports sympy, not torch._dynamo as well.
    warmup.skip_dynamo_wrappers()
    if warm_meta:
        warmup.warm_meta()
    from grader.sandbox.child import server, supervisor
    from grader.sandbox.jail import enter

    try:
        enter.seccomp.build()  # once here: each worker only loads it
    except OSError:
        pass  # the jail probe finds the same and claims no seccomp

    server.queue_seed()
    if sys.platform.startswith("linux"):
        enter.prctl(enter.PR_SET_CHILD_SUBREAPER, 1)
    warmed = time.time()
    page_cache = _make_reads_resident(libraries, pages, early)
    # Everything imported so far lives as long as the zygote and its forks: move it out of the
    # cyclic collector's reach, so that no worker's (or the zygote's) full collection walks torch's
    # objects again (and copies their pages on write). No collection first: the imports left little
    # garbage, and walking ~1e6 objects would delay the first worker.
    gc.freeze()
    gc.enable()
    ctl = socket.socket(fileno=ctl_fd)
    # When it started, had imported torch and had warmed up (wall clock): the start-up breakdown's.
    times = {"start": started, "torch": imported, "warm": warmed}
    ctl.send(json.dumps({"ready": True, "pid": os.getpid(), "times": times, "resident": page_cache}).encode())
    mine: set[int] = set()
    direct: dict[int, _Direct] = {}  # workers forked straight into their own PID namespace
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY) if sys.platform.startswith("linux") else -1
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while True:
        watched: list[socket.socket | int] = [ctl, wake_r, *(d.status for d in direct.values() if not d.killing)]
        r, _, _ = select.select(watched, [], [], 0.2)
        if wake_r in r:
            try:
                os.read(wake_r, 512)
            except OSError:
                pass
        for d in direct.values():
            if d.status in r:
                d.on_status()
        if ctl in r:
            try:
                msg, fds, _, _ = socket.recv_fds(ctl, 65536, 8)
            except OSError:
                msg, fds = b"", []
            if not msg:
                break
            req = json.loads(msg)
            if req.get("op") == "spawn" and len(fds) == 4:
                sys.stdout.flush()
                sys.stderr.flush()
                straight = bool(req.get("direct")) and own_pid_ns >= 0 and type(req.get("cfg")) is dict
                try:
                    pid = enter.fork_in_new_pid_ns(own_pid_ns) if straight else os.fork()
                except OSError as e:
                    for fd in fds:
                        os.close(fd)
                    ctl.send(json.dumps({"error": f"fork failed: {e}"}).encode())
                    continue
                if pid == 0:
                    try:
                        ctl.close()
                        for d in direct.values():  # other workers' status sockets
                            d.status.close()
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        enter.prctl(enter.PR_SET_PDEATHSIG, signal.SIGKILL)
                        if straight:
                            supervisor.direct(req["cfg"], *fds)
                        else:
                            supervisor.supervise(*fds)
                    finally:
                        os._exit(1)
                if straight:
                    direct[pid] = _Direct(pid, socket.socket(fileno=fds[0]))
                    direct[pid].send({"pid": pid})
                    fds = fds[1:]
                for fd in fds:
                    os.close(fd)
                mine.add(pid)
                ctl.send(json.dumps({"pid": pid}).encode())
            elif req.get("op") == "warm_meta" and not fds:
                warmup.warm_meta()
                ctl.send(json.dumps({"ok": True, "resident": _make_reads_resident(libraries, pages)}).encode())
            else:
                for fd in fds:
                    os.close(fd)
                ctl.send(json.dumps({"error": "bad request"}).encode())
        _reap(mine, direct)
    _kill_all(mine)
    # Skip interpreter teardown: unloading torch is slow and nothing here needs flushing.
    os._exit(0)


def _hidden() -> tuple[str, ...]:
    """What no worker may read: the grader's own package."""
    import grader

    return (os.path.dirname(os.path.realpath(grader.__file__)),)


def _make_reads_resident(libraries: tuple[str, ...], pages: bool = True, early: Any = None) -> dict:
    """Every page a worker may read, resident (unless not `pages`), and the Landlock layer that keeps
    its reads to them (``grader.sandbox.jail.resident``), `libraries` whole (folders on the workers' sys.path only); run
    again after imports that add files. `early`: the helper's ``prefetch.Prefetch`` (its part is
    taken once it is done). Its summary, or the error that leaves workers without it."""
    import glob

    from grader.sandbox.jail import paths, resident

    devices = (*paths.BASIC_DEVICES, *glob.glob("/dev/nvidia*"))  # a worker's own layer narrows them
    try:
        return resident.prepare(hidden=_hidden(), open_below=("/sys", os.getcwd()), devices=devices,
                                libraries=libraries, pages=pages,
                                prefetched=early.collect() if early is not None else None)
    except OSError as e:
        return {"error": f"{type(e).__name__}: {e}"}


class _Direct:
    """The zygote's side of a worker it forked straight into a new PID namespace: it does what the
    supervisor does on the supervised path. The worker's configuration came with the spawn request,
    so only the zygote reads this status socket: it carries, to the grader, a "pid" line
    and, once the worker is reaped, a "status" line; from the grader, "k" (or EOF) means kill it.
    The worker is PID 1 of its namespace: when it dies, the kernel kills everything it started."""

    def __init__(self, pid: int, status: socket.socket):
        self.pid = pid
        self.status = status
        self.killing = False

    def send(self, msg: dict) -> None:
        try:
            self.status.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            pass

    def on_status(self) -> None:
        try:
            data = self.status.recv(64)
        except OSError:
            data = b""
        if not data or b"k" in data:
            self.killing = True
            try:
                os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
            except ProcessLookupError:
                pass

    def exited(self, exit_status: int) -> None:
        from grader.sandbox.child import supervisor

        self.send(supervisor.exit_report(exit_status, self.killing))
        self.status.close()


def _reap(mine: set[int], direct: dict[int, _Direct]) -> None:
    from grader.sandbox.child import supervisor

    try:
        while True:
            pid, exit_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            mine.discard(pid)
            d = direct.pop(pid, None)
            if d is not None:
                d.exited(exit_status)
    except ChildProcessError:
        pass
    # Orphans adopted from dead supervisors are never ours to keep.
    for pid in supervisor.children():
        if pid not in mine:
            supervisor.kill(pid)


def _kill_all(mine: set[int]) -> None:
    from grader.sandbox.child import supervisor

    for pid in list(mine):
        supervisor.kill(pid)
    supervisor.sweep_orphans()


if __name__ == "__main__":
    args = sys.argv[2:]
    main(int(sys.argv[1]), warm_meta="--warm-meta" in args, pages="--no-resident-pages" not in args,
         libraries=tuple(args[i + 1] for i, a in enumerate(args[:-1]) if a == "--library"))
