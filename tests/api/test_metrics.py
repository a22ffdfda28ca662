"""/metrics reflects real work when the app owns its runtime (as in production)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.config import Settings

pytestmark = pytest.mark.models


def _value(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def test_metrics_track_synthesis_cache_and_readiness(tmp_path: Path) -> None:
    app = create_app(Settings(home=tmp_path))
    # A loopback base URL: the Host guard refuses TestClient's default "testserver".
    with TestClient(app, base_url="http://127.0.0.1") as client:
        deadline = time.monotonic() + 120
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "runtime never became ready"
            time.sleep(0.5)
        body = {"text": "Counting the metrics.", "format": "wav"}
        assert client.post("/v1/tts", json=body).headers["X-Cache"] == "miss"
        assert client.post("/v1/tts", json=body).headers["X-Cache"] == "memory"
        # A stream: where its first audio's time went (issue #20's stages).
        stream = {"text": "Stages of the first audio. Then a second sentence.", "stream": True}
        started = time.perf_counter()
        with client.stream("POST", "/v1/tts", json={**stream, "format": "pcm"}) as response:
            chunks = response.iter_bytes()
            first = next(chunk for chunk in chunks if chunk)
            client_ttfa = time.perf_counter() - started
            rest = b"".join(chunks)
        assert first and rest
        text = client.get("/metrics").text
    assert _value(text, "voxclone_ready") == 1
    assert _value(text, "voxclone_circuit_open") == 0
    # Once per stream, when its first byte is sent; a whole file is not a
    # first audio (both were counted, the stream twice: 3 here).
    assert _value(text, "voxclone_time_to_first_audio_seconds_count") == 1
    assert _value(text, "voxclone_audio_seconds_synthesized_total") > 0.5
    assert _value(text, "voxclone_batch_size_count") >= 1
    assert 'voxclone_cache_hits_total{tier="memory"} 1.0' in text
    assert "voxclone_voices_stored 0.0" in text
    stages = {
        stage: _value(text, f'voxclone_first_audio_stage_seconds_sum{{stage="{stage}"}}')
        for stage in ("plan", "queue", "engine", "post", "encode")
    }
    counts = _value(text, 'voxclone_first_audio_stage_seconds_count{stage="engine"}')
    assert counts == 1  # the stream only: whole files have no first-audio stages
    assert stages["engine"] > 0.01  # the model call is a real part of it
    # The stages happen inside what the client waited for.
    assert sum(stages.values()) <= client_ttfa, (stages, client_ttfa)
