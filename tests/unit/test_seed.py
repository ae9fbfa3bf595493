"""The assignment's seed: the instructor's where spec.toml sets one, else 128 random bits kept beside
it; a kit's seed drawn at random, unrelated to either."""

from __future__ import annotations

import os
import re
import tomllib

import pytest

from grader.assignment.seed import SEED_FILE, assignment_seed, kit_seed
from grader.assignment.spec_file import read_spec
from grader.errors import AssignmentSpecError


def test_the_instructors_seed_is_used_as_written(tmp_path):
    assert assignment_seed(424242, tmp_path) == 424242
    assert not (tmp_path / SEED_FILE).exists()


def test_without_a_seed_128_random_bits_are_drawn_once_and_kept(tmp_path):
    first = assignment_seed(None, tmp_path)
    assert first.bit_length() > 100  # 128 random bits: below 2**100 with probability 2**-28
    assert (tmp_path / SEED_FILE).read_text() == f"{first}\n"
    assert os.stat(tmp_path / SEED_FILE).st_mode & 0o077 == 0  # the instructor's only
    assert assignment_seed(None, tmp_path) == first  # the same inputs on every run
    other = tmp_path / "other"
    other.mkdir()
    assert assignment_seed(None, other) != first


def test_a_folder_that_cannot_keep_a_seed_is_a_clear_error(tmp_path):
    gone = tmp_path / "gone"  # what a read-only folder gives too (root writes into those)
    with pytest.raises(AssignmentSpecError, match=r"sets no seed and .*seed.secret cannot be written .* add "
                                                  r"seed = \d+ \(a fresh random number\) to spec.toml"):
        assignment_seed(None, gone)


def test_a_bad_seed_is_a_clear_error(tmp_path):
    for bad in ('"12"', "-1", "true"):
        (tmp_path / "spec.toml").write_text(f"seed = {bad}\n")
        with pytest.raises(AssignmentSpecError, match=r"spec.toml: seed in the top table must be a non-negative "
                                                      rf"integer, got {re.escape(repr(tomllib.loads(f'x = {bad}')['x']))}"):
            read_spec(tmp_path)
    (tmp_path / SEED_FILE).write_text("not a number\n")
    with pytest.raises(AssignmentSpecError, match="expected the assignment's seed"):
        assignment_seed(None, tmp_path)


def test_kit_seeds_are_drawn_at_random():
    seeds = {kit_seed() for _ in range(50)}
    assert len(seeds) == 50 and all(0 <= s < 2**63 for s in seeds)


@pytest.mark.slow  # full tier: loads a copied assignment twice
def test_a_new_seed_secret_changes_the_assignments_fingerprint(tmp_path):
    """The ledger keys on the fingerprint: a redrawn seed (seed.secret deleted) draws other inputs,
    so nothing graded with the old one may be reused."""
    import shutil
    from pathlib import Path

    from grader.assignment.fingerprint import fingerprint
    from grader.assignment.spec import load_assignment

    src = Path(__file__).resolve().parents[2] / "assignments" / "masked-attention"
    folder = tmp_path / "masked-attention"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text("\n".join(line for line in spec.read_text().splitlines() if not line.startswith("seed =")) + "\n")
    first = load_assignment(folder)
    before = fingerprint(first)
    (folder / SEED_FILE).unlink()
    second = load_assignment(folder)
    assert second.seed != first.seed
    assert fingerprint(second).changed(before) == ("spec",)
