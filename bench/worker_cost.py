"""Per-submission cost of a worker: ``python bench/worker_cost.py [runs]``.

Prints medians of: zygote fork + jail + load + one trivial call; the same with a fresh
``python -m grader.sandbox.child.supervisor`` process; and a cold ``python -c "import torch"``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _per_worker(sb, sub, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with sb.open(sub) as w:
            w.call("f", 1)
        times.append(time.perf_counter() - t0)
    return times


def main(runs: int = 10) -> None:
    from grader.sandbox import Sandbox
    from grader.submission.load import load_submission

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "trivial.py"
        p.write_text("def f(x):\n    return x + 1\n")
        sub = load_submission(p)
        rows = []
        t0 = time.perf_counter()
        with Sandbox() as sb:
            start = time.perf_counter() - t0
            rows.append((f"zygote fork, {sb.isolation}", _per_worker(sb, sub, runs)))
        rows.append(("zygote start-up (once per batch)", [start]))
        with Sandbox(use_zygote=False) as sb:
            rows.append((f"fresh process, {sb.isolation}", _per_worker(sb, sub, runs)))
        with Sandbox(use_zygote=False, isolation="process") as sb:
            rows.append((f"fresh process, {sb.isolation}", _per_worker(sb, sub, runs)))
    cold = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        cold.append(time.perf_counter() - t0)
    rows.append(('cold python -c "import torch"', cold))
    for name, times in rows:
        print(f"{statistics.median(times) * 1000:9.1f} ms  median of {len(times):2d}  {name}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
