"""The 8 checks every peer (nbgrader, otter, a cold `python` per file) runs: same code for all.

Each check is a snippet run in the submission's namespace (`torch`, `causal_mask`, `padding_mask`,
`combine_masks`, `masked_attention` defined there) that raises AssertionError when it fails. The
reference is torch's own `scaled_dot_product_attention`. Our grader runs its full masked-attention
assignment instead (32 case instances with diagnosis), i.e. more work than these 8 checks.
"""

from __future__ import annotations

PRELUDE = """\
import torch as _t
import torch.nn.functional as _F
def _close(a, b, atol=1e-5, rtol=1e-4):
    return a.shape == b.shape and bool(_t.allclose(a.float(), b.float(), atol=atol, rtol=rtol))
def _qkv(seed, B, H, Lq, Lk, D):
    g = _t.Generator().manual_seed(seed)
    return (_t.randn(B, H, Lq, D, generator=g), _t.randn(B, H, Lk, D, generator=g),
            _t.randn(B, H, Lk, D, generator=g))
"""

CHECKS: list[tuple[str, str]] = [
    ("causal_square", """\
m = causal_mask(5)
assert m.dtype == _t.bool and _t.equal(m, _t.ones(5, 5, dtype=_t.bool).tril()), "causal_mask(5) is wrong"
"""),
    ("causal_rect", """\
m = causal_mask(3, 6)
assert _t.equal(m, _t.ones(3, 6, dtype=_t.bool).tril(3)), "causal_mask(3, 6) must be bottom-right aligned"
"""),
    ("padding_right", """\
m = padding_mask(_t.tensor([5, 3, 1]), 5)
assert _t.equal(m, _t.arange(5)[None] < _t.tensor([5, 3, 1])[:, None]), "padding_mask right is wrong"
"""),
    ("padding_left", """\
m = padding_mask(_t.tensor([6, 2, 4, 0]), 6, side="left")
assert _t.equal(m, _t.arange(6)[None] >= 6 - _t.tensor([6, 2, 4, 0])[:, None]), "padding_mask left is wrong"
"""),
    ("attention_nomask", """\
q, k, v = _qkv(1, 2, 4, 37, 37, 64)
out, w = masked_attention(q, k, v)
assert _close(out, _F.scaled_dot_product_attention(q, k, v)), "attention without a mask is wrong"
"""),
    ("attention_causal", """\
q, k, v = _qkv(2, 2, 4, 33, 33, 16)
m = _t.ones(33, 33, dtype=_t.bool).tril()
out, w = masked_attention(q, k, v, mask=m)
assert _close(out, _F.scaled_dot_product_attention(q, k, v, attn_mask=m)), "causal attention is wrong"
"""),
    ("attention_key_padding", """\
q, k, v = _qkv(3, 3, 3, 12, 12, 16)
keep = (_t.arange(12)[None] < _t.tensor([12, 7, 3])[:, None])[:, None, None, :]
out, w = masked_attention(q, k, v, mask=keep)
assert _close(out, _F.scaled_dot_product_attention(q, k, v, attn_mask=keep)), "key padding is wrong"
"""),
    ("combine_left_causal", """\
q, k, v = _qkv(4, 2, 4, 10, 10, 16)
pad = _t.arange(10)[None] >= 10 - _t.tensor([10, 6])[:, None]
keep = combine_masks(_t.ones(10, 10, dtype=_t.bool).tril(), pad)
want = _t.ones(10, 10, dtype=_t.bool).tril()[None, None] & pad[:, None, None, :]
assert keep.shape == (2, 1, 10, 10) and _t.equal(keep, want), "combine_masks is wrong"
out, w = masked_attention(q, k, v, mask=want)
rows = want.any(-1, keepdim=True)
ref = _F.scaled_dot_product_attention(q, k, v, attn_mask=want)
assert _close(_t.where(rows, out, 0), _t.where(rows, ref, 0)), "left padding + causal is wrong"
"""),
]


def run_in(ns: dict) -> dict[str, bool]:
    """Run every check in namespace `ns` (the floor and the cold baseline use this)."""
    exec(PRELUDE, ns)
    out = {}
    for name, src in CHECKS:
        try:
            exec(src, dict(ns))
            out[name] = True
        except Exception:  # noqa: BLE001 - a failing or raising check scores 0
            out[name] = False
    return out
