"""A class of 30 with every attack on the grader's own reading mixed in (tests/hostile_inputs.py),
and workers that try to pass code to each other (tests/hostile_workers.py),
through the real CLI: the batch finishes with 30 results, each attack costs only its own student,
a student's file names decide nothing about the layout, and `grader ci` follows no committed link."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

import hostile_inputs
import hostile_workers
from grader.cli.app import main
from grader.submission.ids import name_hash

pytestmark = pytest.mark.slow  # full tier: a class of 30 graded through the CLI, and a grader ci run


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("intake")
    # the grader's own reading attacked, and workers that try to reach each other (devpts, page cache)
    expected = hostile_inputs.write_class(base / "class", size=30, extra=list(hostile_workers.WRITERS))
    out = base / "out"
    result = CliRunner().invoke(main, ["grade", str(base / "class"), "-a", "masked-attention", "-o", str(out),
                                       "-j", "2"], catch_exceptions=False)
    results = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in (out / "results").glob("*.json")}
    return base, result, results, expected


def test_the_batch_finishes_with_thirty_results(batch):
    _, result, results, _ = batch
    assert result.exit_code == 0, result.output
    assert "30 submission(s): 30 graded" in result.output
    assert len(results) == 30


def test_each_attack_costs_only_its_own_student(batch):
    _, _, results, expected = batch
    for sid, expect in expected.items():
        r = results[sid]
        if expect.graded:
            assert r["load"]["ok"] and r["score"]["earned"] == r["score"]["possible"], sid
        else:
            assert not r["load"]["ok"] and expect.says in r["load"]["message"], sid
            assert {c["concept"] for c in r["cases"]} == {"load-error"}
    ordinary = [r for sid, r in results.items() if sid.startswith("student")]
    extra = len(hostile_workers.WRITERS)
    assert len(ordinary) == 30 - len(expected) - 2 - extra and all(r["load"]["ok"] for r in ordinary)


def test_workers_reaching_for_each_other_get_nothing_across(batch):
    _, _, results, _ = batch
    score = {sid: (r["score"]["earned"], r["score"]["possible"]) for sid, r in results.items()}
    assert score["devpts_taker"][0] == 0  # no implementation came through the host's terminals
    for full in ("devpts_giver", "page_cache_prober"):
        assert score[full][0] == score[full][1], full
    assert results["meta_results"]["load"]["ok"] and score["meta_results"][0] < score["meta_results"][1] / 2


def test_a_file_named_like_the_main_module_is_one_student_and_expected_toml_is_ignored(batch):
    base, result, results, _ = batch
    assert results["attention"]["submission"]["filename"] == "attention.py"
    assert "outside" not in results and "passwd" not in results
    assert not (base / "outside.py").exists()


def test_two_files_of_one_lms_id_are_both_graded_with_a_warning(batch):
    _, result, results, _ = batch
    first, second = "doe_jane_12345_attention.py", "doe_jane_12345_attention_v2.py"
    mine = {f"doe_jane_12345-{name_hash(first)}", f"doe_jane_12345-{name_hash(second)}"}
    assert mine <= set(results)
    assert "Warning: " in result.output and first in result.output and second in result.output


def test_newest_grades_only_the_latest_of_one_student(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    older, newer = hostile_inputs.same_lms_id_twice(folder)
    older.touch()
    import os

    os.utime(older, (1_000_000_000, 1_000_000_000))
    result = CliRunner().invoke(main, ["grade", str(folder), "-a", "masked-attention", "-o", str(tmp_path / "out"),
                                       "--newest"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [p.stem for p in (tmp_path / "out" / "results").glob("*.json")] == ["doe_jane_12345"]
    assert f"grading only the newest, {newer}" in " ".join(result.output.split())


def test_grader_ci_does_not_follow_a_link_committed_in_the_pull_request(tmp_path, monkeypatch):
    runner_secret = tmp_path / "runner" / "solution.py"
    runner_secret.parent.mkdir()
    shutil.copy(hostile_inputs.CORRECT, runner_secret)  # a file of the runner that would score 100 %
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "attention.py").symlink_to(runner_secret)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["ci", "attention.py", "-a", "masked-attention", "--junit",
                                       str(tmp_path / "junit.xml")], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "scored 0/" in result.output and "is a symbolic link; commit the file itself" in result.output
