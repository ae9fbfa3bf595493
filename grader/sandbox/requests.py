"""The requests the grader sends a worker, encoded once, the same way everywhere.

A request frame depends only on the request: grader values, handles by id alone. So a frame sent
ahead (``Worker.send_ahead``) and the request that later takes it compare byte for byte.
"""

from __future__ import annotations

from typing import Any

from grader.sandbox.errors import SandboxError
from grader.sandbox.wire import encode_frame


def request_frame(msg: dict) -> bytes:
    """A request as the grader sends it: grader values only, handles by id alone (so that frames
    sent ahead and the requests that take them compare byte for byte)."""
    return encode_frame(msg, on_object=_refuse, handle_types=False)


def load_msg(units) -> dict:
    return {"op": "load", "units": [{"label": u.label, "cell": u.cell, "source": u.source} for u in units]}


def describe_msg(names: list[str]) -> dict:
    return {"op": "describe_all", "names": [str(n) for n in names]}


def _refuse(value: Any) -> Any:
    raise SandboxError(f"cannot send a {type(value).__name__} to the worker: only tensors, numbers, "
                       "strings, None, lists, tuples, str-keyed dicts and handles cross")
