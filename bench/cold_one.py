"""Cold baseline: `python bench/cold_one.py SUBMISSION.py` -- a fresh interpreter imports torch and the
submission and runs the 8 peer checks; prints {"passed": k, "total": 8} as JSON."""
import importlib.util
import json
import os
import sys

import torch  # noqa: F401 - part of what a cold run pays

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_checks import CHECKS, run_in  # noqa: E402

spec = importlib.util.spec_from_file_location("submission", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(mod)
    res = run_in(vars(mod))
except Exception:  # noqa: BLE001
    res = {n: False for n, _ in CHECKS}
print(json.dumps({"passed": sum(res.values()), "total": len(CHECKS)}))
