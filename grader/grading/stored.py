"""Public cases' setups written to a file and read back: how a student kit checks without the reference.

``grader release`` computes every public case's ``Setup`` (inputs, expected results and whatever
the case's diagnosis keeps in ``extra``) with the trusted reference, and writes them here:
tensors in one safetensors file, the structure around them (dicts, lists, tuples, numbers,
dtypes, the grader's own dataclasses such as ``Expected``, ``AttentionCase`` and ``Hypotheses``) as JSON
in its metadata. Never pickle: reading a kit runs no code from it. The same format holds a batch's
setups between runs (`grader.grading.setup_cache`), read with ``read_checked``: a digest of the
content in the metadata, and the entries its reader expects, must match.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from grader.cases import Setup
from grader.errors import AssignmentSpecError

FILE = "expected.safetensors"
FORMAT = 3
"""2: diagnosis hypotheses are stored with the setups (``AttentionCase.mistakes``, ``extra``);
3: tensors packed into one stored tensor per dtype (hundreds of small tensors cost more to write
one by one than their bytes)."""
DATACLASS_MODULES = ("grader.",)
"""Where a stored dataclass may come from: the grader's own (a kit names no other code to import)."""


class _Writer:
    def __init__(self) -> None:
        self._parts: dict[str, list[torch.Tensor]] = {}
        self._sizes: dict[str, int] = {}

    def _pack(self, t: torch.Tensor) -> dict[str, Any]:
        """`t`'s place in the packed tensor of its dtype: {"$p": name, "o": offset, "s": shape}."""
        name = str(t.dtype).removeprefix("torch.")
        offset = self._sizes.get(name, 0)
        self._parts.setdefault(name, []).append(t.detach().to("cpu").reshape(-1))
        self._sizes[name] = offset + t.numel()
        return {"$p": name, "o": offset, "s": list(t.shape)}

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: torch.cat(parts) for name, parts in self._parts.items()}

    def encode(self, x: Any, where: str) -> Any:
        if isinstance(x, torch.Tensor):
            if x.device.type == "meta":
                return {"$meta": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
            return {**self._pack(x), "grad": True} if x.requires_grad else self._pack(x)
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, float):
            return {"$f": repr(x)}  # JSON has no inf/nan
        if isinstance(x, torch.Generator):
            return {"$gen": self._pack(x.get_state())}
        if isinstance(x, torch.dtype):
            return {"$dtype": str(x).removeprefix("torch.")}
        if isinstance(x, torch.device):
            return {"$device": str(x)}
        if isinstance(x, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, dict):
            if not all(isinstance(k, str) for k in x):
                raise AssignmentSpecError(f"{where}: only str keys can be stored in a student kit")
            return {"$dict": {k: self.encode(v, f"{where}[{k!r}]") for k, v in x.items()}}
        t = type(x)
        if dataclasses.is_dataclass(x) and t.__module__.startswith(DATACLASS_MODULES):
            return {"$dc": f"{t.__module__}:{t.__qualname__}",
                    "fields": {f.name: self.encode(getattr(x, f.name), f"{where}.{f.name}")
                               for f in dataclasses.fields(x)}}
        raise AssignmentSpecError(f"{where}: a {t.__module__}.{t.__qualname__} cannot be stored in a student kit "
                                  "(tensors, numbers, str, dtypes, lists, tuples, dicts and grader dataclasses can)")


def _decode(x: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(x, list):
        return [_decode(v, tensors) for v in x]
    if not isinstance(x, dict):
        return x
    if "$p" in x:
        t = _unpack(x, tensors)
        return t.requires_grad_(True) if x.get("grad") else t
    if "$gen" in x:
        gen = torch.Generator()
        gen.set_state(_unpack(x["$gen"], tensors))
        return gen
    if "$meta" in x:
        return torch.empty(x["$meta"], dtype=getattr(torch, x["dtype"]), device="meta")
    if "$f" in x:
        return float(x["$f"])
    if "$dtype" in x:
        return getattr(torch, x["$dtype"])
    if "$device" in x:
        return torch.device(x["$device"])
    if "$tuple" in x:
        return tuple(_decode(v, tensors) for v in x["$tuple"])
    if "$dict" in x:
        return {k: _decode(v, tensors) for k, v in x["$dict"].items()}
    if "$dc" in x:
        module, _, name = x["$dc"].partition(":")
        if not module.startswith(DATACLASS_MODULES):
            raise ValueError(f"stored setups name {x['$dc']!r}, which is not the grader's")
        cls: Any = importlib.import_module(module)
        for part in name.split("."):
            if part.startswith("_"):
                raise ValueError(f"stored setups name {x['$dc']!r}, which is not a public dataclass")
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"stored setups name {x['$dc']!r}, which is not a dataclass")  # nothing else is called
        return cls(**{k: _decode(v, tensors) for k, v in x["fields"].items()})
    raise ValueError(f"stored setups: unknown entry {sorted(x)}")


def _unpack(x: dict, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """A tensor of its own (a copy, not a view of the packed one) from its place `x`."""
    packed = tensors[x["$p"]]
    shape = [int(n) for n in x["s"]]
    start, n = int(x["o"]), math.prod(shape)
    if start < 0 or start + n > packed.numel():
        raise ValueError(f"stored setups: a tensor past the end of the {x['$p']} data")
    return packed[start:start + n].clone().reshape(shape)


def write(path: Path, setups: dict[str, Setup], reference_runs: dict[str, bool], *,
          meta: dict[str, str] | None = None) -> None:
    """Write ``setups`` (case instance id -> Setup) and, per device case, whether the reference runs
    it; ``meta``: more metadata entries (str -> str), which ``read_checked`` can require."""
    w = _Writer()
    tree = {iid: {"inputs": w.encode(s.inputs, f"{iid}: inputs"), "expected": w.encode(s.expected, f"{iid}: expected"),
                  "extra": w.encode(s.extra, f"{iid}: extra")} for iid, s in setups.items()}
    text = json.dumps(tree)
    tensors = w.tensors
    entries = {**(meta or {}), "format": str(FORMAT), "setups": text, "reference_runs": json.dumps(reference_runs),
               "digest": _digest(text, tensors)}
    save_file(tensors, str(path), metadata=entries)


def read(path: Path) -> tuple[dict[str, Setup], dict[str, bool]]:
    """The setups and reference-runs flags ``write`` stored."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != str(FORMAT):
        raise AssignmentSpecError(f"{path}: not a stored-setups file of format {FORMAT}; release the kit again")
    return _setups(meta, load_file(str(path)))


def read_checked(path: Path, expect: dict[str, str]) -> tuple[dict[str, Setup], dict[str, bool]]:
    """Like ``read``, for a file this grader wrote earlier: ValueError unless its metadata holds
    every entry of ``expect`` and its content matches the digest written with it."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    wrong = sorted(k for k, v in {**expect, "format": str(FORMAT)}.items() if meta.get(k) != v)
    if wrong:
        raise ValueError(f"{path}: other {', '.join(wrong)}")
    tensors = load_file(str(path))
    if meta.get("digest") != _digest(meta.get("setups", ""), tensors):
        raise ValueError(f"{path}: its content does not match its digest")
    return _setups(meta, tensors)


def _setups(meta: dict[str, str], tensors: dict[str, torch.Tensor]) -> tuple[dict[str, Setup], dict[str, bool]]:
    tree = json.loads(meta["setups"])
    setups = {iid: Setup(inputs=_decode(d["inputs"], tensors), expected=_decode(d["expected"], tensors),
                         extra=_decode(d["extra"], tensors)) for iid, d in tree.items()}
    return setups, {k: bool(v) for k, v in json.loads(meta.get("reference_runs", "{}")).items()}


def _digest(tree: str, tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over the structure and every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256(tree.encode())
    for name in sorted(tensors):
        t = tensors[name]
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
