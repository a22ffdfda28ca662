"""Streaming through a real HTTP server: early first bytes, cancellation on disconnect."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timed

WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight")
# Short sentences: enough that rendering all of them takes several seconds.
TEXT = " ".join(f"Sentence {w} is here." for w in WORDS[:5])
LONG_TEXT = " ".join(f"Sentence number {w} is there." for w in WORDS)


def _wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_first_audio_arrives_long_before_the_stream_ends(live_server: Callable[..., Any]) -> None:
    with live_server() as server, httpx.Client(base_url=server.url, timeout=60) as http:
        started = time.perf_counter()
        first_audio_at = None
        total = 0
        with http.stream(
            "POST", "/v1/tts", json={"text": TEXT, "stream": True, "format": "pcm"}
        ) as r:
            assert r.status_code == 200
            for chunk in r.iter_bytes():
                total += len(chunk)
                if first_audio_at is None and total > 2400:  # > 50 ms of audio
                    first_audio_at = time.perf_counter() - started
        finished_at = time.perf_counter() - started
    assert first_audio_at is not None
    assert total > 24_000 * 2 * 3  # several seconds of 16-bit audio
    assert first_audio_at < 0.5 * finished_at, (first_audio_at, finished_at)


def test_disconnect_mid_stream_stops_remaining_work(
    live_server: Callable[..., Any], runtime: Any
) -> None:
    with live_server() as server:
        before = runtime.scheduler.stats().completed
        with (
            httpx.Client(base_url=server.url, timeout=60) as http,
            http.stream(
                "POST", "/v1/tts", json={"text": LONG_TEXT, "stream": True, "format": "pcm"}
            ) as r,
        ):
            received = 0
            for chunk in r.iter_bytes():
                received += len(chunk)
                if received > 2400:
                    break  # leaving the block closes the connection
        # The stream ends once the chunk already inside the engine is done.
        slots = server.app.state.stream_slots
        stats = runtime.scheduler.stats
        assert _wait_until(lambda: slots.open == 0 and stats().in_flight == 0, 20)
        settled = runtime.scheduler.stats().completed
        time.sleep(1.5)
        after = runtime.scheduler.stats().completed
    assert after == settled, "engine work continued after the client left"
    assert after - before <= 4, f"{after - before} of 8 sentences were synthesized"


def test_disconnect_cuts_the_chunk_inside_the_engine(
    live_server: Callable[..., Any], runtime: Any
) -> None:
    """The chunk being rendered when the client leaves is cut too (issue 48:
    the scheduler's cancel watcher), not left to run to its end."""
    sentence = "This sentence is one of many that the listener will never hear."
    with live_server() as server:
        with (
            httpx.Client(base_url=server.url, timeout=60) as http,
            http.stream(
                "POST",
                "/v1/tts",
                json={"text": " ".join([sentence] * 6), "stream": True, "format": "pcm"},
            ) as r,
        ):
            received = 0
            for chunk in r.iter_bytes():
                received += len(chunk)
                if received > 2400:
                    break
        left = time.perf_counter()
        stats = runtime.scheduler.stats
        assert _wait_until(lambda: stats().in_flight == 0 and stats().queued == 0, 60)
        idle_s = time.perf_counter() - left
    print(f"HTTP stream disconnect: engine idle {idle_s * 1000:.0f} ms")
    assert idle_s < 1.0
