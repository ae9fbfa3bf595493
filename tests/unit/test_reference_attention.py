import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import (
    causal_mask,
    combine_masks,
    compare_flash,
    compare_tensors,
    exact_float32,
    masked_attention,
    oracle_attention,
    padding_mask,
    tolerance_for,
)

LAYOUTS = ["none", "full", "keys", "shared", "2d", "causal", "random_with_empty_rows"]


def make_mask(layout: str, B: int, H: int, Lq: int, Lk: int, g: torch.Generator):
    """A bool keep-mask (True = may attend) of the given broadcast layout, or None."""
    if layout == "none":
        return None
    if layout == "full":
        return torch.rand(B, H, Lq, Lk, generator=g) < 0.7  # (B, H, Lq, Lk)
    if layout == "keys":
        lengths = torch.randint(0, Lk + 1, (B,), generator=g)
        return padding_mask(lengths, Lk)[:, None, None, :]  # (B, 1, 1, Lk)
    if layout == "shared":
        return torch.rand(1, 1, Lq, Lk, generator=g) < 0.6  # (1, 1, Lq, Lk)
    if layout == "2d":
        return torch.rand(Lq, Lk, generator=g) < 0.6  # (Lq, Lk)
    if layout == "causal":
        return causal_mask(Lq, Lk)  # (Lq, Lk), leading rows empty when Lq > Lk
    mask = torch.rand(B, H, Lq, Lk, generator=g) < 0.5
    mask[:, :, 0] = False  # at least one fully masked row
    return mask


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    B=st.integers(1, 3),
    H=st.integers(1, 3),
    Lq=st.integers(1, 9),
    Lk=st.integers(1, 9),
    D=st.sampled_from([1, 3, 8, 16]),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    layout=st.sampled_from(LAYOUTS),
    scale=st.sampled_from([None, 0.3]),
    seed=st.integers(0, 2**16),
)
def test_matches_sdpa(B, H, Lq, Lk, D, dtype, layout, scale, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Lq, D, generator=g).to(dtype)
    k = torch.randn(B, H, Lk, D, generator=g).to(dtype)
    v = torch.randn(B, H, Lk, D + 1, generator=g).to(dtype)
    mask = make_mask(layout, B, H, Lq, Lk, g)

    out, weights = masked_attention(q, k, v, mask, scale=scale)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    oracle, oracle_w = oracle_attention(q, k, v, mask, scale=scale)

    assert out.dtype == dtype and out.shape == (B, H, Lq, D + 1)
    assert weights.shape == (B, H, Lq, Lk)
    assert oracle.dtype == torch.float64
    if mask is not None:  # rows that see no key are exactly 0 in all three
        empty = ~torch.broadcast_to(mask, (B, H, Lq, Lk)).any(-1)  # (B, H, Lq)
        assert torch.all(out[empty] == 0) and torch.all(sdpa[empty] == 0)
        assert torch.all(weights[empty] == 0) and torch.all(oracle[empty] == 0)
    if dtype in (torch.float32, torch.float64):
        atol, rtol = tolerance_for(dtype)
        if dtype == torch.float64:
            atol, rtol = 1e-12, 1e-12
        assert compare_tensors(out, sdpa, atol=atol, rtol=rtol, dtype=dtype).ok
        assert compare_tensors(out, oracle, atol=atol, rtol=rtol).ok
        assert compare_tensors(weights, oracle_w, atol=atol, rtol=rtol).ok
    else:
        # SDPA is a correct same-dtype implementation: the flash rule must accept it,
        # and the naive reference itself stays inside the fixed fallback tolerance.
        assert compare_flash(sdpa, oracle, out).ok
        atol, rtol = tolerance_for(dtype)
        assert compare_tensors(out, oracle, atol=atol, rtol=rtol).ok


def test_leading_dims_are_free():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    out, _ = masked_attention(q, k, v, causal_mask(5))
    flat, _ = masked_attention(*(t.reshape(12, 5, 4) for t in (q, k, v)), causal_mask(5))  # (B*H, L, D)
    assert torch.equal(out.reshape(12, 5, 4), flat)
    out3, _ = masked_attention(q[0, 0], k[0, 0], v[0, 0])  # no leading dims: (L, D)
    assert torch.allclose(out3, F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0]), atol=1e-12)


def test_known_values_negative_scores():
    # scores [-5, -3, 7, 9] with keys 3, 4 masked: softmax over [-5, -3] only
    q = torch.ones(1, 1, dtype=torch.float64)
    k = torch.tensor([[-5.0], [-3.0], [7.0], [9.0]], dtype=torch.float64)
    v = torch.eye(4, dtype=torch.float64)
    keep = torch.tensor([[True, True, False, False]])
    out, w = masked_attention(q, k, v, keep, scale=1.0)
    e = 1 / (1 + math.exp(2))
    assert torch.allclose(w, torch.tensor([[e, 1 - e, 0, 0]], dtype=torch.float64), atol=1e-15)
    assert torch.equal(out, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fully_masked_rows_output_zero_and_finite_zero_gradients(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=g).to(dtype).requires_grad_() for _ in range(3))
    keep = combine_masks(causal_mask(6), padding_mask([6, 3], 6, side="left"))  # batch 1: rows 0-2 empty
    keep = keep.clone()
    keep[0, 0, 4] = False  # and one more empty row in batch 0
    out, weights = masked_attention(q, k, v, keep)
    empty = ~torch.broadcast_to(keep, (2, 3, 6, 6)).any(-1)  # (B, H, Lq)
    assert int(empty.sum()) == 3 * 3 + 3
    assert torch.all(out[empty] == 0) and torch.all(weights[empty] == 0)
    assert not out.isnan().any()

    (out * torch.randn(out.shape, generator=g).to(dtype)).sum().backward()
    for t in (q, k, v):
        assert t.grad.isfinite().all()
    assert torch.all(q.grad[empty] == 0)

    # a loss on the empty rows alone has zero gradient everywhere
    for t in (q, k, v):
        t.grad = None
    out, _ = masked_attention(q, k, v, keep)
    out[empty].sum().backward()
    for t in (q, k, v):
        assert torch.all(t.grad == 0)


def test_fully_masked_row_gradients_match_sdpa():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.rand(1, 2, 5, 5, generator=g) < 0.6
    keep[:, :, 1] = False
    grads = []
    for fn in (lambda *a: masked_attention(*a, keep)[0], lambda *a: F.scaled_dot_product_attention(*a, attn_mask=keep)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        fn(*leaves).pow(2).sum().backward()
        grads.append([t.grad for t in leaves])
    for ours, theirs in zip(*grads):
        assert torch.allclose(ours, theirs, atol=1e-12)


def test_causality_gradient_is_exactly_zero_for_future_inputs():
    g = torch.Generator().manual_seed(5)
    T = 12
    q, k, v = (torch.randn(2, 3, T, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    for t in (0, T // 2, T - 2):
        for x in (q, k, v):
            x.grad = None
        out, _ = masked_attention(q, k, v, causal_mask(T))
        (out[:, :, : t + 1] * torch.randn(2, 3, t + 1, 8, generator=g, dtype=torch.float64)).sum().backward()
        for x in (q, k, v):
            assert torch.all(x.grad[:, :, t + 1 :] == 0)
        assert v.grad[:, :, : t + 1].abs().max() > 0  # the past does matter


def test_non_bool_masks_are_rejected_with_a_clear_message():
    q = torch.randn(1, 2, 4)
    with pytest.raises(ValueError, match=r"mask must be a bool tensor \(True = may attend\); got dtype torch.int64"):
        masked_attention(q, q, q, torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"got dtype torch.float32.*mask == 0"):
        masked_attention(q, q, q, torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor \(True = may attend\); got list"):
        masked_attention(q, q, q, [[True, True], [True, True]])


def test_oracle_is_float64_of_the_rounded_inputs():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, 7, 8, generator=g).half() for _ in range(3))
    out, w = oracle_attention(q, k, v, causal_mask(7))
    expected, _ = masked_attention(q.double(), k.double(), v.double(), causal_mask(7))
    assert out.dtype == w.dtype == torch.float64
    assert torch.equal(out, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_sdpa_on_cuda(dtype):
    g = torch.Generator().manual_seed(0)
    B, H, L, D = 2, 8, 256, 64
    q, k, v = (torch.randn(B, H, L, D, generator=g).to("cuda", dtype) for _ in range(3))
    pad = padding_mask([L, 100], L, side="left", device="cuda")
    keep = combine_masks(causal_mask(L, device="cuda"), pad)  # (B, 1, L, L), empty rows in batch 1
    with exact_float32():
        out, _ = masked_attention(q, k, v, keep)
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        oracle, _ = oracle_attention(q, k, v, keep)
    assert out.device.type == "cuda" and out.dtype == dtype
    empty = ~keep.any(-1).expand(B, H, L)
    assert torch.all(out[empty] == 0) and torch.all(sdpa[empty] == 0)
    if dtype == torch.float32:
        assert compare_tensors(out, oracle, atol=1e-5, rtol=1e-5).ok
        assert compare_tensors(sdpa, oracle, atol=1e-5, rtol=1e-5).ok
    else:
        result = compare_flash(sdpa, oracle, out)
        assert result.ok, str(result.reason)


# --- the half-precision rule accepts every correct way of writing attention in the input dtype -----


def _guarded(w, mask):
    return w if mask is None else torch.where(mask.any(-1, keepdim=True), w, torch.zeros((), dtype=w.dtype))


def _by_hand_reciprocal(q, k, v, mask):
    """q pre-scaled, finfo.min fill, exp of (scores - max), times the reciprocal of the sum."""
    s = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    w = _guarded(e * (1.0 / e.sum(-1, keepdim=True)), mask)
    return w @ v, w


def _einsum(q, k, v, mask):
    s = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = _guarded(torch.softmax(s, -1), mask)
    return torch.einsum("...qk,...kd->...qd", w, v), w


def _upcast(q, k, v, mask):
    out, w = masked_attention(q.float(), k.float(), v.float(), mask)
    return out.to(q.dtype), w.to(q.dtype)


def _sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None


@pytest.mark.slow  # full tier: 60 examples of six implementations in two dtypes
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    Lq=st.integers(1, 12),
    extra_keys=st.integers(0, 6),
    D=st.sampled_from([8, 16, 64]),
    dtype=st.sampled_from([torch.float16, torch.bfloat16]),
    layout=st.sampled_from(["none", "keys", "causal", "random_with_empty_rows"]),
    q_scale=st.sampled_from([0.3, 1.0, 4.0]),
    seed=st.integers(0, 2**16),
)
def test_half_precision_rule_accepts_every_correct_same_dtype_implementation(Lq, extra_keys, D, dtype, layout,
                                                                              q_scale, seed):
    """torch.softmax, a softmax by hand (two ways), einsum, SDPA and a float32 upcast all pass the
    rule built as the attention cases build it: the naive error of the worse of torch.softmax and a
    softmax by hand, per element."""
    from grader.checks.compare import farthest_of

    from reference import masked_attention_by_hand

    g = torch.Generator().manual_seed(seed)
    B, H, Lk = 2, 2, Lq + extra_keys
    q = (torch.randn(B, H, Lq, D, generator=g) * q_scale).to(dtype)
    k, v = (torch.randn(B, H, Lk, D, generator=g).to(dtype) for _ in range(2))
    mask = make_mask(layout, B, H, Lq, Lk, g)
    rows = None if mask is None else torch.broadcast_to(mask, (B, H, Lq, Lk)).any(-1, keepdim=True)
    o64, w64 = oracle_attention(q, k, v, mask)
    (on, wn), (oh, wh) = masked_attention(q, k, v, mask), masked_attention_by_hand(q, k, v, mask)
    naive_out, naive_w = farthest_of(o64, [on, oh]), farthest_of(w64, [wn, wh])
    for impl in (masked_attention, masked_attention_by_hand, _by_hand_reciprocal, _einsum, _upcast, _sdpa):
        out, w = impl(q, k, v, mask)
        c = compare_flash(out, o64, naive_out, where=rows)
        assert c.ok, (impl.__name__, "out", str(c.reason))
        if w is not None:
            c = compare_flash(w, w64, naive_w, where=rows)
            assert c.ok, (impl.__name__, "weights", str(c.reason))
