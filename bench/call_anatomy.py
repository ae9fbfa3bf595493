"""Where one student call's time goes, on both sides of the wire: ``python bench/call_anatomy.py [calls]``.

A masked-attention call is timed in a real jailed worker (the batch's kind of sandbox) for a few
input sizes and dtypes. The grader side is split by timers wrapped around the wire's encoder and
decoder in this process; the worker side by a bench submission that, when it is loaded, wraps the
worker's own frame reader, decoder, encoder, writer and per-call preparation in timers (the
worker's server is an ordinary module in the worker's own process) and times its own compute.
The same attention code run in this process gives the compute floor. Medians over ``calls`` calls
after a warm-up; each figure is wall time.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TIMED_SUBMISSION = '''
import math, sys, time, torch

TIMES = {}


def _timed(owner, name, label):
    f = getattr(owner, name)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            TIMES.setdefault(label, []).append(time.perf_counter() - t0)
    setattr(owner, name, timed)


_server = sys.modules["grader.sandbox.child.server"]
for _name, _label in (("read_frame", "worker: read the request (waits for it)"),
                      ("decode_frame", "worker: decode the request"),
                      ("encode_frame", "worker: encode the reply"),
                      ("write_all", "worker: write the reply")):
    _timed(_server, _name, _label)
_timed(_server.Server, "_prepare", "worker: seed and prepare")


def masked_attention(q, k, v, mask=None):
    t0 = time.perf_counter()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v
    TIMES.setdefault("worker: the attention itself", []).append(time.perf_counter() - t0)
    return out, weights


def times():
    out = {k: list(v) for k, v in TIMES.items()}
    TIMES.clear()
    return out
'''

SIZES = (("2x4x8x16 float32", (2, 4, 8, 16), "float32"),
         ("2x4x64x64 float32", (2, 4, 64, 64), "float32"),
         ("2x4x64x64 float16", (2, 4, 64, 64), "float16"))


def main(calls: int = 200) -> None:
    import torch

    from grader.sandbox import Sandbox
    from grader.sandbox.host import worker as worker_module
    from grader.submission.load import load_submission

    grader_times: dict[str, list[float]] = {}

    def timed(owner, name: str, label: str) -> None:
        f = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                grader_times.setdefault(label, []).append(time.perf_counter() - t0)
        setattr(owner, name, wrapper)

    timed(worker_module, "request_frame", "grader: encode the request")
    timed(worker_module, "decode_frame", "grader: decode the reply")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timed_attention.py"
        path.write_text(TIMED_SUBMISSION)
        submission = load_submission(path)
        namespace: dict = {}
        exec(compile(_floor_source(), "floor", "exec"), namespace)
        torch.set_num_threads(1)
        sandbox = Sandbox()
        print(f"isolation: {sandbox.isolation}; medians of {calls} calls (us)")
        try:
            for title, shape, dtype_name in SIZES:
                dtype = getattr(torch, dtype_name)
                gen = torch.Generator().manual_seed(0)
                q, k, v = (torch.randn(*shape, generator=gen).to(dtype) for _ in range(3))
                keep = torch.ones(shape[2], shape[2], dtype=torch.bool).tril()
                floor = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    with torch.no_grad():
                        namespace["masked_attention"](q, k, v, keep)
                    floor.append(time.perf_counter() - t0)
                with sandbox.open(submission) as worker:
                    if not worker.load.ok:
                        raise SystemExit(f"the bench submission did not load: {worker.load.message}")
                    for _ in range(20):
                        worker.call("masked_attention", q, k, v, mask=keep)
                    worker.call("times")
                    grader_times.clear()
                    whole = []
                    for _ in range(calls):
                        t0 = time.perf_counter()
                        worker.call("masked_attention", q, k, v, mask=keep)
                        whole.append(time.perf_counter() - t0)
                    worker_times = worker.call("times")
                rows = [("the call, as the grader sees it", whole)] + sorted(grader_times.items()) + sorted(
                    (k, v[:calls]) for k, v in worker_times.items())
                print(f"\n{title}")
                for label, values in rows:
                    print(f"  {label:44} {1e6 * statistics.median(values):8.0f}")
                print(f"  {'the same attention in this process':44} {1e6 * statistics.median(floor):8.0f}")
        finally:
            sandbox.close()


def _floor_source() -> str:
    """The bench submission's attention without its timers and patches."""
    body = TIMED_SUBMISSION.split("def masked_attention")[1].split("def times")[0]
    body = "\n".join(line for line in body.splitlines() if "TIMES" not in line and "t0 =" not in line)
    return "import math, torch\n\ndef masked_attention" + body


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
