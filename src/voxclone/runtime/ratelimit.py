"""Token-bucket rate limiting per key (API key, tenant or client address).

A bucket holds up to ``burst`` tokens and refills at ``rate_per_s``; a request
costing ``cost`` tokens passes if that many are available. The in-memory
limiter serves a single process; the Redis limiter keeps one bucket per key
for every process and replica, updated atomically by a Lua script that reads
Redis's own clock, so replicas with skewed clocks still agree.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from voxclone.errors import InvalidInput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: float  # 0 when allowed; otherwise when ``cost`` tokens will be there
    remaining: float  # tokens left in the bucket after this decision
    # What the X-RateLimit-* headers report: the bucket's size (0: unknown, as
    # when Redis is down and the limiter fails open) and the seconds until it
    # is full again.
    limit: float = 0.0
    reset_s: float = 0.0


def _decision(
    allowed: bool, retry_after_s: float, tokens: float, rate: float, burst: float
) -> Decision:
    return Decision(
        allowed=allowed,
        retry_after_s=retry_after_s,
        remaining=tokens,
        limit=burst,
        reset_s=max(0.0, burst - tokens) / rate,
    )


class RateLimiter(Protocol):
    def check(self, key: str, cost: float = 1.0) -> Decision: ...


def _validate_config(rate_per_s: float, burst: float) -> None:
    if rate_per_s <= 0:
        raise ValueError("rate_per_s must be > 0")
    if burst < 1:
        raise ValueError("burst must be >= 1")


def _validate_cost(cost: float, burst: float) -> None:
    if cost <= 0:
        raise InvalidInput("request cost must be positive", field="cost", value=cost)
    if cost > burst:
        # Such a request could never pass; say so instead of asking the
        # client to retry forever.
        raise InvalidInput(
            f"request cost {cost:g} exceeds the rate-limit burst of {burst:g}",
            field="cost",
            limit=burst,
            value=cost,
        )


class InMemoryRateLimiter:
    """Per-process token buckets. ``clock`` is injectable for tests."""

    def __init__(
        self,
        rate_per_s: float,
        burst: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        _validate_config(rate_per_s, burst)
        self.rate_per_s = float(rate_per_s)
        self.burst = float(burst)
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, updated_at)
        self._lock = threading.Lock()

    def check(self, key: str, cost: float = 1.0) -> Decision:
        _validate_cost(cost, self.burst)
        with self._lock:
            now = self._clock()
            tokens, updated = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + max(0.0, now - updated) * self.rate_per_s)
            if tokens >= cost:
                tokens -= cost
                decision = _decision(True, 0.0, tokens, self.rate_per_s, self.burst)
            else:
                wait = (cost - tokens) / self.rate_per_s
                decision = _decision(False, wait, tokens, self.rate_per_s, self.burst)
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > self.max_keys:
                self._prune_locked(now)
            return decision

    def _prune_locked(self, now: float) -> None:
        # A bucket that has had time to refill completely is the same as no
        # bucket at all, so dropping it changes no decision.
        full_after = self.burst / self.rate_per_s
        for key, (_, updated) in list(self._buckets.items()):
            if now - updated >= full_after:
                del self._buckets[key]
        # Still too many active keys: forget the fullest buckets, whose reset
        # changes the fewest decisions (a drained, abusive client keeps its
        # debt). Prune to 90 % so the sort runs once per many new keys.
        target = int(self.max_keys * 0.9)
        excess = len(self._buckets) - target
        if excess > 0:

            def refilled(item: tuple[str, tuple[float, float]]) -> float:
                tokens, updated = item[1]
                return tokens + (now - updated) * self.rate_per_s

            fullest = sorted(self._buckets.items(), key=refilled, reverse=True)[:excess]
            for key, _ in fullest:
                del self._buckets[key]


# KEYS[1] = bucket; ARGV = rate_per_s, burst, cost. Returns {allowed, tokens, retry_after}
# with the floats as strings (Lua numbers would be truncated to integers in the reply).
_TOKEN_BUCKET_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local retry = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry = (cost - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
-- once full again the bucket carries no information: let it expire
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(tokens), tostring(retry)}
"""


class RedisRateLimiter:
    """Token buckets in Redis, shared by every process that uses the same prefix.

    While Redis cannot be reached, decisions come from ``fallback`` when one
    is given (the server passes a per-process :class:`InMemoryRateLimiter`:
    each process then limits on its own, a looser but real limit); without
    one the limiter fails open (``fail_open``, the default: serving beats
    refusing everyone because a side service is down) or refuses everything
    (``fail_open=False``). ``degraded`` is true while the last call to Redis
    failed and ``degraded_decisions`` counts the decisions made without it,
    so the state is visible in metrics and readiness detail, never silent.
    """

    def __init__(
        self,
        client: Any,
        rate_per_s: float,
        burst: float,
        prefix: str = "voxclone:rl:",
        *,
        fail_open: bool = True,
        fallback: RateLimiter | None = None,
    ) -> None:
        _validate_config(rate_per_s, burst)
        self.fallback = fallback
        self.degraded = False
        self.degraded_decisions = 0
        self.client = client
        self.rate_per_s = float(rate_per_s)
        self.burst = float(burst)
        self.prefix = prefix
        self.fail_open = fail_open
        self._script = client.register_script(_TOKEN_BUCKET_LUA)
        # Imported here: only a server configured with Redis needs the package
        # (~0.7 s to import on 2 cores).
        from redis.exceptions import RedisError

        self._redis_error: type[Exception] = RedisError

    @property
    def mode_without_redis(self) -> str:
        if self.fallback is not None:
            return "local"
        return "fail-open" if self.fail_open else "fail-closed"

    def check(self, key: str, cost: float = 1.0) -> Decision:
        _validate_cost(cost, self.burst)
        try:
            allowed, tokens, retry = self._script(
                keys=[self.prefix + key],
                args=[repr(self.rate_per_s), repr(self.burst), repr(float(cost))],
            )
        except self._redis_error:
            if not self.degraded:
                log.warning("rate limiter cannot reach Redis; mode %s", self.mode_without_redis)
            self.degraded = True
            self.degraded_decisions += 1
            if self.fallback is not None:
                return self.fallback.check(key, cost)
            if self.fail_open:
                # No bucket is kept meanwhile: limit 0 says so (no headers).
                return Decision(allowed=True, retry_after_s=0.0, remaining=0.0)
            # Refused by this decision, not by a bucket: empty for a second.
            return Decision(False, 1.0, remaining=0.0, limit=self.burst, reset_s=1.0)
        if self.degraded:
            log.info("rate limiter reaches Redis again")
            self.degraded = False
        return _decision(
            int(allowed) == 1, float(retry), float(tokens), self.rate_per_s, self.burst
        )
