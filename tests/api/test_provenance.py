"""Every route's audio carries the watermark, and ``/v1/provenance/detect``
and ``voxclone detect`` find it (issue 49).

The shared runtime is built with the default Settings: marking on.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import job_audio

from voxclone.api.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "data"
TEXT = "Provenance matters: this sentence was spoken by a machine, and it says so."


def _key(app: FastAPI, *scopes: str, owner: str = "prov49") -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", set(scopes), owner=owner)
    return {"Authorization": f"Bearer {plaintext}"}


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    return make_app(rate_limit_per_minute=0)


def _detect(c: TestClient, headers: dict[str, str], audio: bytes, name: str) -> dict[str, Any]:
    r = c.post("/v1/provenance/detect", files={"audio": (name, audio)}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_every_route_marks_its_audio(app: FastAPI, tmp_path: Path) -> None:
    headers = _key(app, "tts")
    outputs: dict[str, bytes] = {}
    with TestClient(app) as c:
        for name, path, body in (
            ("tts.wav", "/v1/tts", {"text": TEXT, "format": "wav"}),
            ("tts-stream.mp3", "/v1/tts?stream=true", {"text": TEXT, "format": "mp3"}),
            ("openai.mp3", "/v1/audio/speech",
             {"model": "kokoro", "input": TEXT, "voice": "clear_female"}),
            ("openai.opus", "/v1/audio/speech",
             {"model": "kokoro", "input": TEXT, "voice": "clear_female",
              "response_format": "opus"}),
        ):  # fmt: skip
            r = c.post(path, json=body, headers=headers)
            assert r.status_code == 200, (path, r.text)
            assert r.headers["x-voxclone-watermark"] == "perth", path
            outputs[name] = r.content
        r = c.post("/v1/audio/speech/captioned", json={"input": TEXT}, headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers["x-voxclone-watermark"] == "perth"
        outputs["captioned.mp3"] = base64.b64decode(r.json()["audio"])
        outputs["job.mp3"] = job_audio(c, {"text": TEXT, "format": "mp3"}, headers)

        for name, audio in outputs.items():
            found = _detect(c, headers, audio, name)
            assert found["watermarked"], (name, found)
            assert found["confidence"] >= 0.5 and found["payload"] is not None

        clean = (DATA / "librispeech_1088-129236-0000.wav").read_bytes()
        found = _detect(c, headers, clean, "clean.wav")
        assert found == {
            "watermarked": False,
            "confidence": found["confidence"],
            "payload": None,
            "manifest": found["manifest"],
        }
        assert found["manifest"]["present"] is False  # a recording: no C2PA manifest
        assert found["confidence"] < 0.5

        # Scope-checked like the other routes, and bad input is a 4xx naming the field.
        reader = _key(app, "voices:read")
        files = {"audio": ("clean.wav", clean)}
        assert c.post("/v1/provenance/detect", files=files, headers=reader).status_code == 403
        bad = c.post("/v1/provenance/detect", files={"audio": ("x.wav", b"nope")},
                     headers=headers)  # fmt: skip
        assert 400 <= bad.status_code < 500 and bad.json()["error"]["field"] == "audio"

    # The CLI: exit 0 on every marked file, 1 on a clean recording.
    for name in ("tts.wav", "openai.mp3"):
        saved = tmp_path / name
        saved.write_bytes(outputs[name])
        assert cli_main(["detect", str(saved)]) == 0, name
    assert cli_main(["detect", str(DATA / "librispeech_1088-129236-0000.wav")]) == 1


def test_the_header_says_when_marking_is_off(make_app: Any) -> None:
    app = make_app(watermark=False)
    with TestClient(app) as c:
        r = c.post("/v1/tts", json={"text": "Hello.", "format": "wav"}, headers=_key(app, "tts"))
        assert r.status_code == 200
        assert r.headers["x-voxclone-watermark"] == "none"


def test_cli_detect_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["detect", str(DATA / "librispeech_3005-163389-0000.wav")]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["watermarked"] is False and out["payload"] is None
