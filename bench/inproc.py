"""In-process passes over a generated batch, through the Python API (grader code is not modified):

    python bench/inproc.py floor   BATCH_DIR OUT_JSON [--limit N]
    python bench/inproc.py profile BATCH_DIR OUT_JSON [--limit N]

floor:   the same Engine and cases, but student code runs in THIS process through a tiny stand-in
         worker (bench-only; no isolation, no wire, no fork): the compute floor per submission.
         Also times the 8 peer checks (bench/peer_checks.py) run in-process on each .py/.ipynb.
profile: the real `grader.batch.run.run_batch` with -j 1 and timers wrapped around the engine, the
         sandbox and the report writers, giving the split of time per submission.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

T: dict[str, float] = collections.defaultdict(float)
N: collections.Counter = collections.Counter()
_tls = threading.local()


def timed(owner, name: str, label: str) -> None:
    """Wrap owner.name so its wall time adds to T[label] (exclusive of nested timed calls)."""
    f = getattr(owner, name, None)
    if f is None:  # not in this version of the grader
        return

    @functools.wraps(f)
    def w(*a, **k):
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        t0 = time.perf_counter()
        stack.append(0.0)
        try:
            return f(*a, **k)
        finally:
            dt = time.perf_counter() - t0
            nested = stack.pop()
            T[label] += dt - nested
            N[label] += 1
            if stack:
                stack[-1] += dt

    setattr(owner, name, w)


def pctl(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def submissions(batch: Path, limit: int | None) -> list[Path]:
    subs = sorted(p for p in batch.iterdir() if p.suffix in (".py", ".ipynb"))
    return subs[:limit] if limit else subs


# --- the floor -----------------------------------------------------------------------------------

class _InProcWorker:
    """The Worker API, served in this process by the real worker-side Server (no isolation)."""

    alive = True
    reply_cap = 0

    def __init__(self, sub, scratch: str):
        from grader.sandbox import LoadReport
        from grader.results import CellError
        from grader.sandbox.child import server as W

        main = os.path.basename(sub.path) if sub.kind == "ipynb" else "attention.py"
        self.srv = W.Server({"scratch": scratch, "main": main})
        with self._quiet():
            r = self.srv.op_load({"units": [{"label": u.label, "cell": u.cell, "source": u.source}
                                            for u in sub.units]})
        errors = [CellError(cell=e.get("cell"), error=str(e["error"]), traceback=str(e["traceback"]))
                  for e in r["cell_errors"]]
        self.load = LoadReport(ok=bool(r["completed"]) or bool(r["defined"]), cell_errors=errors,
                               defined=tuple(r["defined"]))

    @contextlib.contextmanager
    def _quiet(self):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield

    def _op(self, fn, req):
        from grader.sandbox import StudentError

        req = {k: _copy(v) for k, v in req.items()}
        try:
            with self._quiet():
                return fn(req)
        except BaseException as e:  # noqa: BLE001 - as the real worker does
            d = self.srv.describe_exc(e)
            raise StudentError(d["type"], d["message"], d["traceback"]) from None

    def output(self):
        return "", ""

    def describe(self, name):
        from grader.sandbox import NameInfo

        r = self.srv.op_describe({"name": name})
        return NameInfo(name=name, kind=r["kind"], signature=r["signature"], params=tuple(r["params"]),
                        available=tuple(r["available"]))

    def describe_all(self, names):
        return {n: self.describe(n) for n in names}

    def call(self, name, *args, **kwargs):
        return _copy(self._op(self.srv.op_call, {"name": name, "args": list(args), "kwargs": kwargs})["value"])

    def call_method(self, handle, method, *args, **kwargs):
        return _copy(self._op(self.srv.op_call_method, {"handle": handle, "method": method, "args": list(args),
                                                        "kwargs": kwargs})["value"])

    def state_dict(self, handle):
        return self._op(self.srv.op_state_dict, {"handle": handle})["value"]

    def load_state_dict(self, handle, state):
        self._op(self.srv.op_load_state_dict, {"handle": handle, "state": state})

    def vjp(self, target, args, kwargs=None, *, wrt, cotangent, output_index=None):
        r = self._op(self.srv.op_vjp, {"target": target, "args": list(args), "kwargs": dict(kwargs or {}),
                                       "wrt": list(wrt), "cotangent": cotangent, "output_index": output_index})
        return _copy(r["value"]), [_copy(g) for g in r["grads"]]

    def close(self):
        sys.modules.pop("submission", None)

    retire = close


def _copy(v):
    """Tensors cross the real wire as copies; do the same so a submission cannot alter the setups."""
    import torch

    if type(v) is torch.Tensor:
        return v.detach().clone()
    if type(v) in (list, tuple):
        return type(v)(_copy(x) for x in v)
    if type(v) is dict:
        return {k: _copy(x) for k, x in v.items()}
    return v


class _FloorSandbox:
    isolation = "none (in-process floor)"
    limits_note = "none: the student's code runs in this process"

    def __init__(self, limits):
        self.limits = limits
        self._dir = tempfile.mkdtemp(prefix="bench-floor-")

    def open(self, sub):
        return _InProcWorker(sub, self._dir)


def floor(batch: Path, limit: int | None) -> dict:
    import torch

    torch.set_num_threads(1)
    from grader.assignment.spec import load_assignment
    from grader.grading.engine import limits_for
    from grader.grading.factory import engine_for
    from grader.submission.load import load_submission
    from peer_checks import run_in

    a = load_assignment("masked-attention")
    eng = engine_for(a, _FloorSandbox(limits_for(a)), device="cpu")
    t0 = time.perf_counter()
    eng.prepare()
    prepare_s = time.perf_counter() - t0
    paths = submissions(batch, limit)
    subs = [load_submission(p, main_module=a.main_module, cell_tag=a.cell_tag) for p in paths]
    eng.grade(subs[0])  # warm-up: lazy torch imports (meta device -> torch._dynamo) paid once here
    times, peer_times, scores, peer_pass = [], [], {}, {}
    for p, sub in zip(paths, subs):
        t0 = time.perf_counter()
        r = eng.grade(sub)
        times.append(time.perf_counter() - t0)
        scores[p.name] = r.score.percent
        # the 8 peer checks on the same code, in this process
        import types
        mod = types.ModuleType("submission")
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for u in sub.units:
                try:
                    exec(compile(u.source, u.label, "exec"), mod.__dict__)
                except Exception:  # noqa: BLE001
                    pass
            peer_pass[p.name] = sum(run_in(mod.__dict__).values())
        peer_times.append(time.perf_counter() - t0)
    return {"n": len(times), "prepare_s": prepare_s, "per_sub_s": times,
            "median_s": statistics.median(times), "p95_s": pctl(times, 0.95),
            "peer_checks_median_s": statistics.median(peer_times), "scores": scores, "peer_passed": peer_pass,
            "cases": len(eng.instances)}


# --- the profile pass ------------------------------------------------------------------------------

def profile(batch: Path, limit: int | None, out_dir: Path) -> dict:
    import grader.batch.run as B
    from grader.batch import local as L, outputs as O, recording as R
    from grader.sandbox.host import sandbox, worker
    from grader.grading import engine as E
    from grader.assignment.spec import load_assignment

    timed(B, "load_submission", "load (read + parse)")
    timed(B, "discover", "discover")
    timed(L, "start_sandbox", "sandbox start (zygote, once)")
    timed(L, "reference_setups", "reference (setups, once)")
    timed(E.Engine, "prepare", "reference (setups, once)")
    timed(sandbox.Sandbox, "_spawn", "worker start (fork + jail)")
    timed(worker.Worker, "run_units", "student code load (module/cells)")
    for op in ("describe", "describe_all", "call", "call_method", "vjp", "state_dict", "load_state_dict"):
        timed(worker.Worker, op, "student calls (round trip)")
    timed(E.Engine, "run_case", "compare + diagnosis (grader side)")
    timed(E, "missing_entry_points", "compare + diagnosis (grader side)")
    timed(E.Engine, "_report", "result objects")
    timed(worker.Worker, "close", "worker stop")
    timed(worker.Worker, "retire", "worker stop")  # the kill; the clean-up runs on the reaper thread
    timed(R, "write_result_json", "results JSON")
    timed(R, "write_submission", "student HTML")
    timed(R.Ledger, "record", "ledger + gradebook")
    timed(R.Gradebook, "record", "ledger + gradebook")
    timed(O, "write_all", "dashboard + exports (once)")
    timed(O, "load_results", "dashboard + exports (once)")

    # the meta-device case alone (first meta op in a fresh worker imports torch._dynamo)
    per_case: dict[str, list[float]] = collections.defaultdict(list)
    orig_result = E.case_result

    def case_result(a, inst, outcome, v, duration=0.0):
        per_case[inst.case.id].append(duration)
        return orig_result(a, inst, outcome, v, duration)
    E.case_result = case_result

    a = load_assignment("masked-attention")
    paths = submissions(batch, limit)
    cfg = B.BatchConfig(assignment=a, paths=paths, out_dir=out_dir, jobs=1, force=True, device="cpu")
    per_sub = []
    t0 = time.perf_counter()
    res = B.run_batch(cfg, lambda e: per_sub.append(e.seconds) if e.kind == "graded" else None)
    wall = time.perf_counter() - t0
    n = max(1, res.graded)
    top_cases = sorted(((statistics.median(v), k) for k, v in per_case.items()), reverse=True)[:3]
    return {"n": res.graded, "wall_s": wall, "isolation": res.isolation,
            "split_total_s": dict(T), "split_per_sub_ms": {k: 1000 * v / n for k, v in T.items()},
            "calls": dict(N), "per_sub_s": per_sub, "median_s": statistics.median(per_sub) if per_sub else None,
            "slowest_cases_median_s": [[k, v] for v, k in top_cases]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["floor", "profile"])
    ap.add_argument("batch", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    if args.mode == "floor":
        r = floor(args.batch, args.limit)
    else:
        r = profile(args.batch, args.limit, args.out.with_suffix(".grade"))
    args.out.write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
