"""Run a submission in a separate, jailed worker process and talk to it over a data-only wire.

The grader process never imports student code. See docs/architecture.md ("Contract: sandbox")
and ../shared/security.md for the threat model and the isolation levels.

Three parts, and what both sides share:

- ``host/``: what runs in the grader: the `Sandbox` (``host/sandbox.py``), starting the zygote
  early (``host/zygote.py``), a `Worker` and the calls it serves (``host/worker.py``), its channel
  (``host/channel.py``), its processes and killing them (``host/process.py``), the isolation plan
  (``host/isolation.py``), what a worker reports (``host/reports.py``), what a sandbox reads of a
  submission and writes into a worker's scratch dir (``host/submission.py``) and the self-test;
- ``child/``: what runs in the worker's processes: the zygote, the supervisor and the server that
  runs the student's code;
- ``jail/``: the jail's mechanisms: namespaces, mounts, uid and rlimits (``jail/enter.py``),
  Landlock, seccomp, cgroups, and which files a worker may read (``jail/paths.py``);
- beside them: the frames both sides exchange (``wire.py``), the errors (``errors.py``) and the
  `Limits` (``limits.py``).

Importing this package does not import torch: the names from the modules that do (``Sandbox``,
``Worker``, ``Handle``, ...) are loaded on first use, so that ``grader.sandbox.host.zygote.prestart()``
can start the zygote before this process pays for ``import torch``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grader.sandbox.errors import (
    CrashKind,
    EnvironmentBroken,
    SandboxError,
    StudentError,
    WireError,
    WorkerCrashed,
    WorkerTimeout,
)

if TYPE_CHECKING:
    from grader.sandbox.host.reports import LoadReport, NameInfo
    from grader.sandbox.host.sandbox import Sandbox
    from grader.sandbox.host.worker import Worker
    from grader.sandbox.limits import Budget, Limits
    from grader.sandbox.wire import Handle, Opaque

_LAZY = {"Budget": "limits", "Limits": "limits", "LoadReport": "host.reports", "NameInfo": "host.reports",
         "Sandbox": "host.sandbox", "Worker": "host.worker", "Handle": "wire", "Opaque": "wire"}

__all__ = [
    "Budget",
    "CrashKind",
    "EnvironmentBroken",
    "Handle",
    "Limits",
    "LoadReport",
    "NameInfo",
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
