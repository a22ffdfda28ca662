"""What a deadline means for a stream, through the HTTP routes (real runtime).

The default engine's scheduler is given a known rate (0.01 s a character on
one worker, the median of its measured calls) and two reservations of 500
characters that nothing renders: 5 s of work ahead on each of the two
workers, which a new request's first chunk waits behind too (each is a
request's first chunk). The decisions are then
pure arithmetic, so they hold however fast or loaded the machine is:

* a stream whose client named its deadline (``X-Request-Deadline``) must end
  by it: a 2,000-character text that could start in time but not finish is
  refused with 503 at once, on the native and the OpenAI route (before: it
  was admitted because it could start, and the client hung up mid-stream);
* without the header, the server's deadline only bounds the start, and the
  first audio must come within ``stream_first_audio_s``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from voxclone.bootstrap import Runtime
from voxclone.runtime.admission import WorkRate
from voxclone.runtime.scheduler import Scheduler

pytestmark = pytest.mark.timed

# Sentences of ~50 characters: 2,000 characters are several engine chunks.
LONG_TEXT = " ".join(f"Sentence {i} walks along the quiet river bank." for i in range(42))


@pytest.fixture()
def busy_scheduler(runtime: Runtime) -> Iterator[Scheduler]:
    scheduler = runtime.default.scheduler
    saved = scheduler.rate
    rate = WorkRate()
    rate.observe(1.0, 100)  # 0.01 s/char measured and planned with
    scheduler.rate = rate
    held = [scheduler.admit(500, None) for _ in range(2)]  # 500 x 0.01 = 5 s each
    try:
        yield scheduler
    finally:
        for admission in held:
            admission.release()
        scheduler.rate = saved


def _assert_refused(client: TestClient, path: str, body: dict, **kwargs: object) -> None:
    """503 + Retry-After; a stream that was admitted instead is left at once
    (so a regression fails fast instead of rendering the whole text)."""
    with client.stream("POST", path, json=body, **kwargs) as response:  # type: ignore[arg-type]
        assert response.status_code == 503, response.status_code
        response.read()
        assert response.json()["error"]["code"] == "overloaded"
        assert int(response.headers["retry-after"]) >= 1


def test_stream_with_client_deadline_must_finish_by_it(make_app, busy_scheduler) -> None:
    assert len(LONG_TEXT) > 1900
    # Starts after ~5.2 s (the work ahead + its 20-unit first chunk): within
    # 15 s; but the rest (~2,100 spoken units in sentence chunks, two at a
    # time once the 5 s ahead drained) takes until ~15.8 s, past 85 % of 15 s.
    with TestClient(make_app(stream_first_audio_s=60)) as client:
        deadline = {"X-Request-Deadline": "15"}
        _assert_refused(client, "/v1/tts", {"text": LONG_TEXT, "stream": True}, headers=deadline)
        openai = {"model": "tts-1", "input": LONG_TEXT, "voice": "alloy"}
        _assert_refused(client, "/v1/audio/speech", openai, headers=deadline)


def test_stream_without_client_deadline_is_bounded_by_first_audio(make_app, busy_scheduler) -> None:
    body = {"text": LONG_TEXT, "stream": True}
    # First audio ~5.2 s away: over 85 % of a 5 s first-audio budget ...
    with TestClient(make_app(stream_first_audio_s=5)) as client:
        _assert_refused(client, "/v1/tts", body)
    # ... within a 60 s one, and with no client deadline the end is not bounded.
    with (
        TestClient(make_app(stream_first_audio_s=60)) as client,
        client.stream("POST", "/v1/tts", json=body) as response,
    ):
        assert response.status_code == 200  # leave at once: the render is cancelled
