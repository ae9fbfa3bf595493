"""The isolation level: probed once at start-up, then applied by each worker to itself.

Features (each either fully applied or not claimed):

- ``namespaces``: new network, mount, IPC and PID namespaces (no network at all, a private /proc,
  a private /tmp, and the worker tree dies with its PID-1);
- ``uid``: the worker drops to uid/gid 65534 (only when the grader runs as root);
- ``landlock``: reads limited to the interpreter and libraries, writes to the scratch dir; TCP
  connect/bind and signals outside the worker denied where the kernel's ABI has them; in a worker
  forked from the zygote, a second layer the zygote built keeps reads to the files it made
  resident (``grader.sandbox.jail.resident``: the page cache then carries no bit between workers);
- ``cgroup``: a memory + pids cgroup (v1) per worker, and a cpu cgroup with a quota where the
  kernel has one (a worker and everything it starts share one CPU at most), else ``rss`` polling;
- ``seccomp``: a system-call filter (``grader.sandbox.jail.seccomp``): no keyrings, no sockets, no new
  namespaces, no mounts, ptrace, bpf, io_uring or userfaultfd; and a fresh, empty session keyring;
- ``rlimits``: CPU, file size, core, open files (always, on POSIX).

With namespaces, the worker's scratch dir is a tmpfs of its own, limited in bytes and files (its
pages count against the worker's memory cgroup), /tmp and the other world-writable folders are
empty tmpfs, /dev is a private one holding only the planned device nodes (no terminals: the host's
devpts is shared by every process of a uid), and the grader's own files (its package, the
reference, the assignments, the checkout) are covered by empty mounts. With Landlock, they are also
left out of the read allowlist, entry by entry where they sit inside an allowed folder
(site-packages), and of /dev only the planned device nodes may be opened.

``python -m grader.sandbox.jail.enter`` prints the probe as JSON (run by the grader, which never forks
itself).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import resource
import sys
from typing import Any

try:
    from grader.sandbox.jail import landlock, resident, seccomp
except ImportError:  # run as a script by the probe (python -I enter.py): the modules beside this one
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock  # type: ignore[no-redef,import-not-found]
    import resident  # type: ignore[no-redef,import-not-found]
    import seccomp  # type: ignore[no-redef]

NOBODY = 65534

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NS_FLAGS = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_REMOUNT = 32
MNT_DETACH = 2

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def prctl(option: int, arg: int) -> None:
    _check(libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(libc().unshare(flags), "unshare")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc().mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


# --- probe (runs in a small python process started by the grader) --------------------------

def probe() -> dict[str, Any]:
    """What this machine allows, tried for real in throw-away child processes."""
    info: dict[str, Any] = {"linux": sys.platform.startswith("linux"), "root": os.geteuid() == 0,
                            "namespaces": False, "landlock": 0, "userns": False}
    if not info["linux"]:
        return info
    info["namespaces"] = _try_in_child(lambda: unshare(NS_FLAGS))
    if not info["namespaces"] and not info["root"]:
        info["userns"] = _try_in_child(lambda: unshare(NS_FLAGS | CLONE_NEWUSER))
        info["namespaces"] = info["userns"]
    info["landlock"] = landlock.abi()
    info["seccomp"] = _try_in_child(_seccomp_works)
    return info


def _seccomp_works() -> None:
    """Load the worker's filter in a throw-away child, then check that it denies what it must."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    seccomp.build().load()
    import socket

    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    except PermissionError:
        return
    raise RuntimeError("socket() still allowed")


def _try_in_child(fn) -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --- applied in the worker's supervisor ("A") and the worker itself ("B") ---------------------

def enter_supervisor(cfg: dict) -> None:
    """In the supervisor: own session, subreaper, cgroups, and namespaces for the worker it forks."""
    try:
        os.setsid()
    except OSError:
        pass
    if not sys.platform.startswith("linux"):
        return
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    for path in cfg.get("cgroups", []):
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    if "namespaces" in cfg["features"]:
        flags = NS_FLAGS | (CLONE_NEWUSER if cfg.get("userns") else 0)
        uid, gid = os.geteuid(), os.getegid()
        unshare(flags)
        if cfg.get("userns"):
            write_text("/proc/self/setgroups", "deny")
            write_text("/proc/self/uid_map", f"0 {uid} 1")
            write_text("/proc/self/gid_map", f"0 {gid} 1")


def enter_direct(cfg: dict) -> None:
    """In a worker forked straight from the zygote into a new PID namespace (``fork_in_new_pid_ns``):
    what ``enter_supervisor`` does for the supervised path, applied to the worker itself. It is
    PID 1 of its namespace, so everything it starts dies with it and orphans are re-parented to it."""
    os.setsid()
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    for path in cfg.get("cgroups", []):
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")  # "0": the writing process (our pid as the host sees it is not ours to know)
    if "namespaces" in cfg["features"]:
        unshare(NS_FLAGS & ~CLONE_NEWPID)


def fork_in_new_pid_ns(own_pid_ns: int) -> int:
    """os.fork(), with the child as PID 1 of a new PID namespace (root only; single fork, no
    supervisor process). ``own_pid_ns``: an fd of /proc/self/ns/pid, used to point this
    process's future children back at its own namespace, so the next call can unshare again."""
    unshare(CLONE_NEWPID)
    try:
        return os.fork()
    finally:
        if os.getpid() != 1:  # in the parent (the child is PID 1 of its namespace)
            _check(libc().setns(own_pid_ns, CLONE_NEWPID), "setns")


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` (a /proc or cgroup control file)."""
    with open(path, "w") as f:
        f.write(text)


def enter_worker(cfg: dict) -> list[str]:
    """In the worker, before any student code: returns the features actually applied."""
    applied: list[str] = []
    feats = cfg["features"]
    scratch = cfg["scratch"]
    linux = sys.platform.startswith("linux")
    if "namespaces" in feats:
        _private_mounts(cfg)
        applied.append("namespaces")
    _rlimits(cfg)
    applied.append("rlimits")
    if "uid" in feats:
        os.chown(scratch, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        applied.append("uid")
    if linux:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        prctl(PR_SET_PDEATHSIG, 9)
    if "landlock" in feats:
        if cfg.get("resident"):  # reads only of what the zygote made resident
            resident.restrict()
        landlock.restrict(cfg["read_paths"], [scratch], cfg.get("landlock_abi", 1), cfg.get("devices", []))
        applied.append("landlock")
    resident.drop()
    if "cgroup" in feats:
        applied.append("cgroup")
    os.chdir(scratch)
    if "seccomp" in feats:  # last: it denies the mounts and namespaces used above
        try:
            seccomp.join_new_session_keyring()
        except OSError:
            pass  # a kernel without keyrings has nothing to leak through them
        seccomp.build().load()
        applied.append("seccomp")
    return applied


def _rlimits(cfg: dict) -> None:
    def setl(which: int, value: int) -> None:
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass

    setl(resource.RLIMIT_CPU, max(1, int(cfg["cpu_seconds"])))
    setl(resource.RLIMIT_FSIZE, int(cfg["max_file_bytes"]))
    setl(resource.RLIMIT_CORE, 0)
    setl(resource.RLIMIT_NOFILE, 256)
    if cfg.get("address_space"):
        setl(resource.RLIMIT_AS, int(cfg["address_space"]))
    if cfg.get("nproc"):
        setl(resource.RLIMIT_NPROC, int(cfg["nproc"]))


WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/var/lock", "/run/lock", "/dev/mqueue")
"""Folders any uid may write to on a usual Linux: each worker gets empty ones of its own, so that
nothing written there outlives it or reaches another worker."""


def _private_mounts(cfg: dict) -> None:
    """The worker's view of the file system, in its own mount namespace:

    - an empty tmpfs over /tmp, the other world-writable folders, the unreadable ancestors of the
      interpreter (``hide``, e.g. /root) and the grader's own folders (``cover``); every path the
      worker must read (``read_paths``: the interpreter, sys.path, libraries) that lay below one of them is
      bound back in place, so a virtualenv under /tmp or /root still imports;
    - a /dev of its own (``private_dev``: the planned device nodes and an empty /dev/shm);
    - the scratch dir: a tmpfs of its own (``scratch_bytes``, ``scratch_inodes``) holding a copy of
      the files the grader put there;
    - a private /proc (this PID namespace only).
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    scratch = cfg["scratch"]
    keep = sorted(cfg.get("read_paths", []))
    if cfg.get("resident"):
        # The scratch tmpfs is mounted on the host's folder for it, inside the sandbox's root
        # folder bound back in place: the zygote's Landlock layer names that root (by its inode),
        # and a rule reaches through a mount only from the folder the mount point lies in.
        keep = sorted({*keep, os.path.dirname(scratch)})
    private_dev(cfg.get("devices", []))
    writable = {d for d in WORLD_WRITABLE if os.path.isdir(d) and not below(d, "/dev")} | set(cfg.get("hide", []))
    covered = set(cfg.get("cover", []))
    src = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for d in sorted(writable | covered, key=len):  # outer folders first
            if os.path.isdir(d):
                _mask(d, [p for p in keep if below(p, d)], read_only=d in covered)
            elif d in covered and os.path.isfile(d):
                mount("/dev/null", d, None, MS_BIND)
        os.makedirs(scratch, exist_ok=True)
        mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV,
              f"mode=0755,size={int(cfg['scratch_bytes'])},nr_inodes={int(cfg['scratch_inodes'])}")
        _copy_tree(src, scratch)
    finally:
        os.close(src)
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        pass


DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}


def private_dev(devices: list[str]) -> None:
    """A fresh tmpfs over /dev holding only `devices` (each bound from the host's node: no mknod,
    which a user namespace may not do), the usual /dev/fd and /dev/std* links and an empty, world-
    writable /dev/shm. No ptmx and no devpts: the host's are shared by every process of the uid,
    and a worker needs no terminal. The nodes are held by fds first: the tmpfs covers them."""
    held = []
    for d in devices:
        try:
            held.append((os.open(d, os.O_PATH | os.O_CLOEXEC), d))
        except OSError:
            pass
    try:
        mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m,nr_inodes=256")
        for fd, d in held:
            os.makedirs(os.path.dirname(d), exist_ok=True)
            open(d, "a").close()
            mount(f"/proc/self/fd/{fd}", d, None, MS_BIND)
    finally:
        for fd, _ in held:
            os.close(fd)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    os.chmod("/dev/shm", 0o1777)


def _mask(folder: str, keep: list[str], *, read_only: bool) -> None:
    """An empty tmpfs over `folder`, with the paths in `keep` (below it) bound back in place."""
    held = []
    for p in keep:  # held by an fd: reachable through /proc/self/fd once covered
        try:
            held.append((os.open(p, os.O_PATH | os.O_CLOEXEC), p))
        except OSError:
            pass
    mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
    for fd, p in held:
        try:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(p, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(p), exist_ok=True)
                open(p, "a").close()
            mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
        finally:
            os.close(fd)
    if read_only:
        mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def below(path: str, folder: str) -> bool:
    """`path` lies inside `folder` (strictly; both normalised)."""
    return path.startswith(folder.rstrip("/") + "/")


def _copy_tree(src_fd: int, dest: str) -> None:
    """Copy the files and folders under the directory `src_fd` into `dest` (no links followed)."""
    for entry in os.scandir(src_fd):
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(os.path.join(dest, entry.name))
            sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=src_fd)
            try:
                _copy_tree(sub, os.path.join(dest, entry.name))
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
            with os.fdopen(fd, "rb") as f, open(os.path.join(dest, entry.name), "wb") as out:
                while chunk := f.read(1 << 20):
                    out.write(chunk)


if __name__ == "__main__":
    print(json.dumps(probe()))
