"""SpeechService on the real runtime: request coalescing and the cache tiers.

Real Kokoro, real disk cache, real Redis on loopback. Texts carry a random
number so a rerun in the same session (or a shared home) never starts warm.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest, SpeechResult

pytestmark = pytest.mark.models

PARALLEL_REQUESTS = 32
JOIN_TIMEOUT_S = 120.0


def _unique_sentence(topic: str) -> str:
    return f"{topic} {random.randint(1000, 999_999)}."


def _count_calls(monkeypatch: pytest.MonkeyPatch, obj: Any, name: str) -> list[Any]:
    """Wrap ``obj.name`` so every call's first argument is recorded."""
    calls: list[Any] = []
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else None)
        return original(*args, **kwargs)

    monkeypatch.setattr(obj, name, wrapper)
    return calls


# ----------------------------------------------------------------- single flight


def test_identical_parallel_requests_share_one_synthesis(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    submits = _count_calls(monkeypatch, runtime.scheduler, "submit")
    req = SpeechRequest(text=_unique_sentence("Flight"))
    results: list[SpeechResult | None] = [None] * PARALLEL_REQUESTS
    errors: list[BaseException] = []
    start_together = threading.Barrier(PARALLEL_REQUESTS)

    def call(index: int) -> None:
        try:
            start_together.wait()
            results[index] = runtime.speech.synthesize(req)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(PARALLEL_REQUESTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)

    assert not errors, errors[:3]
    assert all(r is not None for r in results)
    # A one-sentence text is one engine item: one synthesis means one submit.
    assert len(submits) == 1, f"{len(submits)} engine submissions for one request text"
    first = results[0]
    assert first is not None and len(first.audio) > 1000
    assert all(r is not None and r.audio == first.audio for r in results)


# ------------------------------------------------------------------ cache tiers


@pytest.fixture
def runtimes(tmp_path: Path, redis_server: str) -> Iterator[Callable[[Path], Runtime]]:
    """Builds runtimes with the Redis tier on and closes them all at the end."""
    built: list[Runtime] = []

    def make(home: Path) -> Runtime:
        rt = build_runtime(Settings(home=home, redis_url=redis_server), warmup=False)
        built.append(rt)
        return rt

    yield make
    for rt in built:
        rt.close()


def test_cache_survives_restart_is_shared_via_redis_and_invalidates_per_voice(
    tmp_path: Path, runtimes: Callable[[Path], Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    voice = "clear_male"
    req = SpeechRequest(text=_unique_sentence("Tier"), voice=voice)
    home_a, home_c = tmp_path / "a", tmp_path / "c"

    first = runtimes(home_a)
    assert first.cache is not None
    assert [t.name for t in first.cache.tiers] == ["memory", "disk", "redis"]
    stored_keys = _count_calls(monkeypatch, first.cache, "put")
    made = first.speech.synthesize(req)
    assert made.cache == "miss"
    assert len(stored_keys) == 1
    key = stored_keys[0]
    assert first.speech.synthesize(req).cache == "memory"
    first.close()

    # Restart on the same home: the memory tier is empty, the disk tier answers.
    restarted = runtimes(home_a)
    again = restarted.speech.synthesize(req)
    assert again.cache == "disk"
    assert again.audio == made.audio

    # Another replica (own home, shared Redis) gets a Redis hit.
    replica = runtimes(home_c)
    shared = replica.speech.synthesize(req)
    assert shared.cache == "redis"
    assert shared.audio == made.audio

    # Deleting the voice removes its audio from every tier of that runtime.
    assert restarted.cache is not None
    for tier in restarted.cache.tiers:
        assert tier.get(key) is not None, f"{tier.name} should hold the entry before"
    other_key = "0" * 64  # audio of another voice must survive the deletion
    restarted.cache.put(other_key, b"other voice audio", voice_id="clear_female")
    restarted.speech.invalidate_voice(voice)
    for tier in restarted.cache.tiers:
        assert tier.get(key) is None, f"{tier.name} still holds audio of a deleted voice"
        assert tier.get(other_key) is not None, f"{tier.name} dropped another voice's audio"
    assert restarted.cache.get_entry(key) is None
