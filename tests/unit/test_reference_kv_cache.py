import pytest
import torch

from reference import KVCache, MultiHeadAttention, decode, decode_with_lengths, padding_mask

D_MODEL, HEADS = 16, 4


def make_model(seed=0) -> MultiHeadAttention:
    torch.manual_seed(seed)  # nn.Linear init uses the global RNG; only here, in tests
    return MultiHeadAttention(D_MODEL, HEADS).double()


def inputs(B, T, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, D_MODEL, generator=g, dtype=torch.float64)


def test_kv_cache_grows_along_time():
    cache = KVCache()
    assert len(cache) == 0
    k1, v1 = torch.zeros(2, 3, 4, 5), torch.ones(2, 3, 4, 5)
    k, v = cache.append(k1, v1)
    assert len(cache) == 4 and k is k1
    k, v = cache.append(torch.full((2, 3, 1, 5), 2.0), torch.full((2, 3, 1, 5), 3.0))
    assert len(cache) == 5 and k.shape == v.shape == (2, 3, 5, 5)
    assert torch.all(k[:, :, 4] == 2) and torch.all(v[:, :, :4] == 1) and torch.all(v[:, :, 4] == 3)


def test_kv_cache_rejects_mismatched_shapes():
    cache = KVCache()
    with pytest.raises(ValueError, match=r"k and v must both be \(B, h, T, d_k\); got \(2, 3, 4\) and \(2, 3, 4\)"):
        cache.append(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4))
    cache.append(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"new keys \(2, 2, 1, 5\) do not match the cache \(2, 3, 4, 5\)"):
        cache.append(torch.zeros(2, 2, 1, 5), torch.zeros(2, 2, 1, 5))


@pytest.mark.parametrize(
    "prefill, chunks, lengths",
    [
        (5, None, [5, 6, 7, 8, 9, 10, 11]),  # prefill then single tokens
        (4, [3, 1, 1, 1, 1], [4, 7, 8, 9, 10, 11]),  # a multi-token chunk
        (0, None, list(range(1, 12))),  # from an empty cache
        (2, [4, 5], [2, 6, 11]),
        (11, [], [11]),
    ],
)
def test_cached_decoding_equals_full_causal_forward(prefill, chunks, lengths):
    model = make_model()
    x = inputs(B=2, T=11)
    full = model(x, causal=True)
    out, got_lengths = decode_with_lengths(model, x, prefill, chunks)
    assert got_lengths == lengths
    assert out.shape == full.shape
    assert torch.allclose(out, full, atol=1e-12, rtol=0)
    assert torch.equal(decode(model, x, prefill, chunks), out)


def test_left_padded_batch_decoding_matches_each_sequence_alone():
    model = make_model()
    prompts, new, P = [5, 3], 4, 5
    T = P + new
    seqs = [inputs(B=1, T=n + new, seed=20 + n)[0] for n in prompts]  # (n + new, d_model) each
    x = torch.full((2, T, D_MODEL), 30.0, dtype=torch.float64)  # loud padding
    for b, (n, s) in enumerate(zip(prompts, seqs)):
        x[b, P - n :] = s
    # left padding of the prompt, then True appended for every generated token
    keep = torch.cat([padding_mask(prompts, P, side="left"), torch.ones(2, new, dtype=torch.bool)], dim=1)
    out, lengths = decode_with_lengths(model, x, P, mask=keep)
    assert lengths == [5, 6, 7, 8, 9]
    full = model(x, keep[:, None, None, :], causal=True)
    for b, (n, s) in enumerate(zip(prompts, seqs)):
        alone = model(s[None], causal=True)[0]  # (n + new, d_model)
        assert torch.allclose(out[b, P - n :], alone, atol=1e-12)
        assert torch.allclose(full[b, P - n :], alone, atol=1e-12)
    assert torch.all(out[1, :2] == 0)  # padded queries see no real key


@pytest.mark.parametrize(
    "prefill, chunks, message",
    [
        (12, None, r"prefill \(12\) must be in \[0, T=11\]"),
        (5, [3, 2], r"prefill \(5\) \+ chunks \[3, 2\] must add up to T \(11\), each chunk >= 1"),
        (5, [6, 0], r"chunks \[6, 0\] must add up"),
    ],
)
def test_decode_rejects_bad_steps(prefill, chunks, message):
    with pytest.raises(ValueError, match=message):
        decode(make_model(), inputs(B=1, T=11), prefill, chunks)
