"""POST /v1/voices refuses a bad field before any audio work (issue 37:
``language=xx`` was accepted, and a bad name was refused only after ~9 s of
cloning). The real route and the real VoiceService on a real SQLite store; the
reference loader, the first step of the audio work, is a spy."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from voxclone.errors import AudioQualityError
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.voice_store import ConsentRecord, SqlVoiceStore, VoiceRecord
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores

FORM = {
    "name": "Ada",
    "consent": "true",
    "consent_statement": "I agree that my voice is cloned.",
    "given_by": "Ada Lovelace",
}


class Spy:
    """The reference loader: counts the uploads that reached the audio work."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, audio: bytes) -> Any:
        self.calls += 1
        raise AudioQualityError("the spy stops the audio work here", field="audio")


@pytest.fixture()
def spy(runtime: Any, app_runtime: Any, tmp_path: Path) -> Iterator[Spy]:
    caps = runtime.engine.capabilities
    store = SqlVoiceStore(tmp_path / "voices.sqlite3", style_shapes={caps.engine: caps.style_shape})
    jobs = SqlJobStore(store.database)
    loader = Spy()
    service = VoiceService(
        VoiceStores(voices=store, jobs=jobs, job_events=JobEvents(), report_queue=jobs),
        CloningKit(
            cloner=SimpleNamespace(),  # type: ignore[arg-type]  # never reached: checks come first
            reference_loader=loader,
            style_engine=caps,
        ),
        VoiceHooks(on_voice_changed=lambda _voice: None),
    )
    service.start()
    store.create(
        VoiceRecord(
            id="",
            name="Taken",
            language="en-us",
            owner="local",
            created_at="",
            updated_at="",
            version=1,
            consent=ConsentRecord(hashlib.sha256(b"ok").hexdigest(), "local", "2026-01-01T00:00"),
            embedding=np.zeros(256, np.float32),
            style=np.zeros(caps.style_shape, np.float32),
            quality={},
            source="instant",
            engine=caps.engine,
            model_id=caps.model_id,
        )
    )
    app_runtime.replace(voices=service)
    try:
        yield loader
    finally:
        service.close()
        jobs.close()
        store.close()


def _enroll(c: TestClient, **fields: str) -> Any:
    return c.post(
        "/v1/voices",
        data={**FORM, **fields},
        files={"audio": ("ref.wav", b"RIFF" + b"\0" * 200, "audio/wav")},
    )


def test_an_unknown_language_is_refused_before_the_audio_is_read(
    client: TestClient, spy: Spy
) -> None:
    r = _enroll(client, language="xx", wait="false")
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "unsupported_language" and error["field"] == "language"
    assert "en-us" in error["limit"] and "fr" in error["limit"]
    assert "en-us" in error["message"]  # the allowed codes are in the message too
    assert spy.calls == 0


@pytest.mark.parametrize(
    ("fields", "status", "field"),
    [
        ({"name": "   "}, 422, "name"),
        ({"name": "x" * 65}, 422, "name"),
        ({"name": "two\nlines"}, 422, "name"),
        ({"name": "taken"}, 409, "name"),  # the owner's "Taken", any case
        ({"given_by": "g" * 129}, 422, "given_by"),
        ({"consent": "yes"}, 422, "consent"),
    ],
)
def test_a_bad_field_is_refused_before_the_audio_is_read(
    client: TestClient, spy: Spy, fields: dict[str, str], status: int, field: str
) -> None:
    r = _enroll(client, **fields)
    assert r.status_code == status, r.text
    assert r.json()["error"]["field"] == field
    assert spy.calls == 0


def test_good_fields_reach_the_audio_work(client: TestClient, spy: Spy) -> None:
    # Case and "_" are forgiven in the language code; the upload is then read.
    r = _enroll(client, language="EN_us")
    assert r.status_code == 422 and r.json()["error"]["code"] == "audio_quality", r.text
    assert spy.calls == 1
