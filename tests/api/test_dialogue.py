"""Dialogue (issue 50) on the real Kokoro runtime: one WAV of two voices with the
turn gap measured as silence, loudness matched across turns, speaker-labelled
word times, SRT/VTT with names, streaming, a job, the output cap and the 4xx,
and ``voxclone dialogue`` with a script and a cast through a live server."""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.api import cli
from voxclone.service.dialogue import DEFAULT_GAP_MS
from voxclone.synth.audio.join import audible_bounds
from voxclone.synth.audio.quality import integrated_loudness

# Two built-in voices (the suite's models folder has no other packs).
TURNS = [
    {"voice": "clear_female", "text": "Did you hear the news this morning?", "speaker": "Alice"},
    {"voice": "clear_male", "text": "No, I did not. Tell me everything!", "speaker": "Bob"},
]


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    return make_app(rate_limit_per_minute=0)


def _turn_spans(audio: np.ndarray, rate: int, words: list[dict[str, Any]]) -> list[np.ndarray]:
    spans = []
    for turn in sorted({w["turn"] for w in words}):
        mine = [w for w in words if w["turn"] == turn]
        lo, hi = int(mine[0]["start_time"] * rate), int(mine[-1]["end_time"] * rate)
        spans.append(audio[lo:hi])
    return spans


def _silence_between(audio: np.ndarray, rate: int, end_s: float, start_s: float) -> float:
    """Seconds from the last audible 10 ms frame before ``start_s`` (after the
    first turn's words end at ``end_s``) to the first audible one after it."""
    window = audio[int((end_s - 0.3) * rate) : int((start_s + 0.3) * rate)]
    frame = rate // 100
    n = len(window) // frame
    rms = np.sqrt(np.mean(window[: n * frame].reshape(n, frame) ** 2, axis=1))
    loud = rms > 10 ** (-50 / 20)
    # The longest quiet run in the window is the gap.
    best = run = 0
    for flag in loud:
        run = 0 if flag else run + 1
        best = max(best, run)
    return best * frame / rate


def test_two_voices_one_wav_gap_loudness_and_speaker_captions(app: FastAPI) -> None:
    with TestClient(app) as c:
        r = c.post("/v1/audio/dialogue", json={"turns": TURNS, "timestamps": True})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["speakers"] == ["Alice", "Bob"]
        words = body["timestamps"]
        assert {w["speaker"] for w in words} == {"Alice", "Bob"}
        assert [w["word"] for w in words if w["turn"] == 0][:3] == ["Did", "you", "hear"]
        assert all(w["speaker"] == "Bob" for w in words if w["turn"] == 1)
        audio, rate = sf.read(io.BytesIO(base64.b64decode(body["audio"])), dtype="float32")
        assert rate == 24_000 and audio.ndim == 1
        assert abs(len(audio) / rate - body["duration_s"]) < 0.05

        # The silence between the turns is the default gap (10 ms frames).
        first_end = max(w["end_time"] for w in words if w["turn"] == 0)
        second_start = min(w["start_time"] for w in words if w["turn"] == 1)
        gap = _silence_between(audio, rate, first_end, second_start)
        assert abs(gap - DEFAULT_GAP_MS / 1000) <= 0.03, gap

        # Loudness matched across voices: within 1 dB (BS.1770 integrated).
        levels = [integrated_loudness(span, rate) for span in _turn_spans(audio, rate, words)]
        assert max(levels) - min(levels) < 1.0, levels

        # pause_ms overrides the gap before its turn.
        slow = [TURNS[0], {**TURNS[1], "pause_ms": 800}]
        r = c.post("/v1/audio/dialogue", json={"turns": slow})
        assert r.status_code == 200 and r.headers["content-type"].startswith("audio/wav")
        audio2, _ = sf.read(io.BytesIO(r.content), dtype="float32")
        bounds = audible_bounds(audio2, rate)
        assert bounds is not None
        assert len(audio2) / rate - len(audio) / rate == pytest.approx(0.55, abs=0.05)


def test_subtitles_name_the_speakers(app: FastAPI) -> None:
    with TestClient(app) as c:
        srt = c.post("/v1/audio/dialogue?format=srt", json={"turns": TURNS})
        vtt = c.post("/v1/audio/dialogue?format=vtt", json={"turns": TURNS})
    assert srt.status_code == 200, srt.text
    assert srt.headers["content-type"].startswith("application/x-subrip")
    cues = srt.text.strip().split("\n\n")
    assert cues[0].splitlines()[2].startswith("Alice: Did you hear")
    assert cues[-1].splitlines()[2].startswith("Bob: ")
    assert vtt.status_code == 200 and vtt.text.startswith("WEBVTT")
    assert "<v Alice>Did you hear" in vtt.text and "<v Bob>" in vtt.text


def test_streamed_dialogue_is_chunked_audio(app: FastAPI) -> None:
    body = {"turns": TURNS, "stream": True}
    with TestClient(app) as c, c.stream("POST", "/v1/audio/dialogue", json=body) as r:
        assert r.status_code == 200
        chunks = [chunk for chunk in r.iter_bytes() if chunk]
    assert len(chunks) >= 3  # the header, then audio as each turn renders
    data = b"".join(chunks)
    assert data[:4] == b"RIFF"
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert 2.0 < len(audio) / rate < 8.0


def test_dialogue_job_renders_to_a_signed_download(app: FastAPI) -> None:
    with TestClient(app) as c:
        r = c.post("/v1/jobs/dialogue", json={"turns": TURNS, "response_format": "wav"})
        assert r.status_code == 202, r.text
        job = r.json()
        deadline = time.monotonic() + 180
        while job["state"] not in ("succeeded", "failed", "cancelled"):
            assert time.monotonic() < deadline, job
            time.sleep(0.3)
            job = c.get(f"/v1/jobs/{job['id']}").json()
        assert job["state"] == "succeeded", job
        download = c.get(job["audio_url"])
        assert download.status_code == 200
    audio, rate = sf.read(io.BytesIO(download.content), dtype="float32")
    assert 2.0 < len(audio) / rate < 8.0


@pytest.mark.timed  # "priced, not rendered": a 2 s bound
def test_over_the_output_cap_is_413_before_any_render(make_app: Any, app_runtime: Any) -> None:
    # The cap is the runtime's setting (as every route prices against it).
    settings = app_runtime.current.settings.model_copy(update={"max_output_s": 20.0})
    app_runtime.replace(settings=settings)
    app = make_app(rate_limit_per_minute=0)
    line = "This sentence is long enough to be spoken for a few seconds at least. " * 3
    turns = [{"voice": "clear_female" if i % 2 else "clear_male", "text": line} for i in range(4)]
    with TestClient(app) as c:
        started = time.perf_counter()
        r = c.post("/v1/audio/dialogue", json={"turns": turns})
        took = time.perf_counter() - started
        job = c.post("/v1/jobs/dialogue", json={"turns": turns})
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["field"] == "turns" and error["limit"] == 20.0 and error["value"] > 20.0
    assert took < 2.0, took  # priced, not rendered (a render takes ~10 s here)
    assert job.status_code == 413 and job.json()["error"]["field"] == "turns"


def test_bad_dialogues_are_4xx_naming_the_field(app: FastAPI) -> None:
    with TestClient(app) as c:
        empty = c.post("/v1/audio/dialogue", json={"turns": []})
        unknown = c.post(
            "/v1/audio/dialogue",
            json={"turns": [TURNS[0], {"voice": "nobody_here", "text": "Hello."}]},
        )
        many = c.post(
            "/v1/audio/dialogue", json={"turns": [{"voice": "clear_female", "text": "Hi."}] * 501}
        )
        blank = c.post(
            "/v1/audio/dialogue", json={"turns": [{"voice": "clear_female", "text": " "}]}
        )
        pause = c.post(
            "/v1/audio/dialogue",
            json={"turns": [{"voice": "clear_female", "text": "Hi.", "pause_ms": 60_000}]},
        )
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "turns"
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["error"]["field"] == "turns[1].voice"
    assert unknown.json()["error"]["message"].startswith("turn 1:")
    assert many.status_code == 422 and many.json()["error"]["limit"] == 500
    assert blank.status_code == 422 and blank.json()["error"]["field"] == "turns[0].text"
    assert pause.status_code == 422 and pause.json()["error"]["field"] == "turns[0].pause_ms"


SCRIPT = """# a short scene
Alice: Did you hear the news this morning?

Bob: No, I did not.
Tell me everything!
"""


def test_cli_dialogue_script_and_cast_through_a_server(
    live_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    script = tmp_path / "scene.txt"
    script.write_text(SCRIPT)
    cast = tmp_path / "cast.json"
    cast.write_text(
        json.dumps({"Alice": "clear_female", "Bob": {"voice": "clear_male", "speed": 1.1}})
    )
    out, subs = tmp_path / "scene.wav", tmp_path / "scene.vtt"
    with live_server(rate_limit_per_minute=0, allowed_hosts=["127.0.0.1"]) as server:
        code = cli.main(
            [
                "dialogue",
                str(script),
                "--cast",
                str(cast),
                "-o",
                str(out),
                "--subtitles",
                str(subs),
                "--server",
                server.url,
            ]
        )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "2 turns" in err
    audio, rate = sf.read(out, dtype="float32")
    assert rate == 24_000 and 2.0 < len(audio) / rate < 8.0
    vtt = subs.read_text()
    assert "<v Alice>Did you hear" in vtt and "<v Bob>No I did not" in vtt.replace(",", "")

    # A name not in the cast: one line naming the line, exit 2, nothing written.
    script.write_text(SCRIPT + "Carol: And me?\n")
    code = cli.main(["dialogue", str(script), "--cast", str(cast), "-o", str(tmp_path / "x.wav")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "line 6: 'Carol' is not in the cast" in err
    assert not (tmp_path / "x.wav").exists()


def test_a_dialogue_job_refuses_an_overlong_idempotency_key(app: FastAPI) -> None:
    with TestClient(app) as c:
        r = c.post(
            "/v1/jobs/dialogue", json={"turns": TURNS}, headers={"Idempotency-Key": "k" * 201}
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "Idempotency-Key"
