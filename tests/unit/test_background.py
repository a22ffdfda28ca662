"""Background work at low CPU priority (runtime/background.py): the cloning
models load this way once speech is served, so they do not slow its first
streams (issue #20)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from voxclone.runtime.background import (
    LOWEST_PRIORITY,
    run_at_low_priority,
    wait_for_quiet,
)


def _own_priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread priority here")
def test_work_runs_at_the_lowest_priority_in_its_own_thread_and_returns() -> None:
    caller, before = threading.get_ident(), _own_priority()
    seen = run_at_low_priority(lambda: (threading.get_ident(), _own_priority()), name="t")
    assert seen[0] != caller and seen[1] == LOWEST_PRIORITY
    # The caller (e.g. a pooled thread that serves requests later) is untouched.
    assert _own_priority() == before


def test_what_the_work_raises_reaches_the_caller() -> None:
    def broken() -> None:
        raise ValueError("weights unreadable")

    with pytest.raises(ValueError, match="weights unreadable"):
        run_at_low_priority(broken, name="t")


def test_waits_for_a_quiet_moment_and_gives_up_at_the_deadline() -> None:
    busy_until = time.monotonic() + 0.3
    started = time.monotonic()
    assert wait_for_quiet(lambda: time.monotonic() > busy_until, 0.2, 5.0, poll_s=0.01)
    assert time.monotonic() - started >= 0.5  # 0.3 s busy, then 0.2 s quiet
    # Busy for good: it goes ahead at the deadline instead of waiting forever.
    started = time.monotonic()
    assert not wait_for_quiet(lambda: False, 0.1, 0.3, poll_s=0.01)
    assert 0.3 <= time.monotonic() - started < 2.0
