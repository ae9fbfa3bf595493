"""grader.sandbox.wire: frames round-trip every allowed value and reject malformed bytes."""

import json
import math
import struct

import pytest
import torch

from grader.sandbox import Handle, Opaque, WireError
from grader.sandbox.wire import DTYPES, PREFIX, check_prefix, decode_frame, encode_frame


def roundtrip(msg, **kw):
    frame = encode_frame(msg)
    hlen, plen = check_prefix(frame[:8], max_header=1 << 20, max_payload=1 << 30)
    assert len(frame) == 8 + hlen + plen
    return decode_frame(frame[8:8 + hlen], frame[8 + hlen:], **kw)


def split(frame):
    hlen, plen = PREFIX.unpack(frame[:8])
    return frame[8:8 + hlen], frame[8 + hlen:]


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_dtype_round_trips_exactly(name):
    dtype = DTYPES[name]
    if dtype.is_floating_point:
        t = torch.tensor([[0.5, -1.25, 3.0], [float("inf"), -0.0, 7.0]], dtype=dtype)
    elif dtype is torch.bool:
        t = torch.tensor([[True, False, True], [False, False, True]])
    else:
        t = torch.tensor([[0, 1, 2], [3, 100, 7]], dtype=dtype)
    back = roundtrip({"v": t})["v"]
    assert type(back) is torch.Tensor and back.dtype == dtype and back.shape == t.shape
    assert torch.equal(back, t)


def test_nan_payload_and_non_contiguous_tensors():
    t = torch.arange(12.0).reshape(3, 4).t()
    t[0, 0] = float("nan")
    back = roundtrip({"v": t})["v"]
    assert back.is_contiguous() and torch.equal(back[1:], t[1:]) and math.isnan(back[0, 0])


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_views_of_every_dtype_travel_as_their_values(name):
    base = (torch.arange(24).reshape(2, 3, 4) % 5).to(DTYPES[name])
    views = [base.transpose(0, 2), base[:, 1:, ::2], base[1:2].expand(3, 3, 4), base.flatten()[5:]]
    if base.is_floating_point():
        views.append(base.clone().requires_grad_(True) * 1)
    for v in views:
        back = roundtrip({"v": v})["v"]
        assert back.is_contiguous() and back.shape == v.shape and torch.equal(back, v.detach())


def test_scalar_and_empty_tensors():
    msg = roundtrip({"s": torch.tensor(2.5), "e": torch.empty(0, 3, dtype=torch.int64)})
    assert msg["s"].shape == () and msg["s"].item() == 2.5
    assert msg["e"].shape == (0, 3) and msg["e"].dtype == torch.int64


def test_meta_tensors_travel_without_data():
    frame = encode_frame({"m": torch.empty(2, 1000, 1000, device="meta", dtype=torch.float16)})
    assert len(frame) < 300
    back = roundtrip({"m": torch.empty(2, 3, device="meta")})["m"]
    assert back.is_meta and back.shape == (2, 3) and back.dtype == torch.float32


def test_nested_values():
    value = {"a": [1, 2.5, None, True, "s", (torch.ones(2), {"b": -3})], "t": (1,)}
    back = roundtrip({"v": value})["v"]
    assert back["a"][:5] == [1, 2.5, None, True, "s"]
    assert type(back["a"][5]) is tuple and torch.equal(back["a"][5][0], torch.ones(2))
    assert back["a"][5][1] == {"b": -3} and back["t"] == (1,)


@pytest.mark.parametrize("x", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scalars_survive(x):
    back = roundtrip({"v": x})["v"]
    assert type(back) is float and (math.isnan(back) if math.isnan(x) else back == x)


def test_objects_become_opaque():
    class Sub(torch.Tensor):
        pass

    back = roundtrip({"a": torch.ones(2).as_subclass(Sub), "b": object(), "c": {1: 2},
                      "d": torch.ones(2, dtype=torch.complex64)})
    assert back["a"] == Opaque(f"{Sub.__module__}.test_objects_become_opaque.<locals>.Sub")
    assert back["b"] == Opaque("object") and back["c"] == Opaque("dict")
    assert back["d"] == Opaque("torch.Tensor[torch.complex64]")


def test_handles_need_a_resolver():
    frame = encode_frame({"h": Handle(3, "submission.M")})
    with pytest.raises(WireError, match="handles are not accepted"):
        decode_frame(*split(frame))
    msg = decode_frame(*split(frame), on_handle=lambda i, t: ("resolved", i, t))
    assert msg["h"] == ("resolved", 3, "submission.M")


def test_prefix_caps_checked_before_allocation():
    with pytest.raises(WireError, match="header of 2000000 bytes"):
        check_prefix(struct.pack("<II", 2_000_000, 0), max_header=1 << 20, max_payload=10)
    with pytest.raises(WireError, match="payload of 11 bytes is over the limit of 10"):
        check_prefix(struct.pack("<II", 10, 11), max_header=1 << 20, max_payload=10)
    with pytest.raises(WireError, match="header of 0 bytes"):
        check_prefix(struct.pack("<II", 0, 0), max_header=1 << 20, max_payload=10)
    with pytest.raises(WireError, match="truncated"):
        check_prefix(b"\x01\x00", max_header=1 << 20, max_payload=10)


def header(tensors, msg=None):
    return json.dumps({"msg": msg or {"v": {"$T": 0}}, "tensors": tensors}).encode()


@pytest.mark.parametrize("hdr, payload, match", [
    (b"not json", b"", "not valid JSON"),
    (b'{"msg": {"v": NaN}, "tensors": []}', b"", "not valid JSON"),
    (b'{"msg": 1, "tensors": []}', b"", "lacks"),
    (header([{"dtype": "complex64", "shape": [1], "device": "cpu", "nbytes": 8}]), b"\0" * 8, "not allowed"),
    (header([{"dtype": "float32", "shape": [2], "device": "cpu", "nbytes": 4}]), b"\0" * 4, "declares 4"),
    (header([{"dtype": "float32", "shape": [2], "device": "cpu", "nbytes": 8}]), b"\0" * 4, "past the end"),
    (header([{"dtype": "float32", "shape": [1], "device": "cpu", "nbytes": 4}]), b"\0" * 8, "no tensor accounts"),
    (header([{"dtype": "float32", "shape": [-1], "device": "cpu", "nbytes": 4}]), b"\0" * 4, "shape"),
    (header([{"dtype": "float32", "shape": [1] * 17, "device": "cpu", "nbytes": 4}]), b"\0" * 4, "shape"),
    (header([{"dtype": "float32", "shape": [1], "device": "disk", "nbytes": 4}]), b"\0" * 4, "device"),
    (header([{"dtype": "float32", "shape": [1], "device": "meta", "nbytes": 4}]), b"\0" * 4, "meta tensor"),
    (header([], {"v": {"$T": 0}}), b"", "out of range"),
    (header([], {"v": {"$x": 1}}), b"", "unknown tagged"),
    (header([], {"v": {"$f": "1e999"}}), b"", "unknown tagged"),
])
def test_malformed_frames_rejected(hdr, payload, match):
    with pytest.raises(WireError, match=match):
        decode_frame(hdr, payload)


def test_deep_nesting_rejected():
    value = []
    for _ in range(100):
        value = [value]
    with pytest.raises(WireError, match="nested too deeply"):
        encode_frame({"v": value})
    deep = json.dumps({"msg": {"v": json.loads("[" * 100 + "]" * 100)}, "tensors": []}).encode()
    with pytest.raises(WireError, match="nested too deeply"):
        decode_frame(deep, b"")


def test_a_generator_travels_as_its_state_and_draws_the_same_numbers():
    gen = torch.Generator().manual_seed(1234)
    torch.rand(3, generator=gen)  # not at its initial state any more
    (back,) = roundtrip({"args": [gen]})["args"]
    assert type(back) is torch.Generator and back is not gen
    assert torch.equal(torch.rand(5, generator=back), torch.rand(5, generator=gen))


def test_a_forged_generator_state_is_a_wire_error():
    gen = torch.Generator().manual_seed(1)
    header_, payload = split(encode_frame({"args": [gen]}))
    msg = json.loads(header_)
    msg["msg"]["args"][0]["$g"] = {"$f": "nan"}  # a float where the state tensor was
    with pytest.raises(WireError, match="a generator's state must be a 1-D uint8 tensor"):
        decode_frame(json.dumps(msg).encode(), payload)
