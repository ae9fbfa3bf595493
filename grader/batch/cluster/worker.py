"""The Dask worker's side of `grader grade --cluster`: a plugin per worker process holding the
assignment, one Sandbox (own warm zygote) and one Engine for the whole run, and the task that
grades one submission there (`grade_remote`), returning plain JSON data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from typing import TYPE_CHECKING

from grader.batch.cluster.payload import unpack, write_tree

if TYPE_CHECKING:
    from distributed import Worker
    from distributed.diagnostics.plugin import WorkerPlugin as _PluginBase

    from grader.grading.engine import Engine
    from grader.sandbox import Sandbox
    from grader.sandbox.host.portable import PortableSandbox
else:
    try:
        from distributed.diagnostics.plugin import WorkerPlugin as _PluginBase
    except ImportError:  # the plugin is only ever built where distributed is installed
        _PluginBase = object


def worker_gpus(dask_worker: Worker) -> int:
    """GPU tasks this worker can run at once: its GPU resource, at most one per thread."""
    return int(min(dask_worker.state.total_resources.get("GPU", 0), dask_worker.state.nthreads))


def worker_facts() -> dict:
    """What the instructor checks before grading (run on each worker with client.run)."""
    import grader
    import torch

    return {"grader": grader.__version__, "torch": torch.__version__}


class GraderPlugin(_PluginBase):
    """Per worker process: the assignment, one Sandbox (warm zygote) and one Engine for the whole run,
    built by `grader.grading.factory` after the same checks a local batch makes."""

    def __init__(self, name: str, files: dict[str, bytes], folder: str, device: str, ignore_sigint: bool,
                 lang: str | None = None, accept_isolation: str | None = None):
        self.name, self.files, self.folder, self.device = name, files, folder, device
        self.accept_isolation = accept_isolation
        """The weaker level the instructor accepts (``--accept-isolation``), else None."""
        self.lang = lang
        """The students' feedback language the reports record (the batch's ``--lang``)."""
        self.ignore_sigint = ignore_sigint
        """local:N: Ctrl-C in the terminal reaches the worker processes too; only the instructor acts on it."""
        self.engine: Engine | None = None
        self.error = ""
        self._sandbox: Sandbox | PortableSandbox | None = None
        self._tmp = ""

    async def setup(self, worker: Worker) -> None:
        import asyncio
        import signal

        if self.ignore_sigint and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        import torch

        from grader.assignment.spec import load_assignment
        from grader.grading.engine import limits_for
        from grader.grading.factory import batch_engines, sandbox_for

        try:
            torch.set_num_threads(1)  # one task at a time per worker process, like one local slot
            _remove_stale_assignments()
            self._tmp = tempfile.mkdtemp(prefix=f"grader-assignment-{os.getpid()}-")
            root = os.path.join(self._tmp, self.folder)
            write_tree(root, self.files)
            a = load_assignment(root)
            # The same checks as a local batch, in this worker's own jail: the self-test (limits
            # included), then the trusted reference at 100 %.
            self._sandbox = sandbox = sandbox_for(limits_for(a), self.device, accept_isolation=self.accept_isolation)
            self.engine, = batch_engines(a, sandbox, torch.device(self.device), 1, lang=self.lang)
        except Exception as e:  # noqa: BLE001 - reported to the instructor, who refuses to start
            self.error = f"{type(e).__name__}: {e}"
            self.teardown(None)

    def teardown(self, worker: Worker | None) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""


def _remove_stale_assignments() -> None:
    """Assignment copies left by worker processes that were killed (SIGKILL skips the plugin's teardown)."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        pid = name.split("-")[2] if name.startswith("grader-assignment-") else ""
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def plugin_state(name: str, dask_worker: Worker) -> dict:
    """The isolation level of a worker's sandbox for this run, or why it could not start."""
    plugin = _plugin(dask_worker, name)
    if plugin is None:
        return {"error": "the grader plugin is not installed on this worker"}
    if plugin.engine is None:
        return {"error": plugin.error or "the sandbox is not ready"}
    return {"isolation": plugin.engine.sandbox.isolation}


def grade_remote(plugin_name: str, payload: dict) -> dict:
    """The task: grade one submission on this worker; {"report": canonical JSON} or {"error": why}."""
    import traceback

    from distributed import get_worker

    from grader.results import to_dict

    t0 = time.perf_counter()
    plugin = _plugin(get_worker(), plugin_name)
    engine = plugin.engine if plugin is not None else None
    if engine is None:
        why = (plugin.error if plugin is not None else "") or "no plugin"
        return {"error": f"the sandbox is not ready on this worker: {why}"}
    try:
        a = engine.assignment
        sub = unpack(payload, main_module=a.main_module, cell_tag=a.cell_tag, intake=engine.intake)
        report = engine.grade(sub, student_id=payload["student_id"])
        return {"report": to_dict(report), "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - a grader fault on one submission must not end the batch
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


def _plugin(dask_worker: Worker, name: str) -> GraderPlugin | None:
    """This run's plugin on `dask_worker`, if it is installed (Dask keeps every plugin by name)."""
    plugin = dask_worker.plugins.get(name)
    return plugin if isinstance(plugin, GraderPlugin) else None
