"""Word timestamps over HTTP: the captioned route (JSON, SRT, SSE) and /v1/tts's flag."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import soundfile as sf
from fastapi.testclient import TestClient

TEXT = "At 7 we left. The road was long."
WORDS = ["At", "7", "we", "left", "The", "road", "was", "long"]


def test_captioned_json_has_audio_and_the_original_words(client: TestClient) -> None:
    r = client.post(
        "/v1/audio/speech/captioned",
        json={"model": "kokoro", "input": TEXT, "voice": "clear_male", "response_format": "wav"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["audio_format"] == "wav"
    audio, rate = sf.read(io.BytesIO(base64.b64decode(body["audio"])), dtype="float32")
    stamps = body["timestamps"]
    assert [t["word"] for t in stamps] == WORDS
    starts = [t["start_time"] for t in stamps]
    assert starts == sorted(starts) and starts[0] >= 0
    assert stamps[-1]["end_time"] <= len(audio) / rate
    # The words are where the speech is: every word span has audible energy.
    for t in stamps:
        span = audio[int(t["start_time"] * rate) : int(t["end_time"] * rate)]
        assert span.size and float(np.sqrt(np.mean(span**2))) > 0.01, t


def test_captioned_srt_and_the_tts_flag(client: TestClient) -> None:
    srt = client.post("/v1/audio/speech/captioned?format=srt", json={"input": TEXT})
    assert srt.status_code == 200, srt.text
    assert srt.headers["content-type"].startswith("application/x-subrip")
    assert srt.text.startswith("1\n00:00:00,")
    assert "At 7 we left" in srt.text
    tts = client.post("/v1/tts", json={"text": "Gate 22.", "timestamps": True, "format": "mp3"})
    assert tts.status_code == 200, tts.text
    assert [t["word"] for t in tts.json()["timestamps"]] == ["Gate", "22"]
    assert tts.json()["audio_format"] == "mp3"
    bad = client.post("/v1/audio/speech/captioned?format=ass", json={"input": TEXT})
    assert bad.status_code == 422


def test_captioned_stream_sends_words_with_their_audio(client: TestClient) -> None:
    r = client.post(
        "/v1/audio/speech/captioned",
        json={"input": TEXT, "response_format": "pcm", "stream": True},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    sent = 0.0
    words = []
    for event in events[:-1]:
        sent += len(base64.b64decode(event["audio"])) / 2 / 24_000
        for t in event["timestamps"]:
            # A word arrives no earlier than the audio that ends it.
            assert t["end_time"] <= sent + 1e-3
            words.append(t["word"])
    assert words == WORDS


def test_timestamps_of_ssml_input_are_refused_before_any_audio(client: TestClient) -> None:
    r = client.post(
        "/v1/tts",
        json={"text": '<speak>Hi <break time="500ms"/> there.</speak>', "timestamps": True},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "timestamps"
