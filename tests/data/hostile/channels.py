# Hostile: two students' workers passing code to each other through state the host shares.
# A giver leaves a message (a whole implementation, say) where a taker, alive at the same time or
# in a later run, could read it: the host's devpts (/dev/ptmx, /dev/pts/N: every pseudo-terminal
# uid 65534 opens is uid 65534's), or the page cache (a page of a file every worker may read,
# cached or not, is one bit: mincore, cachestat and preadv2(RWF_NOWAIT) read it, fadvise evicts).
# Each function returns what it got; the tests assert that nothing gets through.
import ctypes
import errno
import fcntl
import mmap
import os
import struct
import termios

libc = ctypes.CDLL(None, use_errno=True)
TIOCGPTN, TIOCSPTLCK = 0x80045430, 0x40045431
_kept = []  # the giver's terminal stays open while the taker looks


def _name(e):
    return errno.errorcode.get(e, str(e))


def _err():
    return _name(ctypes.get_errno())


def devpts_give(message):
    """Open a pseudo-terminal and leave `message` in it; returns its pts name or the errno."""
    try:
        master = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        return _name(e.errno)
    fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))  # unlockpt
    n = struct.unpack("i", fcntl.ioctl(master, TIOCGPTN, struct.pack("i", 0)))[0]
    slave = os.open(f"/dev/pts/{n}", os.O_RDWR | os.O_NOCTTY)
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    os.write(master, message.encode() + b"\n")
    _kept.extend([master, slave])
    return f"pts/{n}"


def devpts_take():
    """Read whatever a pseudo-terminal of another worker holds; returns it, or why not."""
    try:
        names = os.listdir("/dev/pts")
    except OSError as e:
        return f"listdir: {_name(e.errno)}"
    got = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/dev/pts/{name}", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            got.append(f"{name}: {_name(e.errno)}")
            continue
        try:
            return os.read(fd, 1 << 16).decode(errors="replace")
        except OSError as e:
            got.append(f"{name}: read {_name(e.errno)}")
        finally:
            os.close(fd)
    return got or "no terminals"


def dev_entries():
    """What /dev holds (or why it cannot be listed), and which of its usual nodes open."""
    try:
        listed = sorted(os.listdir("/dev"))
    except OSError as e:
        listed = _name(e.errno)
    opened = {}
    for name in ("null", "zero", "full", "random", "urandom", "ptmx", "tty", "fuse", "kmsg"):
        try:
            os.close(os.open(f"/dev/{name}", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
            opened[name] = "ok"
        except OSError as e:
            opened[name] = _name(e.errno)
    with open("/dev/urandom", "rb") as f:
        opened["urandom_bytes"] = len(f.read(16))
    with open("/dev/null", "w") as f:
        opened["null_write"] = f.write("x")
    return {"listed": listed, "opened": opened}


def _library_file():
    """A file every worker may read: the C library this process mapped, else (where /proc or the
    library may not be read) the compiled ctypes module."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if ("libc.so" in path or "libc-" in path) and os.access(path, os.R_OK):
                    return path
    except OSError:
        pass
    return ctypes.__cached__ if os.access(ctypes.__cached__, os.R_OK) else ctypes.__file__


def page_cache_oracles():
    """Each way to read or change whether a page of a shared file is cached: "ok" or the errno."""
    out = {}
    path = _library_file()
    fd = os.open(path, os.O_RDONLY)
    try:
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        page = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vec = (ctypes.c_ubyte * 1)()
        out["mincore"] = "ok" if libc.mincore(page, 4096, vec) == 0 else _err()
        for name, advice in (("madvise_pageout", 21), ("madvise_cold", 20),
                             ("madvise_dontneed", mmap.MADV_DONTNEED)):  # the last: what allocators do
            out[name] = "ok" if libc.madvise(page, 4096, advice) == 0 else _err()
        libc.munmap(page, 4096)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            out["fadvise"] = "ok"
        except OSError as e:
            out["fadvise"] = _name(e.errno)
        libc.readahead.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_size_t]
        out["readahead"] = "ok" if libc.readahead(fd, 0, 4096) == 0 else _err()
        cstat = (ctypes.c_uint64 * 8)()
        crange = (ctypes.c_uint64 * 2)(0, 4096)
        r = libc.syscall(451, fd, crange, cstat, 0)  # cachestat
        out["cachestat"] = "ok" if r == 0 else _err()
        try:
            os.preadv(fd, [bytearray(4096)], 0, os.RWF_NOWAIT)
            out["preadv2_nowait"] = "ok"
        except OSError as e:
            out["preadv2_nowait"] = _name(e.errno)
        try:
            os.preadv(fd, [bytearray(4096)], 0, os.RWF_HIPRI)  # other flags stay allowed
            out["preadv2_hipri"] = "ok"
        except OSError as e:
            out["preadv2_hipri"] = _name(e.errno)
        out["pread"] = "ok" if len(os.pread(fd, 4096, 0)) == 4096 else "short"
        ctx = ctypes.c_ulong(0)
        out["io_setup"] = "ok" if libc.syscall(206 if os.uname().machine == "x86_64" else 0, 1,
                                               ctypes.byref(ctx)) == 0 else _err()
    finally:
        os.close(fd)
    wfd = os.open("scratch-page", os.O_RDWR | os.O_CREAT, 0o600)  # its own file: writes with NOWAIT
    try:
        try:
            os.pwritev(wfd, [b"x" * 4096], 0, os.RWF_NOWAIT)
            out["pwritev2_nowait"] = "ok"
        except OSError as e:
            out["pwritev2_nowait"] = _name(e.errno)
    finally:
        os.close(wfd)
    return out


def page_cache_give(paths, bits):
    """Leave one bit per file: read its first page for a 1 (caching it), leave it for a 0. Returns,
    per file, "ok" or why it could not be opened."""
    out = []
    for path, bit in zip(paths, bits):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            out.append(_name(e.errno))
            continue
        try:
            if bit:
                os.pread(fd, 4096, 0)
            out.append("ok")
        finally:
            os.close(fd)
    return out


def page_cache_take(paths, fast_ns=40_000):
    """Read the bits back by timing the first read of each file's first page: fast (cached: the
    giver read it) is a 1, slow (from the disk) a 0. Returns (bits, nanoseconds or why not)."""
    import time

    bits, took = [], []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            bits.append(None)
            took.append(_name(e.errno))
            continue
        try:
            t0 = time.perf_counter_ns()
            os.pread(fd, 4096, 0)
            ns = time.perf_counter_ns() - t0
        finally:
            os.close(fd)
        bits.append(1 if ns < fast_ns else 0)
        took.append(ns)
    return bits, took
