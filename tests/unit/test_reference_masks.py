import pytest
import torch

from reference import causal_mask, combine_masks, padding_mask, to_key_padding_mask


def rows(mask: torch.Tensor) -> list[str]:
    return ["".join("1" if x else "0" for x in row) for row in mask.tolist()]


@pytest.mark.parametrize(
    "q_len, k_len, expected",
    [
        (2, 5, ["11110", "11111"]),
        (1, 9, ["111111111"]),
        (3, 3, ["100", "110", "111"]),
        (5, 2, ["00", "00", "00", "10", "11"]),
    ],
)
def test_causal_mask_is_bottom_right_aligned(q_len, k_len, expected):
    mask = causal_mask(q_len, k_len)
    assert mask.dtype == torch.bool
    assert mask.shape == (q_len, k_len)
    assert rows(mask) == expected


def test_causal_mask_defaults_to_square_and_matches_torch_lower_right():
    assert torch.equal(causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril())
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 8, generator=g) for n in (3, 7, 7))
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(3, 7))
    torchs = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(3, 7))
    assert torch.allclose(ours, torchs, atol=1e-6)
    top_left = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(3, 7, dtype=torch.bool).tril())
    assert not torch.allclose(top_left, torchs, atol=1e-3)  # the alignment is what is compared


def test_causal_mask_rejects_negative_length():
    with pytest.raises(ValueError, match=r"lengths must be >= 0; got q_len=-1, k_len=3"):
        causal_mask(-1, 3)


def test_padding_mask_right_and_left():
    assert rows(padding_mask([3, 1, 0], 4)) == ["1110", "1000", "0000"]
    assert rows(padding_mask(torch.tensor([3, 1, 4]), 4, side="left")) == ["0111", "0001", "1111"]
    assert padding_mask([2], 3).dtype == torch.bool


@pytest.mark.parametrize(
    "lengths, max_len, side, message",
    [
        ([2, 5], 4, "right", r"every length must be in \[0, max_len=4\]; got \[2, 5\]"),
        ([-1], 4, "left", r"every length must be in \[0, max_len=4\]; got \[-1\]"),
        ([1], 4, "middle", r"side must be 'left' or 'right'; got 'middle'"),
    ],
)
def test_padding_mask_errors(lengths, max_len, side, message):
    with pytest.raises(ValueError, match=message):
        padding_mask(lengths, max_len, side=side)


def test_combine_masks_ands_keys_and_broadcasts_to_b1qk():
    keep = combine_masks(causal_mask(3, 4), padding_mask([4, 2], 4))
    assert keep.shape == (2, 1, 3, 4)
    assert rows(keep[0, 0]) == ["1100", "1110", "1111"]
    assert rows(keep[1, 0]) == ["1100", "1100", "1100"]


def test_combine_masks_errors():
    with pytest.raises(ValueError, match=r"masks must be bool \(True = may attend\); got torch.float32"):
        combine_masks(causal_mask(3).float(), padding_mask([3], 3))
    with pytest.raises(ValueError, match=r"expected causal \(Lq, Lk\) and padding \(B, Lk\); got \(3, 3\) and \(1, 4\)"):
        combine_masks(causal_mask(3), padding_mask([3], 4))


def test_to_key_padding_mask_inverts():
    keep = padding_mask([2], 3)
    assert rows(to_key_padding_mask(keep)) == ["001"]
    with pytest.raises(ValueError, match="keep mask must be bool"):
        to_key_padding_mask(keep.long())
