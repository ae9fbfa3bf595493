"""The worker's system-call filter, built with libseccomp (through ctypes; no hand-written BPF).

Default: allow. Denied with EPERM, whatever the arguments:

- the kernel keyrings (``keyctl``, ``add_key``, ``request_key``): keys outlive a worker and are
  shared by every process of a uid, so they would carry one student's code to another's run;
- ``socket()`` of every family: the worker's channel to the grader is inherited, it needs no other
  (a pathname Unix socket is not governed by Landlock, raw and netlink sockets reach the kernel);
- new namespaces and joining others (``unshare``, ``setns``, ``clone`` with a namespace flag;
  ``clone3``, whose flags the filter cannot read, answers ENOSYS so that libc falls back to ``clone``);
- mounts, ``ptrace`` and reading or writing other processes' memory, ``bpf``, ``perf_event_open``,
  ``userfaultfd``, ``io_uring``, kernel modules and ``kexec``, clocks, swap, reboot, and the like;
- the page cache's oracles and evictions: ``mincore`` and ``cachestat`` (which pages of a file are
  cached), ``fadvise64`` (DONTNEED drops them) and ``readahead``, and Linux AIO (``io_setup``,
  ``io_submit``: a control block's RWF_NOWAIT, which the filter cannot read, fails a read that
  would wait for the disk). Any file every worker may read is shared by all of them, and by
  later runs: one page cached or not is one bit left for another student's code.

Denied with EPERM for some arguments only: ``preadv2`` and ``pwritev2`` with RWF_NOWAIT in their
flags (argument 5 on x86-64 and aarch64 alike, after the offset's two halves: a read with it fails
at once where the page is not cached), and ``madvise`` with MADV_PAGEOUT or MADV_COLD (which push a
mapped file's pages out of the cache).

System calls of another architecture (the 32-bit ABI on x86-64) kill the process: libseccomp's
default for a filter that names only the native one.

`build()` makes the filter once (in the zygote, before it forks); `load(ctx)` installs it in a
worker, the last step of its jail (after NO_NEW_PRIVS, which an unprivileged filter needs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

ACT_ALLOW = 0x7FFF0000
CMP_EQ = 4
CMP_MASKED_EQ = 7


def ACT_ERRNO(e: int) -> int:  # noqa: N802 - the libseccomp macro's name
    return 0x00050000 | (e & 0xFFFF)


DENIED = (
    # keyrings
    "keyctl", "add_key", "request_key",
    # sockets (the channel is inherited)
    "socket",
    # namespaces
    "unshare", "setns",
    # mounts and the root
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "fanotify_init", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "iopl", "ioperm",
    # the machine
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "sethostname", "setdomainname",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "vhangup", "nfsservctl",
    # the page cache: residency oracles and evictions (Linux AIO reads take RWF_NOWAIT in memory)
    "mincore", "cachestat", "fadvise64", "readahead", "io_setup", "io_submit",
)

RWF_NOWAIT = 0x00000008
RW_FLAGS_ARG = 5
"""preadv2/pwritev2(fd, iov, iovcnt, pos_l, pos_h, flags): the flags' argument index, the same on
every 64-bit ABI (pos_h is passed, as 0, where an offset fits one register)."""
MADV_COLD, MADV_PAGEOUT = 20, 21
NEWER_THAN_LIBSECCOMP = {"cachestat": 451}
"""System calls an older libseccomp cannot name, by number (one table for every architecture)."""

NAMESPACE_FLAGS = (
    0x00000080,  # CLONE_NEWTIME
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_lib = None


def library():
    """libseccomp, or None where it is not installed."""
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("seccomp")
        try:
            lib = ctypes.CDLL(name or "libseccomp.so.2", use_errno=True)
        except OSError:
            return None
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                               ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def syscall_number(name: str) -> int | None:
    """The native number of a system call (None: unknown here, or no libseccomp)."""
    lib = library()
    if lib is None:
        return None
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    return nr if nr >= 0 else None


class Filter:
    """A built filter (a libseccomp context), ready to load into any process forked from this one."""

    def __init__(self, ctx: int):
        self.ctx = ctx

    def load(self) -> None:
        ret = library().seccomp_load(self.ctx)
        if ret < 0:
            raise OSError(-ret, f"seccomp_load: {errno.errorcode.get(-ret, -ret)}")


_built: Filter | None = None


def build() -> Filter:
    """The worker's filter (built once per process; forks inherit it). Raises OSError where
    libseccomp is missing or refuses a rule."""
    global _built
    if _built is not None:
        return _built
    lib = library()
    if lib is None:
        raise OSError(errno.ENOSYS, "libseccomp is not installed")
    ctx = lib.seccomp_init(ACT_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")

    def rule(action: int, name: str, *cmps: _ArgCmp) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            nr = NEWER_THAN_LIBSECCOMP.get(name, -1)
        if nr < 0:
            return  # not a system call on this architecture
        arr = (_ArgCmp * len(cmps))(*cmps) if cmps else None
        ret = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if ret < 0:
            raise OSError(-ret, f"seccomp rule for {name}")

    try:
        for name in DENIED:
            rule(ACT_ERRNO(errno.EPERM), name)
        for flag in NAMESPACE_FLAGS:
            rule(ACT_ERRNO(errno.EPERM), "clone", _ArgCmp(0, CMP_MASKED_EQ, flag, flag))
        rule(ACT_ERRNO(errno.ENOSYS), "clone3")
        for name in ("preadv2", "pwritev2"):
            rule(ACT_ERRNO(errno.EPERM), name, _ArgCmp(RW_FLAGS_ARG, CMP_MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))
        for advice in (MADV_COLD, MADV_PAGEOUT):
            rule(ACT_ERRNO(errno.EPERM), "madvise", _ArgCmp(2, CMP_EQ, advice, 0))
    except BaseException:
        lib.seccomp_release(ctx)
        raise
    _built = Filter(ctx)
    return _built


def join_new_session_keyring() -> None:
    """Give this process a fresh, empty, anonymous session keyring (belt and braces beside the
    filter: nothing of the grader's session keyring stays reachable). Raises OSError where the
    kernel has no keyrings."""
    nr = syscall_number("keyctl")
    if nr is None:
        raise OSError(errno.ENOSYS, "keyctl is not a system call here")
    libc = ctypes.CDLL(None, use_errno=True)
    KEYCTL_JOIN_SESSION_KEYRING = 1
    if libc.syscall(ctypes.c_long(nr), ctypes.c_int(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"keyctl(JOIN_SESSION_KEYRING): {errno.errorcode.get(e, e)}")
