"""Create Redis clients with timeouts suited to a request path.

Without explicit timeouts a stalled Redis would hang every request that
touches the cache or the rate limiter; with them, callers get a RedisError
quickly and degrade (cache miss, rate limiter fail-open).
"""

from __future__ import annotations

import redis
from redis.exceptions import RedisError


def connect(
    url: str,
    *,
    socket_timeout_s: float = 2.0,
    connect_timeout_s: float = 2.0,
    health_check_interval_s: int = 30,
) -> redis.Redis:
    """A client for ``url`` returning raw bytes (audio values are binary)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=connect_timeout_s,
        health_check_interval=health_check_interval_s,
        decode_responses=False,
    )


def is_reachable(client: redis.Redis) -> bool:
    """True if the server answers PING; used by readiness checks."""
    try:
        return bool(client.ping())
    except RedisError:
        return False
