# Hostile: every known way out of the jail.
# Each function tries one and returns what it got; the tests assert that none of them works.
import ctypes
import errno
import os
import socket
import sys

libc = ctypes.CDLL(None, use_errno=True)
NR = {"keyctl": 250, "add_key": 248, "request_key": 249, "unshare": 272, "userfaultfd": 323,
      "io_uring_setup": 425, "bpf": 321, "perf_event_open": 298, "ptrace": 101, "mount": 165}
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4


def _err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def keyring_store(payload):
    """Keep `payload` in uid 65534's user keyring, for a later worker to find."""
    data = payload.encode()
    r = libc.syscall(NR["add_key"], b"user", b"grader-collusion", data, len(data), KEY_SPEC_USER_KEYRING)
    return "stored" if r >= 0 else _err()


def keyring_load():
    """What an earlier worker left in the user keyring (or the errno that stopped us)."""
    kid = libc.syscall(NR["request_key"], b"user", b"grader-collusion", None, KEY_SPEC_USER_KEYRING)
    if kid < 0:
        return _err()
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(NR["keyctl"], 11, kid, buf, 4096)  # KEYCTL_READ
    return buf.raw[:n].decode() if n >= 0 else _err()


def keyring_read_session(description):
    """Read a key the grader's own session keyring holds."""
    kid = libc.syscall(NR["keyctl"], 10, KEY_SPEC_SESSION_KEYRING, b"user", description.encode(), 0)  # SEARCH
    if kid < 0:
        return _err()
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(NR["keyctl"], 11, kid, buf, 4096)
    return buf.raw[:n].decode() if n >= 0 else _err()


def import_reference():
    """Find the grader's files through the modules the worker inherited, and import the reference."""
    found = []
    for name in ("grader", "grader.sandbox", "grader.sandbox.child.server"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None)
        if f:
            pkg = os.path.dirname(os.path.abspath(f))
            while os.path.basename(pkg) != "grader" and pkg != "/":
                pkg = os.path.dirname(pkg)
            found.append(os.path.dirname(pkg))
    for root in found:
        sys.path.append(root)
        for rel in ("reference/__init__.py", "reference/attention.py", "grader/grading/engine.py",
                    "assignments/masked-attention/cases_hidden.py"):
            try:
                with open(os.path.join(root, rel)) as f:
                    return f"read {rel}: {len(f.read())} chars"
            except OSError as e:
                pass
    try:
        import reference  # noqa: F401
        return "imported reference"
    except Exception as e:  # noqa: BLE001
        return f"no: {type(e).__name__}"


def unix_connect(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        return f"socket: {errno.errorcode.get(e.errno)}"
    try:
        s.connect(path)
        s.sendall(b"hello from a worker")
        return "connected"
    except OSError as e:
        return f"connect: {errno.errorcode.get(e.errno)}"
    finally:
        s.close()


def raw_sockets():
    out = {}
    for name, fam, typ in (("packet", getattr(socket, "AF_PACKET", 17), socket.SOCK_RAW),
                           ("netlink", getattr(socket, "AF_NETLINK", 16), socket.SOCK_RAW),
                           ("inet", socket.AF_INET, socket.SOCK_STREAM),
                           ("unix", socket.AF_UNIX, socket.SOCK_DGRAM)):
        try:
            socket.socket(fam, typ).close()
            out[name] = "open"
        except OSError as e:
            out[name] = errno.errorcode.get(e.errno, str(e.errno))
    return out


def kernel_surface():
    out = {}
    out["unshare_user_net"] = "ok" if libc.syscall(NR["unshare"], 0x10000000 | 0x40000000) == 0 else _err()
    out["userfaultfd"] = "ok" if libc.syscall(NR["userfaultfd"], 0) >= 0 else _err()
    params = ctypes.create_string_buffer(120)
    out["io_uring"] = "ok" if libc.syscall(NR["io_uring_setup"], 4, params) >= 0 else _err()
    out["bpf"] = "ok" if libc.syscall(NR["bpf"], 0, None, 0) >= 0 else _err()
    out["ptrace"] = "ok" if libc.syscall(NR["ptrace"], 0, 0, 0, 0) >= 0 else _err()  # PTRACE_TRACEME
    try:
        pid = os.fork()
    except OSError as e:
        out["fork"] = errno.errorcode.get(e.errno)
    else:
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out["fork"] = "ok"
    return out


def fill_disk(megabytes):
    """Write `megabytes` MiB in 1 MiB files; returns how many were written."""
    block = b"x" * (1 << 20)
    for i in range(megabytes):
        with open(f"fill-{i}.bin", "wb") as f:
            f.write(block)
    return megabytes


def many_files(n):
    for i in range(n):
        open(f"f{i}", "w").close()
    return n


def shared_dirs(text):
    """Leave `text` where a later worker could find it; returns where it stuck."""
    stuck = []
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(os.path.join(d, "grader-collusion.txt"), "w") as f:
                f.write(text)
            stuck.append(d)
        except OSError:
            pass
    return stuck


def find_shared():
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(os.path.join(d, "grader-collusion.txt")) as f:
                return f.read()
        except OSError:
            pass
    return None


def big_reply(megabytes):
    import torch
    return torch.zeros(megabytes << 18)  # float32: 4 bytes each


def lazy_import():
    import importlib
    mod = importlib.import_module("torch.fx.experimental.symbolic_shapes")
    return mod.__name__


def neighbours_counters():
    """Read the cgroup counters of the machine (another worker's memory and CPU use among them);
    returns what could be listed."""
    found = []
    for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"):
        try:
            found += [os.path.join(d, n) for n in os.listdir(d)]
        except OSError:
            pass
    return found


def cpu_topology():
    """What torch and OpenMP read of /sys on the CPU: it must stay readable."""
    return sorted(n for n in os.listdir("/sys/devices/system/cpu") if n.startswith("cpu"))[:1]
