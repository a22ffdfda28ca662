"""Start-up stage timing: what each step of becoming ready cost, in seconds.

Filled by the composition root as it loads and warms each model, shown on
``/readyz`` (``detail.startup_s``), logged once ready, and read by
``bench/startup.py`` so every start-up choice is a measured one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class StartupStages:
    """Ordered stage name → seconds; safe to read while another thread adds to it."""

    def __init__(self) -> None:
        self._stages: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, time.perf_counter() - started)

    def record(self, name: str, seconds: float) -> None:
        with self._lock:
            self._stages[name] = self._stages.get(name, 0.0) + seconds

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return {name: round(seconds, 3) for name, seconds in self._stages.items()}

    def total(self) -> float:
        with self._lock:
            return sum(self._stages.values())
