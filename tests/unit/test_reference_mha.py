import pytest
from hypothesis import example, given, settings, strategies as st
import torch
from torch import nn

from reference import MultiHeadAttention, causal_mask, padding_mask, to_key_padding_mask

D_MODEL, HEADS = 32, 4


def make_model(dtype=torch.float64, seed=0) -> MultiHeadAttention:
    torch.manual_seed(seed)  # nn.Linear init uses the global RNG; only here, in tests
    return MultiHeadAttention(D_MODEL, HEADS).to(dtype)


def torch_mha(model: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(D_MODEL, HEADS, bias=False, batch_first=True).to(model.W_q.weight.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([model.W_q.weight, model.W_k.weight, model.W_v.weight]))
        ref.out_proj.weight.copy_(model.W_o.weight)
    return ref.eval()


def inputs(B=2, T=10, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, D_MODEL, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [None, [10, 6]])
def test_matches_nn_multihead_attention(dtype, atol, causal, lengths):
    model = make_model(dtype)
    x = inputs(dtype=dtype)
    B, T, _ = x.shape
    keep = None if lengths is None else padding_mask(lengths, T)  # (B, T), right padded
    out, weights = model(
        x, None if keep is None else keep[:, None, None, :], causal=causal, return_weights=True
    )
    expected, expected_w = torch_mha(model)(
        x, x, x,
        key_padding_mask=None if keep is None else to_key_padding_mask(keep),
        attn_mask=~causal_mask(T) if causal else None,  # nn.MultiheadAttention: True = ignore
        need_weights=True,
        average_attn_weights=False,
    )
    assert out.shape == (B, T, D_MODEL) and out.dtype == dtype
    assert weights.shape == (B, HEADS, T, T)
    assert torch.allclose(out, expected, atol=atol, rtol=atol)
    assert torch.allclose(weights, expected_w, atol=atol, rtol=atol)


def test_head_split_uses_view_then_transpose():
    # with W_q = W_k = identity and W_v = W_o = identity, head j sees features j*d_k:(j+1)*d_k
    model = make_model()
    with torch.no_grad():
        for lin in (model.W_q, model.W_k, model.W_v, model.W_o):
            lin.weight.copy_(torch.eye(D_MODEL, dtype=torch.float64))
    x = inputs(B=1, T=5)
    out, weights = model(x, return_weights=True)
    d_k = D_MODEL // HEADS
    for j in range(HEADS):
        xs = x[0, :, j * d_k : (j + 1) * d_k]  # (T, d_k)
        w = torch.softmax(xs @ xs.T / d_k**0.5, dim=-1)
        assert torch.allclose(weights[0, j], w, atol=1e-12)
        assert torch.allclose(out[0, :, j * d_k : (j + 1) * d_k], w @ xs, atol=1e-12)


def test_d_model_must_be_divisible_by_h():
    with pytest.raises(ValueError, match=r"^d_model \(30\) must be divisible by h \(4\)$"):
        MultiHeadAttention(30, 4)


def test_rejects_bad_input_shape_and_non_bool_mask():
    model = make_model()
    with pytest.raises(ValueError, match=r"x must be \(B, T, d_model=32\); got \(2, 5, 16\)"):
        model(torch.zeros(2, 5, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor \(True = may attend\); got dtype torch.float64"):
        model(inputs(), torch.ones(2, 1, 1, 10, dtype=torch.float64))


def test_causality_gradient_wrt_future_inputs_is_exactly_zero():
    model = make_model()
    g = torch.Generator().manual_seed(7)
    T = 9
    for t in (0, T // 2, T - 2):
        x = inputs(T=T).requires_grad_()
        out = model(x, causal=True)
        (out[:, : t + 1] * torch.randn(2, t + 1, D_MODEL, generator=g, dtype=torch.float64)).sum().backward()
        assert torch.all(x.grad[:, t + 1 :] == 0)
        assert x.grad[:, : t + 1].abs().max() > 0


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_invariance(side, causal):
    model = make_model(torch.float32)
    seqs = [inputs(B=1, T=n, dtype=torch.float32, seed=10 + n)[0] for n in (7, 4, 2)]  # (n, d_model) each
    T = 7
    batch = torch.full((3, T, D_MODEL), 50.0)  # loud padding: any leak is large
    for b, s in enumerate(seqs):
        n = s.shape[0]
        if side == "right":
            batch[b, :n] = s
        else:
            batch[b, T - n :] = s
    keep = padding_mask([7, 4, 2], T, side=side)  # (B, T)
    out = model(batch, keep[:, None, None, :], causal=causal)  # (B, T, d_model)
    for b, s in enumerate(seqs):
        alone = model(s[None], causal=causal)[0]  # (n, d_model)
        n = s.shape[0]
        rows = out[b, :n] if side == "right" else out[b, T - n :]
        assert torch.allclose(rows, alone, atol=1e-5, rtol=1e-4)


def test_left_padded_causal_padded_queries_are_zero():
    model = make_model()
    keep = padding_mask([5, 2], 5, side="left")
    out = model(inputs(T=5), keep[:, None, None, :], causal=True)
    assert torch.all(out[1, :3] == 0)
    assert out[1, 3:].abs().min() > 0


def test_the_explorer_masks_take_a_mask_with_a_row_per_query():
    """A keep mask (B, 1, T, T) (causal and padding AND-ed by the caller) is cut to the step's rows."""
    from reference import combine_masks, mistakes

    model = make_model(torch.float32)
    weights = {k: v.float() for k, v in model.state_dict().items()}
    keep = combine_masks(causal_mask(5), padding_mask([5, 2], 5, side="left"))  # (B, 1, T, T)
    seen = mistakes.step_masks(weights, HEADS, inputs(T=5, dtype=torch.float32), [(0, 5)], mask=keep, causal=False)
    assert torch.equal(seen["keep"], keep)
    assert torch.equal(seen["masks"]["mask-combination"], torch.ones(2, 1, 5, 5, dtype=torch.bool))


# --- mha-kv-cache's half-precision allowance accepts every correct same-dtype implementation -------


def _mha_common():
    import importlib

    from grader.assignment.spec import load_assignment

    case = next(c for c in load_assignment("mha-kv-cache").cases if c.id == "mha_half_small")
    return importlib.import_module(case.check_fn.__module__.rsplit(".", 1)[0] + "._common")


def _heads(t, h):
    B, T, d = t.shape
    return t.view(B, T, h, d // h).transpose(1, 2)  # (B, h, T, d_k)


def _mha_with(attend, W, x, h, keep, fused=False):
    if fused:  # one product for q, k and v
        q, k, v = (_heads(t, h) for t in (x @ torch.cat([W["q"], W["k"], W["v"]]).T).chunk(3, -1))
    else:
        q, k, v = (_heads(torch.nn.functional.linear(x, W[n]), h) for n in "qkv")
    out = attend(q, k, v, keep)  # (B, h, T, d_k)
    B, _, T, _ = out.shape
    return torch.nn.functional.linear(out.transpose(1, 2).reshape(B, T, -1), W["o"])


def _softmax(s):
    return torch.softmax(s, -1)


def _by_hand(s):
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def _attend(softmax=_softmax, prescale=False, fill=float("-inf"), reciprocal=False, how="matmul"):
    def attend(q, k, v, keep):
        scale = q.shape[-1] ** -0.5
        if prescale:
            q = q * scale
        if how == "einsum":
            s = torch.einsum("bhqd,bhkd->bhqk", q, k)
        elif how == "bmm":
            B, h, T, dk = q.shape
            s = torch.bmm(q.reshape(B * h, T, dk), k.reshape(B * h, -1, dk).transpose(1, 2)).view(B, h, T, -1)
        else:
            s = q @ k.transpose(-2, -1)
        s = s if prescale else s * scale
        s = s.masked_fill(~keep, fill if fill is not None else torch.finfo(s.dtype).min)
        if reciprocal:
            e = torch.exp(s - s.amax(-1, keepdim=True))
            return (e * (1.0 / e.sum(-1, keepdim=True))) @ v
        return softmax(s) @ v
    return attend


def _sdpa(q, k, v, keep):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)


CORRECT_MHA = {
    "torch.softmax": lambda W, x, h, keep: _mha_with(_attend(), W, x, h, keep),
    "by hand": lambda W, x, h, keep: _mha_with(_attend(_by_hand), W, x, h, keep),
    "q pre-scaled, by hand, reciprocal, finfo.min": lambda W, x, h, keep: _mha_with(
        _attend(prescale=True, fill=None, reciprocal=True), W, x, h, keep),
    "einsum": lambda W, x, h, keep: _mha_with(_attend(how="einsum"), W, x, h, keep),
    "bmm, q pre-scaled": lambda W, x, h, keep: _mha_with(_attend(prescale=True, how="bmm"), W, x, h, keep),
    "SDPA": lambda W, x, h, keep: _mha_with(_sdpa, W, x, h, keep),
    "fused qkv, by hand": lambda W, x, h, keep: _mha_with(_attend(_by_hand), W, x, h, keep, fused=True),
    "float32 upcast": lambda W, x, h, keep: _mha_with(
        _attend(), {n: w.float() for n, w in W.items()}, x.float(), h, keep).to(x.dtype),
}


@pytest.mark.slow  # full tier: 40 examples of eight implementations
@settings(max_examples=40, deadline=None, derandomize=True)
@given(dtype=st.sampled_from([torch.float16, torch.bfloat16]),
       shape=st.sampled_from([(1, 6, 16, 2), (2, 16, 32, 4), (3, 24, 64, 4), (2, 16, 64, 1)]),
       x_scale=st.sampled_from([1.0, 3.0, 6.0]), seed=st.integers(0, 2**16))
@example(dtype=torch.bfloat16, shape=(1, 16, 32, 4), x_scale=6.0, seed=51)  # q pre-scaled: 1.5 x torch.softmax's
@example(dtype=torch.float16, shape=(2, 16, 64, 1), x_scale=6.0, seed=3)  # SDPA: 1.05 x torch.softmax's
def test_mha_half_precision_rule_accepts_every_correct_same_dtype_implementation(dtype, shape, x_scale, seed):
    """What mha-kv-cache's half-precision cases allow (``_common.expected``: twice the error of the
    worst of torch.softmax, a softmax by hand, q pre-scaled and SDPA) covers each way of writing a
    correct causal MHA in the input dtype, on inputs up to 6 x the cases' scale. The examples are
    inputs where the allowance of torch.softmax's naive result alone refused correct code."""
    from grader.checks.compare import compare

    common = _mha_common()
    B, T, d, h = shape
    g = torch.Generator().manual_seed(seed)
    W = {n: (torch.randn(d, d, generator=g) / d ** 0.5).to(dtype) for n in "qkvo"}
    x = (torch.randn(B, T, d, generator=g) * x_scale).to(dtype)
    exp = common.expected({f"W_{n}.weight": w.float() for n, w in W.items()}, h, x, causal=True)
    keep = causal_mask(T)
    with torch.no_grad():
        for name, impl in CORRECT_MHA.items():
            c = compare(impl(W, x, h, keep), exp)
            assert c.ok, (name, c.reason)
