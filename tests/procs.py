"""Reading /proc for the sandbox tests: which processes are alive, and what they run."""

from __future__ import annotations

import os


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, start time in clock ticks, command line) for every live, non-zombie process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(name)] = (int(fields[1]), int(fields[19]), cmd)
    return table


def processes_mentioning(text: str) -> dict[int, tuple[int, str]]:
    """pid -> (ppid, cmdline) for live processes whose command line mentions ``text``."""
    return {pid: (ppid, cmd) for pid, (ppid, _, cmd) in process_table().items() if text in cmd}


def by_comm(token: str) -> list[int]:
    """Pids whose command name (/proc/PID/comm) is exactly ``token``."""
    pids = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and open(f"/proc/{name}/comm").read().strip() == token:
                pids.append(int(name))
        except OSError:
            pass
    return pids
