"""Run a submission in a separate, jailed worker process and talk to it over a data-only wire.

The grader process never imports student code. See docs/architecture.md ("Contract: sandbox")
and ../shared/security.md for the threat model and the isolation levels.
"""

from grader.sandbox.errors import SandboxError, StudentError, WireError, WorkerCrashed, WorkerTimeout
from grader.sandbox.host import Limits, LoadReport, NameInfo, Sandbox, Worker
from grader.sandbox.wire import Handle, Opaque

__all__ = [
    "Limits", "Sandbox", "Worker", "Handle", "Opaque", "NameInfo", "LoadReport",
    "SandboxError", "StudentError", "WorkerTimeout", "WorkerCrashed", "WireError",
]
