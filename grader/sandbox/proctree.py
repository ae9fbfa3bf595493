"""A process and everything it started, seen through /proc: its memory, and killing all of it.

Used where no cgroup holds a worker (the "rss" feature): the memory it and its descendants use is
polled, and at the end every descendant is killed. Where /proc is missing, both do nothing.
"""

from __future__ import annotations

import os
import signal

from grader.sandbox.host.zygote import descendants


def tree_rss(root: int | None) -> int:
    """Bytes of memory `root` and its descendants use (PSS, else RSS)."""
    if not root or not os.path.isdir("/proc"):
        return 0
    # PSS, not RSS: forked processes share torch's pages, which RSS would count once per process.
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in [root] + descendants(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * page
            except (OSError, ValueError, IndexError):
                continue
        except (ValueError, IndexError):
            continue
    return total


def kill_tree(root: int | None) -> None:
    """SIGKILL every descendant of `root` (and its process group), a few rounds for late forks."""
    if not root or not os.path.isdir("/proc"):
        return
    for _ in range(5):
        pids = descendants(root)
        if not pids:
            return
        for p in pids:
            try:
                os.killpg(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
