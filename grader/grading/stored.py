"""Public cases' setups written to a file and read back: how a student kit checks without the reference.

``grader release`` computes every public case's ``Setup`` (inputs, expected results and whatever
the case's diagnosis keeps in ``extra``) with the trusted reference, and writes them here:
tensors in one safetensors file, the structure around them (dicts, lists, tuples, numbers,
dtypes, the grader's own dataclasses such as ``Expected``, ``AttentionCase`` and ``Hypotheses``) as JSON
in its metadata. Never pickle: reading a kit runs no code from it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from grader.cases import Setup
from grader.errors import AssignmentSpecError

FILE = "expected.safetensors"
FORMAT = 2
"""2: diagnosis hypotheses are stored with the setups (``AttentionCase.mistakes``, ``extra``)."""
DATACLASS_MODULES = ("grader.",)
"""Where a stored dataclass may come from: the grader's own (a kit names no other code to import)."""


class _Writer:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}

    def encode(self, x: Any, where: str) -> Any:
        if isinstance(x, torch.Tensor):
            if x.device.type == "meta":
                return {"$meta": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
            key = f"t{len(self.tensors)}"
            self.tensors[key] = x.detach().to("cpu").clone().contiguous()
            return {"$t": key, "grad": True} if x.requires_grad else {"$t": key}
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, float):
            return {"$f": repr(x)}  # JSON has no inf/nan
        if isinstance(x, torch.Generator):
            key = f"t{len(self.tensors)}"
            self.tensors[key] = x.get_state().clone()
            return {"$gen": key}
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
    if "$t" in x:
        return tensors[x["$t"]].requires_grad_(True) if x.get("grad") else tensors[x["$t"]]
    if "$gen" in x:
        gen = torch.Generator()
        gen.set_state(tensors[x["$gen"]].clone())
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
            cls = getattr(cls, part)
        return cls(**{k: _decode(v, tensors) for k, v in x["fields"].items()})
    raise ValueError(f"stored setups: unknown entry {sorted(x)}")


def write(path: Path, setups: dict[str, Setup], reference_runs: dict[str, bool]) -> None:
    """Write ``setups`` (case instance id -> Setup) and, per device case, whether the reference runs it."""
    w = _Writer()
    tree = {iid: {"inputs": w.encode(s.inputs, f"{iid}: inputs"), "expected": w.encode(s.expected, f"{iid}: expected"),
                  "extra": w.encode(s.extra, f"{iid}: extra")} for iid, s in setups.items()}
    meta = {"format": str(FORMAT), "setups": json.dumps(tree), "reference_runs": json.dumps(reference_runs)}
    save_file(w.tensors, str(path), metadata=meta)


def read(path: Path) -> tuple[dict[str, Setup], dict[str, bool]]:
    """The setups and reference-runs flags ``write`` stored."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != str(FORMAT):
        raise AssignmentSpecError(f"{path}: not a stored-setups file of format {FORMAT}; release the kit again")
    tensors = load_file(str(path))
    tree = json.loads(meta["setups"])
    setups = {iid: Setup(inputs=_decode(d["inputs"], tensors), expected=_decode(d["expected"], tensors),
                         extra=_decode(d["extra"], tensors)) for iid, d in tree.items()}
    return setups, {k: bool(v) for k, v in json.loads(meta.get("reference_runs", "{}")).items()}
