"""OpenAI-compatible endpoints through the TestClient (the real client is in test_e2e_server)."""

from __future__ import annotations

import base64
import io
import json
import time
from typing import Any

import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.api.routes_openai import OPENAI_VOICE_ALIASES, emotion_from_instructions
from voxclone.runtime.key_scopes import LOCAL_OWNER
from voxclone.service.speech.request import SpeechRequest


def test_speech_with_openai_voice_name_returns_wav(client: TestClient) -> None:
    r = client.post(
        "/v1/audio/speech",
        json={"model": "tts-1", "input": "Hi there.", "voice": "alloy", "response_format": "wav"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
    assert rate == 24_000 and len(audio) > 0.2 * rate


def test_pcm_is_16_bit_24khz_and_matches_alias_target(client: TestClient) -> None:
    body = {"model": "kokoro", "input": "Hi there.", "response_format": "pcm"}
    via_alias = client.post("/v1/audio/speech", json={**body, "voice": "onyx"})
    direct = client.post("/v1/audio/speech", json={**body, "voice": "clear_male"})
    assert via_alias.headers["content-type"] == "audio/pcm"
    assert len(via_alias.content) % 2 == 0 and len(via_alias.content) > 24_000 * 2 * 0.2
    assert via_alias.content == direct.content
    assert OPENAI_VOICE_ALIASES["onyx"] == "clear_male"


def test_unknown_model_is_openais_404_listing_models(client: TestClient) -> None:
    """As OpenAI answers a model it does not serve: 404 ``model_not_found``
    (was a 400 ``invalid_model``), OpenAI's keys beside ours."""
    r = client.post("/v1/audio/speech", json={"model": "gpt-9", "input": "x", "voice": "alloy"})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "model_not_found" and err["type"] == "invalid_request_error"
    assert err["param"] == err["field"] == "model" and "tts-1" in err["limit"]


def test_openais_dated_model_snapshots_speak_as_their_family(client: TestClient) -> None:
    body = {"input": "Hi there.", "voice": "alloy", "response_format": "pcm"}
    family = client.post("/v1/audio/speech", json={**body, "model": "gpt-4o-mini-tts"})
    dated = client.post("/v1/audio/speech", json={**body, "model": "gpt-4o-mini-tts-2025-03-20"})
    assert dated.status_code == 200, dated.text
    assert dated.content == family.content


@pytest.mark.timed  # refused within 1 s, before any work
def test_input_over_openais_4096_characters_is_refused_at_once(client: TestClient) -> None:
    """Issue 46: a 20,000-character input streamed for 596 s; OpenAI refuses
    more than 4,096 characters, and so does this route now, before any work."""
    text = "The quick brown fox jumps over the lazy dog. " * 445  # 20,025 characters
    started = time.perf_counter()
    r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": text, "voice": "alloy"})
    elapsed = time.perf_counter() - started
    assert r.status_code == 400, r.text[:200]
    assert elapsed < 1.0
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "string_above_max_length"
    assert err["param"] == err["field"] == "input" and err["limit"] == 4096
    assert err["value"] == len(text)
    assert "4096" in err["message"] and "/v1/jobs/speech" in err["message"]
    # One character over is refused; the limit itself is not (its 413/422
    # checks are the service's, not this cap's).
    over = client.post(
        "/v1/audio/speech", json={"model": "tts-1", "input": "a" * 4097, "voice": "alloy"}
    )
    assert over.status_code == 400 and over.json()["error"]["limit"] == 4096


def test_voice_object_speaks_as_the_name(client: TestClient) -> None:
    body = {"model": "tts-1", "input": "Hi there.", "response_format": "pcm"}
    by_name = client.post("/v1/audio/speech", json={**body, "voice": "onyx"})
    by_object = client.post("/v1/audio/speech", json={**body, "voice": {"id": "onyx"}})
    assert by_object.status_code == 200, by_object.text
    assert by_object.content == by_name.content
    assert by_object.headers["x-voice"] == by_name.headers["x-voice"]
    missing = client.post("/v1/audio/speech", json={**body, "voice": {"id": "nope"}})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "voice"


@pytest.mark.parametrize("name", ["marin", "cedar"])
def test_openais_2025_voices_speak_as_a_voice_of_their_sex(client: TestClient, name: str) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    expected = runtime.catalog.openai_aliases().get(name) or OPENAI_VOICE_ALIASES[name]
    body = {"model": "tts-1", "input": "Hi there.", "voice": name, "response_format": "pcm"}
    r = client.post("/v1/audio/speech", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-voice"] == expected
    direct = client.post("/v1/audio/speech", json={**body, "voice": expected})
    assert r.content == direct.content
    assert OPENAI_VOICE_ALIASES[name] == ("clear_female" if name == "marin" else "clear_male")


def test_x_voice_names_the_voice_that_spoke_on_every_route(client: TestClient) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    default = runtime.speech.resolve(SpeechRequest(text="Hi there.")).voice.id
    tts = client.post("/v1/tts", json={"text": "Hi there."})
    streamed = client.post("/v1/tts", json={"text": "Hi there.", "stream": True})
    captioned = client.post("/v1/audio/speech/captioned", json={"input": "Hi there."})
    srt = client.post("/v1/audio/speech/captioned?format=srt", json={"input": "Hi there."})
    sse = client.post("/v1/audio/speech/captioned", json={"input": "Hi there.", "stream": True})
    for r in (tts, streamed, captioned, srt, sse):
        assert r.status_code == 200, r.text[:200]
        assert r.headers["x-voice"] == default
    openai = client.post(
        "/v1/audio/speech",
        json={"model": "tts-1", "input": "Hi there.", "voice": "alloy", "stream_format": "sse"},
    )
    expected = runtime.catalog.openai_aliases().get("alloy") or OPENAI_VOICE_ALIASES["alloy"]
    assert openai.headers["x-voice"] == expected


@pytest.mark.parametrize(("speed", "same_as"), [(0.25, 0.5), (4.0, 2.0), (3.0, 2.0)])
def test_openai_speed_range_is_accepted_and_clamped(
    client: TestClient, speed: float, same_as: float
) -> None:
    body = {"model": "tts-1", "input": "Hi there.", "voice": "alloy", "response_format": "pcm"}
    r = client.post("/v1/audio/speech", json={**body, "speed": speed})
    assert r.status_code == 200, r.text
    clamped = client.post("/v1/audio/speech", json={**body, "speed": same_as})
    assert r.content == clamped.content


@pytest.mark.parametrize("speed", [0.2, 4.5])
def test_speed_outside_openais_range_is_rejected_with_limit(
    client: TestClient, speed: float
) -> None:
    r = client.post(
        "/v1/audio/speech",
        json={"model": "tts-1", "input": "x", "voice": "alloy", "speed": speed},
    )
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "speed"
    assert r.json()["error"]["limit"] == [0.25, 4.0]


def test_openai_voice_names_are_listed_with_their_voice(client: TestClient) -> None:
    voices = {v["id"]: v for v in client.get("/v1/audio/voices").json()["voices"]}
    assert {"alloy", "nova", "shimmer"} <= set(voices["clear_female"]["aliases"])
    assert {"echo", "onyx"} <= set(voices["clear_male"]["aliases"])
    assert "jm_kumo" in voices["kenji"]["aliases"]


def test_unknown_voice_and_format(client: TestClient) -> None:
    r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "x", "voice": "nope"})
    assert r.status_code == 404 and r.json()["error"]["field"] == "voice"
    r = client.post(
        "/v1/audio/speech",
        json={"model": "tts-1", "input": "x", "voice": "alloy", "response_format": "ogg"},
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "response_format"


def test_sse_stream_format_sends_deltas_then_done(client: TestClient) -> None:
    r = client.post(
        "/v1/audio/speech",
        json={
            "model": "gpt-4o-mini-tts",
            "input": "Hi there.",
            "voice": "nova",
            "response_format": "pcm",
            "stream_format": "sse",
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(audio) > 24_000 * 2 * 0.2


def test_instructions_pick_an_emotion() -> None:
    assert emotion_from_instructions("Speak in a cheerful and positive tone.") == "happy"
    assert emotion_from_instructions("Whispering, please") == "whisper"
    assert emotion_from_instructions("Sad. Then angry.") == "sad"
    assert emotion_from_instructions("Talk like a pirate") == "neutral"
    assert emotion_from_instructions(None) == "neutral"


def test_instructions_change_the_audio(client: TestClient) -> None:
    body = {"model": "tts-1", "input": "Hi there.", "voice": "alloy", "response_format": "pcm"}
    plain = client.post("/v1/audio/speech", json=body).content
    sad = client.post("/v1/audio/speech", json={**body, "instructions": "sound sad"}).content
    assert sad != plain
    assert len(sad) > len(plain)  # the sad preset speaks slower


def test_voices_and_models_listings(client: TestClient) -> None:
    voices = client.get("/v1/audio/voices").json()
    assert "clear_female" in {v["id"] for v in voices["voices"]}
    assert voices["aliases"]["alloy"] == "clear_female"
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    assert {"tts-1", "tts-1-hd", "kokoro"} <= {m["id"] for m in models["data"]}


def test_x_voice_names_a_clone_and_the_built_in_a_replaced_clone_speaks_as(
    client: TestClient, store_style_voice: Any
) -> None:
    """A clone speaks under its id; one the stock check replaced speaks as a
    built-in, and the header says which (nothing said so before)."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    own = store_style_voice(runtime, "Own voice", LOCAL_OWNER)
    replaced = store_style_voice(
        runtime,
        "Replaced voice",
        LOCAL_OWNER,
        builtin="clear_male",
        quality={"replaced_by_stock_voice": "clear_male"},
    )
    for record, expected in ((own, own.id), (replaced, "clear_male")):
        r = client.post("/v1/tts", json={"text": "Hi there.", "voice": record.name})
        assert r.status_code == 200, r.text[:200]
        assert r.headers["x-voice"] == expected
