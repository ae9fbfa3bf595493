import dataclasses

import pytest
import torch
import torch.nn.functional as F

from reference import (
    Comparison,
    causal_mask,
    combine_masks,
    compare_flash,
    compare_tensors,
    masked_attention,
    oracle_attention,
    padding_mask,
    tolerance_for,
)


def test_tolerance_for():
    assert tolerance_for(torch.float32) == (1e-5, 1e-5)
    assert tolerance_for(torch.float16) == (1e-2, 1e-2)
    assert tolerance_for(torch.bfloat16) == (5e-2, 5e-2)
    assert tolerance_for(torch.float64) == (1e-10, 1e-10)
    with pytest.raises(ValueError, match=r"no tolerance for dtype torch.int32"):
        tolerance_for(torch.int32)


def test_comparison_is_frozen():
    c = compare_tensors(torch.zeros(2), torch.zeros(2), atol=0, rtol=0)
    assert c == Comparison(True, 0.0, 0.0, None, None, None, "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.ok = False


def test_compare_tensors_fixed_tolerance_reports_worst_failure():
    expected = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    actual = expected.clone()
    actual[0, 1] += 0.01
    actual[1, 2] += 0.31
    c = compare_tensors(actual, expected, atol=0.02, rtol=0.0)
    assert not c.ok
    assert c.first_bad_index == (1, 2)
    assert c.expected_value == 6.0 and c.actual_value == pytest.approx(6.31, abs=1e-6)
    assert c.max_abs_error == pytest.approx(0.31, abs=1e-6)
    assert c.allowed_error == pytest.approx(0.02)
    assert str(c.reason) == "error 0.31 > allowed 0.02 at (1, 2)"
    ok = compare_tensors(actual, expected, atol=0.0, rtol=0.06)  # 0.31 <= 0.06 * 6
    assert ok.ok and str(ok.reason) == "" and ok.first_bad_index is None


def test_compare_tensors_where_selects_elements():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1] = 7.0  # a padded row
    assert not compare_tensors(actual, expected, atol=1e-5, rtol=1e-5).ok
    rows = torch.tensor([[True], [False]])  # (2, 1) broadcast over columns
    assert compare_tensors(actual, expected, atol=1e-5, rtol=1e-5, where=rows).ok
    with pytest.raises(ValueError, match=r"where \(2,\) does not broadcast to \(2, 3\)"):
        compare_tensors(actual, expected, atol=1, rtol=1, where=torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match="where must be a plain bool tensor"):
        compare_tensors(actual, expected, atol=1, rtol=1, where=torch.ones(2, 3))


def test_compare_tensors_shapes_must_match_exactly():
    c = compare_tensors(torch.zeros(2, 3), torch.zeros(2, 4), atol=1, rtol=1)
    assert not c.ok and str(c.reason) == "shape (2, 3) != (2, 4)"
    c = compare_tensors(torch.zeros(1, 4), torch.zeros(2, 4), atol=1, rtol=1)  # would broadcast
    assert not c.ok and str(c.reason) == "shape (1, 4) != (2, 4)"
    c = compare_tensors(torch.zeros(4), torch.zeros(1, 4), atol=1, rtol=1)
    assert not c.ok and str(c.reason) == "shape (4,) != (1, 4)"


def test_compare_tensors_dtype():
    c = compare_tensors(torch.zeros(3), torch.zeros(3, dtype=torch.float64), atol=1, rtol=1, dtype=torch.float16)
    assert not c.ok and str(c.reason) == "dtype float32 != float16"
    assert compare_tensors(torch.zeros(3), torch.zeros(3, dtype=torch.float64), atol=0, rtol=0).ok


def test_nan_and_inf_never_pass():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[0, 1] = float("nan")
    c = compare_tensors(actual, expected, atol=float("inf"), rtol=float("inf"))
    assert not c.ok and str(c.reason) == "NaN at (0, 1)" and c.first_bad_index == (0, 1)
    both = torch.full((2,), float("nan"))
    assert not compare_tensors(both, both.clone(), atol=1, rtol=1).ok
    actual = expected.clone()
    actual[1, 0] = float("-inf")
    c = compare_tensors(actual, expected, atol=1e9, rtol=1)
    assert not c.ok and str(c.reason) == "inf at (1, 0)"
    infs = torch.tensor([float("inf"), 1.0])
    assert compare_tensors(infs, infs.clone(), atol=0, rtol=0).ok  # equal infs are equal
    nan_out = torch.zeros(2, 2, dtype=torch.float16)
    nan_out[1, 1] = float("nan")
    c = compare_flash(nan_out, torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float16))
    assert not c.ok and str(c.reason) == "NaN at (1, 1)"


class Hostile(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"the comparison called {func} on a student tensor subclass")


class Sneaky(torch.Tensor):
    pass


@pytest.mark.parametrize(
    "actual, reason",
    [
        (torch.zeros(3).as_subclass(Hostile), "actual is a Hostile, not a plain torch.Tensor"),
        (torch.zeros(3).as_subclass(Sneaky), "actual is a Sneaky, not a plain torch.Tensor"),
        (torch.nn.Parameter(torch.zeros(3)), "actual is a Parameter, not a plain torch.Tensor"),
        ([0.0, 0.0, 0.0], "actual is a list, not a plain torch.Tensor"),
        (None, "actual is a NoneType, not a plain torch.Tensor"),
        (torch.zeros(3).to_sparse(), "actual has layout torch.sparse_coo, expected a dense (strided) tensor"),
        (torch.zeros(3, device="meta"), "actual is on the meta device and has no values"),
        (torch.zeros(3, dtype=torch.complex64), "actual has dtype torch.complex64, expected a real dtype"),
    ],
)
def test_rejects_anything_but_a_plain_dense_tensor(actual, reason):
    c = compare_tensors(actual, torch.zeros(3), atol=1, rtol=1)
    assert c == Comparison(False, c.max_abs_error, c.allowed_error, None, None, None, c.reason) and str(c.reason) == reason
    c = compare_flash(actual, torch.zeros(3, dtype=torch.float64), torch.zeros(3))
    assert not c.ok and str(c.reason) == reason


def test_bad_reference_is_a_grader_error():
    with pytest.raises(TypeError, match="expected is a Sneaky"):
        compare_tensors(torch.zeros(3), torch.zeros(3).as_subclass(Sneaky), atol=1, rtol=1)
    with pytest.raises(ValueError, match=r"naive \(2,\) and oracle \(3,\) must have the same shape"):
        compare_flash(torch.zeros(3), torch.zeros(3), torch.zeros(2))


def _case(dtype, q_scale, seed=0):
    """Causal + padded fp16/bf16 inputs; returns q, k, v, keep, real query rows, oracle, naive."""
    g = torch.Generator().manual_seed(seed)
    B, H, L, D = 2, 4, 64, 64
    q, k, v = (torch.randn(B, H, L, D, generator=g).to(dtype) for _ in range(3))
    q = q * q_scale  # q*30 gives scores around 115
    pad = padding_mask([64, 40], L)  # (B, L)
    keep = combine_masks(causal_mask(L), pad)  # (B, 1, L, L)
    rows = pad[:, None, :, None]  # (B, 1, L, 1)
    return q, k, v, keep, rows, oracle_attention(q, k, v, keep)[0], masked_attention(q, k, v, keep)[0]


def _einsum_attention(q, k, v, keep):
    """Another correct same-dtype implementation: scale q first, finfo.min fill."""
    s = torch.einsum("bhqd,bhkd->bhqk", q / q.shape[-1] ** 0.5, k)
    s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, dim=-1), v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("q_scale", [1.0, 30.0])
def test_compare_flash_accepts_correct_same_dtype_implementations(dtype, q_scale):
    q, k, v, keep, rows, oracle, naive = _case(dtype, q_scale)
    for actual in (F.scaled_dot_product_attention(q, k, v, attn_mask=keep), _einsum_attention(q, k, v, keep)):
        c = compare_flash(actual, oracle, naive, where=rows)
        assert c.ok, str(c.reason)
        assert 0 < c.max_abs_error <= c.allowed_error
    c = compare_flash(naive, oracle, naive)
    rounding = torch.finfo(dtype).eps * float(oracle.abs().max())  # one rounding step at the largest value
    assert c.ok and c.allowed_error == pytest.approx(2 * c.max_abs_error + rounding + 1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compare_flash_rejects_zero_filled_mask(dtype):
    q, k, v, keep, rows, oracle, naive = _case(dtype, 1.0)
    s = (q @ k.transpose(-2, -1)) / 8.0
    zero_filled = torch.softmax(s.masked_fill(~keep, 0.0), dim=-1) @ v
    c = compare_flash(zero_filled, oracle, naive, where=rows)
    assert not c.ok
    assert c.max_abs_error > 1.0 and c.allowed_error < 0.05
    assert rows[c.first_bad_index[0], 0, c.first_bad_index[2], 0]
    err = (zero_filled.double() - oracle).abs() * rows
    assert c.max_abs_error == float(err.max())
    assert c.expected_value == float(oracle[c.first_bad_index])
    rounding = torch.finfo(dtype).eps * float((oracle.abs() * rows).max())
    assert str(c.reason).startswith(f"error {c.max_abs_error:.3g} > allowed {c.allowed_error:.3g} (2 x naive error + "
                               f"{rounding:.3g} rounding + 1e-05) at ")


def test_compare_flash_requires_the_naive_dtype():
    _, _, _, _, rows, oracle, naive = _case(torch.float16, 1.0)
    c = compare_flash(naive.float(), oracle, naive, where=rows)
    assert not c.ok and str(c.reason) == "dtype float32 != float16"


# --- the quick passing path agrees with the full path ------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

import grader.checks.tolerance as compare_module  # noqa: E402

_SPECIAL = st.sampled_from([0.0, 1.0, -2.5, 1e-6, float("nan"), float("inf"), float("-inf"), 1e30])


@st.composite
def _pairs(draw):
    n = draw(st.integers(1, 12))
    values = st.one_of(st.floats(-4, 4, allow_nan=False), _SPECIAL)
    e = torch.tensor(draw(st.lists(values, min_size=n, max_size=n)), dtype=torch.float64)
    noise = torch.tensor(draw(st.lists(st.one_of(st.floats(-1e-4, 1e-4), _SPECIAL), min_size=n, max_size=n)),
                         dtype=torch.float64)
    a = torch.where(torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n))), e + noise, e)
    where = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=n, max_size=n).map(torch.tensor)))
    return a, e, where


@settings(max_examples=300, deadline=None)
@given(_pairs(), st.sampled_from([(1e-5, 1e-5), (0.0, 0.0), (1e-2, 1e-2)]))
def test_quick_path_gives_the_full_paths_verdict(pair, tol):
    a, e, where = pair
    atol, rtol = tol
    quick = compare_tensors(a, e, atol=atol, rtol=rtol, where=where)
    full = compare_tensors(a, e, atol=atol, rtol=rtol, where=where, quick=False)
    assert quick.ok == full.ok
    if full.ok:
        assert quick.max_abs_error == pytest.approx(full.max_abs_error, abs=0.0)
    else:
        assert repr(quick) == repr(full)  # failures always take the full path (repr: NaN == NaN)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=0, max_size=4), st.data())
def test_failure_index_is_torchs_unravel_index(shape, data):
    size = 1
    for s in shape:
        size *= s
    flat = data.draw(st.integers(0, size - 1))
    want = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ()
    assert compare_module.unravel_index(flat, torch.Size(shape)) == want


def test_failure_index_names_the_cell_that_differs():
    expected = torch.zeros(2, 3, 4)
    actual = expected.clone()
    actual[1, 2, 3] = 7.0
    assert compare_tensors(actual, expected, atol=1e-5, rtol=0).first_bad_index == (1, 2, 3)
    actual[1, 2, 3] = float("nan")
    assert compare_tensors(actual, expected, atol=1e-5, rtol=0).first_bad_index == (1, 2, 3)
