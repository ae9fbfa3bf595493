"""The setup cache through the real commands: `grader grade` and `grader check` read back what an
earlier run computed, give every sample exactly the results of a run without the cache, and a
damaged cache file costs a recomputation, never a wrong grade. GRADER_TIMINGS says which it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs the real command several times

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "submissions" / "masked-attention"


def _run(*args: str | Path, cache: Path | None, marks: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_NO_CACHE", "GRADER_CACHE_DIR")}
    env["GRADER_TIMINGS"] = str(marks)
    flags = ["--no-cache"] if cache is None else ["--cache-dir", str(cache)]
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args), *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _how(marks: Path) -> list[str]:
    """The cache outcome each run recorded (one per run, in order)."""
    return [m["cache"] for m in map(json.loads, marks.read_text().splitlines()) if m["phase"] == "setups.end"]


def _results(out: Path) -> dict[str, dict]:
    found = {}
    for p in sorted((out / "results").glob("*.json")):
        d = json.loads(p.read_text())
        d.pop("graded_at")
        for c in d["cases"]:
            c.pop("duration_s")
        found[p.stem] = d
    return found


def test_grade_reads_the_setups_back_and_every_sample_gets_the_same_results(tmp_path):
    marks, cache = tmp_path / "marks.jsonl", tmp_path / "cache"
    batch = [SAMPLES / "correct", SAMPLES / "buggy"]
    runs = {}
    for name, where in (("plain", None), ("cold", cache), ("warm", cache)):
        p = _run("grade", *batch, "-a", "masked-attention", "-o", tmp_path / name, "--force", cache=where, marks=marks)
        assert p.returncode == 0, p.stderr[-2000:]
        runs[name] = _results(tmp_path / name)
    assert _how(marks) == ["off", "miss", "hit"]
    assert [p.name.split("-")[0] for p in cache.iterdir()] == ["masked"]  # masked-attention-<key>.safetensors
    assert len(runs["plain"]) == len(list(SAMPLES.glob("*/*.py"))) + len(list(SAMPLES.glob("*/*.ipynb")))
    assert runs["cold"] == runs["plain"]
    assert runs["warm"] == runs["plain"]


def test_check_reads_the_setups_back_and_a_damaged_file_is_computed_again(tmp_path):
    marks, cache = tmp_path / "marks.jsonl", tmp_path / "cache"
    sub = SAMPLES / "buggy" / "no_scaling.py"
    outputs = []
    for _ in range(2):
        p = _run("check", sub, "-a", "masked-attention", "-o", tmp_path / "report", cache=cache, marks=marks)
        assert p.returncode == 1, p.stderr[-2000:]  # the public cases find the missing scaling
        outputs.append(p.stdout)
    (stored,) = cache.iterdir()
    stored.write_bytes(stored.read_bytes()[:-100])  # truncated
    p = _run("check", sub, "-a", "masked-attention", "-o", tmp_path / "report", cache=cache, marks=marks)
    outputs.append(p.stdout)
    p = _run("check", sub, "-a", "masked-attention", "-o", tmp_path / "report", cache=None, marks=marks)
    outputs.append(p.stdout)
    assert _how(marks) == ["miss", "hit", "miss", "off"]
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]
    assert "scal" in outputs[0]


def test_the_commands_say_where_the_cache_is_and_how_to_turn_it_off():
    p = subprocess.run([sys.executable, "-m", "grader", "grade", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert "--no-cache" in p.stdout and "GRADER_CACHE_DIR" in p.stdout and "GRADER_NO_CACHE" in p.stdout
