"""Frames between grader and worker: a JSON header plus raw little-endian tensor bytes. Never pickle.

A frame is ``u32 header_len, u32 payload_len`` (little-endian), then the UTF-8 JSON header, then
the payload. The header holds a message whose values are tagged JSON:

- ``None``, bool, int, str and finite floats are plain JSON;
- ``{"$f": "nan" | "inf" | "-inf"}`` a non-finite float;
- ``{"$t": [...]}`` a tuple, ``{"$d": {...}}`` a str-keyed dict, a JSON list a list;
- ``{"$T": i}`` tensor ``i`` of the header's ``"tensors"`` table (dtype, shape, device, nbytes);
- ``{"$h": id, "type": name}`` a handle to an object kept in the worker;
- ``{"$o": type_name}`` something that cannot cross (a tensor subclass, a numpy array, ...).

Both sides decode with the same checks: dtype allowlist, exact byte counts, caps on the header and
payload sizes checked before anything is allocated, bounded nesting.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from grader.sandbox.errors import WireError

PREFIX = struct.Struct("<II")
MAX_HEADER_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_ITEMS = 100_000
MAX_NDIM = 16

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "bool": torch.bool,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_BIG_ENDIAN = sys.byteorder != "little"

# Built once: json.dumps and json.loads with options build a new encoder or decoder per call.
_JSON_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True)
class Handle:
    """An object that stays in the worker (a module, a cache); pass it back to call its methods."""

    id: int
    type_name: str
    worker: str = ""
    """Token of the worker that owns the object; a handle is useless elsewhere."""


@dataclass(frozen=True)
class Opaque:
    """A value that cannot cross the wire (tensor subclass, numpy array, custom object)."""

    type_name: str


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES[dtype]


# --- encoding -------------------------------------------------------------------------------

class Encoder:
    """Turns a value tree into (json-able tree, tensor table, payload chunks).

    ``on_object`` decides what a non-wire value becomes (the worker makes Handles of modules);
    by default it is an Opaque.
    """

    def __init__(self, on_object: Callable[[Any], Any] | None = None, handle_types: bool = True):
        self.tensors: list[dict] = []
        self.chunks: list[bytes] = []
        self.on_object = on_object
        self.handle_types = handle_types
        self._items = 0

    def encode(self, value: Any, depth: int = 0) -> Any:
        self._items += 1
        if depth > MAX_DEPTH or self._items > MAX_ITEMS:
            raise WireError("value is nested too deeply or has too many items to send")
        t = type(value)
        if value is None or t is bool or t is str:
            return value
        if t is int:
            return value
        if t is float:
            if math.isfinite(value):
                return value
            return {"$f": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
        if t is torch.Tensor or t is torch.nn.Parameter:
            return self._tensor(value)
        if t is list:
            return [self.encode(v, depth + 1) for v in value]
        if t is tuple:
            return {"$t": [self.encode(v, depth + 1) for v in value]}
        if t is dict and all(type(k) is str for k in value):
            return {"$d": {k: self.encode(v, depth + 1) for k, v in value.items()}}
        if t is torch.Generator:
            # Its state goes as a uint8 tensor; the receiver builds a generator in that state, so
            # the student's sampling draws the numbers the case's own generator would have drawn.
            if value.device.type != "cpu":
                raise WireError(f"only CPU torch.Generators can be sent (this one is on {value.device})")
            return {"$g": self._tensor(value.get_state()), "seed": value.initial_seed()}
        if t is Handle:
            return {"$h": value.id, "type": value.type_name if self.handle_types else ""}
        if t is Opaque:
            return {"$o": value.type_name}
        if self.on_object is not None:
            return self.on_object(value)
        return {"$o": type_name_of(value)}

    def _tensor(self, t: torch.Tensor) -> Any:
        # Each attribute of a tensor is a call into torch that builds a new Python object: read
        # each once (every frame carries a few tensors, and both sides encode one per request).
        dtype = t.dtype
        name = _DTYPE_NAMES.get(dtype)
        if name is None:
            return {"$o": f"torch.Tensor[{dtype}]"}
        layout = t.layout
        if layout is not torch.strided:
            return {"$o": f"torch.Tensor[{layout}]"}
        device = t.device
        meta = {"dtype": name, "shape": list(t.shape), "device": str(device), "nbytes": 0}
        if device.type != "meta":
            data = t.detach()
            if device.type != "cpu":
                data = data.cpu()
            if data.is_conj() or data.is_neg():
                data = data.resolve_conj().resolve_neg()
            if dtype is torch.bfloat16:  # numpy has no bfloat16; the same bits as int16
                data = data.view(torch.int16)
            raw = data.numpy().tobytes()  # C order, whatever the strides; one copy (docs/performance.md)
            if _BIG_ENDIAN and dtype.itemsize > 1:
                raw = _swap(raw, dtype.itemsize)
            meta["nbytes"] = len(raw)
            self.chunks.append(raw)
        self.tensors.append(meta)
        return {"$T": len(self.tensors) - 1}


def _swap(raw: bytes, size: int) -> bytes:
    import numpy as np

    return np.frombuffer(raw, dtype=f"u{size}").byteswap().tobytes()


def type_name_of(value: Any) -> str:
    """The dotted name of a value's type ("torch.Tensor"; builtins bare: "int"), as the wire sends it."""
    t = type(value)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", "") or t.__name__
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def encode_frame(message: dict, on_object: Callable[[Any], Any] | None = None, *,
                 handle_types: bool = True) -> bytes:
    """Serialise one message (a str-keyed dict of wire values) into a frame. ``handle_types=False``
    sends handles by id alone (the worker knows its objects; the grader's requests then do not
    depend on what the student named their classes)."""
    enc = Encoder(on_object, handle_types)
    body = {k: enc.encode(v) for k, v in message.items()}
    header = _JSON_ENCODER.encode({"msg": body, "tensors": enc.tensors}).encode()
    payload = b"".join(enc.chunks)
    if len(header) > 0xFFFFFFFF or len(payload) > 0xFFFFFFFF:
        raise WireError("message too large to send")
    return PREFIX.pack(len(header), len(payload)) + header + payload


# --- decoding -------------------------------------------------------------------------------

def check_prefix(prefix: bytes, *, max_header: int, max_payload: int) -> tuple[int, int]:
    """The two lengths of a frame, refused before allocating when over the caps."""
    if len(prefix) != PREFIX.size:
        raise WireError("truncated frame prefix")
    hlen, plen = PREFIX.unpack(prefix)
    if hlen == 0 or hlen > max_header:
        raise WireError(f"frame header of {hlen} bytes (limit {max_header})")
    if plen > max_payload:
        raise WireError(f"a reply of {_mib(plen)} where at most {_mib(max_payload)} is expected "
                        f"(frame payload of {plen} bytes is over the limit of {max_payload})")
    return hlen, plen


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def decode_frame(header: bytes, payload: bytes | bytearray | memoryview, *,
                 on_handle: Callable[[int, str], Any] | None = None,
                 device_map: Callable[[str], str] | None = None,
                 on_text: Callable[[str], str] | None = None) -> dict:
    """Header + payload bytes -> message dict, validating every tensor against the payload.
    `on_text`: applied to every string built (values, dict keys, type names); the grader passes
    `grader.untrusted.wire_text`, so worker text is made safe where it enters."""
    try:
        doc = _JSON_DECODER.decode(bytes(header).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise WireError(f"frame header is not valid JSON: {e}") from None
    if type(doc) is not dict or type(doc.get("msg")) is not dict or type(doc.get("tensors")) is not list:
        raise WireError("frame header lacks 'msg' or 'tensors'")
    tensors = _decode_tensors(doc["tensors"], memoryview(payload), device_map)
    dec = _Decoder(tensors, on_handle, on_text)
    return {dec.text(str(k)): dec.decode(v, 0) for k, v in doc["msg"].items()}


def _same(s: str) -> str:
    return s


def _no_constant(name: str) -> Any:
    raise ValueError(f"bare {name} is not allowed")


_JSON_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _decode_tensors(table: list, payload: memoryview, device_map) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    offset = 0
    for meta in table:
        if type(meta) is not dict:
            raise WireError("tensor entry is not an object")
        name = meta.get("dtype")
        dtype = DTYPES.get(name) if type(name) is str else None
        if dtype is None:
            raise WireError(f"tensor dtype {name!r} is not allowed")
        shape = meta.get("shape")
        if (type(shape) is not list or len(shape) > MAX_NDIM
                or not all(type(s) is int and 0 <= s < 2**40 for s in shape)):
            raise WireError(f"tensor shape {shape!r} is invalid")
        device = meta.get("device")
        if type(device) is not str or not _valid_device(device):
            raise WireError(f"tensor device {device!r} is invalid")
        numel = math.prod(shape)
        itemsize = dtype.itemsize
        nbytes = meta.get("nbytes")
        if device == "meta":
            if nbytes != 0:
                raise WireError("meta tensor carries data")
            out.append(torch.empty(shape, dtype=dtype, device="meta"))
            continue
        if type(nbytes) is not int or nbytes != numel * itemsize:
            raise WireError(f"tensor of shape {shape} and dtype {meta['dtype']} declares {nbytes!r} bytes")
        if offset + nbytes > len(payload):
            raise WireError("tensor data runs past the end of the payload")
        chunk = payload[offset:offset + nbytes]
        offset += nbytes
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            buf = bytearray(chunk) if not _BIG_ENDIAN or itemsize == 1 else bytearray(_swap(bytes(chunk), itemsize))
            t = torch.frombuffer(buf, dtype=dtype).view(shape)  # its own copy, in the dtype sent
        if device != "cpu":
            t = t.to(device_map(device) if device_map else device)
        out.append(t)
    if offset != len(payload):
        raise WireError(f"payload has {len(payload) - offset} bytes no tensor accounts for")
    return out


def _valid_device(device: str) -> bool:
    if device in ("cpu", "meta", "cuda", "mps"):
        return True
    kind, _, index = device.partition(":")
    return kind in ("cuda", "mps") and index.isdigit() and len(index) < 4


class _Decoder:
    def __init__(self, tensors: list[torch.Tensor], on_handle, on_text=None):
        self.tensors = tensors
        self.on_handle = on_handle
        self.text = on_text or _same
        self.items = 0

    def decode(self, v: Any, depth: int) -> Any:
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise WireError("value is nested too deeply or has too many items")
        t = type(v)
        if t is str:
            return self.text(v)
        if v is None or t in (bool, int, float):
            return v
        if t is list:
            return [self.decode(x, depth + 1) for x in v]
        if t is not dict or len(v) not in (1, 2):
            raise WireError(f"unexpected value in frame: {type(v).__name__}")
        if "$T" in v and len(v) == 1:
            i = v["$T"]
            if type(i) is not int or not 0 <= i < len(self.tensors):
                raise WireError(f"tensor reference {i!r} out of range")
            return self.tensors[i]
        if "$f" in v and len(v) == 1 and v["$f"] in ("nan", "inf", "-inf"):
            return float(v["$f"])
        if "$t" in v and len(v) == 1 and type(v["$t"]) is list:
            return tuple(self.decode(x, depth + 1) for x in v["$t"])
        if "$d" in v and len(v) == 1 and type(v["$d"]) is dict:
            return {self.text(str(k)): self.decode(x, depth + 1) for k, x in v["$d"].items()}
        if "$g" in v and type(v.get("seed")) is int:
            state = self.decode(v["$g"], depth + 1)
            if type(state) is not torch.Tensor or state.dtype is not torch.uint8 or state.dim() != 1:
                raise WireError("a generator's state must be a 1-D uint8 tensor")
            gen = torch.Generator()
            try:
                gen.set_state(state.clone())
            except RuntimeError as e:
                raise WireError(f"not a CPU generator's state: {e}") from None
            return gen
        if "$o" in v and len(v) == 1 and type(v["$o"]) is str:
            return Opaque(self.text(v["$o"][:200]))
        if "$h" in v and type(v["$h"]) is int and type(v.get("type")) is str:
            if self.on_handle is None:
                raise WireError("handles are not accepted here")
            return self.on_handle(v["$h"], self.text(v["type"][:200]))
        raise WireError(f"unknown tagged value {sorted(v)[:3]}")


# --- blocking helpers (used by the worker, whose peer is the trusted grader) ----------------

def read_exact(fd: int, n: int) -> bytes:
    import os

    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("channel closed")
        buf += chunk
    return bytes(buf)


def read_frame(fd: int, *, max_header: int = 256 << 20, max_payload: int = 4 << 30) -> tuple[bytes, bytes]:
    hlen, plen = check_prefix(read_exact(fd, PREFIX.size), max_header=max_header, max_payload=max_payload)
    return read_exact(fd, hlen), read_exact(fd, plen)


def write_all(fd: int, data: bytes) -> None:
    import os

    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
