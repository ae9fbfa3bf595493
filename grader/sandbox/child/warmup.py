"""What a worker's image runs once before any student code, so that no worker pays it again.

The zygote (and the portable worker, which has no zygote) calls ``warm_ops`` after importing torch
and ``warm_meta`` when meta-device cases will run. Both run forward CPU or meta ops on one thread:
no OpenMP team or autograd thread is started, so the zygote stays safe to fork.
"""

from __future__ import annotations

import types


def warm_ops() -> None:
    """Run, once, the CPU ops attention code uses, in every dtype the cases use.

    Their first call in a process pays one-off set-up (MKL and oneDNN initialisation, kernel
    selection, Python-side caches); done here, every worker inherits it instead of paying it again.
    """
    import math

    import torch

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, 5, 8, generator=gen)
    keep = torch.ones(5, 5, dtype=torch.bool).tril()
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = q.to(dtype)
        s = torch.einsum("bhqd,bhkd->bhqk", x, x) / math.sqrt(x.shape[-1])
        s = torch.matmul(x, x.transpose(-2, -1)).masked_fill(~keep, float("-inf"))
        s = torch.where(keep, s, torch.finfo(dtype).min)
        w = torch.nan_to_num(torch.softmax(s, dim=-1))
        (w @ x).sum()
        torch.bmm(x.flatten(0, 1), x.flatten(0, 1).transpose(1, 2))
        torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=keep)
        torch.cat([x, x], dim=2).view(2, 2, 10, 8).transpose(1, 2).reshape(2, 10, 16)
    with torch.no_grad():
        torch.nn.Linear(8, 8, bias=False)(q)
    # The wire: every worker encodes replies and decodes arguments in these dtypes.
    from grader.sandbox.wire import PREFIX, decode_frame, encode_frame

    values = [q.to(dtype) for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)]
    frame = encode_frame({"ok": True, "value": (values, keep, torch.tensor([1, 2]), [1.5, "x", None])})
    hlen, _ = PREFIX.unpack(frame[:PREFIX.size])
    decode_frame(frame[PREFIX.size:PREFIX.size + hlen], frame[PREFIX.size + hlen:])


def warm_meta() -> bool:
    """Run the first meta-device op; True when it left ``torch._dynamo`` unimported.

    Meta tensors compute nothing and start no threads, but torch runs their kernels in Python
    (``torch._refs``, ``torch._prims``), and the first call imports sympy (~0.4 s) and, through
    the ``torch._compile._disable_dynamo`` wrapper around those kernels, ``torch._dynamo``
    (~1 s more, and ~75 MB more for every fork to copy). That wrapper imports it only to keep
    ``torch.compile`` from tracing into the kernel; outside ``torch.compile`` the kernel runs the
    same either way. ``skip_dynamo_wrappers`` tells the wrappers their kernel is already wrapped,
    so the warm-up (and every worker's meta op) stays out of ``torch._dynamo``.
    """
    import sys

    import torch

    if not already_skipping():
        skip_dynamo_wrappers()
    # Matmul, softmax, masked_fill, comparisons, tril: the kernels the device-placement cases reach.
    x = torch.empty(2, 2, 5, 8, device="meta")
    keep = torch.ones(5, 5, dtype=torch.bool, device="meta").tril()
    s = (x @ x.transpose(-2, -1) * 2).masked_fill(~keep, float("-inf"))
    (torch.softmax(s, dim=-1) @ x).sum()
    _ = torch.arange(5, device="meta").view(1, -1) < torch.tensor([3], device="meta").view(-1, 1)
    skip_dynamo_wrappers()  # kernels of modules the ops above imported
    return "torch._dynamo" not in sys.modules


def already_skipping() -> bool:
    """`skip_dynamo_wrappers` ran in this process: the wrappers that existed then are marked, and
    the decorator marks those made since."""
    import torch._compile as compile_api

    return hasattr(compile_api._disable_dynamo, "_grader_original")


def skip_dynamo_wrappers() -> int:
    """Mark every ``_disable_dynamo`` wrapper's function as already wrapped; returns how many.

    The wrapper (``torch/_compile.py``) looks up ``fn.__dynamo_disable`` on each call and, the
    first time it is missing, imports ``torch._dynamo`` to build it. Setting it to ``fn`` itself
    makes every call go straight to ``fn``. Functions decorated later (modules imported after
    this) are marked as they are decorated. When torch's wrapper no longer has that shape, nothing
    is changed and the first meta op imports ``torch._dynamo`` as before.
    """
    import gc

    import torch._compile as compile_api

    decorate = getattr(compile_api._disable_dynamo, "_grader_original", compile_api._disable_dynamo)
    inner = next((c for c in decorate.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == "inner"), None)
    if inner is None or "fn" not in inner.co_freevars or "__dynamo_disable" not in inner.co_names:
        return 0
    slot = inner.co_freevars.index("fn")
    marked = 0
    for wrapper in gc.get_referrers(inner):
        if isinstance(wrapper, types.FunctionType) and wrapper.__closure__:
            fn = wrapper.__closure__[slot].cell_contents
            if getattr(fn, "__dynamo_disable", None) is None:
                fn.__dynamo_disable = fn
                marked += 1

    if compile_api._disable_dynamo is decorate:
        def marking(fn=None, recursive=True):
            wrapped = decorate(fn, recursive)
            if fn is not None:
                fn.__dynamo_disable = fn
            return wrapped

        marking._grader_original = decorate  # type: ignore[attr-defined]
        compile_api._disable_dynamo = marking
    return marked
