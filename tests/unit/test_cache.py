from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from voxclone.runtime.cache import (
    CacheEntry,
    DiskTier,
    EmbeddingCache,
    MemoryTier,
    TieredCache,
    cache_key,
    voice_tag,
)
from voxclone.runtime.shared_render import SingleFlight


def _entry(size: int, voice: str | None = "v1", fill: int = 1) -> CacheEntry:
    return CacheEntry(data=bytes([fill]) * size, content_type="audio/wav", voice_id=voice)


def _key(i: int) -> str:
    return cache_key(text=f"sentence {i}", voice="v1")


# ---------------------------------------------------------------- keys


def test_cache_key_is_canonical_and_sensitive_to_every_part() -> None:
    base = dict(
        model="kokoro@1",
        voice="v1@3",
        text="hello",
        language="en-us",
        controls={"speed": 1.0, "pitch": 0.0},
        format="wav",
        sample_rate=24000,
    )
    same_other_order = dict(reversed(list(base.items())))
    same_other_order["controls"] = {"pitch": 0, "speed": 1}  # ints equal to the floats
    assert cache_key(**base) == cache_key(**same_other_order)
    assert len(cache_key(**base)) == 64
    for field, changed in [
        ("text", "hello!"),
        ("sample_rate", 48000),
        ("format", "mp3"),
        ("controls", {"speed": 1.1, "pitch": 0.0}),
        ("voice", "v1@4"),
    ]:
        assert cache_key(**{**base, field: changed}) != cache_key(**base), field


def test_cache_key_rejects_non_json_values() -> None:
    with pytest.raises(TypeError):
        cache_key(text=object())
    with pytest.raises(ValueError):
        cache_key(speed=float("nan"))


def test_voice_tag_is_stable_and_distinct() -> None:
    assert voice_tag("alice") == voice_tag("alice")
    assert voice_tag("alice") != voice_tag("bob")
    assert voice_tag("../etc").isalnum()


# ---------------------------------------------------------------- memory


def test_memory_tier_bounds_bytes_and_evicts_least_recently_used() -> None:
    tier = MemoryTier(max_bytes=300)
    for i in range(3):
        assert tier.put(_key(i), _entry(100))
    assert tier.get(_key(0)) is not None  # 0 becomes most recent; 1 is now the oldest
    tier.put(_key(3), _entry(100))
    assert tier.bytes_used == 300
    assert tier.get(_key(1)) is None
    assert tier.keys() == [_key(2), _key(0), _key(3)]
    assert tier.counters.evictions == 1


def test_memory_tier_skips_values_larger_than_budget() -> None:
    tier = MemoryTier(max_bytes=50)
    assert not tier.put(_key(0), _entry(51))
    assert len(tier) == 0 and tier.counters.skipped == 1


def test_memory_tier_replacing_a_key_does_not_double_count() -> None:
    tier = MemoryTier(max_bytes=1000)
    tier.put(_key(0), _entry(100))
    tier.put(_key(0), _entry(40))
    assert tier.bytes_used == 40 and len(tier) == 1


# ---------------------------------------------------------------- disk


def _entry_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.vxc"))


def test_disk_tier_round_trip_and_survives_restart(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    tier.put(_key(0), _entry(500, voice="alice"))
    again = DiskTier(tmp_path, max_bytes=10_000)
    got = again.get(_key(0))
    assert got == _entry(500, voice="alice")
    assert again.bytes_used == tier.bytes_used > 500
    assert len(again) == 1


def test_disk_tier_ignores_and_repairs_truncated_entry(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    tier.put(_key(0), _entry(500))
    tier.put(_key(1), _entry(500))
    victim = next(p for p in _entry_files(tmp_path) if p.stem == _key(0))
    victim.write_bytes(victim.read_bytes()[:300])  # a write that died half way
    assert tier.get(_key(0)) is None
    assert not victim.exists()  # repaired: removed rather than served again
    assert tier.counters.errors == 1
    assert tier.get(_key(1)) is not None


def test_disk_tier_detects_bit_flip_with_checksum(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    tier.put(_key(0), _entry(500))
    (path,) = _entry_files(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF  # same length, different content
    path.write_bytes(bytes(raw))
    assert tier.get(_key(0)) is None


def test_disk_tier_start_up_drops_corrupt_files_and_stale_temp_files(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    tier.put(_key(0), _entry(500))
    tier.put(_key(1), _entry(500))
    good, bad = sorted(_entry_files(tmp_path), key=lambda p: p.stem != _key(0))
    bad.write_bytes(bad.read_bytes()[:100])
    stale_tmp = good.parent / ".tmp-crashed"
    stale_tmp.write_bytes(b"partial")
    old = time.time() - 3600
    os.utime(stale_tmp, (old, old))
    fresh_tmp = good.parent / ".tmp-in-progress"
    fresh_tmp.write_bytes(b"partial")

    again = DiskTier(tmp_path, max_bytes=10_000)
    assert len(again) == 1 and not bad.exists()
    assert again.bytes_used == good.stat().st_size
    assert not stale_tmp.exists()
    assert fresh_tmp.exists()  # may belong to a live writer in another process
    assert again.get(_key(0)) is not None


def test_disk_tier_writes_leave_no_temp_files(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    for i in range(5):
        tier.put(_key(i), _entry(100))
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".vxc"]
    assert leftovers == []
    # sharded: files sit under a two-character directory named after the key
    for path in _entry_files(tmp_path):
        assert path.parent.name == path.stem[:2]


def test_disk_tier_byte_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=2_000)
    for i in range(3):
        tier.put(_key(i), _entry(400))
    per_file = _entry_files(tmp_path)[0].stat().st_size
    assert tier.get(_key(0)) is not None  # refresh 0
    tier.put(_key(3), _entry(400))
    assert tier.bytes_used <= 2_000
    assert tier.bytes_used == per_file * 3
    assert tier.get(_key(1)) is None
    assert {p.stem for p in _entry_files(tmp_path)} == {_key(0), _key(2), _key(3)}


def test_disk_tier_restart_enforces_smaller_budget_by_recency(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path, max_bytes=10_000)
    for i in range(3):
        tier.put(_key(i), _entry(500))
    for i, path in enumerate(sorted(_entry_files(tmp_path), key=lambda p: p.stem)):
        os.utime(path, (1000.0 + i, 1000.0 + i))  # deterministic recency by mtime
    newest = max(_entry_files(tmp_path), key=lambda p: p.stat().st_mtime)
    small = DiskTier(tmp_path, max_bytes=newest.stat().st_size)
    assert [p.stem for p in _entry_files(tmp_path)] == [newest.stem]
    assert len(small) == 1


# ---------------------------------------------------------------- tiered


def test_tiered_cache_promotes_hits_and_reports_events(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    memory = MemoryTier(10_000)
    disk = DiskTier(tmp_path, 100_000)
    cache = TieredCache([memory, disk], listener=lambda tier, result: events.append((tier, result)))
    disk.put(_key(0), _entry(100, voice="alice"))

    assert cache.get(_key(0)) == (bytes([1]) * 100, "disk")
    assert cache.get(_key(0)) == (bytes([1]) * 100, "memory")
    found = cache.get_entry(_key(0))
    assert found is not None and found[0].content_type == "audio/wav"
    assert cache.get(_key(9)) is None
    assert events == [
        ("memory", "miss"),
        ("disk", "hit"),
        ("memory", "hit"),
        ("memory", "hit"),
        ("memory", "miss"),
        ("disk", "miss"),
    ]
    stats = cache.stats()
    assert stats["memory"]["hits"] == 2 and stats["disk"]["hits"] == 1


def test_tiered_invalidate_voice_removes_entries_in_every_tier(tmp_path: Path) -> None:
    memory = MemoryTier(100_000)
    disk = DiskTier(tmp_path, 100_000)
    cache = TieredCache([memory, disk])
    for i in range(4):
        cache.put(_key(i), b"a" * 50, voice_id="alice" if i % 2 == 0 else "bob")
    cache.put(_key(9), b"n" * 50, voice_id=None)

    removed = cache.invalidate_voice("alice")
    assert removed == {"memory": 2, "disk": 2}
    for i in (0, 2):
        assert cache.get(_key(i)) is None
    assert memory.get(_key(1)) is not None and disk.get(_key(3)) is not None
    assert cache.get(_key(9)) is not None
    # a fresh process sees the disk state too
    assert DiskTier(tmp_path, 100_000).invalidate_voice("alice") == 0
    assert cache.invalidate_voice("alice") == {"memory": 0, "disk": 0}


def test_tiered_cache_survives_a_failing_listener(tmp_path: Path) -> None:
    def boom(tier: str, outcome: str) -> None:
        raise RuntimeError("metrics down")

    cache = TieredCache([MemoryTier(1000)], listener=boom)
    cache.put(_key(0), b"x", voice_id=None)
    assert cache.get(_key(0)) == (b"x", "memory")


# ---------------------------------------------------------------- embeddings


def test_embedding_cache_is_bounded_lru_and_returns_read_only_arrays() -> None:
    cache = EmbeddingCache(max_entries=2)
    keys = [EmbeddingCache.content_key(bytes([i]) * 10, model="ge2e") for i in range(3)]
    assert keys[0] != EmbeddingCache.content_key(bytes([0]) * 10, model="other")
    original = np.arange(4, dtype=np.float32)
    cache.put(keys[0], original)
    original[0] = 99  # the caller's array is not the cached one
    cache.put(keys[1], np.ones(4, dtype=np.float32))
    got = cache.get(keys[0])
    assert got is not None and got[0] == 0
    with pytest.raises(ValueError):
        got[0] = 5
    cache.put(keys[2], np.zeros(4, dtype=np.float32))
    assert cache.get(keys[1]) is None and len(cache) == 2

    calls: list[float] = []

    def compute(fill: float) -> np.ndarray:
        calls.append(fill)
        return np.full(4, fill)

    value = cache.get_or_compute(keys[1], lambda: compute(7.0))
    again = cache.get_or_compute(keys[1], lambda: compute(8.0))
    assert calls == [7.0] and float(value[0]) == float(again[0]) == 7.0


# ---------------------------------------------------------------- singleflight


def test_singleflight_threads_share_one_call() -> None:
    flight = SingleFlight()
    calls = 0
    gate = threading.Event()
    results: list[int] = []
    lock = threading.Lock()

    def compute() -> int:
        nonlocal calls
        with lock:
            calls += 1
        gate.wait(5)
        return 42

    def worker() -> None:
        value = flight.do("k", compute)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    # Release the computation only once the 31 other threads wait on it.
    _wait_for_followers(flight, "k", 31)
    gate.set()
    for t in threads:
        t.join(5)
    assert calls == 1
    assert results == [42] * 32
    assert flight.in_flight() == 0
    assert flight.do("k", lambda: 7) == 7  # entry removed: a later call computes afresh


def _wait_for_followers(flight: SingleFlight, key: str, count: int) -> None:
    """Until ``count`` threads block on ``key``'s call: a condition, not a sleep
    (a slow thread arriving after the release would compute a second time)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        call = flight._thread_calls.get(key)
        # threading.Event keeps its waiters in its Condition (CPython).
        if call is not None and len(call.done._cond._waiters) >= count:  # type: ignore[attr-defined]
            return
        time.sleep(0.001)
    raise AssertionError(f"{count} threads did not reach the flight")


def test_singleflight_threads_all_see_the_exception() -> None:
    flight = SingleFlight()
    gate = threading.Event()
    errors: list[BaseException] = []

    def failing() -> int:
        gate.wait(5)
        raise KeyError("engine broke")

    def worker() -> None:
        try:
            flight.do("k", failing)
        except KeyError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    _wait_for_followers(flight, "k", 7)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(errors) == 8 and flight.in_flight() == 0


def test_singleflight_asyncio_tasks_share_one_call() -> None:
    async def scenario() -> tuple[int, list[int], int]:
        flight = SingleFlight()
        calls = 0

        async def compute() -> int:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.05)
            return 42

        results = await asyncio.gather(*(flight.do_async("k", compute) for _ in range(32)))
        return calls, list(results), flight.in_flight()

    calls, results, in_flight = asyncio.run(scenario())
    assert calls == 1 and results == [42] * 32 and in_flight == 0


def test_singleflight_asyncio_exception_and_cancelled_waiter() -> None:
    async def scenario() -> None:
        flight = SingleFlight()
        release = asyncio.Event()

        async def failing() -> int:
            await release.wait()
            raise KeyError("engine broke")

        waiters = [asyncio.create_task(flight.do_async("k", failing)) for _ in range(4)]
        await asyncio.sleep(0.01)
        waiters[0].cancel()  # a client that went away must not cancel the others
        await asyncio.sleep(0.01)
        release.set()
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        assert isinstance(outcomes[0], asyncio.CancelledError)
        assert all(isinstance(o, KeyError) for o in outcomes[1:])
        assert flight.in_flight() == 0

    asyncio.run(scenario())
