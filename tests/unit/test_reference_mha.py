import pytest
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
