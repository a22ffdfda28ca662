"""Voice library, jobs and job-progress SSE routes, against FakeVoiceService.

These check the routes' shape (forms, status codes, SSE framing) with the
real request types; tenancy and deletion on the real service are tested in
tests/integration/test_tenancy_privacy.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_voices import FakeJobView, FakeVoiceService
from fastapi.testclient import TestClient

from voxclone.runtime.job_store import JobEvents


@pytest.fixture()
def fake(runtime: Any, app_runtime: Any) -> Iterator[FakeVoiceService]:
    service = FakeVoiceService(runtime.catalog, JobEvents())
    app_runtime.replace(voices=service, jobs=FakeJobView(service), job_events=service.events)
    yield service


FORM = {
    "name": "Ada",
    "consent": "true",
    "consent_statement": "I agree that my voice is cloned.",
    "given_by": "Ada Lovelace",
}


def _enroll(c: TestClient, **extra: Any) -> Any:
    return c.post(
        "/v1/voices",
        data={**FORM, **extra},
        files={"audio": ("ref.wav", b"RIFF" + b"\0" * 200, "audio/wav")},
    )


def test_enroll_list_get_rename_delete(client: TestClient, fake: FakeVoiceService) -> None:
    r = _enroll(client, keep_reference="true")
    assert r.status_code == 201, r.text
    voice = r.json()
    assert voice["name"] == "Ada" and voice["job"] is None
    assert voice["has_reference_audio"] is True
    assert "style" not in voice and "embedding" not in voice
    sent = fake.enrolled[-1]
    assert sent.owner == "local" and sent.consent.given_by == "Ada Lovelace"
    assert sent.consent.statement == FORM["consent_statement"]
    assert sent.match_tone is True  # the recording's tone is matched unless turned off
    assert sent.keep_clone is False  # a built-in heard about as close may replace the clone

    listed = client.get("/v1/voices").json()["voices"]
    assert [v["id"] for v in listed] == [voice["id"]]
    assert client.get(f"/v1/voices/{voice['id']}").json()["name"] == "Ada"
    renamed = client.patch(f"/v1/voices/{voice['id']}", json={"name": "Ada L"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Ada L"
    deleted = client.delete(f"/v1/voices/{voice['id']}")
    body = deleted.json()
    # The deletion answers with its signed receipt too (issue 49).
    assert body["id"] == voice["id"] and body["deleted"] is True
    assert body["receipt"]["receipt"]["voice_id"] == voice["id"]
    assert client.get(f"/v1/voices/{voice['id']}").status_code == 404
    assert _enroll(client, name="Plain", match_tone="false").status_code == 201
    assert fake.enrolled[-1].match_tone is False
    assert _enroll(client, name="Mine", keep_clone="true").status_code == 201
    assert fake.enrolled[-1].keep_clone is True


def test_enroll_without_waiting_returns_the_report_job(
    client: TestClient, fake: FakeVoiceService
) -> None:
    waited = _enroll(client)
    assert waited.status_code == 201 and waited.json()["report_job"] is None
    assert fake.waited is True  # waiting for the report is the default
    r = _enroll(client, name="Quick", wait="false", refine="true")
    assert r.status_code == 201, r.text
    body = r.json()
    assert fake.waited is False
    assert body["report_job"]["kind"] == "report" and body["job"]["kind"] == "refine"
    job = client.get(f"/v1/jobs/{body['report_job']['id']}")
    assert job.status_code == 200 and job.json()["voice_id"] == body["id"]


@pytest.mark.parametrize("consent", ["false", "", "yes please"])
def test_enroll_without_consent_is_422_naming_consent(
    client: TestClient, fake: FakeVoiceService, consent: str
) -> None:
    r = _enroll(client, consent=consent)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "consent"
    assert fake.enrolled == []


def test_enroll_missing_audio_names_the_field(client: TestClient, fake: FakeVoiceService) -> None:
    r = client.post("/v1/voices", data=FORM)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "audio"


def test_service_errors_pass_through(client: TestClient, fake: FakeVoiceService) -> None:
    r = client.post("/v1/voices", data=FORM, files={"audio": ("a.wav", b"x", "audio/wav")})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "audio_quality"


def test_refine_job_and_cancel(client: TestClient, fake: FakeVoiceService) -> None:
    voice = _enroll(client, refine="true").json()
    assert voice["job"]["state"] == "queued"
    r = client.post(f"/v1/voices/{voice['id']}/refine", json={"budget_s": 30})
    assert r.status_code == 202
    job = r.json()
    assert client.get(f"/v1/jobs/{job['id']}").json()["state"] == "queued"
    cancelled = client.post(f"/v1/jobs/{job['id']}/cancel").json()
    assert cancelled["state"] == "cancelled"


def test_refine_passes_the_method_and_refuses_an_unknown_one(
    client: TestClient, fake: FakeVoiceService
) -> None:
    voice = _enroll(client).json()
    url = f"/v1/voices/{voice['id']}/refine"
    assert client.post(url, json={"method": "deep"}).status_code == 202
    assert client.post(url).status_code == 202
    assert fake.refine_methods == ["deep", None]  # None: the server's VOXCLONE_REFINE_METHOD
    r = client.post(url, json={"method": "magic"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "method"


def test_job_events_stream_progress_until_done(client: TestClient, fake: FakeVoiceService) -> None:
    voice = _enroll(client).json()
    job_id = client.post(f"/v1/voices/{voice['id']}/refine").json()["id"]

    def work() -> None:
        while fake.events.subscriber_count(job_id) == 0:
            time.sleep(0.01)
        fake.advance(job_id, state="running", progress=40.0, message="searching")
        fake.advance(job_id, state="succeeded", progress=100.0, message="done")

    worker = threading.Thread(target=work)
    worker.start()
    r = client.get(f"/v1/jobs/{job_id}/events")
    worker.join(5)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    states = [e["state"] for e in events]
    assert states[0] == "queued" and states[-1] == "succeeded"
    assert "running" in states
    assert "event: done" in r.text


def test_voice_routes_without_voice_service_are_503(client: TestClient, app_runtime: Any) -> None:
    # A runtime built with ``with_voices=False`` (a synthesis-only replica) has none.
    app_runtime.replace(voices=None)
    for r in (
        client.get("/v1/voices"),
        client.get("/v1/voices/v_missing"),
        client.post("/v1/voices", data=FORM, files={"audio": ("a.wav", b"RIFF", "audio/wav")}),
    ):
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "not_ready"
    # Jobs do not need cloning (speech jobs run on synthesis-only replicas too).
    assert client.get("/v1/jobs/j_missing").status_code == 404


def test_tts_with_inline_reference_clip(client: TestClient, fake: FakeVoiceService) -> None:
    r = client.post(
        "/v1/tts",
        data={"text": "Good morning.", "consent": "true", "consent_statement": "I agree."},
        files={"reference": ("ref.wav", b"RIFF" + b"\0" * 200, "audio/wav")},
    )
    assert r.status_code == 200, r.text
    male = client.post("/v1/tts", json={"text": "Good morning.", "voice": "clear_male"})
    assert r.content == male.content  # the fake clones every clip as clear_male
    bad = client.post(
        "/v1/tts",
        data={"text": "hi", "consent": "true", "consent_statement": "I agree."},
        files={"reference": ("r.wav", b"x", "audio/wav")},
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "reference"


def test_enroll_with_several_recordings_sends_them_all(
    client: TestClient, fake: FakeVoiceService
) -> None:
    clips = [b"RIFF" + bytes([i]) * 200 for i in range(3)]
    r = client.post(
        "/v1/voices",
        data=FORM,
        files=[("audio", (f"ref{i}.wav", clip, "audio/wav")) for i, clip in enumerate(clips)],
    )
    assert r.status_code == 201, r.text
    sent = fake.enrolled[-1]
    assert sent.audio == clips[0] and list(sent.extra_audio) == clips[1:]


def test_add_recordings_makes_a_new_version(client: TestClient, fake: FakeVoiceService) -> None:
    voice = _enroll(client).json()
    files = [("audio", (f"more{i}.wav", b"RIFF" + b"\1" * 200, "audio/wav")) for i in range(2)]
    r = client.post(f"/v1/voices/{voice['id']}/recordings", files=files)
    assert r.status_code == 200, r.text
    assert r.json()["version"] == voice["version"] + 1
    assert fake.voices[voice["id"]].quality["clips"] == 3

    missing = client.post("/v1/voices/v_nope/recordings", files=files)
    assert missing.status_code == 404
    bad = client.post(
        f"/v1/voices/{voice['id']}/recordings", files=[("audio", ("x.wav", b"x", "audio/wav"))]
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "audio"
    none = client.post(f"/v1/voices/{voice['id']}/recordings", data={"x": "1"})
    assert none.status_code == 422 and none.json()["error"]["field"] == "audio"
