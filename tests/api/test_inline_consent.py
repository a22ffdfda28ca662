"""Inline reference clips are cloning (issue 18, finding 1).

``/v1/tts`` with ``reference=`` needs the voices:write scope and the consent
fields of enrollment, can be turned off, records the consent, and the audio
made with the inline voice is purged when the voice expires.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_voices import FakeJobView, FakeVoiceService
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.runtime.job_store import JobEvents
from voxclone.runtime.voice_store import ConsentRecord

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
CLIP = {"reference": ("ref.wav", b"RIFF" + b"\0" * 200, "audio/wav")}
CONSENT = {"consent": "true", "consent_statement": "I agree that my voice is cloned."}


@pytest.fixture()
def fake(runtime: Any, app_runtime: Any) -> Iterator[FakeVoiceService]:
    service = FakeVoiceService(runtime.catalog, JobEvents())
    app_runtime.replace(voices=service, jobs=FakeJobView(service))
    yield service


def _key(app: FastAPI, *scopes: str) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", set(scopes), owner="tenant")
    return {"Authorization": f"Bearer {plaintext}"}


def test_tts_scope_alone_cannot_clone_inline(make_app: Any, fake: FakeVoiceService) -> None:
    app = make_app()
    tts_only = _key(app, "tts")
    writer = _key(app, "tts", "voices:write")
    with TestClient(app) as c:
        r = c.post("/v1/tts", data={"text": "Hi.", **CONSENT}, files=CLIP, headers=tts_only)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["field"] == "scope"
        assert "voices:write" in r.json()["error"]["message"]
        assert fake.inline_consents == []
        # Speaking with a stored voice still needs only the tts scope.
        assert c.post("/v1/tts", json={"text": "Hi."}, headers=tts_only).status_code == 200
        r = c.post("/v1/tts", data={"text": "Hi.", **CONSENT}, files=CLIP, headers=writer)
        assert r.status_code == 200, r.text
    owner, consent = fake.inline_consents[0]
    assert owner == "tenant" and consent.given is True
    assert consent.statement == CONSENT["consent_statement"] and consent.given_by == "tenant"


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({}, "consent"),
        ({"consent": "false", "consent_statement": "x"}, "consent"),
        ({"consent": "true"}, "consent_statement"),
        ({"consent": "true", "consent_statement": "   "}, "consent_statement"),
        ({**CONSENT, "given_by": "x" * 200}, "given_by"),
    ],
)
def test_inline_reference_needs_consent(
    client: TestClient, fake: FakeVoiceService, form: dict[str, str], field: str
) -> None:
    r = client.post("/v1/tts", data={"text": "Hi.", **form}, files=CLIP)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert fake.inline_consents == []


def test_consent_fields_without_a_reference_are_unknown_fields(
    client: TestClient, fake: FakeVoiceService
) -> None:
    r = client.post("/v1/tts", data={"text": "Hi.", **CONSENT})
    assert r.status_code == 422 and r.json()["error"]["field"] == "consent"


def test_inline_references_can_be_turned_off(make_app: Any, fake: FakeVoiceService) -> None:
    with TestClient(make_app(inline_references=False)) as c:
        r = c.post("/v1/tts", data={"text": "Hi.", **CONSENT, "given_by": "Ada"}, files=CLIP)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["field"] == "reference"
        assert c.post("/v1/tts", json={"text": "Hi."}).status_code == 200
    assert fake.inline_consents == []


def test_inline_voice_audio_is_purged_when_it_expires(client: TestClient, runtime: Any) -> None:
    """The real voice service and caches: consent logged, cached audio gone at expiry."""
    from voxclone.runtime.inline_log import InlineVoiceLog

    voices = runtime.voices
    if voices is None:
        pytest.skip("the runtime has no voice service")
    clip = {"reference": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")}
    form = {"text": "A short sentence to cache.", **CONSENT, "given_by": "Ada"}
    first = client.post("/v1/tts", data=form, files=clip)
    assert first.status_code == 200, first.text
    assert first.headers["X-Cache"] == "miss"
    again = client.post("/v1/tts", data=form, files=clip)
    assert again.headers["X-Cache"] != "miss"  # audio of the inline voice is cached

    (voice_id,) = [v for v in voices.inline_voices()]
    log = InlineVoiceLog(runtime.settings.db_path)
    try:
        (use,) = log.uses(voice_id)
        assert use.owner == "local" and use.consent.given_by == "Ada"
        assert use.expires_at > time.time() + 0.9 * runtime.settings.inline_voice_ttl_s
        assert voices.purge_expired_inline(now=use.expires_at + 1) == [voice_id]
        assert log.uses(voice_id)[0].purged_at is not None
    finally:
        log.close()
    disk = [t for t in runtime.cache.tiers if type(t).__name__ == "DiskTier"]
    for tier in disk:
        assert tier.invalidate_voice(voice_id) == 0  # nothing of it was left to drop
    assert client.post("/v1/tts", data=form, files=clip).headers["X-Cache"] == "miss"


def test_orphaned_inline_audio_is_purged_at_start(tmp_path: Path) -> None:
    """A process that died with live inline voices: the next one purges their audio."""
    from voxclone.runtime.inline_log import InlineVoiceLog
    from voxclone.service.voices.service import VoiceService
    from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores

    log = InlineVoiceLog(tmp_path / "voices.sqlite3")
    consent = ConsentRecord("0" * 64, "Ada", "2026-01-01T00:00:00+00:00", "127.0.0.1")
    log.record("inline-0123456789abcdef", "local", consent, time.time() + 3600)
    purged: list[str] = []
    none: Any = None
    service = VoiceService(
        VoiceStores(voices=none, jobs=none, job_events=JobEvents(), inline_log=log),
        CloningKit(),
        VoiceHooks(on_voice_changed=purged.append),
    )
    assert purged == []  # building the service does no I/O
    service.start()
    try:
        assert purged == ["inline-0123456789abcdef"]
        assert log.pending() == []
    finally:
        service.close()
