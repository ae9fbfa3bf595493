"""The reader process of `grader.submission.intake`: ``python -m grader.submission.intake_child FD``.

It never imports torch and never runs what it reads. For each request read from the socket FD it
reads one submission (`load_submission`) under an address-space limit of the budget above what the
process itself holds (RLIMIT_AS, soft), and answers: "reading" once its own imports are done and the
reading starts (the grader's deadline for the submission runs from there), the submission's sha256 as
soon as it is known, then the result, or "memory" when the budget ran out. The grader enforces the deadline by
killing this process, and replaces it after any failure, or when a submission left it holding
much more memory than it started with. One request at a time; EOF on FD ends it.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys

from grader.submission.intake import FRAME, encode

_REGROWN_BYTES = 256 << 20
"""Resident memory above the start at which this process asks to be replaced (fragmentation)."""


def main(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    notebooks_ready = False
    baseline = _rss()
    while True:
        try:
            request = _read_request(sock)
        except EOFError:
            return
        if not notebooks_ready and not request["path"].lower().endswith(".py"):
            _limit_memory(None)
            _warm_notebooks()  # once, outside any budget: then no submission pays for the imports
            notebooks_ready, baseline = True, _rss()
        _send(sock, {"status": "reading"}, b"")
        _limit_memory(int(request["memory_bytes"]))
        try:
            header, payload = _read_one(request, sock)
        except MemoryError:
            header, payload = {"status": "memory"}, b""
        _limit_memory(None)
        if header["status"] != "ok" or _rss() > baseline + _REGROWN_BYTES:
            header["restart"] = True
        _send(sock, header, payload)


def _read_one(request: dict, sock: socket.socket) -> tuple[dict, bytes]:
    from grader.submission.load import load_submission

    sub = load_submission(request["path"], main_module=request["main_module"], cell_tag=request["cell_tag"],
                          link_root=request["link_root"],
                          on_digest=lambda d: _send(sock, {"status": "digest", "sha256": d}, b""))
    return encode(sub)


def _warm_notebooks() -> None:
    import nbformat

    nbformat.reads(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])), 4)


def _limit_memory(budget: int | None) -> None:
    """Address space: what this process maps now plus `budget`; None lifts the limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if budget is None:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        return
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft = mapped + budget
    resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _send(sock: socket.socket, header: dict, payload: bytes) -> None:
    head = json.dumps(header).encode("ascii")
    sock.sendall(FRAME.pack(len(head), len(payload)) + head + payload)


def _read_request(sock: socket.socket) -> dict:
    n_head, n_payload = FRAME.unpack(_exactly(sock, FRAME.size))
    request = json.loads(_exactly(sock, n_head))
    _exactly(sock, n_payload)
    return request


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]))
