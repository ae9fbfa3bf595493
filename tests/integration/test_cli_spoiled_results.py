"""Values no check may raise on, through the real CLI: every function and method of a correct
submission returning its results as meta tensors of the right shape (no values), in float64 or
int8, or on another device (tests/data/hostile/spoiled_results.py appended to it), for each
bundled assignment. Every submission is graded, each spoiled case fails as the student's with a
message, and nothing is blamed on the assignment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
TAIL = (ROOT / "tests" / "data" / "hostile" / "spoiled_results.py").read_text("utf-8")
SPOILS = ("meta", "float64", "int8", "device")
CORRECT = {"masked-attention": "sdpa.py", "mha-kv-cache": "sdpa.py",
           "masked-loss-and-sampling": "gather_and_multinomial.py"}


@pytest.mark.slow  # full tier: three batches through the CLI
@pytest.mark.parametrize("aid", sorted(CORRECT))
def test_spoiled_values_fail_the_students_cases_and_the_batch_goes_on(tmp_path, aid):
    subs = tmp_path / "class"
    subs.mkdir()
    correct = (ROOT / "submissions" / aid / "correct" / CORRECT[aid]).read_text("utf-8")
    for spoil in SPOILS:
        tail = TAIL.replace('SPOIL = "meta"', f'SPOIL = "{spoil}"')
        assert f'SPOIL = "{spoil}"' in tail
        (subs / f"{spoil}.py").write_text(correct + "\n\n" + tail, encoding="utf-8")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["grade", str(subs), "-a", aid, "-o", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "4 submission(s): 4 graded" in r.output
    assert "NOT GRADED" not in r.output and "fix the case" not in r.output
    for spoil in SPOILS:
        report = json.loads((out / "results" / f"{spoil}.json").read_text("utf-8"))
        failed = [c for c in report["cases"] if c["outcome"] != "passed"]
        assert len(failed) > len(report["cases"]) // 2, spoil
        assert all(c["message"] and c["concept"] for c in failed), spoil
        if spoil in ("meta", "device"):  # CPU-only here: "another device" is the meta device too
            assert any("on the meta device" in c["message"] for c in failed)
