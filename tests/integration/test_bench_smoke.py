"""The speed benchmark's own passes still run against the grader they measure (bench/ is not
installed, so nothing else would notice when an engine change breaks them): a tiny batch through
the generator, the in-process floor and the -j 1 profile."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # full tier: the benchmark's own smoke run

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*args: str) -> None:
    subprocess.run([sys.executable, *args], check=True, timeout=300, capture_output=True)


def test_generate_floor_and_profile_run_on_a_small_batch(tmp_path):
    batch = tmp_path / "batch"
    _run(str(BENCH / "generate.py"), str(batch), "-n", "4", "--seed", "3")
    files = sorted(p.suffix for p in batch.iterdir() if p.suffix in (".py", ".ipynb"))
    assert len(files) == 4

    _run(str(BENCH / "inproc.py"), "floor", str(batch), str(tmp_path / "floor.json"))
    floor = json.loads((tmp_path / "floor.json").read_text())
    assert floor["median_s"] > 0 and floor["peer_checks_median_s"] > 0

    _run(str(BENCH / "inproc.py"), "profile", str(batch), str(tmp_path / "profile.json"), "--limit", "2")
    prof = json.loads((tmp_path / "profile.json").read_text())
    assert prof["n"] == 2
    assert prof["split_per_sub_ms"]["worker start (fork + jail)"] > 0
    assert prof["split_per_sub_ms"]["student calls (round trip)"] > 0


def test_the_start_breakdown_fills_every_phase_of_grade_and_check(tmp_path):
    subprocess.run([sys.executable, str(BENCH / "start.py"), "-n", "2", "--rounds", "1",
                    "--only", "grade 2 / warm", "--only", "check / cold"], check=True, timeout=900, capture_output=True)
    written = sorted((BENCH / "out").glob("start-*.json"), key=lambda p: p.stat().st_mtime)[-1]
    res = json.loads(written.read_text())
    grade = res["runs"]["grade 2 / warm"][0]["at"]
    check = res["runs"]["check / cold"][0]["at"]
    for phase in ("cli", "zygote.torch", "zygote.warm", "setups.end", "selftest.end", "reference.end",
                  "result.first", "outputs.end", "exit"):
        assert phase in grade, phase
    assert res["runs"]["grade 2 / warm"][0]["info"]["cache"] == "hit"
    assert res["runs"]["check / cold"][0]["info"]["cache"] == "miss"
    assert check["grade.end"] < check["report.written"] < check["exit"]
    assert "| reference at 100 % in the jail |" in res["markdown"]
