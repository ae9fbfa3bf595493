"""Hostile masked-attention submissions whose *code* reaches for other students' workers, written
by functions ``make(folder) -> path`` like those of `hostile_inputs`, to join a class batch.

- a giver (a correct implementation) that leaves its own source in a pseudo-terminal of the host's
  devpts at import, and keeps it open while the batch runs, and a taker with no attention code
  that looks for it there and runs what it finds;
- a page-cache prober (correct code) that tries every residency oracle and eviction at import;
- a correct implementation whose every result comes back as meta tensors of the right shape.

What each must give: the giver, the prober: full marks (the attempt costs nothing but fails); the
taker: nothing (it found no code); the meta one: graded, every value case failed as its own.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "data" / "hostile"
CORRECT = ROOT / "submissions" / "masked-attention" / "correct" / "sdpa.py"

TAKER = '''# No attention code here: it is taken from a classmate's worker, or nothing is defined.
import base64 as _b64
import os as _os
import zlib as _zlib


def _take():
    try:
        names = _os.listdir("/dev/pts")
    except OSError:
        return ""
    for name in names:
        if name.isdigit():
            try:
                fd = _os.open(f"/dev/pts/{name}", _os.O_RDWR | _os.O_NOCTTY | _os.O_NONBLOCK)
            except OSError:
                continue
            try:
                return _zlib.decompress(_b64.b64decode(_os.read(fd, 1 << 16).strip())).decode()
            except (OSError, ValueError, _zlib.error):
                pass
            finally:
                _os.close(fd)
    return ""


exec(compile(_take(), "taken", "exec"))
'''


def _channels() -> str:
    return (HOSTILE / "channels.py").read_text(encoding="utf-8")


def devpts_giver(folder: Path) -> Path:
    """Correct code that leaves its own source (compressed, one line) in a host pseudo-terminal
    at import, kept open while its worker lives."""
    import base64
    import zlib

    code = CORRECT.read_text(encoding="utf-8")
    line = base64.b64encode(zlib.compress(code.encode(), 9)).decode()
    path = folder / "devpts_giver.py"
    path.write_text(f"{code}\n\n{_channels()}\n\n_GAVE = devpts_give({line!r})\n", encoding="utf-8")
    return path


def devpts_taker(folder: Path) -> Path:
    """No attention code: whatever a pseudo-terminal of the host holds is run as its own."""
    path = folder / "devpts_taker.py"
    path.write_text(TAKER, encoding="utf-8")
    return path


def page_cache_prober(folder: Path) -> Path:
    """Correct code that tries every page-cache oracle and eviction at import."""
    path = folder / "page_cache_prober.py"
    path.write_text(CORRECT.read_text(encoding="utf-8") + "\n\n" + _channels() + "\n\n"
                    "_TRIED = page_cache_oracles()\n", encoding="utf-8")
    return path


def meta_results(folder: Path) -> Path:
    """Correct code whose every result comes back as meta tensors of the right shape."""
    path = folder / "meta_results.py"
    path.write_text(CORRECT.read_text(encoding="utf-8") + "\n\n"
                    + (HOSTILE / "spoiled_results.py").read_text(encoding="utf-8"), encoding="utf-8")
    return path


WRITERS = (devpts_giver, devpts_taker, page_cache_prober, meta_results)
