"""Builds the fixture GradeReports stored beside this file (python tests/data/results/_make.py).

Realistic numbers: 5x5 causal attention weights computed the right way and with two classic
bugs (masked scores filled with 0; mask applied to the weights after the softmax).
The report tests load the JSON files and also check they still equal what this script builds.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from grader.results import (
    AssignmentInfo, CaseResult, CellError, Environment, Evidence, GradeReport, Heatmap, LoadInfo,
    Outcome, Points, SubmissionInfo, to_dict,
)

HERE = Path(__file__).parent
T = 5
KEEP = [[k <= q for k in range(T)] for q in range(T)]
CASES = [  # id, title, points, hidden
    ("causal_mask_square", "Causal mask, square", 1.0, False),
    ("masked_attention_causal", "Causal attention weights (5×5)", 2.0, False),
    ("padding_right[right]", "Padding on the right", 2.0, False),
    ("fully_masked_rows", "A query that may see nothing", 1.0, False),
    ("hidden_padding[mixed]", "Mixed padding", 2.0, True),
    ("fp16_fill", "Half precision fill value", 1.0, True),
]
ENV = Environment("0.1.0", "2.5.1", "3.11.9", "cpu", "bwrap+cgroup", ["float32", "float16"])
ASSIGNMENT = AssignmentInfo("masked-attention", "1.0", "Masked attention")


def _scores(head: int) -> list[list[float]]:
    f = math.sin if head == 0 else math.cos
    return [[round(1.5 * f(1.3 * q + 0.7 * k + head), 3) for k in range(T)] for q in range(T)]


def _softmax(row: list[float]) -> list[float]:
    m = max(row)
    e = [math.exp(x - m) if x != -math.inf else 0.0 for x in row]
    s = sum(e)
    return [x / s for x in e]


def _r(m: list[list[float]]) -> list[list[float]]:
    return [[round(v, 4) for v in row] for row in m]


def reference(head: int) -> list[list[float]]:
    s = _scores(head)
    return _r([_softmax([s[q][k] if KEEP[q][k] else -math.inf for k in range(T)]) for q in range(T)])


def zero_filled(head: int) -> list[list[float]]:
    s = _scores(head)
    return _r([_softmax([s[q][k] if KEEP[q][k] else 0.0 for k in range(T)]) for q in range(T)])


def masked_after_softmax(head: int) -> list[list[float]]:
    s = _scores(head)
    return _r([[w if KEEP[q][k] else 0.0 for k, w in enumerate(_softmax(s[q]))] for q in range(T)])


def _max_err(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def _first_bad(a, b):
    for q in range(T):
        for k in range(T):
            if abs(a[q][k] - b[q][k]) > 1e-5:
                return q, k
    return 0, 0


def _weights_case(actual_of, concept: str, message: str, notes: list[str]) -> CaseResult:
    exp0, act0 = reference(0), actual_of(0)
    q, k = _first_bad(act0, exp0)
    leaks = [[q_, k_] for q_ in range(T) for k_ in range(T) if not KEEP[q_][k_] and act0[q_][k_] > 1e-6]
    ev = Evidence(
        expected_shape=[1, 2, T, T], actual_shape=[1, 2, T, T], expected_dtype="float32", actual_dtype="float32",
        max_abs_error=round(max(_max_err(actual_of(h), reference(h)) for h in (0, 1)), 4), allowed_error=1e-5,
        first_bad_index=[0, 0, q, k], expected_value=exp0[q][k], actual_value=act0[q][k],
        leaking_cells=leaks or None, row_sums=[round(sum(r), 4) for r in act0],
        heatmaps=[Heatmap(f"batch 0, head {h}", reference(h), actual_of(h), KEEP) for h in (0, 1)],
        notes=notes,
    )
    return CaseResult("masked_attention_causal", "Causal attention weights (5×5)", Outcome.FAILED, Points(0, 2),
                      False, concept, message, ev, 0.02)


def _passed(cid: str) -> CaseResult:
    _, title, pts, hidden = next(c for c in CASES if c[0] == cid)
    return CaseResult(cid, title, Outcome.PASSED, Points(pts, pts), hidden, None, "", Evidence(), 0.01)


def _report(sid: str, cases: list[CaseResult], *, load: LoadInfo | None = None, filename: str | None = None,
            graded_at: str = "2026-11-29T10:00:00Z") -> GradeReport:
    by_id = {c.id: c for c in cases}
    ordered = [by_id.get(cid) or _passed(cid) for cid, *_ in CASES]
    earned = sum(c.points.earned for c in ordered)
    possible = sum(c.points.possible for c in ordered)
    return GradeReport(SubmissionInfo(sid, (sid.encode().hex() * 64)[:64], filename or f"{sid}.py", "py"),
                       ASSIGNMENT, Points(earned, possible), ordered, load or LoadInfo(ok=True), ENV, graded_at)


HIDDEN_FAIL = CaseResult(
    "hidden_padding[mixed]", "Mixed padding", Outcome.FAILED, Points(0, 2), True, "padding-broadcast",
    "SECRET-MESSAGE: padded keys at positions 3 and 4 of batch 1 still get weight.",
    Evidence(expected_shape=[2, 1, 4, 4], actual_shape=[2, 1, 4, 4], max_abs_error=0.31, allowed_error=1e-5,
             first_bad_index=[1, 0, 0, 3], expected_value=0.0, actual_value=0.31, leaking_cells=[[0, 3]],
             heatmaps=[Heatmap("SECRET-HEATMAP batch 1", [[0.5, 0.5, 0.0, 0.0]] * 4, [[0.4, 0.29, 0.0, 0.31]] * 4,
                               [[True, True, False, False]] * 4)],
             notes=["SECRET-NOTE: the hidden input pads batch 1 on the left."]),
    0.03,
)


def build_all() -> dict[str, GradeReport]:
    zero = _weights_case(
        zero_filled, "mask-fill-value",
        "Your weights give attention to future keys: the masked scores were filled with 0, not −∞.",
        ["Every row still sums to 1, so a sum check alone would not catch this."])
    after = _weights_case(
        masked_after_softmax, "mask-after-softmax",
        "Your weights for the visible keys are too small: rows sum to less than 1.",
        ["The hidden cells are 0, but the softmax had already shared weight with them."])
    diag_expected = [[1.0 if k <= q else 0.0 for k in range(T)] for q in range(T)]
    diag_actual = [[1.0 if k < q else 0.0 for k in range(T)] for q in range(T)]
    diag = CaseResult(
        "causal_mask_square", "Causal mask, square", Outcome.FAILED, Points(0, 1), False, "causal-diagonal",
        "Your mask hides the diagonal: each token must be allowed to see itself.",
        Evidence(expected_shape=[T, T], actual_shape=[T, T], expected_dtype="bool", actual_dtype="bool",
                 first_bad_index=[0, 0], expected_value=1.0, actual_value=0.0,
                 heatmaps=[Heatmap("mask", diag_expected, diag_actual, None, "mask")]),
        0.01)
    noisy_out = ("step 1 <script>alert(1)</script>\n\x1b[31mRED WARNING\x1b[0m done\x07\n"
                 "progress 10%\rprogress 100%\n" + "x" * 9000)
    crash = CaseResult("fully_masked_rows", "A query that may see nothing", Outcome.ERROR, Points(0, 1), False,
                       "fully-masked-rows", "Your attention raised an error for a query that may see no key.",
                       Evidence(traceback='  File "attention.py", line 14, in attention\n    w = w / w.sum(-1)\n'
                                          'ZeroDivisionError: <b>float</b> division by zero'), 0.01)
    reports = {
        "ada_zero_fill": _report("ada_zero_fill", [zero, HIDDEN_FAIL],
                                 load=LoadInfo(ok=True, stdout="shapes ok: torch.Size([1, 2, 5, 5])\n")),
        "ben_after_softmax": _report("ben_after_softmax", [after, HIDDEN_FAIL], graded_at="2026-11-29T10:01:00Z"),
        "cy_noisy": _report(
            "cy_noisy", [diag, crash], filename="cy_noisy.ipynb", graded_at="2026-11-29T10:02:00Z",
            load=LoadInfo(ok=True, stdout=noisy_out, stderr="\x1b[1;33mUserWarning\x1b[0m: <img src=x onerror=alert(2)>",
                          cell_errors=[CellError(4, "NameError: name 'plt' is not defined",
                                                 'Cell In[4], line 2\n    plt.imshow(w)\nNameError: name \'plt\' is not defined')])),
        "dee_perfect": _report("dee_perfect", [], graded_at="2026-11-29T10:03:00Z"),
    }
    not_run = [CaseResult(cid, title, Outcome.ERROR, Points(0, pts), hidden, "load-error",
                          "Not run: the submission could not be loaded.", Evidence(), 0.0)
               for cid, title, pts, hidden in CASES]
    broken = _report("eve_syntax", not_run, graded_at="2026-11-29T10:04:00Z",
                     load=LoadInfo(ok=False, message='SyntaxError: invalid syntax (attention.py, line 12)\n'
                                                     '    def attention(q, k, v mask=None):\n'
                                                     '                          ^^^^'))
    reports["eve_syntax"] = replace(broken, score=Points(0, broken.score.possible))
    return reports


def dump(report: GradeReport) -> str:
    return json.dumps(to_dict(report), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


if __name__ == "__main__":
    for sid, rep in build_all().items():
        (HERE / f"{sid}.json").write_text(dump(rep), encoding="utf-8")
