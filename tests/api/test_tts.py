"""POST /v1/tts: audio out, headers, validation, limits, overload."""

from __future__ import annotations

import io
from typing import Any

import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.errors import Overloaded


def _wav(data: bytes) -> tuple[Any, int]:
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    return audio, rate


def test_json_request_returns_decodable_wav_and_cache_header(client: TestClient) -> None:
    body = {"text": "Good morning.", "voice": "clear_female"}
    first = client.post("/v1/tts", json=body)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "audio/wav"
    assert first.headers["x-cache"] == "miss"
    audio, rate = _wav(first.content)
    assert rate == 24_000
    assert 0.3 < len(audio) / rate < 5.0
    again = client.post("/v1/tts", json=body)
    assert again.headers["x-cache"] in {"memory", "disk", "redis"}
    assert again.content == first.content


def test_format_and_rate_change_content_type(client: TestClient) -> None:
    r = client.post("/v1/tts", json={"text": "Good morning.", "format": "flac"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/flac"
    assert r.content[:4] == b"fLaC"
    r = client.post("/v1/tts", json={"text": "Good morning.", "sample_rate": 16000})
    _, rate = _wav(r.content)
    assert rate == 16_000


def test_multipart_fields_are_accepted(client: TestClient) -> None:
    r = client.post("/v1/tts", data={"text": "Good morning.", "speed": "1.2"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"text": "hi", "speed": 3.0}, 422, "speed"),
        ({"text": "hi", "pitch": 0.9}, 422, "pitch"),
        ({"text": "hi", "emotion": "ecstatic"}, 422, "emotion"),
        ({"text": "hi", "format": "ogg-vorbis"}, 422, "response_format"),
        ({"text": "   "}, 422, "text"),
        ({"text": "hi", "voice": "nobody"}, 404, "voice"),
        ({"text": "hi", "language": "tlh"}, 422, "language"),
        ({"voice": "clear_female"}, 422, "text"),
        ({"text": "hi", "unknown_field": 1}, 422, "unknown_field"),
    ],
)
def test_bad_values_name_the_field(
    client: TestClient, body: dict[str, Any], status: int, field: str
) -> None:
    r = client.post("/v1/tts", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"code", "message"}
    assert err.get("field") == field, err


def test_out_of_range_speed_reports_the_limit(client: TestClient) -> None:
    err = client.post("/v1/tts", json={"text": "hi", "speed": 0.1}).json()["error"]
    assert err["limit"] == [0.5, 2.0]


def test_text_longer_than_limit_is_413_with_limit(client: TestClient, runtime: Any) -> None:
    limit = runtime.settings.max_text_chars
    r = client.post("/v1/tts", json={"text": "a" * (limit + 1)})
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["field"] == "text" and err["limit"] == limit


def test_queue_full_is_503_with_retry_after(
    client: TestClient, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> Any:
        raise Overloaded("server is at capacity; retry shortly", retry_after=2.5)

    monkeypatch.setattr(runtime.speech, "synthesize", full)
    r = client.post("/v1/tts", json={"text": "hi"})
    assert r.status_code == 503
    assert r.headers["retry-after"] == "3"
    assert r.json()["error"]["code"] == "overloaded"


def test_stream_flag_returns_audio_in_chunks(client: TestClient) -> None:
    r = client.post("/v1/tts", json={"text": "One. Two.", "stream": True, "format": "pcm"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/pcm"
    assert len(r.content) > 24_000 * 2 * 0.3  # 16-bit mono, at least 0.3 s


def test_stream_validation_errors_are_still_4xx(client: TestClient) -> None:
    r = client.post("/v1/tts", json={"text": "hi", "stream": True, "voice": "nobody"})
    assert r.status_code == 404
    assert r.json()["error"]["field"] == "voice"


def test_too_many_concurrent_streams_is_503(make_app: Any) -> None:
    app = make_app(max_concurrent_streams=1)
    with TestClient(app) as c:
        release = app.state.stream_slots.acquire()  # someone else holds the only slot
        try:
            r = c.post("/v1/tts", json={"text": "hi", "stream": True})
        finally:
            release()
        assert r.status_code == 503
        assert "retry-after" in r.headers
        assert r.json()["error"]["limit"] == 1
        assert c.post("/v1/tts", json={"text": "hi", "stream": True}).status_code == 200
