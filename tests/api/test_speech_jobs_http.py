"""Speech jobs over HTTP on the real runtime: submit, progress, download through the
signed URL, idempotency, tenancy and scopes, link tampering/expiry, deletion."""

from __future__ import annotations

import io
import json
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import soundfile as sf
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import wait_for_job

TEXT = "A worker renders long texts in the background."


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _key(app: FastAPI, *scopes: str, owner: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", set(scopes), owner=owner)
    return _bearer(str(plaintext))


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    # Polling must not trip the rate limiter.
    return make_app(rate_limit_per_minute=0)


def _never_whole(key: str) -> bytes:
    raise AssertionError(f"{key} was read whole")


def test_speech_job_from_submit_to_signed_download(app: FastAPI) -> None:
    alice = _key(app, "tts", owner="alice")
    bob = _key(app, "tts", "voices:read", owner="bob")
    reader = _key(app, "voices:read", owner="alice")
    with TestClient(app) as c:
        r = c.post(
            "/v1/jobs/speech",
            json={"text": TEXT, "format": "wav", "speed": 1.1},
            headers={**alice, "Idempotency-Key": "order-42"},
        )
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["kind"] == "speech" and job["state"] in ("queued", "running")
        assert r.headers["location"] == f"/v1/jobs/{job['id']}"
        # The same key again: the same job, not a second render.
        again = c.post(
            "/v1/jobs/speech",
            json={"text": TEXT, "format": "wav", "speed": 1.1},
            headers={**alice, "Idempotency-Key": "order-42"},
        )
        assert again.status_code == 200 and again.json()["id"] == job["id"]
        conflict = c.post(
            "/v1/jobs/speech",
            json={"text": "Another text."},
            headers={**alice, "Idempotency-Key": "order-42"},
        )
        assert conflict.status_code == 409

        # Tenancy and scopes: another owner sees nothing; a key without tts may
        # not look at speech jobs.
        assert c.get(f"/v1/jobs/{job['id']}", headers=bob).status_code == 404
        assert c.get(f"/v1/jobs/{job['id']}", headers=reader).status_code == 403

        # The progress stream follows the job to its end, the URL in its last event.
        events = c.get(f"/v1/jobs/{job['id']}/events", headers=alice)
        assert events.status_code == 200
        assert "event: progress" in events.text and "event: done" in events.text
        last = json.loads(events.text.strip().rsplit("data: ", 1)[1])
        assert last["state"] == "succeeded" and last["audio_url"]

        done = wait_for_job(c, job["id"], alice)
        assert done["state"] == "succeeded", done
        assert done["progress"] == 100.0 and done["attempts"] == 1
        assert "blob_key" not in (done["result"] or {})
        url = done["audio_url"]
        assert url and done["expires_at"]

        # The link needs no API key: the signature is the credential. The
        # audio is streamed from the store in parts, never read whole.
        blobs = app.state.runtime.speech_jobs.blobs
        whole_read = blobs.get
        blobs.get = _never_whole  # type: ignore[method-assign]
        try:
            audio = c.get(url)
            span = c.get(url, headers={"Range": "bytes=0-99"})
        finally:
            blobs.get = whole_read  # type: ignore[method-assign]
        assert audio.status_code == 200, audio.text
        assert audio.headers["content-type"].startswith("audio/wav")
        assert audio.headers["content-length"] == str(len(audio.content))
        assert span.status_code == 206 and span.content == audio.content[:100]
        samples, rate = sf.read(io.BytesIO(audio.content))
        duration = len(samples) / rate
        # Eight words of English: a few seconds of speech, not silence.
        assert 1.5 < duration < 8.0, duration
        assert abs(samples).max() > 0.05

        # A changed signature, key or expiry is refused with a JSON 403.
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        bad_sig = c.get(parts.path, params={**query, "sig": "0" * 64})
        assert bad_sig.status_code == 403 and bad_sig.json()["error"]["code"] == "forbidden"
        longer = c.get(parts.path, params={**query, "expires": int(query["expires"]) + 3600})
        assert longer.status_code == 403
        other_key = c.get(parts.path.replace(job["id"], "j_other"), params=query)
        assert other_key.status_code == 403
        signer = app.state.runtime.url_signer
        key = parts.path.removeprefix("/v1/files/")
        expired = int(time.time()) - 5
        old = c.get(parts.path, params={"expires": expired, "sig": signer.signature(key, expired)})
        assert old.status_code == 403 and "expired" in old.json()["error"]["message"]

        # Deleting the job removes its audio: the link stops working.
        assert c.delete(f"/v1/jobs/{job['id']}", headers=bob).status_code == 404
        assert c.delete(f"/v1/jobs/{job['id']}", headers=alice).status_code == 200
        assert c.get(url).status_code == 404
        assert c.get(f"/v1/jobs/{job['id']}", headers=alice).status_code == 404


def test_bad_speech_job_requests_are_4xx(app: FastAPI) -> None:
    alice = _key(app, "tts", owner="alice")
    with TestClient(app) as c:
        for body, code in (
            ({}, 422),
            ({"text": "hi", "stream": True}, 422),
            ({"text": "   "}, 422),
            ({"text": "hi", "voice": "no_such_voice"}, 404),
            ({"text": "hi", "format": "bogus"}, 422),
            ({"text": "x" * 100_001}, 413),
        ):
            r = c.post("/v1/jobs/speech", json=body, headers=alice)
            assert r.status_code == code, (body if len(str(body)) < 80 else "long", r.text)
            assert "error" in r.json()
        r = c.post(
            "/v1/jobs/speech", json={"text": "hi"}, headers={**alice, "Idempotency-Key": "k" * 201}
        )
        assert r.status_code == 422
        r = c.get("/v1/files/jobs/j_x.wav")
        assert r.status_code == 422  # no signature at all
        assert c.get(
            "/v1/files/../../etc/passwd", params={"expires": 1, "sig": "a"}
        ).status_code in (
            403,
            404,
        )
