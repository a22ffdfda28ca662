"""Per-caller token buckets: in-process by default, Redis when configured.

The bucket key is the API key id, or the client address for anonymous
(single-user mode) callers, so one noisy client cannot starve the others.
With Redis every server process and replica draws from the same bucket.
The limiter itself is built by the composition root (``bootstrap.build_rate_limiter``).

Every response of a rate-limited route, 200 and 429 alike, says where its
caller's bucket stands (:class:`RateLimitHeadersMiddleware`):
``X-RateLimit-Limit`` (the bucket's size, ``rate_limit_burst``),
``X-RateLimit-Remaining`` (whole requests left now) and ``X-RateLimit-Reset``
(seconds until the bucket is full again, rounded up, as the IETF draft's
``RateLimit-Reset`` counts them; a 429 adds ``Retry-After``, when one
request passes again).
"""

from __future__ import annotations

import logging
import math
from collections.abc import MutableMapping
from typing import Any

from voxclone.errors import RateLimited
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.ratelimit import Decision, RateLimiter, RedisRateLimiter

log = logging.getLogger(__name__)


def rate_limiter_status(limiter: RateLimiter | None) -> dict[str, object]:
    """What /readyz and /metrics say about the limiter."""
    if limiter is None:
        return {"backend": "off"}
    if isinstance(limiter, RedisRateLimiter):
        return {
            "backend": "redis",
            "redis": "unreachable" if limiter.degraded else "ok",
            "without_redis": limiter.mode_without_redis,
            "decisions_without_redis": limiter.degraded_decisions,
        }
    return {"backend": "memory"}


# Where the route's decision waits for the response, in the request's state.
DECISION_STATE = "voxclone_rate_limit"


def enforce_rate_limit(
    limiter: RateLimiter | None,
    identity: str,
    metrics: Metrics | None = None,
    state: MutableMapping[str, Any] | None = None,
) -> None:
    """Take one token for ``identity`` or raise RateLimited (429 with Retry-After).

    ``state``: the request's scope state, where the decision is left for the
    headers of the response."""
    if limiter is None:
        return
    decision = limiter.check(identity)
    if state is not None:
        state[DECISION_STATE] = decision
    if decision.allowed:
        return
    if metrics is not None:
        metrics.rate_limited.inc()
    raise RateLimited(
        f"too many requests; retry in {decision.retry_after_s:.1f} s",
        retry_after=decision.retry_after_s,
    )


def rate_limit_headers(decision: Decision) -> list[tuple[bytes, bytes]]:
    """The X-RateLimit-* headers of ``decision``; none when its bucket is unknown."""
    if decision.limit <= 0:
        return []
    values = (
        ("x-ratelimit-limit", math.floor(decision.limit)),
        ("x-ratelimit-remaining", max(0, math.floor(decision.remaining))),
        ("x-ratelimit-reset", math.ceil(decision.reset_s)),
    )
    return [(name.encode(), str(value).encode()) for name, value in values]


class RateLimitHeadersMiddleware:
    """Add the X-RateLimit-* headers to the response of a request the limiter decided on.

    The decision is taken in the route's auth dependency; the response may
    come from the route, an error handler (429) or a guard outside it (the
    request deadline's 504), so the headers are added where every response
    passes: its start."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_with_headers(message: Any) -> None:
            decision = state.get(DECISION_STATE)
            if message["type"] == "http.response.start" and decision is not None:
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not k.lower().startswith(b"x-ratelimit-")
                ]
                message = {**message, "headers": headers + rate_limit_headers(decision)}
            await send(message)

        await self.app(scope, receive, send_with_headers)
