"""A batch's workers share one budget, the pre-started ones counted: on this machine's cgroups
(root, v1 here; the v2 layout is tested on a fake cgroupfs in tests/unit/test_cgroups.py).

Two workers are alive at once (a slot's current worker and the one it started early) and each
stays within its own memory cap; together they pass the batch's budget, which their usage reaches
and never passes: the kernel's OOM killer ends one of them, reported as over its memory limit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main
from grader.sandbox import Budget, Limits, Sandbox, WorkerCrashed
from grader.submission.load import load_submission

MiB = 1 << 20
LIMITS = Limits(import_timeout_s=60, call_timeout_s=60, submission_timeout_s=120, memory_bytes=640 * MiB)
BUDGET = Budget(cpus=1.0, memory_bytes=768 * MiB)
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups are Linux's"),
              pytest.mark.slow]  # a sandbox of its own


@pytest.fixture(scope="module")
def sb():
    with Sandbox(LIMITS, budget=BUDGET) as box:
        if "cgroup" not in box.features:
            pytest.skip(f"{box.isolation}: no cgroup can be written here")
        yield box


def holder(sb, tmp_path):
    src = tmp_path / "holder.py"
    src.write_text("import torch\n\nkept = []\n\ndef hold(mib):\n"
                   "    kept.append(torch.ones(mib * 2**20 // 4))\n    return len(kept)\n")
    return sb.open(load_submission(src))


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


def test_every_worker_cgroup_lies_below_one_batch_cgroup_with_the_budget(sb, tmp_path):
    with holder(sb, tmp_path) as w:
        with open(f"/proc/{w.pid}/cgroup") as f:
            lines = f.read().splitlines()
    mine = {line.split(":")[1]: line.split(":")[2] for line in lines}
    batch = mine["memory"].split("/")[-2]  # the worker's own cgroup is the last part
    assert batch.startswith(f"grader-{os.getpid()}-batch") and mine["pids"].split("/")[-2] == batch
    memory_batch = "/sys/fs/cgroup/memory" + mine["memory"].rsplit("/", 1)[0]
    assert int(_read(memory_batch, "memory.limit_in_bytes")) == BUDGET.memory_bytes
    if "cpu" in ",".join(mine):
        cpu_key = next(k for k in mine if "cpu" in k.split(","))
        cpu_batch = "/sys/fs/cgroup/cpu" + mine[cpu_key].rsplit("/", 1)[0]
        assert (_read(cpu_batch, "cpu.cfs_quota_us"), _read(cpu_batch, "cpu.cfs_period_us")) == ("100000", "100000")
    assert str(sb.limits_note).endswith("all workers at once, pre-started ones included: 1 CPUs and 0.75 GiB")


def test_two_live_workers_within_their_own_caps_are_held_to_the_batch_budget(sb, tmp_path):
    ended = []
    with holder(sb, tmp_path) as first, holder(sb, tmp_path) as second:
        with open(f"/proc/{first.pid}/cgroup") as f:
            memory = next(line.split(":", 2)[2].strip() for line in f if ":memory:" in line)
        for w in (first, second):
            try:
                w.call("hold", 500)  # 500 MiB each: within 640, together past 768
            except WorkerCrashed as e:
                ended.append(e.kind)
        for w in (first, second):  # the one the kernel ended may be the first, seen only now
            try:
                w.call("hold", 1)
            except WorkerCrashed as e:
                ended.append(e.kind)
    assert "memory" in ended
    batch = "/sys/fs/cgroup/memory" + memory.rsplit("/", 1)[0]
    assert int(_read(batch, "memory.max_usage_in_bytes")) == BUDGET.memory_bytes  # the limit that held


# --- grader grade's flags -------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"


def grade(*args):
    return CliRunner().invoke(main, ["grade", *map(str, args)], catch_exceptions=False)


def test_a_batch_records_the_budget_its_workers_shared(tmp_path):
    cls = tmp_path / "class"
    cls.mkdir()
    for name in ("sdpa.py", "einsum.py"):
        shutil.copy(SAMPLES / "correct" / name, cls / name)
    out = tmp_path / "out"
    result = grade(cls, "-a", "masked-attention", "-o", out, "-j", "2", "--batch-cpus", "1.5", "--batch-memory", "5G")
    assert result.exit_code == 0, result.output
    limits = {json.loads(p.read_text())["environment"]["limits"] for p in (out / "results").glob("*.json")}
    assert len(limits) == 1
    assert limits.pop().endswith("all workers at once, pre-started ones included: 1.5 CPUs and 5 GiB")


def test_a_budget_below_one_workers_share_is_one_error_line(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = grade(tmp_path, "-a", "masked-attention", "-o", tmp_path / "out", "--batch-memory", "512M")
    assert result.exit_code == 2
    assert "Error: --batch-cpus" in result.output and "is less than one worker may use" in result.output
    assert not (tmp_path / "out" / "results").exists() or not list((tmp_path / "out" / "results").iterdir())


@pytest.mark.parametrize("args, words", [(["--batch-memory", "lots"], "is not a size"),
                                         (["--batch-cpus", "0"], "--batch-cpus"),
                                         (["--cluster", "local:2", "--batch-cpus", "2"], "with --cluster")])
def test_budget_flags_that_make_no_sense_are_usage_errors(tmp_path, args, words):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = grade(tmp_path, "-a", "masked-attention", *args)
    assert result.exit_code == 2 and words in result.output
