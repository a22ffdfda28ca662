"""Two real server processes sharing one Redis behave as one service.

* The anonymous caller's token bucket lives in Redis, so alternating requests
  between the two servers lets through about ``burst`` requests in total, not
  ``burst`` per server; the rest get 429 with Retry-After and the JSON error
  shape.
* The audio cache's Redis tier is shared: audio rendered by server A is a
  ``X-Cache: redis`` hit on server B (separate homes, so no shared disk tier).
"""

from __future__ import annotations

import math
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from voxclone.devserver import running_servers

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.models]

BURST = 4
# Slow refill (one token per 100 s) so the allowance is essentially the burst
# even on a busy machine, where one synthesis can take several seconds.
RATE_PER_MINUTE = 0.6
# A database of its own on the session's Redis server: other tests' buckets
# and cache entries cannot change what this test counts.
REDIS_DB = 11
CHEAP_ROUTE = "/v1/models"  # rate limited (TTS scope), no synthesis
ATTEMPTS = 3 * BURST


def _own_db(url: str) -> str:
    return url.rsplit("/", 1)[0] + f"/{REDIS_DB}"


def _assert_error_shape(response: httpx.Response, code: str) -> None:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_two_servers_share_rate_limit_and_audio_cache(redis_server: str, tmp_path: Path) -> None:
    redis_url = _own_db(redis_server)
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        "VOXCLONE_REDIS_URL": redis_url,
        "VOXCLONE_RATE_LIMIT_PER_MINUTE": str(RATE_PER_MINUTE),
        "VOXCLONE_RATE_LIMIT_BURST": str(BURST),
        "VOXCLONE_WORKERS": "1",
        "VOXCLONE_WARM_CLONING": "false",  # nothing here clones
    }
    with running_servers([tmp_path / "a", tmp_path / "b"], env) as (server_a, server_b):
        started = time.monotonic()
        statuses: list[int] = []
        with httpx.Client(timeout=120) as client:
            # Shared audio cache: one token each on A and B.
            body = {"text": f"Shared cache check {uuid.uuid4().hex[:6]}.", "format": "wav"}
            first = client.post(server_a.url + "/v1/tts", json=body)
            assert first.status_code == 200, first.text
            assert first.headers["x-cache"] == "miss"
            second = client.post(server_b.url + "/v1/tts", json=body)
            assert second.status_code == 200, second.text
            assert second.headers["x-cache"] == "redis"
            assert second.content == first.content
            statuses += [first.status_code, second.status_code]

            # Alternate the cheap route between the servers until well past the burst.
            limited: list[httpx.Response] = []
            for i in range(ATTEMPTS):
                url = (server_a if i % 2 == 0 else server_b).url + CHEAP_ROUTE
                response = client.get(url)
                statuses.append(response.status_code)
                if response.status_code == 429:
                    limited.append(response)
        elapsed = time.monotonic() - started

    assert set(statuses) <= {200, 429}, statuses
    allowed = statuses.count(200)
    # Tokens that can have refilled while the test ran, rounded up.
    refill = math.ceil(elapsed * RATE_PER_MINUTE / 60.0)
    assert BURST <= allowed <= BURST + refill, (allowed, statuses)
    assert allowed < 2 * BURST  # per-server buckets would have allowed twice the burst
    # Once the bucket is empty every later request is refused, on both servers.
    first_refused = statuses.index(429)
    assert all(s == 429 for s in statuses[first_refused:]), statuses
    assert {str(r.url).rsplit("/", 2)[0] for r in limited} == {server_a.url, server_b.url}
    for response in limited:
        _assert_error_shape(response, "rate_limited")
        retry_after = int(response.headers["retry-after"])
        # At 0.6 per minute a token takes 100 s; Retry-After must say about that.
        assert 1 <= retry_after <= math.ceil(60.0 / RATE_PER_MINUTE) + 1
