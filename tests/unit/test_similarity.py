"""Code fingerprints and pair ranking (grader.similarity): pure, on planted texts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from hypothesis import given, settings, strategies as st

from grader.results import report_from_dict
from grader.similarity.fingerprint import MAX_TOKENS, fingerprints, normalised_tokens, winnow
from grader.similarity.pairs import Document, ranked_pairs

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "data" / "similarity"
STARTER = (ROOT / "assignments" / "masked-attention" / "starter" / "attention.py").read_text()


def _doc(sid: str, text: str) -> Document:
    return Document(sid, [text], ["attention.py"], fingerprints(normalised_tokens([text])))


def test_renaming_and_recommenting_change_no_fingerprint():
    alice, bob = (PLANTED / "alice.py").read_text(), (PLANTED / "bob.py").read_text()
    assert alice != bob
    assert [t.text for t in normalised_tokens([alice])] == [t.text for t in normalised_tokens([bob])]


def test_winnowing_keeps_each_windows_rightmost_minimum():
    assert winnow([5, 3, 3, 7, 1, 9, 9], 3) == [2, 4]
    assert winnow([], 3) == [] and winnow([4, 2], 3) == [1]


def test_copied_pair_ranks_first_and_starter_code_is_not_counted():
    docs = [_doc(n, (PLANTED / f"{n}.py").read_text()) for n in ("alice", "bob", "erin", "frank", "ivan", "judy")]
    starter = _doc("starter", STARTER).prints.hashes
    pairs = ranked_pairs(docs, starter, [])
    assert (pairs[0].a, pairs[0].b) == ("alice", "bob") and pairs[0].code == 1.0
    assert all({p.a, p.b} != {"ivan", "judy"} for p in pairs)  # two untouched starters share only the starter
    naive = ranked_pairs(docs, set(), [])
    assert any({p.a, p.b} == {"ivan", "judy"} for p in naive)  # ...which would be listed without subtracting it


def test_identical_wrong_outputs_pair_students_and_common_ones_count_less():
    base = report_from_dict(json.loads((ROOT / "tests" / "data" / "results" / "ada_zero_fill.json").read_text()))

    def student(sid: str, digest: str):
        cases = [dataclasses.replace(c, evidence=dataclasses.replace(c.evidence, output_digest=digest))
                 if c.outcome.value == "failed" else c for c in base.cases]
        return dataclasses.replace(base, submission=dataclasses.replace(base.submission, id=sid), cases=cases)

    reports = [student("p", "aa"), student("q", "aa"), *(student(f"m{i}", "bb") for i in range(6))]
    pairs = ranked_pairs([], set(), reports)
    assert (pairs[0].a, pairs[0].b) == ("p", "q") and pairs[0].shared_outputs[0].given_by == 2
    # the same wrong output from six students is a common mistake: it counts 1/5 per case, so those
    # pairs rank below the pair that alone gave theirs (or are not listed at all)
    assert all(p.output_weight < pairs[0].output_weight for p in pairs if p.a.startswith("m"))
    failed = sum(c.outcome.value == "failed" for c in base.cases)
    assert pairs[0].output_weight == failed


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_any_text_tokenizes_without_raising(text):
    fingerprints(normalised_tokens([text, "def f(:\n  '''", "\x00\x1b[2K" + text]))


def test_hostile_sizes_are_capped():
    tokens = normalised_tokens(["x = 1\n" * 200_000])
    assert len(tokens) <= MAX_TOKENS
    assert normalised_tokens(['"""never closed\n' + "a" * 100_000]) == []
