"""The worker's server: runs the submission's code units and answers the grader's requests.

Runs in the worker process "B" (``grader.sandbox.child.supervisor`` forks it and jails it first), on fd
``CHANNEL_FD``, one request frame at a time and one reply frame each, in order. Student objects
that cannot cross the wire stay here behind handles; results are plain tensors and values
(``grader.sandbox.wire``). Student exceptions become error replies with the traceback cut to the
student's own frames. Never pickles; everything it sends is validated by the grader.
"""

from __future__ import annotations

import builtins
import inspect
import io
import linecache
import os
import random
import sys
import traceback
import types
from typing import Any

from grader.sandbox.child import unreadable
from grader.sandbox.wire import (
    Handle,
    WireError,
    decode_frame,
    encode_frame,
    read_frame,
    type_name_of,
    write_all,
)

CHANNEL_FD = 3
"""The worker's end of the channel: the supervisor puts it here, nothing else is open above 2."""
MAX_TEXT = 8000


def serve(cfg: dict, applied: list[str], *, channel: tuple[int, int] = (CHANNEL_FD, CHANNEL_FD),
          environment: dict[str, str] | None = None) -> None:
    """Serve requests read from ``channel[0]``, replies written to ``channel[1]`` (one socket at
    ``CHANNEL_FD`` in a jailed worker; two pipes in a portable one). `environment`: the worker's
    whole environment (default: a cleared one for Linux, with HOME and TMPDIR in the scratch dir)."""
    scratch = cfg["scratch"]
    os.environ.clear()
    os.environ.update(environment if environment is not None else {
        "HOME": scratch, "TMPDIR": scratch, "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    if cfg.get("cuda_visible_devices") is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cfg["cuda_visible_devices"]
    import torch

    torch.set_num_threads(1)
    sys.path[:] = [scratch] + [p for p in cfg.get("sys_path", []) if p and os.path.isdir(p)]
    unreadable.install()  # a package outside the read set imports as one not installed
    sys.argv = [cfg.get("main", "submission.py")]
    sys.stdin = open(os.devnull)
    for stream in (sys.stdout, sys.stderr):
        try:
            if isinstance(stream, io.TextIOWrapper):  # else (None, replaced) nothing to line-buffer
                stream.reconfigure(line_buffering=True)
        except ValueError:
            pass
    cuda = bound_cuda_memory(torch, int(cfg.get("gpu_memory_bytes") or 0)) if cfg.get("device", "").startswith("cuda") else {}
    Server(cfg, channel).run({"op": "hello", "applied": applied, "pid": os.getpid(), "cuda": cuda})


def bound_cuda_memory(torch: Any, limit: int) -> dict:
    """Before any student code: keep this worker's CUDA caching allocator to `limit` bytes of the
    device's memory (``set_per_process_memory_fraction``: past it an allocation raises CUDA's
    out-of-memory error). Best effort: memory the driver, the CUDA context or a library allocates
    outside torch's allocator is in no limit. Returns what was set (for the hello), {} for none."""
    if limit <= 0 or not torch.cuda.is_available():
        return {}
    total = int(torch.cuda.get_device_properties(0).total_memory)
    fraction = min(1.0, limit / total)
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    return {"fraction": fraction, "limit_bytes": min(limit, total), "device_bytes": total}


SEED_QUEUED = False
"""True once ``queue_seed`` ran in the zygote: its forks inherit the queued seed and re-seed only
the CPU generator."""


def queue_seed() -> None:
    """Call torch.manual_seed(0) once, in the zygote: for devices not yet initialised it queues the
    seed (formatting a stack trace each time); every worker then
    inherits the queued seed (see ``Server._prepare``)."""
    global SEED_QUEUED
    import torch

    torch.manual_seed(0)
    SEED_QUEUED = _accelerators_idle(torch)


class Server:
    """The submission's namespace and the objects handed out as handles; one ``op_*`` per request."""

    def __init__(self, cfg: dict, channel: tuple[int, int] = (CHANNEL_FD, CHANNEL_FD)):
        self._rfd, self._wfd = channel
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
                header, payload = read_frame(self._rfd)
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
        write_all(self._wfd, frame)

    @staticmethod
    def _flush() -> None:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass

    # -- objects kept in the worker --
    def _objectify(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.nn.Module):
            h = self.handle(value)
            return {"$h": h.id, "type": h.type_name}
        return {"$o": type_name_of(value)}

    def handle(self, obj: Any) -> Handle:
        key = id(obj)
        if key in self.ids and self.objects.get(self.ids[key]) is obj:
            hid = self.ids[key]
        else:
            hid = len(self.objects) + 1
            self.objects[hid] = obj
            self.ids[key] = hid
        return Handle(hid, type_name_of(obj))

    def _object_for(self, hid: int, type_name: str) -> Any:
        if hid not in self.objects:
            raise WireError(f"no object with handle {hid}")
        return self.objects[hid]

    # -- student calls --
    def _prepare(self) -> None:
        import torch

        # torch.manual_seed() seeds every device; for CUDA/XPU/MTIA not yet initialised it queues
        # the seed (applied at their initialisation), formatting a stack trace each time (see
        # docs/performance.md, Sandbox). Once queued, re-seeding the CPU generator alone is equivalent.
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
        return {"ok": True, "kind": kind, "signature": sig, "params": params, "available": self.defined(),
                "type": type_name_of(obj)}

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
        return {"ok": True, "value": out}

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
        return {"ok": True, "value": out}

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
        return {"ok": True, "value": _detach(out), "grads": grads}

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
