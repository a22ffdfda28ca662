"""Deleting a voice over HTTP takes its speech jobs' audio with it (real runtime).

The probe (issue 37): after ``DELETE /v1/voices/v_…`` a finished job's signed
link still served its audio (200, 76 KB), and a job rendering at that moment
finished and served 2.3 MB. Now both jobs end ``failed`` with error code
``voice_deleted``, the link answers 404 and the blob store holds nothing of them.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import wait_for_job

LONG = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting "
    "the steps as his father had taught him, and lit the great lamp before the ships "
    "came round the point. "
) * 8  # ~1,400 characters: still rendering when the voice is deleted


def _headers(app: FastAPI, owner: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("t", {"tts", "voices:read", "voices:write"}, owner=owner)
    return {"Authorization": f"Bearer {plaintext}"}


def test_deleting_a_voice_revokes_its_finished_and_running_jobs(
    make_app: Any, runtime: Any, store_style_voice: Any
) -> None:
    app = make_app(rate_limit_per_minute=0)
    alice = _headers(app, "alice")
    voice = store_style_voice(runtime, "Doomed", "alice")
    blobs = runtime.speech_jobs.blobs
    with TestClient(app) as c:
        r = c.post(
            "/v1/jobs/speech",
            json={"text": "Hello from a voice.", "voice": voice.id},
            headers=alice,
        )
        assert r.status_code == 202, r.text
        finished = wait_for_job(c, r.json()["id"], alice, states={"succeeded", "failed"})
        assert finished["state"] == "succeeded", finished
        assert finished["voice_id"] == voice.id  # the job records its voice
        url = finished["audio_url"]
        assert c.get(url).status_code == 200

        r = c.post("/v1/jobs/speech", json={"text": LONG, "voice": "Doomed"}, headers=alice)
        assert r.status_code == 202, r.text
        running = wait_for_job(c, r.json()["id"], alice, states={"running", "succeeded", "failed"})
        assert running["state"] == "running", running

        assert c.delete(f"/v1/voices/{voice.id}", headers=alice).status_code == 200

        gone = c.get(url)
        assert gone.status_code == 404, gone.status_code
        revoked = c.get(f"/v1/jobs/{finished['id']}", headers=alice).json()
        assert revoked["state"] == "failed" and revoked["error"]["code"] == "voice_deleted"
        assert revoked["audio_url"] is None
        stopped = wait_for_job(c, running["id"], alice, states={"succeeded", "failed", "cancelled"})
        assert stopped["state"] == "failed", stopped
        assert stopped["error"]["code"] == "voice_deleted" and stopped["audio_url"] is None
    for job_id in (finished["id"], running["id"]):
        assert not blobs.exists(f"jobs/{job_id}.wav")
