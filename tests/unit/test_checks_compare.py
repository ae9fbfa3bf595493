"""grader/checks/compare.py: a student's tensor against the reference, as the verdict a student reads."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.checks.compare import Expected, check_structure, check_values, compare, not_a_tensor, type_name


def _expected(values, dtype=torch.float32, naive=None) -> Expected:
    return Expected(oracle=torch.tensor(values, dtype=torch.float64), naive=naive, dtype=dtype)


def test_the_right_tensor_passes():
    exp = _expected([[1.0, 2.0], [3.0, 4.0]])
    assert check_values(exp.oracle.float(), exp, what="out", concept="c", message="m").passed


def test_a_wrong_shape_is_the_cases_concept_and_names_both_shapes():
    v = check_structure(torch.zeros(2, 3), (3, 2), torch.float32, what="attention(q, k, v)", shape_concept="shapes")
    assert not v.passed and v.concept == "shapes"
    assert str(v.message) == "attention(q, k, v) has shape (2, 3), expected (3, 2)."
    assert v.evidence.expected_shape == [3, 2] and v.evidence.actual_shape == [2, 3]


def test_a_wrong_dtype_is_output_dtype():
    v = check_structure(torch.zeros(2, dtype=torch.float64), (2,), torch.float32, what="out", shape_concept="s")
    assert v.concept == "output-dtype" and str(v.message) == "out is torch.float64, expected torch.float32."


def test_not_a_tensor_is_a_signature_failure_naming_the_type():
    v = check_values([1.0, 2.0], _expected([1.0, 2.0]), what="out", concept="c", message="m")
    assert v.concept == "signature" and "returned list" in str(v.message)
    assert type_name(torch.zeros(1)) == "torch.Tensor" and type_name(3) == "int"
    assert "returned numpy.ndarray" in str(not_a_tensor(type("ndarray", (), {"type_name": "numpy.ndarray"})(), "out").message)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 5), st.floats(1e-3, 10.0))
def test_one_element_off_fails_with_the_cases_concept_and_its_index(i, off):
    exp = _expected([0.5] * 6)
    actual = exp.oracle.float().clone()
    actual[i] += off
    v = check_values(actual, exp, what="out", concept="softmax-axis", message="Check the axis.")
    assert not v.passed and v.concept == "softmax-axis" and str(v.message) == "Check the axis."
    assert v.evidence.first_bad_index == [i]
    assert v.evidence.max_abs_error > v.evidence.allowed_error


def test_nan_has_its_own_concept_and_where_it_is():
    exp = _expected([0.0, 0.0, 0.0])
    actual = torch.tensor([0.0, float("nan"), 0.0])
    v = check_values(actual, exp, what="out", concept="c", message="Fix it.", nan_concept="fully-masked-rows")
    assert v.concept == "fully-masked-rows" and str(v.message) == "out contains NaN. Fix it."
    assert v.evidence.nan_locations == [[1]]


def test_rows_outside_where_may_hold_anything_even_nan():
    exp = _expected([[1.0, 1.0], [0.0, 0.0]])
    actual = torch.tensor([[1.0, 1.0], [float("nan"), 7.0]])
    where = torch.tensor([[True], [False]])
    assert check_values(actual, exp, what="out", concept="c", message="m", where=where).passed


def test_half_precision_uses_the_flash_rule_when_a_naive_result_exists():
    exp = _expected([0.0, 0.0], dtype=torch.float16, naive=torch.tensor([0.0, 0.1], dtype=torch.float16))
    actual = torch.tensor([0.15, 0.0], dtype=torch.float16)  # worse than fp16's fixed tolerance, within 2x naive
    assert compare(actual, exp).ok
    assert not compare(actual, Expected(exp.oracle, None, torch.float16)).ok  # fixed rule without naive


def test_farthest_of_keeps_per_element_the_result_farthest_from_the_oracle():
    from grader.checks.compare import farthest_of

    oracle = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    a = torch.tensor([0.1, 1.0, 2.5], dtype=torch.float16)
    b = torch.tensor([-0.2, 1.25, 2.0], dtype=torch.float16)
    worst = farthest_of(oracle, [a, b])
    assert torch.equal(worst, torch.tensor([-0.2, 1.25, 2.5], dtype=torch.float16))
    for sel in ([True, False, False], [False, True, True]):  # over any selection: the larger own error
        m = torch.tensor(sel)
        err = lambda t, m=m: float((t.double() - oracle)[m].abs().max())  # noqa: E731
        assert err(worst) == max(err(a), err(b))


def test_the_half_precision_allowance_is_computed_once_per_selection_and_never_reused_for_another():
    """compare keeps the reference's part of the flash allowance on the Expected, per selection:
    the same verdict as computing it each time, and a selection with other cells gets its own."""
    from grader.checks.tolerance import compare_flash

    g = torch.Generator().manual_seed(3)
    oracle = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    naive = (oracle + 0.01 * torch.randn(2, 6, 4, generator=g, dtype=torch.float64)).half()
    naive[1, 5] += 1.0  # a row whose naive error is large: selecting it widens the allowance
    exp = Expected(oracle, naive, torch.float16)
    rows = torch.ones(2, 6, 1, dtype=torch.bool)
    rows[1, 5] = False
    student = oracle.half() + 0.3
    for where in (rows.expand(2, 6, 4), rows.expand(2, 6, 4), torch.ones(2, 6, 1, dtype=torch.bool).expand(2, 6, 4),
                  None, rows.expand(2, 6, 4)):
        cached = compare(student, exp, where=where)
        fresh = compare_flash(student, oracle, naive, where=where)
        assert (cached.ok, cached.allowed_error, cached.reason) == (fresh.ok, fresh.allowed_error, fresh.reason)
    assert not compare(student, exp, where=rows.expand(2, 6, 4)).ok
    assert compare(student, exp, where=None).ok  # the selected large row's naive error allows 0.3
