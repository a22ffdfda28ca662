"""The engine's circuit breaker: fail fast after repeated engine errors."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class CircuitBreaker:
    def __init__(self, threshold: int, cooldown_s: float, clock: Callable[[], float]) -> None:
        self._threshold = threshold
        self._cooldown = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_running = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None and self._clock() - self._opened_at < self._cooldown

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._clock() - self._opened_at < self._cooldown or self._trial_running:
                return False
            self._trial_running = True  # half-open: one trial call
            return True

    def record(self, ok: bool) -> None:
        with self._lock:
            self._trial_running = False
            if ok:
                self._failures = 0
                self._opened_at = None
                return
            self._failures += 1
            if self._failures >= self._threshold:
                if self._opened_at is None:
                    log.error("engine circuit opened after %d failures", self._failures)
                self._opened_at = self._clock()
