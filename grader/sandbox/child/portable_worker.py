"""The portable worker: ``python -m grader.sandbox.child.portable_worker REPLIES``, a fresh interpreter.

What it needs every OS has: it is started by ``subprocess`` (never forked from the grader), reads
requests on its stdin pipe and writes replies to the pipe it inherited as REPLIES (an fd on POSIX,
a handle on Windows); its stdout and stderr are the grader's capture pipes. First it moves the
request pipe off fd 0 (student code reading stdin gets end of file), imports torch and warms the
meta device, then reads its configuration (one frame: a JSON header, no payload), applies the
rlimits where the OS has them and serves like every worker (``grader.sandbox.child.server``). Never
pickles.
"""

from __future__ import annotations

import os
import sys

def reply_pipe(arg: str) -> int:
    """The fd of the reply pipe passed as `arg` (a Windows handle made into an fd there)."""
    if sys.platform == "win32":
        import msvcrt

        fd = msvcrt.open_osfhandle(int(arg), os.O_WRONLY)
        msvcrt.setmode(fd, os.O_BINARY)
        return fd
    fd = int(arg)
    private = os.dup(fd)  # not inheritable: a process the student starts does not hold the channel
    os.close(fd)
    return private


def request_pipe() -> int:
    """The request pipe, moved off fd 0 (which becomes the null device)."""
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if sys.platform == "win32":
        import msvcrt

        msvcrt.setmode(fd, os.O_BINARY)
    return fd


def apply_rlimits(cfg: dict) -> list[str]:
    """CPU time, file size, core dumps, open files and (for a CPU worker) address space, where the
    OS has rlimits; returns ["rlimits"] when it does."""
    if sys.platform == "win32":
        return []  # no rlimits: the time limit and the memory poll bound the worker
    import resource

    def setl(which: int, value: int) -> None:
        try:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass  # macOS refuses some (RLIMIT_AS): the memory poll still bounds the worker

    setl(resource.RLIMIT_CPU, max(1, int(cfg["cpu_seconds"])))
    setl(resource.RLIMIT_FSIZE, int(cfg["max_file_bytes"]))
    setl(resource.RLIMIT_CORE, 0)
    setl(resource.RLIMIT_NOFILE, 256)
    if cfg.get("address_space"):
        setl(resource.RLIMIT_AS, int(cfg["address_space"]))
    return ["rlimits"]


def main(argv: list[str]) -> None:
    replies = reply_pipe(argv[0])
    requests = request_pipe()
    # torch, and the first meta-device op (which imports sympy), before the configuration: a spare
    # worker waits here warm, and pays them at boot as the zygote does, not within a case's time limit.
    from grader.sandbox.child import warmup

    warmup.warm_meta()
    from grader.sandbox.child import server
    from grader.sandbox.wire import decode_frame, read_frame

    try:
        header, payload = read_frame(requests, max_header=1 << 20, max_payload=0)
    except EOFError:
        os._exit(0)  # the grader closed it before it was needed (a spare worker)
    cfg = decode_frame(header, payload, on_handle=None)
    applied = apply_rlimits(cfg)
    os.chdir(cfg["scratch"])
    try:
        server.serve(cfg, applied, channel=(requests, replies), environment=dict(os.environ))
    finally:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
