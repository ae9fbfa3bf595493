"""Making a file's pages resident: ``mincore`` says which are missing, and only those are read.

`make_resident` brings every page of a read set (``grader.sandbox.jail.resident``) into the page
cache: small files are read whole (cheaper than asking), larger ones and mapped ranges page run by
page run.

Standard library only: imported by the zygote (with ``resident.py``) and by its helper
(``prefetch.py``).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import time
from dataclasses import dataclass
from typing import Any

PAGE = mmap.PAGESIZE


@dataclass(frozen=True)
class Residency:
    """What `make_resident` did."""

    files: int
    nbytes: int
    """Bytes of file data now resident (the set's size)."""
    read_bytes: int
    """Of those, bytes that were not resident and were read now."""
    seconds: float


_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_long]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return _libc


_MISSING = bytes(0 if b & 1 else 1 for b in range(256))
"""mincore's byte per page -> 1 where the page is not resident (bit 0 clear)."""


_VEC = ctypes.create_string_buffer(1 << 16)


def missing_pages(fd: int, offset: int, length: int) -> list[tuple[int, int]]:
    """(first page, pages) of each run of pages of the file range that are not in the page cache."""
    global _VEC
    if length <= 0:
        return []
    libc = _c()
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        n = (length + PAGE - 1) // PAGE
        if n > len(_VEC):
            _VEC = ctypes.create_string_buffer(n)
        if libc.mincore(ctypes.c_void_p(addr), length, _VEC) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        flags = ctypes.string_at(_VEC, n).translate(_MISSING)
    finally:
        libc.munmap(ctypes.c_void_p(addr), length)
    return [(m.start(), m.end() - m.start()) for m in re.finditer(b"\x01+", flags)]


_BUF = bytearray(1 << 20)


def _read_missing(path: str, ranges: list[tuple[int, int]] | None) -> tuple[int, int]:
    """Read the pages of `ranges` of `path` (None: all of it) that are not cached; returns (the
    bytes the ranges hold, the bytes that had to be read)."""
    held = done = 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0, 0
    try:
        size = os.fstat(fd).st_size
        if ranges is None and size <= len(_BUF):  # a small file: reading it is cheaper than asking
            return size, os.preadv(fd, [_BUF], 0) * 0
        for offset, length in ranges if ranges is not None else [(0, size)]:
            offset -= offset % PAGE
            length = min(length, size - offset)
            if length <= 0:
                continue
            held += length
            for first, pages in missing_pages(fd, offset, length):
                pos, end = offset + first * PAGE, min(offset + (first + pages) * PAGE, size)
                while pos < end:
                    n = os.preadv(fd, [memoryview(_BUF)[:min(len(_BUF), end - pos)]], pos)
                    if not n:
                        break
                    pos += n
                    done += n
    finally:
        os.close(fd)
    return held, done


def make_resident(rs: Any) -> Residency:
    """Every page of `rs` (a ``resident.ReadSet``: its files but those it read already, and its
    mapped ranges) in the page cache."""
    t0 = time.perf_counter()
    held = read = 0
    for path in sorted(rs.files):
        if path in rs.read_already:
            held += max(rs.files[path], 0)
            continue
        h, r = _read_missing(path, None)
        held, read = held + h, read + r
    for path, ranges in sorted(rs.mapped.items()):
        if path not in rs.files:
            h, r = _read_missing(path, ranges)
            held, read = held + h, read + r
    return Residency(files=len(rs.files) + len(rs.mapped.keys() - rs.files.keys()), nbytes=held,
                     read_bytes=read, seconds=time.perf_counter() - t0)
