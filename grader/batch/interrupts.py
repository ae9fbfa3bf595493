"""Ctrl-C during a batch: the first SIGINT/SIGTERM lets the submissions in progress finish and be
recorded, then the run stops; a second one stops at once (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


class Interrupts:
    """SIGINT/SIGTERM: the first sets `requested` and calls `on_first` (finish what is running), the
    second raises KeyboardInterrupt. Installed only from the main thread; restored on exit."""

    def __init__(self, on_first: Callable[[], None]):
        self.requested = False
        self._on_first = on_first
        self._saved: dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._on_first()

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._saved.items():
            signal.signal(sig, old)
