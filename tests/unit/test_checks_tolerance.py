"""grader/checks/tolerance.py: the comparison rules a verdict rests on, on hand-made tensors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.checks.tolerance import compare_flash, compare_tensors, tolerance_for, unravel_index

_finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def _pair(draw):
    n = draw(st.integers(1, 10))
    e = draw(st.lists(_finite, min_size=n, max_size=n))
    a = draw(st.lists(_finite, min_size=n, max_size=n))
    return torch.tensor(a, dtype=torch.float64), torch.tensor(e, dtype=torch.float64)


@settings(max_examples=200, deadline=None)
@given(_pair(), st.sampled_from([(0.0, 0.0), (1e-5, 1e-5), (0.5, 0.1), (10.0, 0.0)]))
def test_a_comparison_passes_exactly_when_every_element_is_within_atol_plus_rtol_times_expected(pair, tol):
    a, e = pair
    atol, rtol = tol
    want = all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a.tolist(), e.tolist()))
    c = compare_tensors(a, e, atol=atol, rtol=rtol)
    assert c.ok == want
    assert c.max_abs_error == pytest.approx(float((a - e).abs().max()))
    if not want:
        worst = max(range(len(e)), key=lambda i: abs(a[i] - e[i]) if abs(a[i] - e[i]) > atol + rtol * abs(e[i])
                    else -1.0)
        assert c.first_bad_index == (worst,)
        assert c.expected_value == float(e[worst]) and c.actual_value == float(a[worst])
        assert str(c.reason).startswith("error ") and f"at ({worst},)" in str(c.reason)


def test_elements_outside_where_are_not_compared():
    e = torch.zeros(2, 3, dtype=torch.float64)
    a = e.clone()
    a[1, 2] = 5.0
    assert not compare_tensors(a, e, atol=0, rtol=0).ok
    where = torch.tensor([[True], [False]])  # broadcast over the columns: row 1 is not compared
    c = compare_tensors(a, e, atol=0, rtol=0, where=where)
    assert c.ok and c.max_abs_error == 0.0


def test_nan_fails_even_with_infinite_tolerance_and_says_where():
    e = torch.zeros(4, dtype=torch.float64)
    a = e.clone()
    a[2] = float("nan")
    c = compare_tensors(a, e, atol=math.inf, rtol=0)
    assert not c.ok and c.first_bad_index == (2,) and str(c.reason) == "NaN at (2,)"


def test_an_infinity_the_reference_shares_is_no_error():
    e = torch.tensor([float("-inf"), 1.0], dtype=torch.float64)
    assert compare_tensors(e.clone(), e, atol=0, rtol=0).ok
    c = compare_tensors(torch.tensor([float("inf"), 1.0], dtype=torch.float64), e, atol=0, rtol=0)
    assert not c.ok and str(c.reason) == "inf at (0,)"


@pytest.mark.parametrize("actual, reason", [
    (torch.zeros(2, 3), "shape (2, 3) != (3, 2)"),
    (torch.zeros(3, 2, dtype=torch.float16), "dtype float16 != float32"),
    ([[0.0, 0.0]] * 3, "actual is a list, not a plain torch.Tensor"),
])
def test_what_cannot_pass_is_refused_with_the_reason(actual, reason):
    c = compare_tensors(actual, torch.zeros(3, 2), atol=1.0, rtol=1.0, dtype=torch.float32)
    assert not c.ok and str(c.reason) == reason and c.first_bad_index is None


def test_a_tensor_subclass_is_refused_whatever_its_values():
    class Sneaky(torch.Tensor):
        pass

    a = torch.zeros(2).as_subclass(Sneaky)
    c = compare_tensors(a, torch.zeros(2), atol=1.0, rtol=1.0)
    assert not c.ok and "Sneaky" in str(c.reason) and "not a plain torch.Tensor" in str(c.reason)


@settings(max_examples=100, deadline=None)
@given(_pair(), st.booleans())
def test_the_quick_path_and_the_full_path_give_one_verdict(pair, loose):
    a, e = pair
    atol, rtol = (1e3, 1.0) if loose else (1e-5, 1e-5)
    quick = compare_tensors(a, e, atol=atol, rtol=rtol)
    full = compare_tensors(a, e, atol=atol, rtol=rtol, quick=False)
    assert (quick.ok, quick.first_bad_index, str(quick.reason)) == (full.ok, full.first_bad_index, str(full.reason))
    assert quick.max_abs_error == full.max_abs_error


def test_flash_rule_allows_factor_times_the_naive_error_plus_one_rounding_step_plus_the_absolute_term():
    oracle = torch.tensor([0.0, 0.0, 0.0, 0.5], dtype=torch.float64)
    naive = torch.tensor([0.0, 0.01, 0.0, 0.5], dtype=torch.float16)  # naive error 0.01 (in fp16)
    allowed = 2 * float(naive[1]) + torch.finfo(torch.float16).eps * 0.5 + 1e-5
    within = torch.tensor([0.0, 0.0, 0.015, 0.5], dtype=torch.float16)
    assert float(within[2]) <= allowed
    c = compare_flash(within, oracle, naive)
    assert c.ok and c.allowed_error == pytest.approx(allowed)
    beyond = torch.tensor([0.0, 0.0, 0.03, 0.5], dtype=torch.float16)
    c = compare_flash(beyond, oracle, naive)
    assert not c.ok and c.first_bad_index == (2,) and "2 x naive error + 0.000488 rounding + 1e-05" in str(c.reason)  # eps(fp16) x 0.5


def test_flash_rule_wants_the_naive_dtype():
    c = compare_flash(torch.zeros(2), torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float16))
    assert not c.ok and str(c.reason) == "dtype float32 != float16"


def test_tolerances_per_dtype():
    assert tolerance_for(torch.float32) == (1e-5, 1e-5)
    assert tolerance_for(torch.bfloat16) == (5e-2, 5e-2)
    with pytest.raises(ValueError, match="no tolerance for dtype torch.int64"):
        tolerance_for(torch.int64)


@pytest.mark.parametrize("flat, shape, want", [(0, (2, 3), (0, 0)), (5, (2, 3), (1, 2)), (7, (2, 2, 2), (1, 1, 1)),
                                               (0, (), ())])
def test_unravel_index(flat, shape, want):
    assert unravel_index(flat, torch.Size(shape)) == want
