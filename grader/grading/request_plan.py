"""The call plan's state: for each case, the request frames the trusted reference made in it
(learned once per batch, see `grader.grading.call_plan`), and where submissions have left it;
which frames go ahead to a worker, and when.

A hidden case's requests go only once it starts, one case at a time: the worker's channel is
readable by the student's code, which must never hold the inputs of a hidden case that has not
started (a public case's are the student's anyway: ``grader check`` runs them).
"""

from __future__ import annotations

from typing import Any, Protocol
from collections.abc import Callable, Sequence

from grader.cases import CaseInstance


class PlannedWorker(Protocol):
    """What the plan needs of a worker: its record of requests made, and a way to send some ahead."""

    record: list[bytes] | None

    def send_ahead(self, frames: list[bytes]) -> None: ...


class CallPlan:
    """Learned requests per case instance id, and the cases known to leave them."""

    def __init__(self, requests: dict[str, list[bytes]] | None = None, stops: dict[str, int] | None = None):
        self.requests: dict[str, list[bytes]] = {} if requests is None else requests
        """Case instance id -> the request frames the trusted reference made in it."""
        self.stops: dict[str, int] = {} if stops is None else stops
        """Case instance id -> how many of its planned requests to send ahead (a submission left the
        plan there); the rest of it is made the straight way."""

    def send(self, worker: PlannedWorker, instances: Sequence[CaseInstance], n: int, missing: dict[str, str],
             sent: dict[int, int]) -> int | None:
        """Send ahead, in one write, the learned requests of case `n` and, while the cases are
        public, of the cases after it, up to the first case known to leave its plan (only its calls
        before that point are sent); `sent` gets the number of frames sent per case index. Returns
        the next case to send for (None: none is left)."""
        if not self.requests:
            return None
        frames: list[bytes] = []
        after: int | None = None
        for i in range(n, len(instances)):
            inst = instances[i]
            if i > n and inst.case.hidden:
                after = i
                break
            if any(name in missing for name in inst.case.uses):
                continue
            cut = self.stops.get(inst.id, 0 if inst.id not in self.requests else None)
            planned = self.requests.get(inst.id, [])[:cut]
            frames += planned
            sent[i] = len(planned)
            if cut is not None or inst.case.hidden:
                after = i + 1
                break
        if frames:
            if worker.record is None:
                worker.record = []
            worker.send_ahead(frames)
        return after if after is not None and after < len(instances) else None

    def complete(self, inst: CaseInstance) -> bool:
        """The case has a learned plan that no submission has left: all of its calls are planned."""
        return inst.id in self.requests and inst.id not in self.stops

    def stop_at(self, inst: CaseInstance, calls: int) -> None:
        """This case left its plan after `calls` requests: from now on only those are sent ahead."""
        self.stops[inst.id] = min(calls, self.stops.get(inst.id, calls))


class NotifyingCalls:
    """A worker as a case's check uses it, calling `after` each time one of its calls returns: the
    engine sends the next case's planned requests once this case has made all of its own, while
    this process compares the replies. The worker still never holds requests of a case other than
    the one it runs (it has answered all of this one's)."""

    def __init__(self, worker: Any, after: Callable[[], None]) -> None:
        self._worker, self._after = worker, after

    def _then(self, value: Any) -> Any:
        self._after()
        return value

    def call(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(self._worker.call(*args, **kwargs))

    def call_method(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(self._worker.call_method(*args, **kwargs))

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(self._worker.state_dict(*args, **kwargs))

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(self._worker.load_state_dict(*args, **kwargs))

    def vjp(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(self._worker.vjp(*args, **kwargs))
