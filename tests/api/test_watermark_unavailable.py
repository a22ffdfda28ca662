"""Without the watermark's weights, speech is served unmarked and says so (issue 49).

A plain ``pip install .`` leaves out resemble-perth (an asset package
installed --no-deps, synth/asset_packages.py). Before, every render then
raised ModelAssetError while marking was on (the default): speech failed.
Now the server starts with one log line naming the install command, speaks
unmarked, answers ``X-Voxclone-Watermark: none`` and shows
``detail.watermark: "unavailable (...)"`` on /readyz.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.synth.audio import watermark


@pytest.fixture()
def perth_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if resemble-perth were not installed: its weights are not found."""
    monkeypatch.setattr(watermark, "WEIGHTS", "not/installed/perth_net.pth.tar")
    monkeypatch.setattr(watermark, "_shared", None)
    monkeypatch.setattr(watermark, "_found", None, raising=False)
    yield


@pytest.mark.usefixtures("perth_missing")
def test_speech_without_watermark_weights_is_unmarked_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path / "home", allowed_hosts=["testserver"])
    assert settings.watermark  # the default: marking on
    with caplog.at_level(logging.INFO):
        runtime = build_runtime(settings, warmup=False)
    try:
        app = create_app(settings, runtime=runtime)
        with TestClient(app) as c:
            r = c.post("/v1/tts", json={"text": "Hello there, my friend.", "format": "wav"})
            assert r.status_code == 200, r.text
            assert r.headers["x-voxclone-watermark"] == "none"
            audio, rate = sf.read(io.BytesIO(r.content), dtype="float32")
            assert audio.size > rate // 2
            stream = c.post("/v1/tts?stream=true", json={"text": "Streams too.", "format": "mp3"})
            assert stream.status_code == 200 and stream.content
            assert stream.headers["x-voxclone-watermark"] == "none"
            ready = c.get("/readyz")
            assert ready.status_code == 200
            state = ready.json()["detail"]["watermark"]
            assert state.startswith("unavailable (") and "pip install --no-deps" in state
    finally:
        runtime.close()
    # One start-up line that says what to install (like "cloning unavailable").
    lines = [r.getMessage() for r in caplog.records if "watermark unavailable" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "resemble-perth==1.0.1" in lines[0] and "pip install --no-deps" in lines[0]


def test_readyz_says_perth_when_marking(tmp_path: Path) -> None:
    assert watermark.state(True) == "perth"
    assert watermark.state(False) == "off"
