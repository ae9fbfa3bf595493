"""Landlock (through ctypes): what the worker may open, applied by the worker to itself.

Reads and execution beneath the read paths, everything beneath the write paths (its scratch dir),
read, write and ioctl on the listed device nodes only (nothing else of /dev: not the host's
/dev/ptmx or /dev/pts, which every process of a uid shares), no TCP connect or bind (ABI 4) and
no signals or abstract Unix sockets out of the domain (ABI 6), where the kernel has them.

Standard library only: the jail probe imports this module as a script's neighbour.
"""

from __future__ import annotations

import ctypes
import os
import stat

SYS_landlock_create_ruleset = 444  # the same number on every architecture
SYS_landlock_add_rule = 445
SYS_landlock_restrict_self = 446

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_ACCESS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights that apply to a file (a rule on a file may hold no others)."""

_libc = None


def _syscall(*args) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc.syscall(*args)


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    try:
        ret = _syscall(SYS_landlock_create_ruleset, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except Exception:
        return 0
    return max(int(ret), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict(read_paths: list[str], write_paths: list[str], abi: int, devices: list[str]) -> None:
    """Deny file access outside the lists (and TCP, and signals out of the domain, when supported).
    `devices`: the only device nodes that may be opened (read, write and ioctl), each by its path."""
    fs_all = _fs_all(abi)
    read = EXECUTE | READ_FILE | READ_DIR
    dev = read | WRITE_FILE | (fs_all & IOCTL_DEV)
    rules = [(p, read) for p in read_paths] + [(d, dev) for d in devices] + [(p, fs_all) for p in write_paths]
    rfd = ruleset(rules, fs_all, net=0b11 if abi >= 4 else 0, scoped=0b11 if abi >= 6 else 0, abi=abi)
    try:
        restrict_with(rfd)
    finally:
        os.close(rfd)


def _fs_all(abi: int) -> int:
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= REFER
    if abi >= 3:
        fs_all |= TRUNCATE
    if abi >= 5:
        fs_all |= IOCTL_DEV
    return fs_all


def ruleset(rules: list[tuple[str, int]], handled: int, *, net: int = 0, scoped: int = 0, abi: int = 1) -> int:
    """A ruleset (its fd) handling `handled` file rights (and `net`, `scoped` where `abi` has them),
    allowing each (path, rights) of `rules`; paths that do not exist are skipped. A ruleset can be
    made once and applied by many processes: `restrict_with` in each."""
    attr = _RulesetAttr(handled, net, scoped)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    rfd = _check(_syscall(SYS_landlock_create_ruleset, ctypes.byref(attr), ctypes.c_size_t(size),
                          ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        add_rules(rfd, rules, handled)
    except BaseException:
        os.close(rfd)
        raise
    return rfd


def add_rules(rfd: int, rules: list[tuple[str, int]], handled: int) -> None:
    """Allow each (path, rights) of `rules` in the ruleset `rfd` (handling `handled`); paths that do
    not exist are skipped. Any process holding the fd may add to it (``prefetch.py``: a helper)."""
    for path, access in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= FILE_ACCESS
            rule = _PathBeneath(access & handled, fd)
            _check(_syscall(SYS_landlock_add_rule, rfd, ctypes.c_int(1), ctypes.byref(rule),
                            ctypes.c_uint32(0)), f"landlock_add_rule {path}")
        finally:
            os.close(fd)


def restrict_with(rfd: int) -> None:
    """Restrict this process with the ruleset `rfd` (another layer: access must pass them all)."""
    _check(_syscall(SYS_landlock_restrict_self, rfd, ctypes.c_uint32(0)), "landlock_restrict_self")
