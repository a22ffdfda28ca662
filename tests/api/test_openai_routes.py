"""OpenAI-compatible endpoints through the TestClient (the real client is in test_e2e_server)."""

from __future__ import annotations

import base64
import io
import json

import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.api.routes_openai import OPENAI_VOICE_ALIASES, emotion_from_instructions


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


def test_unknown_model_is_400_listing_models(client: TestClient) -> None:
    r = client.post("/v1/audio/speech", json={"model": "gpt-9", "input": "x", "voice": "alloy"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["field"] == "model" and "tts-1" in err["limit"]


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
