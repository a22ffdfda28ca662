"""The speaking controls reach the engine through HTTP, on both speech routes.

Validation tests prove a bad ``speed`` is refused; these prove a good one is
*used*: each control changes what it should in the decoded audio (active
duration, median F0, integrated loudness), measured against a neutral render
of the same route. A route that validated a control and then dropped it
would return the neutral audio and fail here.

The OpenAI route carries ``speed`` and an emotion named in ``instructions``
(its schema has no pitch or energy fields; extra fields are ignored, as
OpenAI's clients expect).
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.config import Settings
from voxclone.synth.audio.effects import loudness_lufs, measure_f0

pytestmark = pytest.mark.models

SR = 24_000
TEXT = "The museum opens at nine in the morning."
VOICE = "clear_female"


def _decode(response: Any) -> np.ndarray:
    assert response.status_code == 200, response.text
    audio, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == SR and audio.ndim == 1 and audio.size > SR // 2
    return np.asarray(audio)


def _native(client: TestClient, **controls: Any) -> np.ndarray:
    body = {"text": TEXT, "voice": VOICE, "language": "en-us", **controls}
    return _decode(client.post("/v1/tts", json=body))


def _openai(client: TestClient, **fields: Any) -> np.ndarray:
    body = {"model": "tts-1", "input": TEXT, "voice": VOICE, "response_format": "wav", **fields}
    return _decode(client.post("/v1/audio/speech", json=body))


def _active_s(audio: np.ndarray, frame: int = 480, floor_db: float = -35.0) -> float:
    """Seconds of 20 ms frames within ``floor_db`` of the loudest: speech without pauses."""
    n = len(audio) // frame
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame).astype(np.float64) ** 2, axis=1))
    return float(np.count_nonzero(rms > rms.max() * 10 ** (floor_db / 20)) * frame / SR)


def _octaves(audio: np.ndarray, reference: np.ndarray) -> float:
    return float(np.log2(np.median(measure_f0(audio, SR)) / np.median(measure_f0(reference, SR))))


def _louder_db(audio: np.ndarray, reference: np.ndarray) -> float:
    return loudness_lufs(audio, SR) - loudness_lufs(reference, SR)


@pytest.fixture(scope="module")
def neutral(runtime: Any) -> dict[str, np.ndarray]:
    """Neutral renders, one per route (module-scoped: both are reused below)."""
    with tempfile.TemporaryDirectory() as home:
        app = create_app(Settings(home=Path(home)), runtime=runtime)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            return {"native": _native(c), "openai": _openai(c)}


@pytest.mark.parametrize("route", ["native", "openai"])
@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_changes_the_duration(
    client: TestClient, neutral: dict[str, np.ndarray], route: str, speed: float
) -> None:
    audio = _native(client, speed=speed) if route == "native" else _openai(client, speed=speed)
    ratio = _active_s(audio) / _active_s(neutral[route])
    assert ratio == pytest.approx(1.0 / speed, rel=0.12), f"{route} speed {speed}: ×{ratio:.2f}"


@pytest.mark.parametrize("octaves", [-0.5, 0.5])
def test_pitch_moves_the_median_f0(
    client: TestClient, neutral: dict[str, np.ndarray], octaves: float
) -> None:
    moved = _octaves(_native(client, pitch=octaves), neutral["native"])
    assert moved == pytest.approx(octaves, abs=0.1), f"asked {octaves:+}, got {moved:+.3f}"


@pytest.mark.parametrize(("energy", "sign"), [(0.8, -1), (1.2, +1)])
def test_energy_changes_the_loudness(
    client: TestClient, neutral: dict[str, np.ndarray], energy: float, sign: int
) -> None:
    change = _louder_db(_native(client, energy=energy), neutral["native"])
    assert sign * change > 1.0, f"energy {energy}: {change:+.2f} LU"


@pytest.mark.parametrize("route", ["native", "openai"])
def test_emotion_moves_pitch_pace_and_loudness(
    client: TestClient, neutral: dict[str, np.ndarray], route: str
) -> None:
    # "sad": pitch −0.1 octave, speed 0.83, energy 0.85 (synth/controls.py).
    if route == "native":
        audio = _native(client, emotion="sad")
    else:
        audio = _openai(client, instructions="Read this in a sad, quiet way.")
    base = neutral[route]
    assert _active_s(audio) > 1.1 * _active_s(base)
    assert _octaves(audio, base) < -0.05
    # Quieter, though less than energy 0.85 alone (-1.4 dB): with the watermark
    # on (issue 49) the slower, paused render measured -0.27 dB gated LUFS
    # (below -0.5 without the mark; 2026-12-06) - the mark's floor in pauses
    # lifts frames over the gate. Open in the session's note.
    assert _louder_db(audio, base) < -0.2
