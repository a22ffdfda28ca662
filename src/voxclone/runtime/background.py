"""Work that must not slow the requests being served: run it at low CPU priority.

A server is ready for speech before its cloning models are loaded, and the
loading (importing torch, reading the speaker encoder: ~4 s) then competed
with the first streams: the first request after start had its first audio
after 1.06-1.49 s against 0.6-0.8 s for later ones (2-core host, a stream of
three sentences; after this change 0.80-0.87 s, same host, interleaved runs).
At the lowest priority (nice 19) the loading takes only the CPU speech leaves.

Lowering the priority does not stop Python from holding the GIL, and the
loading was mostly imports; so it also waits for speech to be idle for a moment
(:func:`wait_for_quiet`) before it starts. Even so, the second and third
streams after a start were 0.2-0.3 s slower while torch was imported; the
speaker encoder has not imported torch since (synth/voice/ge2e.py), and its
load is ~0.1 s once its ONNX graph is saved.

Linux sets the nice value per thread, and a thread inherits it from the
thread that creates it; so the work runs in a fresh thread made for it, never
in a pooled one a request may reuse later. Elsewhere, or where the system
refuses, the work runs at normal priority.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

LOWEST_PRIORITY = 19


def lower_this_thread() -> bool:
    """Lower the calling thread's CPU priority to the lowest; False if not possible."""
    if not hasattr(os, "setpriority"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
    except OSError:
        log.debug("could not lower the priority of a background thread", exc_info=True)
        return False
    return True


def run_at_low_priority(work: Callable[[], T], *, name: str) -> T:
    """``work()`` in a new thread at the lowest CPU priority; waits for it and
    returns its result, or raises what it raised."""
    outcome: dict[str, object] = {}

    def body() -> None:
        lower_this_thread()
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def wait_for_quiet(
    is_idle: Callable[[], bool], quiet_s: float, max_wait_s: float, *, poll_s: float = 0.05
) -> bool:
    """Block until ``is_idle()`` has held for ``quiet_s`` (True), or ``max_wait_s``
    passed first (False: the caller goes ahead anyway)."""
    deadline = time.monotonic() + max_wait_s
    quiet_since: float | None = None
    while True:
        now = time.monotonic()
        if is_idle():
            quiet_since = now if quiet_since is None else quiet_since
            if now - quiet_since >= quiet_s:
                return True
        else:
            quiet_since = None
        if now >= deadline:
            return False
        time.sleep(poll_s)
