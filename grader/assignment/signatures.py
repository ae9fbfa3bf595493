"""The documented defaults of an assignment's entry points, read from the ``signature`` strings of
spec.toml, and the rule that keeps a case's call to the arguments that differ from them.

A case that passes ``causal=False`` or ``mask=None`` explicitly would fail code whose signature
lacks that parameter while it does exactly what the case asks; sent without them, the call grades
what the code does. Torch-free (spec.toml is read before torch is imported).

Signature strings look like ``causal_mask(q_len, k_len=None, device=None)`` for a function and
``class M(nn.Module): __init__(self, d_model, h); forward(self, x, mask=None, *, causal=False)``
for a class (a module's ``__call__`` takes ``forward``'s parameters). A part that is not valid
Python parameters gives no defaults: its calls go as written.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable

PLAIN = (bool, int, float, str)
"""The default values a call leaves out: only these (and None) compare safely."""

_PART = re.compile(r"([A-Za-z_]\w*)\s*\(([^()]*)\)")


@dataclass(frozen=True)
class Params:
    """One callable's parameters as documented."""

    positional: tuple[str, ...] = ()
    """Names that may be passed by position, in order (``self`` left out)."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Name -> documented default, for defaults that are None or a plain literal."""


def parse_params(text: str) -> Params | None:
    """``"self, x, mask=None, *, causal=False"`` -> Params; None when it is not Python parameters."""
    try:
        fn = ast.parse(f"def f({text}): pass").body[0]
    except SyntaxError:
        return None
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    defaults: dict[str, Any] = {}
    for name, node in (*zip(positional[len(positional) - len(a.defaults):], a.defaults),
                       *((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)):
        try:
            value = ast.literal_eval(node)
        except ValueError:
            continue
        if value is None or type(value) in PLAIN:
            defaults[name] = value
    if positional[:1] == ["self"]:
        positional = positional[1:]
    return Params(tuple(positional), defaults)


def entry_defaults(name: str, kind: str, signature: str) -> dict[str, Params]:
    """Callable key -> Params for one entry point: ``name`` (a function, or a class's constructor)
    and ``name.method`` for each method a class signature documents."""
    found: dict[str, Params] = {}
    if kind == "class":
        _, _, methods = signature.partition(":")
        for method, text in _PART.findall(methods):
            params = parse_params(text)
            if params is None:
                continue
            found[name if method == "__init__" else f"{name}.{method}"] = params
        if f"{name}.forward" in found and f"{name}.__call__" not in found:
            found[f"{name}.__call__"] = found[f"{name}.forward"]
    else:
        for fn, text in _PART.findall(signature):
            params = parse_params(text) if fn == name else None
            if params is not None:
                found[name] = params
                break
    return found


def call_defaults(entry_points: Iterable[Any]) -> dict[str, Params]:
    """Every entry point's documented defaults (``EntryPoint``s of an `Assignment`)."""
    out: dict[str, Params] = {}
    for ep in entry_points:
        out.update(entry_defaults(ep.name, ep.kind, ep.signature))
    return out


def _is_default(value: Any, default: Any) -> bool:
    if default is None:
        return value is None
    return type(value) is type(default) and value == default


def without_defaults(params: Params | None, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The call with every argument equal to its documented default left out: keyword arguments
    by name, and positional ones from the end (so the others keep their positions)."""
    if params is None:
        return args, kwargs
    kept = {k: v for k, v in kwargs.items() if not (k in params.defaults and _is_default(v, params.defaults[k]))}
    n = len(args)
    while n and n <= len(params.positional):
        name = params.positional[n - 1]
        if name not in params.defaults or not _is_default(args[n - 1], params.defaults[name]):
            break
        n -= 1
    return tuple(args[:n]), kept
