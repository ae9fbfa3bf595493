import pytest
import torch

from reference import exact_float32, resolve_device


def test_resolve_device_names():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device() == torch.device(expected)
    with pytest.raises(ValueError, match=r"device must be one of auto, cpu, cuda; got 'tpu'"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_resolve_device_cuda_without_cuda():
    with pytest.raises(ValueError, match=r"device 'cuda' was requested but torch.cuda.is_available\(\) is False"):
        resolve_device("cuda")


def test_exact_float32_turns_tf32_off_and_restores():
    before = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    try:
        with exact_float32():
            assert torch.backends.cuda.matmul.allow_tf32 is False
            assert torch.backends.cudnn.allow_tf32 is False
            assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cuda.matmul.allow_tf32 is True
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision(before)
