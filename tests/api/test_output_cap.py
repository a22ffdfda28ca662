"""One price of output on every route that makes audio (issue #45).

The audio a request asks for is estimated from its text as it will be spoken
(the caller's lexicon, SSML, numbers) at its pace (speed and ``<prosody
rate>``), plus its breaks, and refused with 413 over ``max_output_s`` before
any render: on ``/v1/tts``, OpenAI speech, captions and speech jobs alike. A
speech job keeps its estimate and is held to it while it renders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.bootstrap import Runtime
from voxclone.runtime.blobs import LocalBlobStore
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.service.jobs import ESTIMATE_FIELD, SpeechJobConfig, SpeechJobs
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.text.lexicon import Pronunciation

WORD = "qux"
# The probe's entry: one word read as a ~200-character respelling (16.8 s).
RESPELLING = ("zorbulat " * 30)[:199].strip()
# ~6,000 characters of that word: ~300,000 spoken units, 5.5 h at speed 1.
TEXT = " ".join([WORD] * 1500)[:6000]


def _bearer(app: FastAPI, owner: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", {"tts"}, owner=owner)
    return {"Authorization": f"Bearer {plaintext}"}


def _long_word(runtime: Runtime, owner: str) -> None:
    runtime.lexicon.put(owner, Pronunciation(WORD, "en", respelling=RESPELLING))


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    return make_app(rate_limit_per_minute=0)


def _is_the_output_cap(r: Any, runtime: Runtime) -> None:
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["field"] == "text"
    assert error["limit"] == runtime.settings.max_output_s
    assert "max_output_s" in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"text": TEXT, "speed": 0.5},
        {"text": f'<speak><prosody rate="50%">{TEXT}</prosody></speak>'},
    ],
    ids=["speed", "prosody-rate"],
)
def test_a_lexicon_expanded_job_over_the_cap_is_413_before_it_is_queued(
    app: FastAPI, runtime: Runtime, body: dict[str, Any]
) -> None:
    # Before: accepted (202) and rendered towards 14-17 h of audio.
    _long_word(runtime, "probe45")
    with TestClient(app) as c:
        r = c.post("/v1/jobs/speech", json=body, headers=_bearer(app, "probe45"))
    _is_the_output_cap(r, runtime)


def test_every_route_that_makes_audio_prices_the_output_alike(
    app: FastAPI, runtime: Runtime
) -> None:
    _long_word(runtime, "probe45-routes")
    headers = _bearer(app, "probe45-routes")
    with TestClient(app) as c:
        for path, body in (
            ("/v1/tts", {"text": TEXT, "speed": 0.5}),
            ("/v1/tts?stream=true", {"text": TEXT, "speed": 0.5}),
            # OpenAI's input stops at 4,096 characters: ~4,000 still say ~7 h.
            ("/v1/audio/speech", {"model": "kokoro", "input": TEXT[:4000], "voice": "alloy",
                                  "speed": 0.5}),
            ("/v1/audio/speech/captioned", {"input": TEXT[:4000], "speed": 0.5}),
        ):  # fmt: skip
            _is_the_output_cap(c.post(path, json=body, headers=headers), runtime)


def test_the_estimate_counts_the_lexicon_prosody_rate_speed_and_breaks(
    runtime: Runtime,
) -> None:
    owner = "probe45-estimate"
    speech = runtime.speech
    text = "The quick brown fox jumps over the lazy dog."

    def estimate(text: str, speed: float | None = None) -> float:
        from voxclone.synth.controls import SpeechControls

        req = SpeechRequest(text=text, owner=owner, controls=SpeechControls(speed=speed))
        return speech.estimate(req).output_s

    plain = estimate(text)
    assert 2.0 < plain < 4.0  # ~3 s: what Kokoro says of it
    assert estimate(text, speed=0.5) == pytest.approx(2 * plain, rel=0.01)
    slow = estimate(f'<speak><prosody rate="50%">{text}</prosody></speak>')
    assert slow == pytest.approx(2 * plain, rel=0.05)
    paused = estimate(f'<speak>{text}<break time="5s"/>{text}</speak>')
    assert paused == pytest.approx(2 * plain + 5.0, rel=0.05)
    _long_word(runtime, owner)
    # The word now says 199 characters: ~13 s more.
    assert estimate(f"{text} {WORD}.") > plain + 12.0


def test_a_job_keeps_its_estimate_and_one_that_outgrows_it_stops_clearly(
    runtime: Runtime, tmp_path: Path
) -> None:
    owner = "probe45-outgrow"
    queue = SqlJobStore(tmp_path / "jobs.sqlite3", recover_on_open=False)
    blobs = LocalBlobStore(tmp_path / "blobs")
    jobs = SpeechJobs(
        queue=queue,
        speech=runtime.speech,
        blobs=blobs,
        events=JobEvents(),
        # No floor: a render may make 1.5x its estimate, not 30 s more.
        config=SpeechJobConfig(outgrow_floor_s=0.0, max_attempts=1),
        worker_id="w",
    )
    try:
        job, _ = jobs.submit(SpeechRequest(text=f"Say {WORD} now.", owner=owner))
        stored = (job.payload or {})[ESTIMATE_FIELD]
        assert 0.3 < stored["output_s"] < 3.0 and stored["units"] > 0
        # The word's pronunciation grows after the job was queued: its audio
        # would be ~14 s, far past the ~1 s it was priced at.
        _long_word(runtime, owner)
        final = jobs.run_one()
        assert final is not None and final.state == "failed", final
        assert final.error is not None and final.error["code"] == "output_over_estimate"
        assert "estimated" in final.message
        assert not blobs.exists(f"jobs/{job.id}.wav")
    finally:
        queue.close()
