"""Admission by queued work and cancellable shared renders (no models needed).

The scheduler runs a fake engine and a fake clock here: these tests are about
its arithmetic (reserved characters x learned rate against a deadline), not
audio, so the engine's speed is fed to the rate estimator directly.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fakes import FakeClock, FakeEngine

from voxclone.errors import Cancelled, Overloaded, PayloadTooLarge
from voxclone.runtime.admission import HEADROOM, WorkRate, estimate
from voxclone.runtime.scheduler import PRIORITY_BACKGROUND, Scheduler
from voxclone.runtime.shared_render import SingleFlight
from voxclone.synth.engine.base import SynthItem

SENTENCE_CHARS = 41  # "Client 7 saw the river and the garden." and alike


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def scheduler(clock: FakeClock) -> Iterator[Scheduler]:
    sched = Scheduler(FakeEngine(), workers=2, queue_size=64, clock=clock)
    yield sched
    sched.close()


def _calibrate(sched: Scheduler, seconds_per_char: float, calls: int = 12) -> None:
    """As if ``calls`` one-worker engine calls had run at exactly this rate."""
    for _ in range(calls):
        sched.rate.observe(seconds_per_char * 100, 100)


def _admit_burst(sched: Scheduler, clock: FakeClock, n: int, chars: float, within: float) -> int:
    admitted = 0
    for _ in range(n):
        try:
            sched.admit(chars, clock() + within)
        except Overloaded:
            continue
        admitted += 1
    return admitted


def _last_finish(jobs: int, seconds_each: float, workers: int) -> float:
    """When the last of ``jobs`` single-chunk requests ends, served FIFO by ``workers``."""
    free = [0.0] * workers
    end = 0.0
    for _ in range(jobs):
        start = heapq.heappop(free)
        end = start + seconds_each
        heapq.heappush(free, end)
    return end


def test_cold_scheduler_serves_a_small_team_at_once(scheduler: Scheduler, clock: FakeClock) -> None:
    # Nothing measured yet; 2, 4, 8 and 16 people press "speak" together on a
    # short sentence with a 30 s deadline. Before: a deliberately slow prior
    # (0.25 s/char) refused all but the first (2 -> [200, 503], 16 -> 15 x 503)
    # although each render takes 1.5-3.5 s. A cold estimate must never refuse
    # on a lightly loaded server: the server measures its real rate right
    # after start-up (Scheduler.calibrate) instead.
    for users in (2, 4, 8, 16):
        held = []
        for _ in range(users):
            held.append(scheduler.admit(SENTENCE_CHARS, clock() + 30.0))
        for admission in held:
            admission.release()


def test_calibration_call_replaces_the_prior(clock: FakeClock) -> None:
    engine = FakeEngine()
    sched = Scheduler(engine, workers=2, queue_size=64, clock=clock)
    try:
        assert not sched.rate.calibrated
        item = SynthItem((1,) * 60, np.zeros((510, 1, 256), np.float32), 1.0)
        sched.calibrate(item, 60.0)
        assert sched.rate.calibrated and sched.rate.samples == 1
    finally:
        sched.close()


def test_calibrated_flood_is_refused_fast_not_timed_out(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # The loaded CI machine, measured (0.1 s/char on one worker: 4.1 s a
    # sentence): of 40 at once, admission takes only what two workers finish
    # by the deadline and refuses the rest at once.
    _calibrate(scheduler, 0.1)
    admitted = _admit_burst(scheduler, clock, 40, SENTENCE_CHARS, 30.0)
    assert 1 <= admitted < 40
    assert _last_finish(admitted, SENTENCE_CHARS * 0.1, workers=2) <= 30.0, admitted


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.2])
def test_calibrated_admission_admits_only_what_finishes_in_time(
    scheduler: Scheduler, clock: FakeClock, rate: float
) -> None:
    _calibrate(scheduler, rate)
    admitted = _admit_burst(scheduler, clock, 64, SENTENCE_CHARS, 30.0)
    # Every admitted request finishes by the deadline at the measured rate ...
    assert _last_finish(admitted, SENTENCE_CHARS * rate, workers=2) <= 30.0 * HEADROOM
    # ... and admission does not waste much of the capacity either.
    capacity = 2 * math.floor(30.0 * HEADROOM / (SENTENCE_CHARS * rate))
    assert admitted >= min(64, capacity) - 2, (admitted, capacity)


def test_one_chunk_is_not_shared_between_workers() -> None:
    # A one-sentence request runs on one worker: its own time is not halved.
    est = estimate(reserved_chars=80, chars=40, piece_chars=510, seconds_per_char=0.1, workers=2)
    assert est.wait_s == pytest.approx(4.0)
    assert est.finish_s == pytest.approx(8.0)
    # A long text's chunks render two at a time (the look-ahead), the last alone.
    long = estimate(reserved_chars=0, chars=1000, piece_chars=100, seconds_per_char=0.1, workers=2)
    assert long.first_audio_s == pytest.approx(10.0)
    assert long.finish_s == pytest.approx(900 * 0.1 / 2 + 10.0)


def test_rate_learns_from_calls_and_follows_the_machine() -> None:
    rate = WorkRate(prior=0.25)
    assert not rate.calibrated and rate.pessimistic == pytest.approx(0.25)
    rate.observe(2.0, 100)  # the first measurement replaces the prior
    assert rate.mean == pytest.approx(0.02) and rate.pessimistic == rate.mean
    rate.observe(0.01, 4)  # too short to say anything about the rate
    assert rate.samples == 1
    for _ in range(30):  # the machine got busier: the estimate follows
        rate.observe(6.0, 100)
    assert rate.mean == pytest.approx(0.06, rel=0.05)
    # A call alone on both cores counts as if both had shared it.
    fast_lane = WorkRate()
    fast_lane.observe(1.0, 100, cores=2)
    assert fast_lane.mean == pytest.approx(0.02)


def test_admission_refuses_once_reserved_work_passes_the_deadline(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    _calibrate(scheduler, 0.01)
    rate = scheduler.seconds_per_char
    now = clock()
    # 20 s of work, 10 s on each of two workers = 10 s of backlog.
    held = [scheduler.admit(10.0 / rate, now + 60) for _ in range(2)]
    assert scheduler.stats().backlog_s == pytest.approx(10.0)
    with pytest.raises(Overloaded) as refused:
        scheduler.admit(100, now + 5)  # 10 s wait + its own work > 5 s
    assert refused.value.retry_after is not None and refused.value.retry_after >= 5
    # A stream only has to start by its deadline: same answer when the wait alone is over it.
    with pytest.raises(Overloaded):
        scheduler.admit(100, now + 5, must_finish=False)
    scheduler.admit(100, now + 14, must_finish=False).release()
    for admission in held:
        admission.release()  # the requests ended (done, failed or their clients left)
    scheduler.admit(100, now + 5).release()
    assert scheduler.stats().reserved_chars == 0


def test_stream_first_audio_budget(scheduler: Scheduler, clock: FakeClock) -> None:
    _calibrate(scheduler, 0.01)
    # Two requests of 1000 x 0.01 s, one on each worker: 10 s before one is free.
    held = [scheduler.admit(1000, None) for _ in range(2)]
    now = clock()
    # Far from its deadline, but the first audio would come after 10 s.
    with pytest.raises(Overloaded):
        scheduler.admit(50, now + 600, must_finish=False, first_audio_s=5.0)
    scheduler.admit(50, now + 600, must_finish=False, first_audio_s=20.0).release()
    for admission in held:
        admission.release()


def test_idle_scheduler_admits_even_with_a_slow_prior(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # 1000 chars at the cold prior would be minutes: still taken on an idle
    # server (nothing to wait for; the call calibrates the rate) ...
    scheduler.admit(1000, clock() + 30).release()
    # ... but once the rate is measured, a text that cannot be done alone even
    # on all cores is a 413 (1000 x 0.25 / 2 cores: 125 s > 30 s).
    _calibrate(scheduler, 0.25)
    with pytest.raises(PayloadTooLarge) as refused:
        scheduler.admit(1000, clock() + 30)
    assert refused.value.field == "text" and 0 < refused.value.limit < 1000


def test_rate_from_a_load_spike_does_not_lock_texts_out_forever(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # A rate measured while the machine was swamped says 200 characters need
    # 50 s even alone on all cores (0.5 s/char / 2): a 413 while it is fresh ...
    _calibrate(scheduler, 0.5)
    scheduler._measured_at = clock()  # as if the last call had just finished
    with pytest.raises(PayloadTooLarge):
        scheduler.admit(200, clock() + 30)
    # ... but nothing admitted means nothing re-measured: once the rate is old,
    # an idle server takes a borderline text again to learn the current speed,
    clock.now += 60
    scheduler.admit(200, clock() + 30).release()
    # while a text far too long is still refused.
    with pytest.raises(PayloadTooLarge):
        scheduler.admit(5000, clock() + 30)


def test_one_slow_call_in_a_spike_does_not_lock_out_later_requests() -> None:
    # Before: a running mean plus its deviation jumped from 0.02 to ~0.09 s/char
    # after one call that ran 10x slow, refusing the next minute's requests.
    rate = WorkRate()
    for _ in range(10):
        rate.observe(2.0, 100)
    rate.observe(20.0, 100)  # one call during a load spike
    assert rate.pessimistic == pytest.approx(0.02)


def test_a_short_request_waits_only_for_running_work_and_first_chunks(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # A long whole file (20 chunks) is admitted; a new one-sentence request's
    # only chunk jumps ahead of the long text's later chunks, so the long
    # text's backlog (10 s on two workers) must not refuse it (deadline 5 s).
    _calibrate(scheduler, 0.01)
    held = scheduler.admit(2000, clock() + 600, piece_chars=100)
    scheduler.admit(40, clock() + 5).release()
    held.release()


def test_two_short_requests_on_two_workers_both_start_at_once(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # Measured on this host under load: 0.18 s a unit, a 100-unit request 18 s.
    # Two at once run side by side (18 s each, deadline 30 s); before, the
    # second was refused as if it queued behind half of the first (26.6 s).
    _calibrate(scheduler, 0.18)
    first = scheduler.admit(100, clock() + 30)
    scheduler.admit(100, clock() + 30).release()
    # A third has to wait for one of them: 36 s, past the deadline.
    second = scheduler.admit(100, clock() + 30)
    with pytest.raises(Overloaded):
        scheduler.admit(100, clock() + 30)
    first.release()
    second.release()


def test_refusal_names_what_it_computed(scheduler: Scheduler, clock: FakeClock) -> None:
    _calibrate(scheduler, 0.1)
    held = [scheduler.admit(SENTENCE_CHARS, clock() + 600) for _ in range(12)]
    with pytest.raises(Overloaded) as refused:
        scheduler.admit(SENTENCE_CHARS, clock() + 10)
    message = refused.value.message
    numbers = [float(n) for n in re.findall(r"([0-9]+(?:\.[0-9]+)?) s", message)]
    assert numbers[0] > numbers[1], message  # the wait it names exceeds what is allowed
    assert refused.value.retry_after == math.ceil(numbers[0] - numbers[1]), message
    for admission in held:
        admission.release()


def test_consumed_chunks_shrink_the_backlog(scheduler: Scheduler) -> None:
    held = scheduler.admit(1000, None)
    before = scheduler.stats().backlog_s
    held.consume(600)
    assert scheduler.stats().backlog_s == pytest.approx(before * 0.4)
    held.release()


def test_no_deadline_only_counts_towards_the_backlog(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # CLI or jobs: never refused for their length (one on each worker).
    held = [scheduler.admit(10_000_000, None) for _ in range(2)]
    assert scheduler.stats().backlog_s > 1000
    with pytest.raises(Overloaded):
        scheduler.check_wait(clock() + 30)
    for admission in held:
        admission.release()
    scheduler.check_wait(clock() + 30)


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


def test_a_background_job_counts_only_its_look_ahead_window(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    _calibrate(scheduler, 0.01)
    now = clock()
    # A book-long job: 100k characters, of which 1000 are queued at a time.
    job = scheduler.admit_window(100_000, 1000)
    assert scheduler.stats().reserved_chars == 1000
    assert job.priority == PRIORITY_BACKGROUND  # its chunks yield to live ones
    live = scheduler.admit(10, None)
    assert live.priority is None
    live.release()
    # A live request is admitted next to it (100k chars counted whole would
    # be 500 s of backlog and refuse it).
    scheduler.admit(100, now + 30).release()
    job.consume(98_500)
    assert scheduler.stats().reserved_chars == 1000
    job.consume(700)  # the text's end: only what is left counts
    assert scheduler.stats().reserved_chars == pytest.approx(800)
    job.release()
    assert scheduler.stats().reserved_chars == 0


def test_a_deadline_no_machine_could_meet_is_refused_even_cold(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    # X-Request-Deadline: 0.05 on a server that has measured nothing yet: even
    # the fast prior (0.015 s/unit, both cores) needs ~0.3 s for a sentence, so
    # the request is refused with 413 instead of rendered and answered late.
    with pytest.raises(PayloadTooLarge):
        scheduler.admit(SENTENCE_CHARS, clock() + 0.05)
    # A normal deadline is taken (nothing is refused on a cold estimate's guess).
    scheduler.admit(SENTENCE_CHARS, clock() + 30).release()


def test_a_flood_sees_itself_at_the_precheck(scheduler: Scheduler, clock: FakeClock) -> None:
    # 40 whole-file requests arrive at once: the event-loop precheck reserves
    # each one's lower bound, so the later ones are refused there, before any
    # thread (measured before: 18 of 40 passed and were refused in a thread
    # after up to 184 ms, because the precheck reserved nothing).
    _calibrate(scheduler, 0.1)
    units = SENTENCE_CHARS * 0.75
    passed = []
    for _ in range(40):
        try:
            passed.append(
                scheduler.precheck(
                    units,
                    clock() + 30,
                    must_finish=True,
                    first_audio_s=None,
                    piece_chars=20,
                    first_piece_chars=units,
                )
            )
        except Overloaded:
            continue
    assert 1 <= len(passed) < 40
    # What passed is priced for real and replaces its reservation (here at
    # the same size: the last one in still fits at the end of the queue).
    real = scheduler.admit(units, clock() + 30, replacing=passed[-1])
    assert passed[-1].remaining == 0 and real.remaining == units
    for admission in [real, *passed]:
        admission.release()
    assert scheduler.stats().reserved_chars == 0


def test_an_early_arrival_is_not_refused_for_the_ones_behind_it(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    """Voice-agent sessions arriving at once (issue 48): each one's precheck
    reserves its place; when the first is priced (a little above its lower
    bound), only what arrived before it is ahead of its first chunk. It used
    to count every later arrival too and was refused (3.5 s > 3.4 s here),
    as test_concurrent_sessions_all_speak[8] saw at load 9."""
    _calibrate(scheduler, 0.1)  # a 10-unit chunk: 1 s on one worker
    deadline = clock() + 4.0  # first audio by 3.4 s (headroom)
    arrived = []
    for _ in range(8):
        try:
            arrived.append(
                scheduler.precheck(
                    10,
                    deadline,
                    must_finish=False,
                    first_audio_s=None,
                    piece_chars=10,
                    first_piece_chars=10,
                )
            )
        except Overloaded:
            continue
    assert len(arrived) == 6  # two first chunks a second on two workers
    first = scheduler.admit(
        15, deadline, must_finish=False, first_piece_chars=15, replacing=arrived[0]
    )
    # It kept its place: the last arrival still queues behind it (2.5 s of
    # first chunks ahead + its own 1 s: past 3.4 s).
    with pytest.raises(Overloaded):
        scheduler.admit(10, deadline, must_finish=False, replacing=arrived[-1])
    for admission in [first, *arrived]:
        admission.release()
    assert scheduler.stats().reserved_chars == 0
