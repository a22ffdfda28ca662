"""The privacy and contract rules of the service layer, fast (no models).

The same guarantees as tests/integration/test_tenancy_privacy.py, one layer
down and in milliseconds, so a mutation run (``make mutants``) can afford to
run them for every mutant of the voice service, the catalog, the cache's
invalidation, the key scopes and the controls plumbing of both speech routes.
Everything is real (SQLite stores, memory and disk cache tiers, the FastAPI
app) except the cloning models, which library operations never touch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from fakes import catalog_engine, silent_builtins, voice_record
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.api.routes_openai import OPENAI_FORMATS, _to_speech_request
from voxclone.api.routes_tts import speech_request
from voxclone.api.schemas import OpenAISpeechRequest, TTSRequest
from voxclone.config import Settings
from voxclone.errors import InvalidInput, NotFound, VoxcloneError
from voxclone.runtime.cache import DiskTier, MemoryTier, TieredCache
from voxclone.runtime.db import open_database
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.keys import KeyStore
from voxclone.runtime.voice_store import SqlVoiceStore, VoiceRecord
from voxclone.service.catalog import VoiceCatalog
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.speech.service import SpeechService
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores
from voxclone.synth.audio.tone import GRID_HZ
from voxclone.synth.controls import SpeechControls
from voxclone.synth.engine.base import EngineVoice
from voxclone.synth.voice.pipeline import CloningPipeline

A, B = "tenant-a", "tenant-b"


# What enrollment measured of the voices here.
PITCHED = {"reference_pitch_hz": 120.0}


def _openai_runtime(store: SqlVoiceStore | None) -> Any:
    """What the OpenAI route reads from a runtime: the catalog (with the two
    voices OpenAI's names stand for) and the model router."""
    engine = catalog_engine(silent_builtins("clear_female", "clear_male"))
    catalog = VoiceCatalog({"kokoro": engine}, store)
    kokoro: Any = SimpleNamespace(capabilities=engine.capabilities)
    return SimpleNamespace(catalog=catalog, speech=SpeechRouter({"kokoro": kokoro}, catalog))


class Library(SimpleNamespace):
    service: VoiceService
    store: SqlVoiceStore
    jobs: SqlJobStore
    changed: list[str]
    voice: VoiceRecord


@pytest.fixture()
def library(database_url: str) -> Iterator[Library]:
    # One shared Database, as the composition root builds it.
    db = open_database(database_url)
    store = SqlVoiceStore(db, style_shapes={"kokoro": (510, 1, 256)})
    jobs = SqlJobStore(db)
    changed: list[str] = []
    service = VoiceService(  # library operations never clone: no cloning kit
        VoiceStores(voices=store, jobs=jobs, job_events=JobEvents()),
        CloningKit(),
        VoiceHooks(on_voice_changed=changed.append),
    )
    voice = store.create(voice_record("Alice", A, quality=PITCHED))
    try:
        yield Library(service=service, store=store, jobs=jobs, changed=changed, voice=voice)
    finally:
        service.close()
        jobs.close()
        store.close()
        db.close()


def test_another_owner_cannot_touch_a_voice_or_its_jobs(library: Library) -> None:
    svc, vid = library.service, library.voice.id
    job = library.jobs.create(kind="refine", owner=A, voice_id=vid)
    for attempt in (
        lambda: svc.get(vid, B),
        lambda: svc.rename(vid, B, "Mine"),
        lambda: svc.delete(vid, B),
        lambda: svc.start_refine(vid, B),
        lambda: svc.get_job(job.id, B),
        lambda: svc.cancel_job(job.id, B),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert svc.list(B) == []
    # Nothing B tried changed anything of A's.
    assert svc.get(vid, A).name == "Alice" and svc.get(vid, A).version == 1
    assert [v.id for v in svc.list(A)] == [vid]
    assert svc.get_job(job.id, A).cancel_requested is False
    assert library.changed == []
    # B's failed delete must not stop A's running refinement either.
    assert svc._voice_jobs.should_stop(job.id, vid) is False


def test_delete_removes_rows_jobs_and_tells_the_caches(library: Library) -> None:
    svc, vid = library.service, library.voice.id
    other = library.store.create(voice_record("Other", A, seed=1, quality=PITCHED))
    job = library.jobs.create(kind="refine", owner=A, voice_id=vid)
    kept_job = library.jobs.create(kind="refine", owner=A, voice_id=other.id)

    deleted = svc.delete(vid, A)

    assert deleted.id == vid
    assert library.changed == [vid]  # exactly once, and only for this voice
    with pytest.raises(NotFound):
        svc.get(vid, A)
    with pytest.raises(NotFound):
        library.jobs.get(job.id, A)
    assert library.jobs.get(kept_job.id, A).voice_id == other.id
    assert [v.id for v in svc.list(A)] == [other.id]
    with pytest.raises(NotFound):  # a second delete is a missing voice, not a crash
        svc.delete(vid, A)
    assert library.changed == [vid]


def test_delete_cancels_the_voices_running_jobs(library: Library) -> None:
    svc, vid = library.service, library.voice.id
    job = library.jobs.create(kind="refine", owner=A, voice_id=vid)
    library.jobs.update(job.id, state="running")
    assert svc._voice_jobs.should_stop(job.id, vid) is False
    svc.delete(vid, A)
    assert svc._voice_jobs.should_stop(job.id, vid) is True  # the refine loop stops


def test_catalog_resolves_only_the_callers_voices(library: Library) -> None:
    catalog = VoiceCatalog({"kokoro": catalog_engine({})}, library.store)
    vid = library.voice.id
    assert catalog.resolve(vid, A).id == vid
    assert catalog.resolve("alice", A).id == vid  # names are case-insensitive
    for voice in (vid, "Alice"):
        with pytest.raises(NotFound) as missing:
            catalog.resolve(voice, B)
        assert missing.value.field == "voice" and voice in missing.value.message
        assert missing.value.limit == catalog.builtin_names
    assert [v.id for v in catalog.listing(A)] == [vid]
    assert catalog.listing(B) == []
    # The resolved voice carries what the cache key and the engine need.
    resolved = catalog.resolve(vid, A)
    assert (resolved.name, resolved.version, resolved.language) == ("Alice", 1, "en-us")
    assert resolved.builtin is False and resolved.tone is None  # enrolled without tone
    np.testing.assert_array_equal(resolved.style, library.voice.style)


def test_catalog_lists_builtins_for_everyone_and_carries_the_tone(library: Library) -> None:
    style = np.zeros((510, 1, 256), np.float32)
    builtin = EngineVoice("clear_female", "a clear voice", style=style)
    catalog = VoiceCatalog({"kokoro": catalog_engine({"clear_female": builtin})}, library.store)
    for owner in (A, B):
        head = catalog.listing(owner)[0]
        assert (head.id, head.name, head.description) == (
            "clear_female",
            "clear_female",
            "a clear voice",
        )
        assert head.builtin is True and head.language is None
        assert catalog.resolve("clear_female", owner).builtin is True
    listed = catalog.listing(A)[1]
    assert (listed.id, listed.name, listed.builtin) == (library.voice.id, "Alice", False)
    assert (listed.language, listed.version) == ("en-us", 1)
    toned = library.store.create(
        voice_record(
            "Toned", A, seed=2, quality=PITCHED, tone_db=np.full(GRID_HZ.shape, 3.0, np.float32)
        )
    )
    tone = catalog.resolve(toned.id, A).tone
    assert tone is not None and np.allclose(tone.gain_db, 3.0)


def test_invalidation_drops_only_that_voice_from_every_tier(tmp_path: Path) -> None:
    cache = TieredCache([MemoryTier(1 << 20), DiskTier(tmp_path / "disk", 1 << 20)])
    cache.put("k1", b"audio one", voice_id="v_one")
    cache.put("k2", b"audio two", voice_id="v_one")
    cache.put("k3", b"audio three", voice_id="v_two")
    speech = SpeechService(
        frontend=None,  # type: ignore[arg-type]  # invalidation touches only the cache
        catalog=None,  # type: ignore[arg-type]
        scheduler=None,  # type: ignore[arg-type]
        # The renderer sizes a stream's first head from the sample rate.
        capabilities=cast(Any, SimpleNamespace(sample_rate=24_000)),
        cache=cache,
    )
    speech.invalidate_voice("v_one")
    for tier in cache.tiers:
        assert tier.get("k1") is None and tier.get("k2") is None, tier.name
        kept = tier.get("k3")
        assert kept is not None and kept.data == b"audio three", tier.name
    # A fresh disk tier (another process, a restart) finds nothing of v_one either.
    assert DiskTier(tmp_path / "disk", 1 << 20).get("k1") is None


# -- controls plumbing: what each route hands the speech service ---------------


def test_native_route_passes_every_control_and_the_owner() -> None:
    body = TTSRequest(
        text="hi",
        voice="v_x",
        language="fr",
        speed=1.5,
        pitch=-0.25,
        energy=1.1,
        emotion="sad",
        intensity=0.5,
        format="mp3",
        sample_rate=16_000,
    )
    req = speech_request(body, A)
    assert req.controls == SpeechControls(
        speed=1.5, pitch=-0.25, energy=1.1, emotion="sad", intensity=0.5
    )
    assert (req.text, req.voice, req.language, req.owner) == ("hi", "v_x", "fr", A)
    assert (req.format, req.sample_rate, req.voice_override) == ("mp3", 16_000, None)
    inline = object()  # an inline reference's one-request voice reaches the service
    assert speech_request(body, A, inline).voice_override is inline


def test_openai_route_passes_speed_emotion_and_the_owner() -> None:
    runtime = _openai_runtime(None)
    body = OpenAISpeechRequest(
        model="tts-1",
        input="hi",
        voice="onyx",
        response_format="flac",
        speed=1.75,
        instructions="Sound happy, then calm.",
    )
    req = _to_speech_request(body, runtime, A)
    assert req.controls == SpeechControls(speed=1.75, emotion="happy")
    assert (req.text, req.voice, req.owner, req.format) == ("hi", "clear_male", A, "flac")
    plain = _to_speech_request(
        OpenAISpeechRequest(model="tts-1", input="hi", voice="nova"), runtime, A
    )
    # No speed sent: the preset's own pace applies (None), not a forced 1.0.
    assert plain.controls == SpeechControls() and plain.voice == "clear_female"
    with pytest.raises(NotFound):  # not an alias and not the caller's voice
        _to_speech_request(
            OpenAISpeechRequest(model="tts-1", input="hi", voice="v_someone"), runtime, A
        )


# -- scopes: each route asks for the right one (no models: auth runs first) ----


@pytest.fixture()
def keyed(tmp_path: Path) -> tuple[TestClient, KeyStore]:
    app = create_app(Settings(home=tmp_path, rate_limit_burst=1000.0), runtime=None)
    # No lifespan (no ``with``): the app never starts loading models, so every
    # request that passes authentication answers 503 "not ready".
    return TestClient(app), app.state.keys


ROUTES = {
    "tts": [("POST", "/v1/tts"), ("POST", "/v1/audio/speech"), ("GET", "/v1/audio/voices")],
    "voices:read": [("GET", "/v1/voices"), ("GET", "/v1/voices/v_x")],
    "voices:write": [
        ("POST", "/v1/voices"),
        ("PATCH", "/v1/voices/v_x"),
        ("DELETE", "/v1/voices/v_x"),
        ("POST", "/v1/voices/v_x/refine"),
    ],
}
# A job is a speech job (tts) or a refinement (voices:*): any of the three scopes
# gets past authentication, and the route checks what the job itself needs
# (tests/api/test_speech_jobs_http.py holds the per-kind 403s).
JOB_ROUTES = [("GET", "/v1/jobs/j_x"), ("POST", "/v1/jobs/j_x/cancel"), ("DELETE", "/v1/jobs/j_x")]


def test_job_routes_need_one_of_the_job_scopes(keyed: tuple[TestClient, KeyStore]) -> None:
    client, keys = keyed
    revoked, record = keys.create("revoked", {"tts"})
    keys.revoke(record.id)
    for scope in ("tts", "voices:read", "voices:write", "admin"):
        key, _ = keys.create(scope, {scope})
        for method, path in JOB_ROUTES:
            r = client.request(method, path, headers={"Authorization": f"Bearer {key}"})
            assert r.status_code in (503, 422), (scope, method, path, r.text)
    for method, path in JOB_ROUTES:
        r = client.request(method, path, headers={"Authorization": f"Bearer {revoked}"})
        assert r.status_code == 401, (method, path, r.text)
        assert client.request(method, path).status_code == 401


@pytest.mark.parametrize("scope", sorted(ROUTES))
def test_each_route_needs_its_scope(keyed: tuple[TestClient, KeyStore], scope: str) -> None:
    client, keys = keyed
    allowed, _ = keys.create("allowed", {scope})
    admin, _ = keys.create("admin", {"admin"})
    others = {s for s in ROUTES if s != scope}
    denied, _ = keys.create("denied", others)
    revoked, record = keys.create("revoked", {scope})
    keys.revoke(record.id)
    for method, path in ROUTES[scope]:
        for key, refused in ((allowed, None), (admin, None), (denied, 403), (revoked, 401)):
            r = client.request(method, path, headers={"Authorization": f"Bearer {key}"})
            if refused is None:  # past authentication: not ready (503) or a body error (422)
                assert r.status_code in (503, 422), (method, path, r.text)
            else:
                assert r.status_code == refused, (method, path, key[:8], r.text)
        assert client.request(method, path).status_code == 401
    assert (
        client.get("/v1/voices", headers={"Authorization": "Bearer vox_" + "x" * 32}).status_code
        == 401
    )


# -- refinement: a cancel is final ---------------------------------------------


def _refine_once(
    library: Library, quality: dict[str, Any], *, improved: bool, before: Callable[[], None]
) -> str:
    """Run one refine job on ``library.voice`` stored with ``quality`` (plus a
    one-pack recipe), with a refiner that calls ``before`` and then reports
    ``improved``; returns the job's final state."""
    svc, vid, style = library.service, library.voice.id, library.voice.style
    assert style is not None
    refined = style + (1.0 if improved else 0.0)
    recipe = {"timbre_weights": [1.0], "timbre_coeffs": [0.0], "prosody_weights": [1.0]}
    library.store.update_style(
        vid,
        A,
        style=style,
        quality={"style_recipe": recipe, **quality},
        source="instant",
    )

    class Refiner:
        config = SimpleNamespace(auditions=0, prosody_auditions=0)

        def refine(self, *args: Any, **kwargs: Any) -> Any:
            before()
            return SimpleNamespace(
                improved=improved,
                similarity=0.9,
                start_similarity=0.5,
                wer=None,
                recipe=kwargs.get("start", args[1] if len(args) > 1 else None),
                style=refined,
                evaluations=2,
                seconds=0.1,
                notes=[],
            )

    svc._refinements._source = lambda budget: Refiner()  # type: ignore[assignment,return-value]
    # The refine wiring, with a cloner that offers nothing.
    svc._refinements._pipeline = CloningPipeline(
        SimpleNamespace(  # type: ignore[arg-type]
            alternatives=lambda *a, **k: [], prosody_alternatives=lambda *a, **k: []
        ),
        probe=None,
    )
    job = svc.start_refine(vid, A, budget_s=1.0)
    svc._refinements._executor.shutdown(wait=True)  # the job has run to its end
    return svc.get_job(job.id, A).state


def test_a_cancel_that_arrives_while_the_refiner_runs_wins(library: Library) -> None:
    """The refiner checks for cancellation only between auditions; a cancel that
    lands after its last check (e.g. a tiny budget) must still leave the voice
    untouched and end the job ``cancelled``, not ``succeeded``."""
    svc, vid = library.service, library.voice.id
    versions: list[int] = []

    def cancel() -> None:
        versions.append(svc.get(vid, A).version)  # the one the refiner started from
        (job,) = library.jobs.list(A)
        svc.cancel_job(job.id, A)  # the user cancels; this refiner never checks

    assert _refine_once(library, {}, improved=True, before=cancel) == "cancelled"
    assert [svc.get(vid, A).version] == versions
    assert library.changed == []


@pytest.mark.parametrize("improved", [True, False])
def test_a_refined_voice_no_longer_claims_the_builtin_it_started_from(
    library: Library, improved: bool
) -> None:
    """A voice the stock check gave a built-in's sound says so in its report;
    once refinement replaces that sound with a better-heard atlas voice, the
    report must stop saying it (and keep saying it when nothing improved)."""
    quality = {"replaced_by_stock_voice": "yuki", "keep_clone": False}
    state = _refine_once(library, quality, improved=improved, before=lambda: None)
    assert state == "succeeded"
    refined = library.service.get(library.voice.id, A).quality
    assert ("replaced_by_stock_voice" in refined) == (not improved)
    assert refined["keep_clone"] is False  # the rest of the report is kept


def test_openai_route_refuses_other_tenants_voices_and_bad_fields(library: Library) -> None:
    runtime = _openai_runtime(library.store)
    vid = library.voice.id
    ok = _to_speech_request(OpenAISpeechRequest(model="tts-1", input="hi", voice=vid), runtime, A)
    assert ok.voice == vid and ok.owner == A
    for voice in (vid, "Alice"):  # B may not even learn that A's voice exists
        with pytest.raises(NotFound):
            _to_speech_request(
                OpenAISpeechRequest(model="tts-1", input="hi", voice=voice), runtime, B
            )
    with pytest.raises(VoxcloneError) as bad_model:
        _to_speech_request(OpenAISpeechRequest(model="gpt-9", input="hi", voice="nova"), runtime, A)
    assert bad_model.value.status == 400 and bad_model.value.field == "model"
    assert (
        bad_model.value.limit == runtime.speech.model_names and "gpt-9" in bad_model.value.message
    )
    with pytest.raises(InvalidInput) as bad_format:
        _to_speech_request(
            OpenAISpeechRequest(model="tts-1", input="hi", voice="nova", response_format="ogg"),
            runtime,
            A,
        )
    assert bad_format.value.field == "response_format" and "ogg" in bad_format.value.message
    assert bad_format.value.limit == list(OPENAI_FORMATS)
    # Instructions that name no emotion keep the neutral preset.
    pirate = OpenAISpeechRequest(model="tts-1", input="hi", voice="nova", instructions="Arr!")
    assert _to_speech_request(pirate, runtime, A).controls.emotion == "neutral"


@pytest.mark.parametrize("improved", [True, False])
def test_version_and_source_say_whether_a_refinement_changed_the_voice(
    library: Library, improved: bool
) -> None:
    """Issue 46: a refinement that kept the instant voice stored it again as a
    new "refined" version (``version 3, source: refined`` for a voice that
    still spoke as its instant clone). Nothing better found: the voice stays
    as it was; found: a new version, source refined, and a verdict that says so."""
    svc, vid = library.service, library.voice.id
    quality = {"verdict": "speaks as its own clone, heard 0.05 closer ...", "similarity": 0.5}
    assert _refine_once(library, quality, improved=improved, before=lambda: None) == "succeeded"
    stored = library.voice.version + 1  # _refine_once stores the voice it refines once
    (job,) = [j for j in library.jobs.list(A) if j.kind == "refine"]
    after = svc.get(vid, A)
    assert job.result is not None and job.result["improved"] is improved
    if improved:
        assert (after.version, after.source) == (stored + 1, "refined")
        assert job.result["version"] == after.version
        assert after.quality["verdict"].startswith("speaks as its refined clone")
        assert "0.90" in after.quality["verdict"] and "0.50 before" in after.quality["verdict"]
    else:
        assert (after.version, after.source) == (stored, "instant")
        assert job.result["version"] == after.version
        assert after.quality["verdict"] == quality["verdict"]
        assert job.message == "kept the voice as it was (no better candidate)"
        assert library.changed == []  # nothing to invalidate: the voice did not change
