"""A class with workers that reach for each other (tests/hostile_workers.py) mixed among ordinary
students, through the real CLI with two slots: a giver leaving its code in the host's devpts while
a taker with no attention code looks for it, a page-cache prober, meta results. Every submission
is graded; the taker gets nothing; the others lose nothing but what their own code earns."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

import hostile_workers
from grader.cli.app import main

pytestmark = pytest.mark.slow  # full tier: a class batch through the CLI

BUGGY = hostile_workers.ROOT / "submissions" / "masked-attention" / "buggy" / "no_scaling.py"


def test_a_class_with_colluding_workers_is_graded_and_the_taker_gets_nothing(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for make in hostile_workers.WRITERS:
        make(folder)
    for i in range(6):
        shutil.copy(hostile_workers.CORRECT if i % 2 else BUGGY, folder / f"student{i}.py")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["grade", str(folder), "-a", "masked-attention", "-o", str(out), "-j", "2"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "10 submission(s): 10 graded" in r.output and "NOT GRADED" not in r.output
    results = {p.stem: json.loads(p.read_text("utf-8")) for p in (out / "results").glob("*.json")}
    score = {sid: (res["score"]["earned"], res["score"]["possible"]) for sid, res in results.items()}
    assert score["devpts_taker"][0] == 0  # no code came through: every entry point is missing
    for full in ("devpts_giver", "page_cache_prober"):
        assert score[full][0] == score[full][1], full
    meta = results["meta_results"]
    assert meta["load"]["ok"] and score["meta_results"][0] < score["meta_results"][1] / 2
