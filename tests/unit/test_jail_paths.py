"""The pure parts of the jail: what a worker may read once the grader's own files are taken out,
and how large a reply may be."""

from __future__ import annotations

import os

import torch
from hypothesis import given
from hypothesis import strategies as st

from grader.cases import Setup
from grader.grading.setups import REPLY_FLOOR, reply_cap
from grader.sandbox.jail.paths import allow_except

TREE = {
    "/": ["usr", "opt", "work"],
    "/usr": ["lib", "bin"],
    "/usr/lib": ["python3"],
    "/usr/lib/python3": ["site-packages"],
    "/usr/lib/python3/site-packages": ["torch", "numpy", "grader", "reference", "attention_grader-0.1.dist-info"],
    "/opt": ["venv"],
    "/opt/venv": ["lib"],
    "/opt/venv/lib": [],
    "/work": ["course"],
    "/work/course": ["grader", "reference", "assignments", "submissions", ".venv"],
    "/work/course/.venv": ["lib"],
}


def listdir(p: str) -> list[str]:
    return TREE[p]


def test_an_allowed_folder_holding_the_grader_is_replaced_by_its_other_entries():
    got = allow_except(["/usr", "/opt/venv"], ["/usr/lib/python3/site-packages/grader",
                                                    "/usr/lib/python3/site-packages/reference"], listdir)
    assert got == ["/opt/venv", "/usr/bin", "/usr/lib/python3/site-packages/attention_grader-0.1.dist-info",
                   "/usr/lib/python3/site-packages/numpy", "/usr/lib/python3/site-packages/torch"]


def test_a_denied_folder_and_everything_below_it_is_dropped():
    assert allow_except(["/work/course/.venv", "/work/course", "/usr/bin"], ["/work/course"], listdir) == ["/usr/bin"]


paths = st.sampled_from(sorted({os.path.join(k, v) for k, vs in TREE.items() for v in vs} | set(TREE)))


@given(st.lists(paths, max_size=5), st.lists(paths, min_size=1, max_size=3))
def test_nothing_denied_is_ever_allowed_and_nothing_else_is_lost(allowed, denied):
    got = allow_except(allowed, denied, lambda p: TREE.get(p, []))

    def under(p, d):
        return p == d or p.startswith(d.rstrip("/") + "/")

    for p in got:
        assert not any(under(p, d) or under(d, p) for d in denied)  # no denied path at, below or above
        assert any(under(p, a) for a in allowed)  # only what was allowed
    for a in allowed:  # an allowed path unrelated to every denied one is kept whole
        if not any(under(a, d) or under(d, a) for d in denied):
            assert a in got


def test_reply_cap_is_eight_times_the_case_and_never_below_the_floor():
    small = Setup(inputs={"n": 3}, expected=torch.zeros(2, 2))
    assert reply_cap(small) == REPLY_FLOOR
    big = Setup(inputs={"q": torch.zeros(1 << 20), "pair": (torch.zeros(1 << 20), 1)},
                expected=torch.zeros(1 << 20, dtype=torch.float64), extra={"w": [torch.zeros(1 << 20)]})
    assert reply_cap(big) == 8 * (4 + 4 + 8 + 4) * (1 << 20)
