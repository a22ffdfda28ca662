"""Pocket TTS through the whole product with a test-built bundle: imported with
`voxclone models import`, loaded by the composition root from
``VOXCLONE_ENGINES``, a voice enrolled from real speech (same ingestion,
consent and quality report as Kokoro clones), spoken through SpeechService and
HTTP, refused by Kokoro, deleted with its prompt.

The weights are random (the real ones are operator-supplied), so the speech is
noise: this proves the plumbing, not the voice. Marked ``models``: the quality
report loads the speaker encoder and Whisper, and Kokoro loads beside it.
"""

from __future__ import annotations

import io
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.api.cli import main
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.errors import NotFound, VoiceModelMismatch
from voxclone.service.speech.service import SpeechRequest
from voxclone.service.voices.request import ConsentInput, EnrollRequest
from voxclone.synth.controls import SpeechControls

# The random-weight bundle builder is shared with bench/engines_speed.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from pocket_random_bundle import make_random_bundle  # noqa: E402

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "data" / "librispeech_1088-129236-0000.wav"
CONSENT = ConsentInput(given=True, statement="I agree to be cloned.", given_by="tester")
SENTENCES = [
    "Hello there, how are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "Voices are cloned from a short recording.",
]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    bundle = tmp_path_factory.mktemp("bundle") / "tiny"
    make_random_bundle(bundle, config="tiny", name="tiny", sentences=SENTENCES)
    home = tmp_path_factory.mktemp("pocket-service")
    mp = pytest.MonkeyPatch()
    mp.setenv("VOXCLONE_HOME", str(home))
    try:
        assert main(["models", "import", "pocket-tts", str(bundle)]) == 0
    finally:
        mp.undo()
    rt = build_runtime(Settings(home=home, engines="pocket-tts,kokoro", warm_cloning=False))
    try:
        yield rt
    finally:
        rt.close()


def test_enroll_speak_refuse_delete(runtime: Runtime) -> None:
    voices = runtime.voices
    assert voices is not None
    record, job = voices.enroll(
        EnrollRequest(audio=REFERENCE.read_bytes(), name="Pocket", owner="alice", consent=CONSENT)
    )
    assert job is None
    assert (record.engine, record.model_id) == ("pocket-tts", "pocket-tts-tiny")
    assert record.style is None and record.prompt is not None
    assert record.quality["clone_method"] == "prompt"
    assert record.quality["instant_clone_s"] is not None

    speech = runtime.speech.synthesize(
        SpeechRequest(text="Hello there. How are you?", voice=record.id, owner="alice")
    )
    audio, rate = sf.read(io.BytesIO(speech.audio), dtype="float32")
    assert rate == 24_000 and audio.size > rate and np.isfinite(audio).all()
    # No native speed in the model: the service renders at 1.0 and time-stretches
    # (random weights always generate the same length, so durations compare exactly).
    fast = runtime.speech.synthesize(
        SpeechRequest(
            text="Hello there. How are you?",
            voice=record.id,
            owner="alice",
            controls=SpeechControls(speed=2.0),
        )
    )
    fast_audio, _ = sf.read(io.BytesIO(fast.audio), dtype="float32")
    assert 0.4 < fast_audio.size / audio.size < 0.65

    with pytest.raises(VoiceModelMismatch):
        runtime.speech.synthesize(
            SpeechRequest(text="Hi.", voice=record.id, owner="alice", model="kokoro")
        )

    voices.delete(record.id, "alice")
    with pytest.raises(NotFound):
        runtime.speech.synthesize(SpeechRequest(text="Hello.", voice=record.id, owner="alice"))
    conn = sqlite3.connect(runtime.settings.db_path)
    assert conn.execute("SELECT COUNT(*) FROM voice_prompts").fetchone() == (0,)
    conn.close()


def test_http_enroll_stream_and_delete(runtime: Runtime, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "app", engines="pocket-tts,kokoro")
    app = create_app(settings, runtime=runtime)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
        assert models["pocket-tts"]["clone_method"] == "prompt"
        enrolled = client.post(
            "/v1/voices",
            files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
            data={"name": "Http", "consent": "true", "consent_statement": "I agree."},
        )
        assert enrolled.status_code == 201, enrolled.text
        voice = enrolled.json()
        assert voice["engine"] == "pocket-tts"
        listed = {v["id"]: v["engine"] for v in client.get("/v1/audio/voices").json()["voices"]}
        assert listed[voice["id"]] == "pocket-tts"
        with client.stream(
            "POST",
            "/v1/tts",
            json={
                "text": "Hello there. The quick brown fox.",
                "voice": voice["id"],
                "format": "pcm",
                "stream": True,
            },
        ) as response:
            assert response.status_code == 200
            pcm = b"".join(response.iter_bytes())
        samples = np.frombuffer(pcm, dtype="<i2")
        assert samples.size > 24_000 and np.abs(samples).max() > 0
        assert client.delete(f"/v1/voices/{voice['id']}").status_code == 200
