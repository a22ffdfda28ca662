"""The one way this package makes Redis clients: timeouts, no retries, a breaker.

Without explicit timeouts a stalled Redis (frozen, partitioned, swapping)
would hang every request that touches the cache or the rate limiter. Every
client comes from :func:`connect`:

* connect and read timeouts (``timeout_s``), and no automatic retries (a
  retry against a frozen server only multiplies the wait);
* a short circuit breaker shared by the client and its pipelines: after a
  connection error or time-out, calls fail at once with
  :class:`RedisUnavailable` (a ``ConnectionError``, so every caller's
  ``except RedisError`` already handles it) until ``cooldown_s`` has passed;
  then one call is let through to probe, and its success closes the circuit.

So a frozen Redis costs one request about ``timeout_s``; the following ones
go straight to the local tiers until the probe finds Redis back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

_OUTAGE_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)


class RedisUnavailable(RedisConnectionError):
    """Raised without touching the network while the circuit is open."""


class RedisBreaker:
    """Open after one outage-type failure; half-open (one probe) after ``cooldown_s``."""

    def __init__(self, cooldown_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._opened_at: float | None = None
        self._probing = False
        self._lock = threading.Lock()
        self.failures = 0  # outage-type failures seen (for metrics)
        self.short_circuited = 0  # calls refused without waiting

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() - self._opened_at < self.cooldown_s:
                self.short_circuited += 1
                return False
            self._probing = True
            return True

    def record(self, ok: bool) -> None:
        with self._lock:
            self._probing = False
            if ok:
                self._opened_at = None
            else:
                self.failures += 1
                self._opened_at = self._clock()

    def guard(self, call: Callable[[], Any]) -> Any:
        if not self.allow():
            raise RedisUnavailable("redis is unreachable (circuit open); not waiting for it")
        try:
            result = call()
        except _OUTAGE_ERRORS:
            self.record(ok=False)
            raise
        except RedisError:
            # A command error (wrong type, script error) means Redis answered.
            self.record(ok=True)
            raise
        self.record(ok=True)
        return result


class GuardedPipeline(redis.client.Pipeline):
    breaker: RedisBreaker

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return self.breaker.guard(lambda: super(GuardedPipeline, self).execute(raise_on_error))  # type: ignore[no-any-return]


class GuardedRedis(redis.Redis):
    """A ``redis.Redis`` whose every command and pipeline goes through ``breaker``."""

    breaker: RedisBreaker

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return self.breaker.guard(
            lambda: super(GuardedRedis, self).execute_command(*args, **options)
        )

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> GuardedPipeline:
        pipe = GuardedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.breaker = self.breaker
        return pipe


def connect(
    url: str,
    *,
    timeout_s: float | None = None,
    socket_timeout_s: float = 2.0,
    connect_timeout_s: float = 2.0,
    cooldown_s: float = 5.0,
    health_check_interval_s: int = 30,
    breaker: RedisBreaker | None = None,
) -> GuardedRedis:
    """A client for ``url`` returning raw bytes (audio values are binary).

    ``timeout_s`` sets both the connect and the read timeout. Pass one
    ``breaker`` to several clients of the same server so they share its state.
    """
    if timeout_s is not None:
        socket_timeout_s = connect_timeout_s = timeout_s
    client = cast(
        GuardedRedis,
        GuardedRedis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=connect_timeout_s,
            health_check_interval=health_check_interval_s,
            retry=Retry(NoBackoff(), 0),
            decode_responses=False,
        ),
    )
    client.breaker = breaker if breaker is not None else RedisBreaker(cooldown_s)
    return client


def is_reachable(client: redis.Redis) -> bool:
    """True if the server answers PING; used by readiness checks."""
    try:
        return bool(client.ping())
    except RedisError:
        return False
