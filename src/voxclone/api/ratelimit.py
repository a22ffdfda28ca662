"""Per-caller token buckets: in-process by default, Redis when configured.

The bucket key is the API key id, or the client address for anonymous
(single-user mode) callers, so one noisy client cannot starve the others.
With Redis every server process and replica draws from the same bucket.
The limiter itself is built by the composition root (``bootstrap.build_rate_limiter``).
"""

from __future__ import annotations

import logging

from voxclone.errors import RateLimited
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.ratelimit import RateLimiter, RedisRateLimiter

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


def enforce_rate_limit(
    limiter: RateLimiter | None, identity: str, metrics: Metrics | None = None
) -> None:
    """Take one token for ``identity`` or raise RateLimited (429 with Retry-After)."""
    if limiter is None:
        return
    decision = limiter.check(identity)
    if decision.allowed:
        return
    if metrics is not None:
        metrics.rate_limited.inc()
    raise RateLimited(
        f"too many requests; retry in {decision.retry_after_s:.1f} s",
        retry_after=decision.retry_after_s,
    )
