"""Run a submission in a separate, jailed worker process and talk to it over a data-only wire.

The grader process never imports student code. See docs/architecture.md ("Contract: sandbox")
and ../shared/security.md for the threat model and the isolation levels.

Importing this package does not import torch: the names from the modules that do (``sandbox``,
``handle``, ``wire``, ...) are loaded on first use, so that ``grader.sandbox.prestart.prestart()`` can start the zygote before this
process pays for ``import torch``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grader.sandbox.errors import (
    EnvironmentBroken,
    OffPlan,
    SandboxError,
    StudentError,
    WireError,
    WorkerCrashed,
    WorkerTimeout,
)

if TYPE_CHECKING:
    from grader.sandbox.handle import Worker
    from grader.sandbox.limits import Budget, Limits
    from grader.sandbox.reports import LoadReport, NameInfo
    from grader.sandbox.sandbox import Sandbox
    from grader.sandbox.wire import Handle, Opaque

_LAZY = {"Budget": "limits", "Limits": "limits", "LoadReport": "reports", "NameInfo": "reports", "Sandbox": "sandbox",
         "Worker": "handle", "Handle": "wire", "Opaque": "wire"}

__all__ = [
    "Budget",
    "EnvironmentBroken",
    "Handle",
    "Limits",
    "LoadReport",
    "NameInfo",
    "OffPlan",
    "Opaque",
    "Sandbox",
    "SandboxError",
    "StudentError",
    "WireError",
    "Worker",
    "WorkerCrashed",
    "WorkerTimeout",
]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'grader.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grader.sandbox.{mod}"), name)
    globals()[name] = value
    return value
