"""Stopping an engine call that is already running, from another thread.

The scheduler drops a cancelled request's queued chunks before they reach
the engine, but a chunk already inside ``Engine.synthesize`` used to run to
its end: a voice agent's barge-in (``close_context``) left the engine busy
12.8 s at load 13 on the 2-core dev host. An engine that can cut a running
call declares ``stoppable = True`` and takes ``stop=`` in ``synthesize``; it
registers with :meth:`CallStop.on_stop` what cuts its call (ONNX Runtime:
``RunOptions.terminate``, which the run checks between operators: 1-34 ms
after it was set on a 185-token Kokoro chunk at load 14) and raises
:class:`~voxclone.errors.Cancelled` when it stopped. The scheduler sets
the stop when the call's one request is cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeGuard

import numpy as np

from voxclone.synth.engine.base import SynthItem


class CallStop:
    """A one-way switch: ``stop()`` runs every registered hook once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def stopped(self) -> bool:
        return self._stopped

    def on_stop(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` when stopped (at once if already stopped)."""
        with self._lock:
            if not self._stopped:
                self._hooks.append(hook)
                return
        hook()

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()


def stoppable(engine: object) -> TypeGuard[StoppableEngine]:
    """Whether ``engine.synthesize`` takes ``stop=`` (an optional capability:
    engines without it keep the plain ``Engine.synthesize`` signature)."""
    return bool(getattr(engine, "stoppable", False))


class StoppableEngine(Protocol):
    def synthesize(
        self, batch: list[SynthItem], *, exclusive: bool = False, stop: CallStop | None = None
    ) -> list[np.ndarray]: ...
