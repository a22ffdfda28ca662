"""The operator's per-key watermark policy (issue 49): with
``watermark_per_key`` on, a key created with the ``speech:unmarked`` scope
gets unmarked speech and says so; every other key, ``admin`` included, and
every key while the policy is off, gets marked speech.

Checked by reading the audio back with the product's detector, not only the
header, and with the same text spoken first by a marked key: the waived key
must not be handed the marked render from the cache or an in-flight share.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import job_download

from voxclone.errors import InvalidInput
from voxclone.runtime.key_scopes import SCOPE_UNMARKED

TEXT = "A waiver is the operator's choice, made key by key, and said on every answer."


def _key(app: FastAPI, *scopes: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", set(scopes), owner="perkey49")
    return {"Authorization": f"Bearer {plaintext}"}


def _marked(c: TestClient, headers: dict[str, str], audio: bytes, name: str) -> bool:
    r = c.post("/v1/provenance/detect", files={"audio": (name, audio)}, headers=headers)
    assert r.status_code == 200, r.text
    return bool(r.json()["watermarked"])


def _speak(c: TestClient, headers: dict[str, str], text: str) -> tuple[str, bytes]:
    r = c.post("/v1/tts", json={"text": text, "format": "wav"}, headers=headers)
    assert r.status_code == 200, r.text
    return r.headers["x-voxclone-watermark"], r.content


def test_a_waived_key_gets_unmarked_speech_on_every_route(make_app: Any) -> None:
    app = make_app(watermark_per_key=True, rate_limit_per_minute=0)
    plain, waived, admin = _key(app, "tts"), _key(app, "tts", SCOPE_UNMARKED), _key(app, "admin")
    with TestClient(app) as c:
        # The marked render first: the waived key's identical request must not share it.
        header, audio = _speak(c, plain, TEXT)
        assert header == "perth" and _marked(c, plain, audio, "plain.wav")
        header, audio = _speak(c, waived, TEXT)
        assert header == "none"
        assert not _marked(c, plain, audio, "waived.wav")
        # ... and the marked key is not handed the waived render either.
        header, audio = _speak(c, admin, TEXT)
        assert header == "perth" and _marked(c, plain, audio, "admin.wav")

        r = c.post(
            "/v1/audio/speech",
            json={"model": "kokoro", "input": TEXT, "voice": "clear_female"},
            headers=waived,
        )
        assert r.status_code == 200 and r.headers["x-voxclone-watermark"] == "none"
        assert not _marked(c, plain, r.content, "openai.mp3")

        r = c.post("/v1/audio/speech/captioned", json={"input": TEXT}, headers=waived)
        assert r.status_code == 200 and r.headers["x-voxclone-watermark"] == "none"
        assert not _marked(c, plain, base64.b64decode(r.json()["audio"]), "captioned.mp3")

        turns = [
            {"voice": "clear_female", "text": "Is this one marked?"},
            {"voice": "clear_male", "text": "Not for this key."},
        ]
        r = c.post("/v1/audio/dialogue", json={"turns": turns}, headers=waived)
        assert r.status_code == 200 and r.headers["x-voxclone-watermark"] == "none"
        assert not _marked(c, plain, r.content, "dialogue.wav")

        # A job renders later, in a worker that does not see the key: it keeps the waiver.
        job = job_download(c, {"text": TEXT + " As a job.", "format": "wav"}, waived)
        assert job.headers["x-voxclone-watermark"] == "none"
        assert not _marked(c, plain, job.content, "job.wav")
        job = job_download(c, {"text": TEXT + " As a job.", "format": "wav"}, plain)
        assert job.headers["x-voxclone-watermark"] == "perth"
        assert _marked(c, plain, job.content, "job-marked.wav")


def test_without_the_policy_the_waiver_is_ignored(make_app: Any) -> None:
    app = make_app(rate_limit_per_minute=0)  # watermark_per_key defaults to False
    waived = _key(app, "tts", SCOPE_UNMARKED)
    with TestClient(app) as c:
        header, audio = _speak(c, waived, TEXT + " Policy off.")
        assert header == "perth"
        assert _marked(c, waived, audio, "off.wav")


def test_the_waiver_alone_is_no_key(make_app: Any) -> None:
    app = make_app(watermark_per_key=True)
    with pytest.raises(InvalidInput) as refused:
        app.state.keys.create("test", {SCOPE_UNMARKED}, owner="perkey49")
    assert refused.value.field == "scopes"
