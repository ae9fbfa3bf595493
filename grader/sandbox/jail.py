"""The isolation level: probed once at start-up, then applied by each worker to itself.

Features (each either fully applied or not claimed):

- ``namespaces``: new network, mount, IPC and PID namespaces (no network at all, a private /proc,
  a private /tmp, and the worker tree dies with its PID-1);
- ``uid``: the worker drops to uid/gid 65534 (only when the grader runs as root);
- ``landlock``: reads limited to the interpreter and libraries, writes to the scratch dir; TCP
  connect/bind and signals outside the worker denied where the kernel's ABI has them;
- ``cgroup``: a memory + pids cgroup (v1) per worker, else ``rss`` polling by the grader;
- ``rlimits``: CPU, file size, core, open files (always, on POSIX).

``python -m grader.sandbox.jail`` prints the probe as JSON (run by the grader, which never forks
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
MNT_DETACH = 2

SYS_landlock_create_ruleset = 444
SYS_landlock_add_rule = 445
SYS_landlock_restrict_self = 446

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
    info["landlock"] = landlock_abi()
    return info


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


def landlock_abi() -> int:
    try:
        ret = libc().syscall(SYS_landlock_create_ruleset, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except Exception:
        return 0
    return max(int(ret), 0)


# --- cgroups (grader side) -------------------------------------------------------------------

def cgroup_base(controller: str) -> str | None:
    """Our own cgroup v1 directory for a controller, if it exists and we may create children."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            path = f"/sys/fs/cgroup/{controller}{parts[2]}".rstrip("/")
            probe = os.path.join(path, f"grader-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
                os.rmdir(probe)
                return path
            except OSError:
                return None
    return None


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
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {uid} 1")
            _write("/proc/self/gid_map", f"0 {gid} 1")


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


def _write(path: str, text: str) -> None:
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
        landlock_restrict(cfg["read_paths"], [scratch], cfg.get("landlock_abi", 1))
        applied.append("landlock")
    if "cgroup" in feats:
        applied.append("cgroup")
    os.chdir(scratch)
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


def _private_mounts(cfg: dict) -> None:
    """Private /proc (this PID namespace only), private /tmp, and the interpreter made reachable
    for uid 65534 by replacing unreadable ancestors (e.g. /root) with a tmpfs holding only it."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = [cfg["scratch"]] + list(cfg.get("expose", []))
    for d in sorted({"/tmp"} | set(cfg.get("hide", []))):
        inside = [p for p in keep if p.startswith(d.rstrip("/") + "/")]
        # Hold each kept path by an fd: it stays reachable through /proc/self/fd once hidden.
        held = [(os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), p) for p in inside]
        mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m")
        for fd, p in held:
            os.makedirs(p, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
            os.close(fd)
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        pass


def hidden_ancestors(paths: list[str]) -> list[str]:
    """Top-most ancestors of `paths` that uid 65534 cannot traverse (mode lacks o+x)."""
    out: set[str] = set()
    for p in paths:
        parts = os.path.abspath(p).split("/")[1:]
        cur = ""
        for part in parts[:-1]:
            cur += "/" + part
            try:
                st = os.stat(cur)
            except OSError:
                break
            if not st.st_mode & 0o001 and st.st_uid != NOBODY:
                out.add(cur)
                break
    return sorted(out)


# --- Landlock ---------------------------------------------------------------------------------

class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_restrict(read_paths: list[str], write_paths: list[str], abi: int) -> None:
    """Deny file access outside the lists (and TCP, and signals out of the domain, when supported)."""
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= 1 << 14  # TRUNCATE
    if abi >= 5:
        fs_all |= 1 << 15  # IOCTL_DEV
    read = (1 << 0) | (1 << 2) | (1 << 3)  # EXECUTE, READ_FILE, READ_DIR
    dev = read | (1 << 1) | (fs_all & (1 << 15))  # + WRITE_FILE, IOCTL_DEV
    attr = _RulesetAttr(fs_all, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    lc = libc()
    rfd = _check(lc.syscall(SYS_landlock_create_ruleset, ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        rules = [(p, read) for p in read_paths] + [("/dev", dev)] + [(p, fs_all) for p in write_paths]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
                rule = _PathBeneath(access & fs_all, fd)
                _check(lc.syscall(SYS_landlock_add_rule, rfd, ctypes.c_int(1), ctypes.byref(rule),
                                  ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(lc.syscall(SYS_landlock_restrict_self, rfd, ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(rfd)


def read_allowlist(extra: list[str] = ()) -> list[str]:
    """Where a worker may read: the interpreter, its libraries and system files, never the grader."""
    import sysconfig

    paths = {"/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/sys", sys.prefix, sys.base_prefix,
             sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            paths.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    for mod in ("torch", "numpy"):
        m = sys.modules.get(mod)
        if m is not None and getattr(m, "__file__", None):
            paths.add(os.path.dirname(os.path.dirname(os.path.realpath(m.__file__))))
    paths.update(extra)
    return sorted(p for p in paths if p and os.path.exists(p))


if __name__ == "__main__":
    print(json.dumps(probe()))
