"""Worker side: a supervisor process forks the worker, which jails itself, runs the code and serves calls.

Process tree per submission (both start paths):

    supervisor "A"  (forked from the zygote, or ``python -m grader.sandbox.worker``)
      - own session, PR_SET_CHILD_SUBREAPER, joins the worker's cgroups, unshares namespaces
      - forks the worker, reports its pid and exit status to the grader on the status socket
      - on "k" or EOF from the grader: SIGKILLs the worker and every orphan it adopted
    worker "B"  (PID 1 of a new PID namespace when available)
      - fds: 0 = /dev/null, 1/2 = output pipes, 3 = channel; nothing else
      - jails itself (jail.enter_worker), clears the environment, then executes the student's code
        and answers frames on fd 3 (grader.sandbox.wire). Never pickles.

Everything here is untrusted once student code has run: the grader validates every frame.
"""

from __future__ import annotations

import builtins
import inspect
import json
import linecache
import os
import random
import select
import signal
import socket
import sys
import traceback
import types
from typing import Any

from grader.sandbox import jail
from grader.sandbox.wire import Handle, WireError, decode_frame, encode_frame, \
    read_frame, write_all

CHANNEL_FD = 3
MAX_TEXT = 8000


# --- supervisor ("A") -------------------------------------------------------------------------

def read_config(status: socket.socket) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = status.recv(65536)
        if not chunk:
            os._exit(0)
        buf += chunk
    return json.loads(buf)


def supervise(status_fd: int, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Run as the supervisor: never returns."""
    try:
        status = socket.socket(fileno=status_fd)
        cfg = read_config(status)
        jail.enter_supervisor(cfg)
    except BaseException as e:  # report and stop: the grader turns this into an operator error
        _send_status(status_fd, {"error": f"supervisor set-up failed: {e!r}"})
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_worker(cfg, channel_fd, out_fd, err_fd)
    for fd in (channel_fd, out_fd, err_fd):
        os.close(fd)
    _send_status(status_fd, {"pid": pid})
    _watch(status, pid)


def direct(cfg: dict, status_fd: int, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Run as a worker forked straight from the zygote into its own PID namespace, with the
    configuration the spawn request carried: the zygote reports its pid and exit status to the
    grader (on the status socket, which only the zygote uses), so it needs no supervisor."""
    try:
        os.close(status_fd)
        jail.enter_direct(cfg)
    except BaseException as e:
        os.write(err_fd, f"worker set-up failed: {e!r}\n".encode())
        os._exit(1)
    _run_worker(cfg, channel_fd, out_fd, err_fd)


def _run_worker(cfg: dict, channel_fd: int, out_fd: int, err_fd: int) -> None:
    """Become the worker and serve until the grader is done; never returns."""
    try:
        _become_worker(cfg, channel_fd, out_fd, err_fd)
    except BaseException:
        try:
            os.write(2, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(70)
    os._exit(0)


def _send_status(fd: int, msg: dict) -> None:
    try:
        write_all(fd, (json.dumps(msg) + "\n").encode())
    except OSError:
        pass


def _watch(status: socket.socket, worker: int) -> None:
    exit_status: int | None = None
    killing = False
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while exit_status is None:
        r, _, _ = select.select([status, wake_r], [], [], 0.5)
        if wake_r in r:
            try:
                os.read(wake_r, 512)
            except OSError:
                pass
        if status in r:
            try:
                data = status.recv(64)
            except OSError:
                data = b""
            if not data or b"k" in data:
                killing = True
                _kill(worker)
                try:
                    _, exit_status = os.waitpid(worker, 0)
                except ChildProcessError:
                    break
        try:
            while True:
                p, st = os.waitpid(-1, os.WNOHANG)
                if p == 0:
                    break
                if p == worker:
                    exit_status = st
        except ChildProcessError:
            break
    _sweep()
    _send_status(status.fileno(), exit_report(exit_status, killing))
    os._exit(0)


def exit_report(exit_status: int | None, killed_by_grader: bool) -> dict:
    """The status line the grader reads when a worker has been reaped (None: it was lost)."""
    if exit_status is None:
        return {"status": {"lost": True}}
    if os.WIFSIGNALED(exit_status):
        return {"status": {"signal": os.WTERMSIG(exit_status), "killed_by_grader": killed_by_grader}}
    return {"status": {"exit": os.WEXITSTATUS(exit_status)}}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _sweep() -> None:
    """Kill and reap every process left behind (orphans are re-parented to us, the subreaper)."""
    for _ in range(10_000):
        for c in _children():
            _kill(c)
        try:
            p, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _become_worker(cfg: dict, channel_fd: int, out_fd: int, err_fd: int) -> None:
    # Move the inherited fds to 0..3 (via high numbers, so sources and targets cannot collide).
    high = [os.dup(fd) for fd in (channel_fd, out_fd, err_fd)]
    high = [_fcntl_dup(fd, 100 + i) for i, fd in enumerate(high)]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(high[1], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], CHANNEL_FD)
    os.closerange(CHANNEL_FD + 1, _max_fd())
    for fd in (0, 1, 2, CHANNEL_FD):
        os.set_inheritable(fd, fd != CHANNEL_FD)
    applied = jail.enter_worker(cfg)
    serve(cfg, applied)


def _fcntl_dup(fd: int, at_least: int) -> int:
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD, at_least)
    os.close(fd)
    return new


def _max_fd() -> int:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < 1 << 20 else 65536


# --- worker ("B") -----------------------------------------------------------------------------

def serve(cfg: dict, applied: list[str]) -> None:
    scratch = cfg["scratch"]
    os.environ.clear()
    os.environ.update({"HOME": scratch, "TMPDIR": scratch, "PATH": "/usr/local/bin:/usr/bin:/bin",
                       "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    if cfg.get("cuda_visible_devices") is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cfg["cuda_visible_devices"]
    import torch

    torch.set_num_threads(1)
    sys.path[:] = [scratch] + [p for p in cfg.get("sys_path", []) if p and os.path.isdir(p)]
    sys.argv = [cfg.get("main", "submission.py")]
    sys.stdin = open(os.devnull)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    Server(cfg).run({"op": "hello", "applied": applied, "pid": os.getpid()})


SEED_QUEUED = False
"""Set by the zygote once it has called torch.manual_seed(0) (which queues the seed for devices
not yet initialised): its forks inherit the queued seed and re-seed only the CPU generator."""


class Server:
    def __init__(self, cfg: dict):
        self.scratch = os.path.realpath(cfg["scratch"])
        self.module = types.ModuleType("submission")
        self.module.__file__ = os.path.join(self.scratch, cfg.get("main", "submission.py"))
        self.module.__dict__["__builtins__"] = builtins
        sys.modules["submission"] = self.module
        self.ns = self.module.__dict__
        self.objects: dict[int, Any] = {}
        self.ids: dict[int, int] = {}
        self._seed_queued = SEED_QUEUED

    # -- loop --
    def run(self, hello: dict) -> None:
        self.send(hello)
        while True:
            try:
                header, payload = read_frame(CHANNEL_FD)
            except EOFError:
                os._exit(0)
            try:
                req = decode_frame(header, payload, on_handle=self._object_for)
            except WireError as e:
                self.send({"ok": False, "error": {"type": "WireError", "message": str(e), "traceback": ""}})
                continue
            op = req.get("op")
            if op == "exit":
                self._flush()
                os._exit(0)
            handler = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
            if handler is None:
                self.send({"ok": False, "error": {"type": "WireError", "message": f"unknown op {op!r}",
                                                  "traceback": ""}})
                continue
            try:
                reply = handler(req)
            except BaseException as e:  # student code raised (SystemExit too)
                reply = {"ok": False, "error": self.describe_exc(e)}
            self.send(reply)

    def send(self, msg: dict) -> None:
        self._flush()
        try:
            frame = encode_frame(msg, on_object=self._objectify)
        except (WireError, ValueError, RecursionError) as e:
            frame = encode_frame({"ok": False, "error": {
                "type": "UnsendableResult", "message": f"the result cannot be sent to the grader: {e}",
                "traceback": ""}})
        write_all(CHANNEL_FD, frame)

    @staticmethod
    def _flush() -> None:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass

    # -- objects kept in the worker --
    def _objectify(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.nn.Module):
            h = self.handle(value)
            return {"$h": h.id, "type": h.type_name}
        return {"$o": _type_name(value)}

    def handle(self, obj: Any) -> Handle:
        key = id(obj)
        if key in self.ids and self.objects.get(self.ids[key]) is obj:
            hid = self.ids[key]
        else:
            hid = len(self.objects) + 1
            self.objects[hid] = obj
            self.ids[key] = hid
        return Handle(hid, _type_name(obj))

    def _object_for(self, hid: int, type_name: str) -> Any:
        if hid not in self.objects:
            raise WireError(f"no object with handle {hid}")
        return self.objects[hid]

    # -- student calls --
    def _prepare(self) -> None:
        import torch

        # torch.manual_seed() seeds every device; for CUDA/XPU/MTIA not yet initialised it queues
        # the seed (applied at their initialisation), formatting a stack trace each time: ~120 us,
        # ~4 ms per submission. Once queued, re-seeding the CPU generator alone is equivalent.
        if self._seed_queued and _accelerators_idle(torch):
            torch.random.default_generator.manual_seed(0)
        else:
            torch.manual_seed(0)
            self._seed_queued = _accelerators_idle(torch)
        random.seed(0)
        torch.set_num_threads(1)

    def _lookup(self, name: Any) -> Any:
        if not isinstance(name, str) or name not in self.ns or name.startswith("__"):
            found = ", ".join(self.defined()) or "nothing"
            raise _Missing(f"the submission defines no {name!r}; found: {found}")
        return self.ns[name]

    def defined(self) -> list[str]:
        return [k for k, v in self.ns.items()
                if not k.startswith("_") and (inspect.isfunction(v) or inspect.isclass(v))
                and getattr(v, "__module__", None) == "submission"]

    def op_ping(self, req: dict) -> dict:
        return {"ok": True, "value": None}

    def op_load(self, req: dict) -> dict:
        errors = []
        completed = 0
        for unit in req["units"]:
            filename = f"<submission: {unit['label']}>"
            src = unit["source"]
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            try:
                code = compile(src, filename, "exec", dont_inherit=True)
                self._prepare()
                exec(code, self.ns)
                completed += 1
            except BaseException as e:  # a unit that raises is recorded; the next one runs
                d = self.describe_exc(e)
                errors.append({"cell": unit.get("cell"), "label": unit["label"],
                               "error": f"{d['type']}: {d['message']}" if d["message"] else d["type"],
                               "traceback": d["traceback"], "errno": d["errno"]})
        return {"ok": True, "cell_errors": errors, "completed": completed, "defined": self.defined()}

    def op_describe(self, req: dict) -> dict:
        name = req["name"]
        if not isinstance(name, str) or name not in self.ns:
            return {"ok": True, "kind": "missing", "signature": None, "params": [], "available": self.defined()}
        obj = self.ns[name]
        kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "other"
        sig, params = None, []
        if kind != "other":
            try:
                s = inspect.signature(obj)
                sig, params = str(s), list(s.parameters)
            except (TypeError, ValueError):
                pass
        t = type(obj)
        type_name = t.__name__ if t.__module__ in ("builtins", None) else f"{t.__module__}.{t.__qualname__}"
        return {"ok": True, "kind": kind, "signature": sig, "params": params, "available": self.defined(),
                "type": type_name}

    def op_describe_all(self, req: dict) -> dict:
        names = req["names"]
        if not isinstance(names, list) or len(names) > 256:
            raise _Missing("describe_all: names must be a list")
        infos = []
        for name in names:
            d = self.op_describe({"name": name})
            d.pop("ok")
            infos.append(d)
        return {"ok": True, "infos": infos}

    def op_call(self, req: dict) -> dict:
        import torch

        fn = self._lookup(req["name"])
        self._prepare()
        with torch.no_grad():
            out = fn(*req["args"], **req["kwargs"])
        if inspect.isclass(fn):
            return {"ok": True, "value": self.handle(out)}
        return {"ok": True, "value": self._result(out)}

    def op_call_method(self, req: dict) -> dict:
        import torch

        obj = req["handle"]
        method = req["method"]
        if not isinstance(method, str) or not method.isidentifier():
            raise _Missing(f"invalid method name {method!r}")
        fn = getattr(obj, method)
        self._prepare()
        with torch.no_grad():
            out = fn(*req["args"], **req["kwargs"])
        return {"ok": True, "value": self._result(out)}

    def op_state_dict(self, req: dict) -> dict:
        import torch

        with torch.no_grad():
            sd = req["handle"].state_dict()
        return {"ok": True, "value": {str(k): _plain(v) for k, v in sd.items()}}

    def op_load_state_dict(self, req: dict) -> dict:
        import torch

        with torch.no_grad():
            req["handle"].load_state_dict(req["state"])
        return {"ok": True, "value": None}

    def op_vjp(self, req: dict) -> dict:
        import torch

        target = req["target"]
        if isinstance(target, str):
            fn, owner = self._lookup(target), None
        else:
            owner = target[0]
            fn = getattr(owner, target[1])
        args = list(req["args"])
        wrt = req["wrt"]
        for i in wrt:
            if not (0 <= i < len(args)) or type(args[i]) is not torch.Tensor:
                raise _Missing(f"vjp: argument {i} is not a tensor")
            args[i] = args[i].detach().requires_grad_(True)
        self._prepare()
        with torch.enable_grad():
            out = fn(*args, **req["kwargs"])
            y = out if req["output_index"] is None else out[req["output_index"]]
            if not isinstance(y, torch.Tensor):
                raise TypeError(f"vjp: the output is a {type(y).__name__}, not a tensor")
            (y * req["cotangent"]).sum().backward()
        grads = [_plain(args[i].grad) if args[i].grad is not None else None for i in wrt]
        if isinstance(owner, torch.nn.Module):
            owner.zero_grad(set_to_none=True)
        return {"ok": True, "value": self._result(_detach(out)), "grads": grads}

    @staticmethod
    def _result(out: Any) -> Any:
        return out

    # -- exceptions --
    def describe_exc(self, e: BaseException) -> dict:
        if isinstance(e, _Missing):
            return {"type": "NameError", "message": str(e), "traceback": ""}
        try:
            message = str(e)
        except BaseException:
            message = "<unprintable exception>"
        tb = self.student_traceback(e)
        code = e.errno if isinstance(e, OSError) and type(e.errno) is int else None
        return {"type": type(e).__name__[:200], "message": message[:MAX_TEXT], "traceback": tb, "errno": code}

    def student_traceback(self, e: BaseException) -> str:
        try:
            frames = [f for f in traceback.extract_tb(e.__traceback__) if self._is_student(f.filename)]
            text = "".join(traceback.format_list(frames))
            if text:
                text = "Traceback (most recent call last):\n" + text
            text += "".join(traceback.format_exception_only(type(e), e))
        except BaseException:
            text = type(e).__name__
        if len(text) > MAX_TEXT:
            text = text[:MAX_TEXT // 2] + "\n...\n" + text[-MAX_TEXT // 2:]
        return text

    def _is_student(self, filename: str) -> bool:
        return filename.startswith("<submission") or os.path.realpath(filename).startswith(self.scratch + os.sep)


def _accelerators_idle(torch: Any) -> bool:
    """True when torch.manual_seed() would only queue seeds (no lazily seeded device initialised,
    no eagerly seeded one present): re-seeding the CPU generator then does the rest of its work."""
    for name in ("cuda", "xpu", "mtia"):
        mod = getattr(torch, name, None)
        if mod is None:
            continue
        initialized = getattr(mod, "is_initialized", None)
        if initialized is None or initialized():
            return False
    if getattr(torch._C, "_has_mps", False):
        return False
    return not hasattr(torch, torch._C._get_privateuse1_backend_name())


class _Missing(Exception):
    """A name or argument the grader asked for does not exist."""


def _plain(v: Any) -> Any:
    import torch

    if type(v) in (torch.Tensor, torch.nn.Parameter):
        return v.detach()
    return v


def _detach(v: Any) -> Any:
    import torch

    if type(v) is torch.Tensor:
        return v.detach()
    if type(v) in (list, tuple):
        return type(v)(_detach(x) for x in v)
    return v


def _type_name(value: Any) -> str:
    t = type(value)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", "") or t.__name__
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def main(argv: list[str]) -> None:
    """``python -m grader.sandbox.worker STATUS_FD CHANNEL_FD`` (stdout/stderr are the output pipes)."""
    status_fd, channel_fd = int(argv[0]), int(argv[1])
    supervise(status_fd, channel_fd, os.dup(1), os.dup(2))


if __name__ == "__main__":
    main(sys.argv[1:])
