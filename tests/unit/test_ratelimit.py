from __future__ import annotations

import pytest
from fakes import FakeClock

from voxclone.errors import InvalidInput
from voxclone.runtime.ratelimit import Decision, InMemoryRateLimiter


def test_burst_then_refusal_with_retry_after() -> None:
    clock = FakeClock()
    limiter = InMemoryRateLimiter(rate_per_s=2.0, burst=5, clock=clock)
    decisions = [limiter.check("alice") for _ in range(5)]
    assert all(d.allowed for d in decisions)
    assert [d.remaining for d in decisions] == [4, 3, 2, 1, 0]
    refused = limiter.check("alice")
    # The bucket's size and the 2.5 s it takes to fill again: the X-RateLimit-* headers.
    assert refused == Decision(
        allowed=False, retry_after_s=0.5, remaining=0.0, limit=5.0, reset_s=2.5
    )


def test_refill_over_time_up_to_burst() -> None:
    clock = FakeClock()
    limiter = InMemoryRateLimiter(rate_per_s=2.0, burst=5, clock=clock)
    for _ in range(5):
        limiter.check("alice")
    clock.advance(0.25)  # half a token: still refused, and the wait shrinks accordingly
    refused = limiter.check("alice")
    assert not refused.allowed and refused.retry_after_s == pytest.approx(0.25)
    clock.advance(0.25)
    assert limiter.check("alice").allowed
    clock.advance(3600)  # long idle: back to exactly the burst, not more
    allowed = [limiter.check("alice").allowed for _ in range(7)]
    assert allowed == [True] * 5 + [False] * 2


def test_keys_have_independent_buckets() -> None:
    limiter = InMemoryRateLimiter(rate_per_s=1.0, burst=1, clock=FakeClock())
    assert limiter.check("alice").allowed
    assert not limiter.check("alice").allowed
    assert limiter.check("bob").allowed


def test_cost_weights_requests() -> None:
    clock = FakeClock()
    limiter = InMemoryRateLimiter(rate_per_s=1.0, burst=10, clock=clock)
    assert limiter.check("alice", cost=8).allowed
    refused = limiter.check("alice", cost=4)
    assert not refused.allowed and refused.retry_after_s == pytest.approx(2.0)
    assert refused.remaining == pytest.approx(2.0)
    with pytest.raises(InvalidInput) as excinfo:
        limiter.check("alice", cost=11)  # could never pass: an error, not a retry hint
    assert excinfo.value.field == "cost" and excinfo.value.limit == 10
    with pytest.raises(InvalidInput):
        limiter.check("alice", cost=0)


def test_pruning_bounds_memory_but_keeps_drained_buckets() -> None:
    clock = FakeClock()
    limiter = InMemoryRateLimiter(rate_per_s=1.0, burst=2, clock=clock, max_keys=10)
    limiter.check("abuser")
    limiter.check("abuser")  # drained
    for i in range(50):
        clock.advance(0.01)
        limiter.check(f"client-{i}")  # each still holds >= 1 token
    assert len(limiter._buckets) <= 10
    # 0.5 s of refill is half a token: a flood of other keys must not reset the debt
    refused = limiter.check("abuser")
    assert not refused.allowed and refused.retry_after_s == pytest.approx(0.5)


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError):
        InMemoryRateLimiter(rate_per_s=0, burst=1)
    with pytest.raises(ValueError):
        InMemoryRateLimiter(rate_per_s=1, burst=0.5)
