"""The page cache carries no bit from one worker to a later one, in this run or the next.

A giver reads the first page of files nobody has read (the test evicts them first, as on a host
that has not read them since boot) to leave ones, and leaves the others unread for zeros; a taker,
in a later worker, times its own first read of each page (from the disk: slow, a 0; cached: fast,
a 1). Two kinds of file a worker could use: one outside what every worker reads anyway (torch's
type stubs), which a worker may not open at all now; and
one inside it (a compiled standard-library module nobody imported), which the zygote read before
the first worker started, so that reading it changes nothing. The pages mapped into every worker
(torch's libraries, evicted first as well) are resident too. The page residency is read here,
outside the jail, with mincore: what a worker's timing would see, without the timing.

The kernel may still drop a cached page when memory runs short (the README's "What timing still
leaks"): where /proc/vmstat shows it reclaimed or dropped pages after the sandbox started, a page
found missing is the kernel's doing, not the zygote's, and only a zygote that skipped the pages
(most of the evicted ones missing) fails.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import pytest
import torch

from grader.sandbox import Limits, Sandbox
from grader.submission.load import load_submission

HOSTILE = Path(__file__).parent.parent / "data" / "hostile"
LIMITS = Limits(import_timeout_s=60, call_timeout_s=60, submission_timeout_s=120, memory_bytes=1 << 30)
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the jail is Linux's"),
              pytest.mark.slow]  # a sandbox of its own, started after the eviction
MESSAGE = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0]


def outside() -> list[str]:
    """torch's type stubs (.pyi): readable on the host, read by no import."""
    folder = Path(torch.__file__).parent
    found = sorted(str(p) for p in folder.rglob("*.pyi") if p.stat().st_size > 4096)
    return found[:len(MESSAGE)]


def inside() -> list[str]:
    """Compiled standard-library modules that neither this process nor the zygote imported."""
    stdlib = Path(os.__file__).parent
    tag = f".{sys.implementation.cache_tag}.pyc"
    taken = {getattr(m, "__cached__", None) for m in list(sys.modules.values())}
    found = sorted(str(p) for p in (stdlib / "__pycache__").glob(f"*{tag}")
                   if str(p) not in taken and p.stat().st_size > 8192)
    return found[-len(MESSAGE):]


def mapped_libraries() -> list[str]:
    """The libraries of torch's site-packages (torch's, numpy's) this process has mapped."""
    root = str(Path(torch.__file__).parent.parent)
    with open("/proc/self/maps") as f:
        return sorted({p for line in f if (p := line.split(None, 5)[-1].strip()).startswith(root)
                       and os.path.isfile(p)})


def dropped() -> int:
    """Pages the kernel has taken out of the page cache since boot: reclaim's (pgsteal_*) and
    drop_caches' runs. A posix_fadvise eviction counts in neither."""
    with open("/proc/vmstat") as f:
        counts = dict(line.split() for line in f)
    return sum(int(n) for name, n in counts.items() if name.startswith("pgsteal_") or name == "drop_pagecache")


def evict(paths: list[str]) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def missing(path: str, offset: int = 0, length: int | None = None) -> int:
    """Pages of the file range that are not in the page cache."""
    size = os.path.getsize(path)
    length = size - offset if length is None else min(length, size - offset)
    if length <= 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
        vec = ctypes.create_string_buffer((length + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
        try:
            assert _libc.mincore(ctypes.c_void_p(addr), length, vec) == 0
        finally:
            _libc.munmap(ctypes.c_void_p(addr), length)
    finally:
        os.close(fd)
    return sum(1 for b in vec.raw if not b & 1)


@pytest.fixture(scope="module")
def files():
    out, ins = outside(), inside()
    assert len(out) == len(ins) == len(MESSAGE)
    evict(out + ins)
    return out, ins


@pytest.fixture(scope="module")
def evicted_libraries(files):
    """Pages of torch's libraries missing before the sandbox starts: those no process has mapped in
    (most of libtorch_cpu's) are evicted first, so that only the zygote can have read them back."""
    libraries = mapped_libraries()
    evict(libraries)
    return {path: missing(path) for path in libraries}


@pytest.fixture(scope="module")
def sb(files, evicted_libraries, dropped_before):
    with Sandbox(LIMITS) as box:
        if "landlock" not in box.features or not box.uses_zygote:
            pytest.skip(f"{box.isolation}: the reads are kept to the resident files only with a zygote and Landlock")
        yield box


@pytest.fixture(scope="module")
def dropped_before():
    """/proc/vmstat's count of dropped pages before the sandbox started."""
    return dropped()


def worker(sb):
    return sb.open(load_submission(HOSTILE / "channels.py"))


def test_a_worker_cannot_open_what_not_every_worker_reads(sb, files):
    out, _ = files
    with worker(sb) as giver:
        gave = giver.call("page_cache_give", out, MESSAGE)
    with worker(sb) as taker:
        bits, took = taker.call("page_cache_take", out)
    assert bits != MESSAGE  # what the channel carried before: every bit
    assert gave == ["EACCES"] * len(MESSAGE)
    assert bits == [None] * len(MESSAGE) and took == ["EACCES"] * len(MESSAGE)


def test_reading_what_every_worker_reads_changes_no_page(sb, files):
    _, ins = files
    assert [missing(p) for p in ins] == [0] * len(MESSAGE)  # evicted before, read by the zygote
    with worker(sb) as giver:
        gave = giver.call("page_cache_give", ins, MESSAGE)
    assert gave == ["ok"] * len(MESSAGE)
    assert [missing(p) for p in ins] == [0] * len(MESSAGE)
    with worker(sb) as taker:
        bits, _ = taker.call("page_cache_take", ins)
    assert bits != MESSAGE
    assert sb.page_cache["files"] > 1000 and sb.page_cache["bytes"] > 0


def test_every_page_mapped_into_the_workers_is_resident(dropped_before, evicted_libraries, sb):
    assert any("libtorch_cpu" in path and n > 0 for path, n in evicted_libraries.items())
    ranges = []
    with open(f"/proc/{sb.zygote_pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/") and os.path.isfile(parts[5].strip()):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                ranges.append((parts[5].strip(), int(parts[2], 16), end - start))
    assert any("libtorch" in path for path, _, _ in ranges)
    left = {path: n for path, offset, length in ranges if (n := missing(path, offset, length))}
    if dropped() == dropped_before:
        assert left == {}
    else:  # the kernel dropped pages meanwhile: a few of these may be among them, not most of
        # the ~1e5 evicted (a zygote that skips the mapped ranges leaves ~half of them missing)
        assert sum(left.values()) < sum(evicted_libraries.values()) // 100, left
