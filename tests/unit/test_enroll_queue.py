"""The enrollment queue (service/voices/admission.py) on a made-up clock:
what it admits, refuses (and the Retry-After it names), the order of turns,
what it learns, and a waiting enrollment whose client left (issue 45)."""

from __future__ import annotations

import threading
import time

import pytest
from fakes import FakeClock

from voxclone.errors import Cancelled, Overloaded
from voxclone.runtime.admission import HEADROOM
from voxclone.service.voices.admission import EnrollmentQueue


def test_full_queue_refuses_at_once_with_retry_after() -> None:
    clock = FakeClock(100.0)
    q = EnrollmentQueue(slots=1, queue=2, clock=clock, prior_s=10.0)
    first = q.admit(renders=True)
    first.wait_turn()  # running
    waiting = [q.admit(renders=True) for _ in range(2)]
    clock.now += 4.0
    started = time.perf_counter()
    with pytest.raises(Overloaded) as refused:
        q.admit(renders=True)
    assert time.perf_counter() - started < 0.01
    # The first slot frees in 10 - 4 = 6 s: then one waiting place does.
    assert refused.value.retry_after == 6.0 and refused.value.limit == 2
    assert "queue is full" in refused.value.message
    assert q.stats()["rejected"] == 1
    for ticket in (first, *waiting):
        ticket.release()
    assert q.stats()["running"] == q.stats()["waiting"] == 0


def test_admitted_places_a_free_slot_takes_are_not_queued() -> None:
    # Ten arriving together before any worker thread took its turn: the
    # free slot's enrollment must not count as waiting (it did, refusing one
    # that fitted).
    q = EnrollmentQueue(slots=2, queue=1, prior_s=1.0)
    tickets = [q.admit(renders=True) for _ in range(3)]
    with pytest.raises(Overloaded):
        q.admit(renders=True)
    for ticket in tickets:
        ticket.release()


def test_deadline_refusal_names_when_it_would_fit() -> None:
    clock = FakeClock(100.0)
    q = EnrollmentQueue(slots=1, queue=10, clock=clock, prior_s=10.0)
    running = q.admit(renders=True)
    running.wait_turn()
    queued = q.admit(renders=True, deadline=clock.now + 60.0)  # done in 20 s: fits
    # A third would be done in 30 s; 30 s of deadline allows 30 x HEADROOM.
    with pytest.raises(Overloaded) as refused:
        q.admit(renders=True, deadline=clock.now + 30.0)
    assert refused.value.retry_after == float(int(30 - 30 * HEADROOM) + 1)
    assert "would be done in about 30 s" in refused.value.message
    queued.release()
    running.release()


def test_a_free_slot_admits_whatever_the_estimate() -> None:
    # A host so slow that one enrollment alone misses the deadline: waiting
    # would not help, so refusing would refuse every retry as well.
    clock = FakeClock(100.0)
    q = EnrollmentQueue(slots=1, queue=4, clock=clock, prior_s=57.0)
    alone = q.admit(renders=True, deadline=clock.now + 60.0)
    alone.wait_turn()
    with pytest.raises(Overloaded):  # behind it, the estimate does refuse
        q.admit(renders=True, deadline=clock.now + 60.0)
    alone.release()


def test_a_running_enrollment_whose_client_left_is_not_waited_for() -> None:
    # It ends at its next render: the next one is admitted, not refused for
    # the rest of its estimate (a real server refused one sent as the first
    # client gave up: 48 s of a 53 s enrollment still counted).
    clock = FakeClock(100.0)
    q = EnrollmentQueue(slots=1, queue=4, clock=clock, prior_s=53.0)
    left = threading.Event()
    running = q.admit(renders=True)
    running.wait_turn(left.is_set)
    clock.now += 5.0
    with pytest.raises(Overloaded):
        q.admit(renders=True, deadline=clock.now + 60.0)
    left.set()
    q.admit(renders=True, deadline=clock.now + 60.0).release()
    running.release()


def test_learns_the_median_of_completed_enrollments_only() -> None:
    clock = FakeClock(100.0)
    q = EnrollmentQueue(slots=1, queue=1, clock=clock, prior_s=3.0)
    for seconds, completed in ((8.0, True), (6.0, True), (100.0, False), (7.0, True)):
        ticket = q.admit(renders=True)
        ticket.wait_turn()
        clock.now += seconds
        ticket.release(completed=completed)
    assert q.expected_s == 7.0  # the failed 100 s one taught nothing


def test_turns_are_first_come_first_served() -> None:
    q = EnrollmentQueue(slots=1, queue=5)
    tickets = [q.admit(renders=True) for _ in range(4)]
    order: list[int] = []

    def run(i: int) -> None:
        tickets[i].wait_turn()
        order.append(i)
        time.sleep(0.01)
        tickets[i].release(completed=True)

    # Started in reverse: the queue, not the threads' start, sets the order.
    threads = [threading.Thread(target=run, args=(i,)) for i in reversed(range(4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert order == [0, 1, 2, 3]


def test_client_leaving_while_waiting_gives_up_the_place() -> None:
    q = EnrollmentQueue(slots=1, queue=1)
    running = q.admit(renders=True)
    running.wait_turn()
    waiting = q.admit(renders=True)
    gone = threading.Event()
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            waiting.wait_turn(gone.is_set)
        except Cancelled as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    gone.set()
    t.join(timeout=5)
    assert outcome and "went away" in str(outcome[0])
    assert q.stats()["waiting"] == 0
    q.admit(renders=True).release()  # the place is free again
    running.release()


def test_drafts_never_wait_but_count_towards_the_bound() -> None:
    q = EnrollmentQueue(slots=1, queue=1)
    full = q.admit(renders=True)
    full.wait_turn()
    draft = q.admit(renders=False)
    draft.wait_turn()  # returns at once although the slot is taken
    with pytest.raises(Overloaded):
        q.admit(renders=False)  # 1 running + 1 draft = slots + queue
    draft.release()
    draft.release()  # twice is harmless
    assert q.stats()["drafts"] == 0
    full.release()
