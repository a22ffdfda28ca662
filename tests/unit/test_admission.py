"""Admission by queued work and cancellable shared renders (no models needed).

The scheduler runs a fake engine here: these tests are about its
arithmetic (reserved characters x learned rate against a deadline), not audio.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_scheduler import FakeEngine

from voxclone.errors import Cancelled, Overloaded, PayloadTooLarge
from voxclone.runtime.scheduler import DEFAULT_SECONDS_PER_CHAR, Scheduler
from voxclone.runtime.singleflight import SingleFlight


@pytest.fixture()
def scheduler() -> Scheduler:
    sched = Scheduler(FakeEngine(), workers=2, queue_size=64)
    yield sched
    sched.close()


def test_admission_refuses_once_reserved_work_passes_the_deadline(scheduler: Scheduler) -> None:
    rate = DEFAULT_SECONDS_PER_CHAR
    now = time.monotonic()
    # 20 s of work on two workers = 10 s of backlog.
    held = scheduler.admit(20.0 / rate, now + 60)
    assert scheduler.stats().backlog_s == pytest.approx(10.0)
    with pytest.raises(Overloaded) as refused:
        scheduler.admit(100, now + 5)  # 10 s wait + its own work > 5 s
    assert refused.value.retry_after is not None and refused.value.retry_after >= 5
    # A stream only has to start by its deadline: same answer when the wait alone is over it.
    with pytest.raises(Overloaded):
        scheduler.admit(100, now + 5, must_finish=False)
    scheduler.admit(100, now + 11, must_finish=False).release()
    held.release()  # the request ended (done, failed or its client left)
    scheduler.admit(100, now + 5).release()
    assert scheduler.stats().reserved_chars == 0


def test_consumed_chunks_shrink_the_backlog(scheduler: Scheduler) -> None:
    held = scheduler.admit(1000, None)
    before = scheduler.stats().backlog_s
    held.consume(600)
    assert scheduler.stats().backlog_s == pytest.approx(before * 0.4)
    held.release()


def test_text_too_long_for_its_deadline_is_413_not_retry(scheduler: Scheduler) -> None:
    with pytest.raises(PayloadTooLarge) as refused:
        scheduler.admit(1_000_000, time.monotonic() + 5)
    assert refused.value.field == "text" and refused.value.limit > 0


def test_no_deadline_only_counts_towards_the_backlog(scheduler: Scheduler) -> None:
    held = scheduler.admit(10_000_000, None)  # CLI or job: never refused for its length
    assert scheduler.stats().backlog_s > 1000
    with pytest.raises(Overloaded):
        scheduler.check_wait(time.monotonic() + 30)
    held.release()
    scheduler.check_wait(time.monotonic() + 30)


def test_shared_render_stops_only_when_every_waiter_left() -> None:
    flight = SingleFlight()
    leader_gone = threading.Event()
    follower_gone = threading.Event()
    started = threading.Event()
    seen: list[bool] = []

    def render(abandoned: object) -> str:
        assert callable(abandoned)
        started.set()
        leader_gone.set()  # the first client leaves at once
        time.sleep(0.2)
        seen.append(abandoned())  # the second still waits: keep going
        follower_gone.set()
        deadline = time.monotonic() + 5
        while not abandoned():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        raise Cancelled("everyone left")

    errors: list[BaseException] = []

    def follower() -> None:
        started.wait(5)
        try:
            flight.do_cancellable("k", lambda _a: "never", follower_gone.is_set)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=follower)
    thread.start()
    with pytest.raises(Cancelled):
        flight.do_cancellable("k", render, leader_gone.is_set)
    thread.join(5)
    assert seen == [False]
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
