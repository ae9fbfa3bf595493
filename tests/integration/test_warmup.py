"""The worker image's warm-up (grader/sandbox/child/warmup.py) leaves torch as a student expects it:
meta ops give the right shapes without importing torch._dynamo, and torch.compile still works."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # full tier: a fresh interpreter imports torch and torch._dynamo

CHECK = r'''
import sys
import torch
from grader.sandbox.child import warmup

warmup.warm_ops()
assert warmup.warm_meta() is True, "the meta warm-up imported torch._dynamo"
x = torch.empty(2, 4, 5, device="meta")
out = torch.softmax(x @ x.transpose(-2, -1), dim=-1).masked_fill(torch.ones(4, 4, dtype=torch.bool, device="meta"), 0.0)
assert out.is_meta and out.shape == (2, 4, 4), out
assert "torch._dynamo" not in sys.modules

# A student's torch.compile: the marked wrappers must not keep dynamo from working.
def f(a):
    return torch.softmax(a.masked_fill(a > 0, float("-inf")), dim=-1)

a = torch.randn(3, 3)
a[:, 0] = -1.0
torch.testing.assert_close(torch.compile(f, backend="eager")(a), f(a))
assert "torch._dynamo" in sys.modules
print("ok")
'''


def test_meta_warm_up_skips_dynamo_and_compile_still_works():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"
