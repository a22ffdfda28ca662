"""Scheduler logic against a fake engine: backpressure, priorities, deadlines,
cancellation, circuit breaker and dynamic batching.

The fake engine is a legitimate test double here: these tests are about the
scheduler's own decisions, not about audio.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest
from fakes import WAIT_S, FakeClock, FakeEngine

from voxclone.errors import Cancelled, DeadlineExceeded, Overloaded
from voxclone.runtime.scheduler import (
    PRIORITY_BACKGROUND,
    PRIORITY_FIRST_CHUNK,
    PRIORITY_NORMAL,
    Scheduler,
    WorkTiming,
)
from voxclone.runtime.scheduler.workers import LONE_LISTENER_MAX_UNITS, LONE_LISTENER_QUIET_S
from voxclone.synth.engine.base import SynthItem
from voxclone.synth.engine.call_stop import CallStop


def item(token: int) -> SynthItem:
    return SynthItem((token,), np.zeros(256, np.float32), 1.0)


def hold_worker(engine: FakeEngine, scheduler: Scheduler, token: int = 999) -> Future[np.ndarray]:
    """Occupy the (single) worker inside an engine call until ``engine.gate`` is set."""
    engine.gate.clear()
    engine.entered.clear()
    future = scheduler.submit(item(token))
    assert engine.entered.wait(WAIT_S), "worker never reached the engine"
    return future


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def make_scheduler() -> Iterator[object]:
    made: list[Scheduler] = []

    def factory(engine: FakeEngine, **kwargs: object) -> Scheduler:
        sched = Scheduler(engine, **kwargs)  # type: ignore[arg-type]
        made.append(sched)
        return sched

    yield factory
    for sched in made:
        sched.close()


# --------------------------------------------------------------- backpressure


def test_full_queue_refuses_fast_with_retry_after(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1, queue_size=3)
    held = hold_worker(engine, sched)
    queued = [sched.submit(item(i)) for i in range(3)]
    assert sched.depth == 3

    started = time.perf_counter()
    with pytest.raises(Overloaded) as info:
        sched.submit(item(42))
    elapsed = time.perf_counter() - started

    assert elapsed < 0.1, f"refusal took {elapsed * 1000:.1f} ms"
    assert info.value.retry_after is not None and info.value.retry_after >= 1
    assert info.value.limit == 3
    assert sched.stats().rejected == 1

    engine.gate.set()
    held.result(WAIT_S)
    for fut in queued:
        fut.result(WAIT_S)
    assert 42 not in engine.seen  # the refused item never ran


# ------------------------------------------------------------------ priorities


def test_first_chunks_jump_the_queue(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    normal = [sched.submit(item(t), priority=PRIORITY_NORMAL) for t in (1, 2, 3)]
    first = [sched.submit(item(t), priority=PRIORITY_FIRST_CHUNK) for t in (10, 11)]
    engine.gate.set()
    for fut in [held, *normal, *first]:
        fut.result(WAIT_S)
    # FIFO within a priority, first chunks before everything queued earlier.
    assert engine.seen == [999, 10, 11, 1, 2, 3]


def test_background_work_waits_for_live_chunks(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    background = [sched.submit(item(t), priority=PRIORITY_BACKGROUND) for t in (20, 21)]
    normal = [sched.submit(item(t), priority=PRIORITY_NORMAL) for t in (1, 2)]
    engine.gate.set()
    for fut in [held, *background, *normal]:
        fut.result(WAIT_S)
    # A speech job's chunks (queued first) run after live requests' chunks.
    assert engine.seen == [999, 1, 2, 20, 21]


def test_background_work_leaves_a_worker_for_live_requests(
    engine: FakeEngine, make_scheduler
) -> None:
    # Two job slots on two workers used to put a job chunk (~15 s at 510
    # tokens) on both, so a live stream's first chunk waited for one to end.
    sched = make_scheduler(engine, workers=2)
    engine.gate.clear()
    background = [sched.submit(item(t), priority=PRIORITY_BACKGROUND) for t in (20, 21, 22)]
    time.sleep(0.3)
    assert engine.seen == [20]  # one job chunk runs; the other worker waits for live work
    live = sched.submit(item(1))
    until = time.monotonic() + WAIT_S
    while engine.seen != [20, 1] and time.monotonic() < until:
        time.sleep(0.01)
    assert engine.seen == [20, 1]
    engine.gate.set()
    for fut in [*background, live]:
        fut.result(WAIT_S)
    assert sorted(engine.seen) == [1, 20, 21, 22]


def test_tenants_take_turns_within_a_priority(engine: FakeEngine, make_scheduler) -> None:
    # Alice's job queued six chunks before Bob's one-chunk job arrived. Before:
    # FIFO, Bob's chunk ran after all six (the probe: a 5-word job waited over
    # 60 s behind three 2,160-character jobs). Now Bob's goes after one of Alice's.
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    alice = [
        sched.submit(item(t), priority=PRIORITY_BACKGROUND, tenant="alice") for t in range(10, 16)
    ]
    bob = sched.submit(item(50), priority=PRIORITY_BACKGROUND, tenant="bob")
    engine.gate.set()
    for fut in [held, *alice, bob]:
        fut.result(WAIT_S)
    assert engine.seen == [999, 10, 50, 11, 12, 13, 14, 15]


def test_one_tenant_alone_keeps_fifo_order(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    futures = [sched.submit(item(t), tenant="alice") for t in (1, 2, 3)]
    engine.gate.set()
    for fut in [held, *futures]:
        fut.result(WAIT_S)
    assert engine.seen == [999, 1, 2, 3]


# ------------------------------------------------------- deadlines, cancellation


def test_expired_item_fails_without_reaching_engine(engine: FakeEngine, make_scheduler) -> None:
    clock = FakeClock()
    sched = make_scheduler(engine, workers=1, clock=clock)
    held = hold_worker(engine, sched)
    late = sched.submit(item(7), timeout_s=1.0)
    on_time = sched.submit(item(8), timeout_s=100.0)
    clock.now += 5.0  # item 7's deadline passes while it waits in the queue
    engine.gate.set()

    with pytest.raises(DeadlineExceeded):
        late.result(WAIT_S)
    assert on_time.result(WAIT_S)[0] == 8
    held.result(WAIT_S)
    assert 7 not in engine.seen
    assert engine.seen == [999, 8]


def test_cancelled_callable_drops_item(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    gone = threading.Event()
    dropped = sched.submit(item(5), cancelled=gone.is_set)
    kept = sched.submit(item(6), cancelled=lambda: False)
    gone.set()  # client disconnects while the item is still queued
    engine.gate.set()

    # The caller learns it with the product's Cancelled, which every render
    # path handles. A concurrent.futures.CancelledError (was) escaped the
    # realtime session's render thread and ended a barge-in's socket with
    # neither its other context's audio nor a close frame (CI, stop 55).
    with pytest.raises(Cancelled):
        dropped.result(WAIT_S)
    assert kept.result(WAIT_S)[0] == 6
    held.result(WAIT_S)
    assert 5 not in engine.seen


def test_cancelled_future_drops_item(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1)
    held = hold_worker(engine, sched)
    dropped = sched.submit(item(5))
    assert dropped.cancel()
    after = sched.submit(item(6))
    engine.gate.set()
    assert after.result(WAIT_S)[0] == 6
    held.result(WAIT_S)
    assert 5 not in engine.seen


# -------------------------------------------------------------- circuit breaker


def test_breaker_opens_then_recovers_after_cooldown(engine: FakeEngine, make_scheduler) -> None:
    clock = FakeClock()
    failures: list[int] = []
    sched = make_scheduler(
        engine,
        workers=1,
        breaker_threshold=3,
        breaker_cooldown_s=10.0,
        clock=clock,
        on_engine_failure=lambda: failures.append(1),
    )
    engine.fail = True
    for token in range(3):
        with pytest.raises(RuntimeError):
            sched.submit(item(token)).result(WAIT_S)
    assert len(failures) == 3
    assert sched.stats().breaker_open

    # Open: fail fast, the engine is not called again.
    started = time.perf_counter()
    with pytest.raises(Overloaded) as info:
        sched.submit(item(50))
    assert time.perf_counter() - started < 0.1
    assert info.value.retry_after is not None
    assert len(engine.batches) == 3

    clock.now += 5.0  # still inside the cooldown
    with pytest.raises(Overloaded):
        sched.submit(item(51))

    # After the cooldown one trial is let through; while it runs others fail fast.
    clock.now += 6.0
    engine.fail = False
    trial = hold_worker(engine, sched, token=60)
    with pytest.raises(Overloaded):
        sched.submit(item(61))
    engine.gate.set()
    assert trial.result(WAIT_S)[0] == 60

    # The successful trial closed the circuit.
    assert not sched.stats().breaker_open
    assert sched.submit(item(62)).result(WAIT_S)[0] == 62
    assert 50 not in engine.seen and 51 not in engine.seen and 61 not in engine.seen


def test_failed_trial_reopens_circuit(engine: FakeEngine, make_scheduler) -> None:
    clock = FakeClock()
    sched = make_scheduler(
        engine, workers=1, breaker_threshold=2, breaker_cooldown_s=10.0, clock=clock
    )
    engine.fail = True
    for token in range(2):
        with pytest.raises(RuntimeError):
            sched.submit(item(token)).result(WAIT_S)
    clock.now += 11.0
    with pytest.raises(RuntimeError):
        sched.submit(item(3)).result(WAIT_S)  # the trial fails
    with pytest.raises(Overloaded):
        sched.submit(item(4))  # so the circuit is open for another cooldown


def test_engine_failure_does_not_kill_worker(engine: FakeEngine, make_scheduler) -> None:
    sched = make_scheduler(engine, workers=1, breaker_threshold=100)
    engine.fail = True
    with pytest.raises(RuntimeError):
        sched.submit(item(1)).result(WAIT_S)
    engine.fail = False
    assert sched.submit(item(2)).result(WAIT_S)[0] == 2
    stats = sched.stats()
    assert (stats.failed, stats.completed) == (1, 1)


# ------------------------------------------------------------------- batching


def test_native_batching_groups_up_to_max_batch(make_scheduler) -> None:
    engine = FakeEngine(native_batching=True)
    sizes: list[int] = []
    sched = make_scheduler(engine, workers=1, max_batch=4, max_wait_ms=100, on_batch=sizes.append)
    held = hold_worker(engine, sched)
    futures = [sched.submit(item(t)) for t in range(1, 7)]
    engine.gate.set()
    results = [f.result(WAIT_S) for f in futures]
    held.result(WAIT_S)

    assert [r[0] for r in results] == [1, 2, 3, 4, 5, 6]  # each caller gets its own audio
    assert engine.batches == [[999], [1, 2, 3, 4], [5, 6]]
    assert sizes == [1, 4, 2]


def test_batch_waits_at_most_max_wait(make_scheduler) -> None:
    engine = FakeEngine(native_batching=True)
    sched = make_scheduler(engine, workers=1, max_batch=8, max_wait_ms=150)
    started = time.perf_counter()
    sched.submit(item(1)).result(WAIT_S)
    elapsed = time.perf_counter() - started
    # A lone item waits for company for about max_wait, then runs by itself.
    assert 0.12 <= elapsed < 1.5, elapsed
    assert engine.batches == [[1]]


def test_items_arriving_within_max_wait_share_a_batch(make_scheduler) -> None:
    engine = FakeEngine(native_batching=True)
    # A window far longer than any scheduling delay, closed by the batch filling
    # up: no sleep decides whether the second item is "within" the window.
    sched = make_scheduler(engine, workers=1, max_batch=2, max_wait_ms=60_000)
    first = sched.submit(item(1))
    second = sched.submit(item(2))
    first.result(WAIT_S)
    second.result(WAIT_S)
    assert engine.batches == [[1, 2]]


def test_engine_without_native_batching_gets_single_items(
    engine: FakeEngine, make_scheduler
) -> None:
    sched = make_scheduler(engine, workers=1, max_batch=8, max_wait_ms=100)
    held = hold_worker(engine, sched)
    futures = [sched.submit(item(t)) for t in range(1, 4)]
    engine.gate.set()
    for fut in futures:
        fut.result(WAIT_S)
    held.result(WAIT_S)
    assert all(len(batch) == 1 for batch in engine.batches)


def test_close_fails_queued_work(engine: FakeEngine) -> None:
    sched = Scheduler(engine, workers=1)  # type: ignore[arg-type]
    held = hold_worker(engine, sched)
    queued = sched.submit(item(1))
    closer = threading.Thread(target=sched.close)
    closer.start()
    with pytest.raises(Cancelled):
        queued.result(WAIT_S)
    engine.gate.set()
    held.result(WAIT_S)
    closer.join(WAIT_S)
    assert 1 not in engine.seen


def test_first_chunk_on_idle_server_runs_alone_in_the_fast_lane(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    engine = FakeEngine(fast_lane=True)
    sched = make_scheduler(engine, workers=2)
    engine.gate.clear()
    engine.entered.clear()
    first = sched.submit(item(1), priority=PRIORITY_FIRST_CHUNK)
    assert engine.entered.wait(WAIT_S)
    second = sched.submit(item(2))
    time.sleep(0.2)  # the free worker must not start item 2 meanwhile
    assert engine.seen == [1]
    engine.gate.set()
    assert first.result(WAIT_S)[0] == 1 and second.result(WAIT_S)[0] == 2
    assert engine.exclusive_calls == [1]
    assert engine.max_active_during_exclusive == 1


def _after_an_exclusive_call(
    engine: FakeEngine, sched: Scheduler, queued: list[tuple[int, int]]
) -> None:
    """Queue ``queued`` (token, priority) while a first chunk holds every core,
    then let it end: the workers find all of them queued at once."""
    engine.gate.clear()
    engine.entered.clear()
    held = sched.submit(item(9), priority=PRIORITY_FIRST_CHUNK)
    assert engine.entered.wait(WAIT_S)
    futures = [sched.submit(item(token), priority=priority) for token, priority in queued]
    engine.gate.set()
    for future in [held, *futures]:
        future.result(WAIT_S)


def test_first_chunk_takes_the_fast_lane_ahead_of_queued_later_chunks(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    """A stream's first chunk and its tail are queued together; the first
    must not share the cores with its own tail (0.62 s against 0.37 s)."""
    engine = FakeEngine(fast_lane=True)
    sched = make_scheduler(engine, workers=2)
    _after_an_exclusive_call(engine, sched, [(1, PRIORITY_FIRST_CHUNK), (2, PRIORITY_NORMAL)])
    assert engine.exclusive_calls == [9, 1]
    assert engine.seen[:3] == [9, 1, 2]


def test_two_queued_first_chunks_share_the_cores(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    engine = FakeEngine(fast_lane=True)
    sched = make_scheduler(engine, workers=2)
    _after_an_exclusive_call(engine, sched, [(1, PRIORITY_FIRST_CHUNK), (3, PRIORITY_FIRST_CHUNK)])
    assert 1 not in engine.exclusive_calls  # it did not make the other first chunk wait


def test_first_chunk_shares_the_cores_while_another_request_is_admitted(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    """A flood: the first admitted request's chunk reaches an idle engine while
    the other admitted requests still prepare their text. Run alone on every
    core it made them wait (6.4 s for a call one thread does in 9.2), and the
    last one ended past its deadline (the 504 of tests/e2e/test_capacity.py's
    flood). With only its own admission open it still takes the fast lane."""
    engine = FakeEngine(fast_lane=True)
    sched = make_scheduler(engine, workers=2)
    far = time.monotonic() + 60
    own = sched.admit(20, far)
    sched.submit(item(1), priority=PRIORITY_FIRST_CHUNK).result(WAIT_S)
    assert engine.exclusive_calls == [1]  # alone: the fast lane
    other = sched.admit(20, far)  # admitted, its chunks not queued yet
    sched.submit(item(2), priority=PRIORITY_FIRST_CHUNK).result(WAIT_S)
    assert engine.exclusive_calls == [1]  # shares the cores
    other.release()
    own.release()
    sched.submit(item(3), priority=PRIORITY_FIRST_CHUNK).result(WAIT_S)
    assert engine.exclusive_calls == [1, 3]


def test_a_lone_listener_s_later_chunks_take_every_core(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    """A voice agent's socket alone on the server: each of its chunks, not only
    a first one, runs on all cores (on one thread a session's second sentence
    came 1.9-3.6 s after its first had played out). Once another request is
    admitted, or queued for someone else, its chunks share the cores."""
    engine = FakeEngine(fast_lane=True)
    clock = FakeClock()
    sched = make_scheduler(engine, workers=2, clock=clock)
    far = clock() + 60
    clause = sched.admit(40, far)
    clause.listener = "socket-a"
    next_clause = sched.admit(40, far)
    next_clause.listener = "socket-a"
    for token in (1, 2):
        sched.submit(item(token), listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 2]
    sched.submit(item(3)).result(WAIT_S)  # nobody's listener: no lane for a later chunk
    assert engine.exclusive_calls == [1, 2]
    other = sched.admit(40, far)  # an HTTP request, its text still being prepared
    sched.submit(item(4), listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 2]
    other.listener = "socket-b"
    sched.submit(item(5), listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 2]  # another socket: shares the cores
    other.release()
    sched.submit(item(6), listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 2]  # socket-b may be between clauses
    clock.now += LONE_LISTENER_QUIET_S
    sched.submit(item(6), listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 2, 6]  # it has gone quiet
    # A long chunk would hold both cores from whoever comes next: one thread.
    sched.submit(item(7), listener="socket-a", cost=LONE_LISTENER_MAX_UNITS + 1).result(WAIT_S)
    assert engine.exclusive_calls == [1, 2, 6]
    clause.release()
    next_clause.release()


def test_a_lone_stream_s_later_chunks_take_every_core_and_leave_nothing_behind(
    make_scheduler,
) -> None:  # type: ignore[no-untyped-def]
    """An HTTP stream alone on the server is one listener's too: its later
    chunks run on all cores (on one thread the rest of the first sentence
    outlasted the first chunk's audio: 0.20 s of silence, p50 of 16 streams).
    Unlike a socket's, its end is not a pause between clauses: the next
    request's first chunk takes the lane at once."""
    engine = FakeEngine(fast_lane=True)
    clock = FakeClock()
    sched = make_scheduler(engine, workers=2, clock=clock)
    far = clock() + 60
    stream = sched.admit(40, far, must_finish=False)
    stream.listener, stream.returns = "stream-1", False
    sched.submit(item(1), listener="stream-1").result(WAIT_S)
    assert engine.exclusive_calls == [1]
    stream.release()
    sched.submit(item(2), priority=PRIORITY_FIRST_CHUNK).result(WAIT_S)
    assert engine.exclusive_calls == [1, 2]  # nobody is between clauses


def test_a_first_chunk_shares_the_cores_while_another_socket_is_between_clauses(
    make_scheduler,
) -> None:  # type: ignore[no-untyped-def]
    """A request's first chunk takes every core only when no other voice
    agent's socket is between two clauses: at 2 sessions one session's next
    clause took both cores while the other's waited behind it with a core
    idle (0.9 s of silence, 2026-12-07)."""
    engine = FakeEngine(fast_lane=True)
    clock = FakeClock()
    sched = make_scheduler(engine, workers=2, clock=clock)
    far = clock() + 60
    head = sched.admit(10, far)
    head.listener = "socket-b"
    sched.submit(item(1), priority=PRIORITY_FIRST_CHUNK, listener="socket-b").result(WAIT_S)
    assert engine.exclusive_calls == [1]  # alone on the server: the fast lane
    head.release()  # socket-b's clause is spoken; its next one is coming
    clause = sched.admit(40, far)
    clause.listener = "socket-a"
    sched.submit(item(2), priority=PRIORITY_FIRST_CHUNK, listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1]  # socket-b is between clauses: one core
    sched.submit(item(3), priority=PRIORITY_FIRST_CHUNK).result(WAIT_S)
    assert engine.exclusive_calls == [1]  # an HTTP stream's first chunk too
    clock.now += LONE_LISTENER_QUIET_S
    sched.submit(item(4), priority=PRIORITY_FIRST_CHUNK, listener="socket-a").result(WAIT_S)
    assert engine.exclusive_calls == [1, 4]  # socket-b has gone quiet
    clause.release()


def test_first_chunk_on_busy_server_shares_the_cores(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    engine = FakeEngine(fast_lane=True)
    sched = make_scheduler(engine, workers=2)
    busy = hold_worker(engine, sched, token=7)
    first = sched.submit(item(1), priority=PRIORITY_FIRST_CHUNK)
    deadline = time.monotonic() + WAIT_S
    while engine.seen != [7, 1] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.seen == [7, 1]  # started next to the busy call, not after it
    engine.gate.set()
    assert busy.result(WAIT_S)[0] == 7 and first.result(WAIT_S)[0] == 1
    assert engine.exclusive_calls == []


# --------------------------------------------------------------- stage timing


def test_timing_splits_queue_wait_from_engine_time(engine: FakeEngine, make_scheduler) -> None:
    """WorkTiming (the first-audio stages of issue #20): the time an item
    waited behind another is its queue stage, not its engine stage."""
    sched = make_scheduler(engine, workers=1, queue_size=8)
    held = hold_worker(engine, sched)
    timing = WorkTiming()
    future = sched.submit(item(7), timing=timing)
    time.sleep(0.3)  # the item waits behind the held one
    assert timing.submitted > 0 and timing.started is None
    engine.gate.set()
    held.result(WAIT_S)
    future.result(WAIT_S)
    assert timing.started is not None and timing.finished is not None
    waited, ran = timing.started - timing.submitted, timing.finished - timing.started
    assert waited >= 0.25 and 0 <= ran < waited


# ------------------------------------------------- cutting a running call (barge-in)


class StoppableFakeEngine(FakeEngine):
    """The fake engine with ``stoppable``: a stop releases its held call,
    which then raises Cancelled as Kokoro's terminated run does."""

    stoppable = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cut: list[int] = []

    def synthesize(  # type: ignore[override]
        self, batch: list[SynthItem], *, exclusive: bool = False, stop: CallStop | None = None
    ) -> list[np.ndarray]:
        if stop is not None:
            stop.on_stop(self.gate.set)
        out = super().synthesize(batch, exclusive=exclusive)
        if stop is not None and stop.stopped:
            self.cut.extend(i.token_ids[0] for i in batch)
            raise Cancelled("request cancelled")
        return out


def test_cancel_cuts_the_running_call_of_its_one_request(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    """A barge-in stops the chunk already inside the engine, not only the queued
    ones: the worker is free within the watcher's poll (was: the call ran to
    its end, here the fake's 5 s timeout)."""
    engine = StoppableFakeEngine()
    sched = make_scheduler(engine, workers=1)
    engine.gate.clear()
    gone = threading.Event()
    future = sched.submit(item(5), cancelled=gone.is_set)
    assert engine.entered.wait(WAIT_S)
    asked = time.perf_counter()
    gone.set()
    with pytest.raises(Cancelled):
        future.result(WAIT_S)
    while sched.stats().in_flight:
        time.sleep(0.001)
    idle_s = time.perf_counter() - asked
    assert idle_s < 1.0, f"engine busy {idle_s:.3f} s after the cancel"
    assert engine.cut == [5]
    stats = sched.stats()
    assert stats.dropped == 1 and stats.failed == 0 and not stats.breaker_open
    assert sched.submit(item(6)).result(WAIT_S)[0] == 6  # the worker goes on


def test_cancel_inside_a_shared_batch_drops_only_its_own_result(make_scheduler) -> None:  # type: ignore[no-untyped-def]
    """A call shared with another request is never cut for one of them: the
    other gets its audio, the cancelled one a Cancelled (was: its audio)."""
    engine = StoppableFakeEngine(native_batching=True)
    sched = make_scheduler(engine, workers=1, max_batch=2, max_wait_ms=200)
    engine.gate.clear()
    gone = threading.Event()
    dropped = sched.submit(item(1), cancelled=gone.is_set)
    kept = sched.submit(item(2))
    assert engine.entered.wait(WAIT_S)
    time.sleep(0.05)
    assert engine.batches == [[1, 2]]
    gone.set()
    time.sleep(0.1)  # ten polls of the cancel watcher
    assert not kept.done() and engine.cut == []
    engine.gate.set()
    assert kept.result(WAIT_S)[0] == 2
    with pytest.raises(Cancelled):
        dropped.result(WAIT_S)
