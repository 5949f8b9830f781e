"""Seconds per named stage of a piece of work, for the reports' timings."""

from __future__ import annotations

import time


class Stopwatch:
    """``lap(name)`` books the seconds since the previous lap (or the start) under ``name``, in ``laps``."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str, digits: int = 3) -> float:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, digits)
        self._last = now
        return self.laps[name]
