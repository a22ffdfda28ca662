"""Cache tier and rate limiter against a real Redis server (fixture in conftest)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from voxclone.runtime.cache import (
    CacheEntry,
    DiskTier,
    MemoryTier,
    RedisTier,
    TieredCache,
    voice_tag,
)
from voxclone.runtime.ratelimit import RedisRateLimiter
from voxclone.runtime.redis_conn import connect, is_reachable

pytestmark = [pytest.mark.redis, pytest.mark.timed]


@pytest.fixture()
def client(redis_server: str) -> Iterator[redis.Redis]:
    conn = connect(redis_server)
    conn.flushdb()
    yield conn
    conn.close()


def test_connection_helper(client: redis.Redis) -> None:
    assert is_reachable(client)
    dead = connect("redis://127.0.0.1:1/0", connect_timeout_s=0.2, socket_timeout_s=0.2)
    assert not is_reachable(dead)


def test_redis_tier_round_trip_with_ttl(client: redis.Redis) -> None:
    tier = RedisTier(client, ttl_s=1, max_value_bytes=1000)
    entry = CacheEntry(data=b"\x00\x01audio", content_type="audio/mpeg", voice_id="alice")
    assert tier.put("k1", entry)
    assert tier.get("k1") == entry
    ttl = client.pttl("voxclone:audio:e:k1")
    assert 0 < ttl <= 1000
    time.sleep(1.2)
    assert tier.get("k1") is None
    assert tier.counters.hits == 1 and tier.counters.misses == 1


def test_redis_tier_skips_values_over_cap(client: redis.Redis) -> None:
    tier = RedisTier(client, ttl_s=60, max_value_bytes=100)
    assert not tier.put("big", CacheEntry(data=b"x" * 101, voice_id="alice"))
    assert tier.put("small", CacheEntry(data=b"x" * 100, voice_id="alice"))
    assert client.exists("voxclone:audio:e:big") == 0
    assert tier.get("small") is not None and tier.counters.skipped == 1


def test_redis_tier_invalidate_voice(client: redis.Redis) -> None:
    tier = RedisTier(client, ttl_s=60, max_value_bytes=1000)
    for i in range(3):
        tier.put(f"a{i}", CacheEntry(data=b"a", voice_id="alice"))
    tier.put("b0", CacheEntry(data=b"b", voice_id="bob"))
    assert tier.invalidate_voice("alice") == 3
    assert all(tier.get(f"a{i}") is None for i in range(3))
    assert tier.get("b0") is not None
    # the deleted voice leaves no index set behind; other voices keep theirs
    assert client.exists(f"voxclone:audio:v:{voice_tag('alice')}") == 0
    assert client.exists(f"voxclone:audio:v:{voice_tag('bob')}") == 1
    assert tier.invalidate_voice("alice") == 0


def test_invalidate_voice_across_all_three_tiers(client: redis.Redis, tmp_path: Path) -> None:
    remote = RedisTier(client, ttl_s=60, max_value_bytes=10_000)
    cache = TieredCache([MemoryTier(10_000), DiskTier(tmp_path, 100_000), remote])
    cache.put("k-alice", b"A" * 100, voice_id="alice")
    cache.put("k-bob", b"B" * 100, voice_id="bob")
    assert cache.invalidate_voice("alice") == {"memory": 1, "disk": 1, "redis": 1}
    assert cache.get("k-alice") is None
    assert cache.get("k-bob") == (b"B" * 100, "memory")


def test_redis_hit_is_promoted_to_local_tiers(client: redis.Redis, tmp_path: Path) -> None:
    # another replica wrote the entry; this one finds it in Redis, then locally
    RedisTier(client, ttl_s=60, max_value_bytes=10_000).put(
        "shared", CacheEntry(data=b"S" * 10, content_type="audio/wav", voice_id="v")
    )
    memory, disk = MemoryTier(10_000), DiskTier(tmp_path, 100_000)
    cache = TieredCache([memory, disk, RedisTier(client, ttl_s=60, max_value_bytes=10_000)])
    assert cache.get("shared") == (b"S" * 10, "redis")
    assert memory.get("shared") is not None and disk.get("shared") is not None


def test_redis_tier_degrades_to_miss_when_unreachable() -> None:
    dead = connect("redis://127.0.0.1:1/0", connect_timeout_s=0.2, socket_timeout_s=0.2)
    tier = RedisTier(dead, ttl_s=60, max_value_bytes=100)
    assert tier.get("k") is None
    assert not tier.put("k", CacheEntry(data=b"x"))
    assert tier.counters.errors == 2


def test_two_limiters_with_separate_clients_share_one_budget(redis_server: str) -> None:
    first_client, second_client = connect(redis_server), connect(redis_server)
    first_client.flushdb()
    try:
        first = RedisRateLimiter(first_client, rate_per_s=0.5, burst=4, prefix="t:rl:")
        second = RedisRateLimiter(second_client, rate_per_s=0.5, burst=4, prefix="t:rl:")
        outcomes = [(first if i % 2 == 0 else second).check("tenant").allowed for i in range(6)]
        assert outcomes == [True, True, True, True, False, False]
        refused = second.check("tenant")
        assert not refused.allowed
        assert 1.0 < refused.retry_after_s <= 2.0  # one token at 0.5/s, minus elapsed time
        assert first.check("other-tenant").allowed
    finally:
        first_client.close()
        second_client.close()


def test_redis_limiter_refills_over_time(client: redis.Redis) -> None:
    limiter = RedisRateLimiter(client, rate_per_s=10, burst=2, prefix="t:refill:")
    assert limiter.check("k").allowed and limiter.check("k").allowed
    refused = limiter.check("k")
    assert not refused.allowed and 0 < refused.retry_after_s <= 0.1
    time.sleep(refused.retry_after_s + 0.05)
    allowed = limiter.check("k")
    assert allowed.allowed and allowed.remaining < 1
    # the bucket expires once it would be full again, so idle keys cost no memory
    assert 0 < client.pttl("t:refill:k") <= 1200


def test_redis_limiter_fail_open_and_closed() -> None:
    dead = connect("redis://127.0.0.1:1/0", connect_timeout_s=0.2, socket_timeout_s=0.2)
    assert RedisRateLimiter(dead, 1, 1).check("k").allowed
    assert not RedisRateLimiter(dead, 1, 1, fail_open=False).check("k").allowed
