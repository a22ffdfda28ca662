"""A prompt-cloning engine plugged in through the registry, end to end.

The engine here is a real implementation of the Engine protocol, only tiny:
it reads text through its own character tokenizer, builds its "prompt" from
the cleaned reference (median F0 and loudness, serialized), and speaks each
token as a harmonic tone at the prompt's pitch. That is enough to prove the
plumbing a neural prompt engine (Pocket TTS) uses: enrollment through the
same ingestion path, consent and quality report; storage of the opaque
prompt; routing by voice and by ``model``; refusals across engines; the HTTP
listings; deletion purging the prompt. Marked ``models``: the quality report
loads the speaker encoder and Whisper.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from char_tokenizer import CharTokenizer
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.errors import InvalidInput, NotFound, UnknownModel, VoiceModelMismatch
from voxclone.service.speech.service import SpeechRequest
from voxclone.service.voices.request import ConsentInput, EnrollRequest
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import (
    EngineBase,
    EngineCapabilities,
    EngineConfig,
    EngineVoice,
    SynthItem,
    Tokenizer,
)
from voxclone.synth.voice.prosody import pitch_stats

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "data" / "librispeech_3005-163389-0000.wav"
CONSENT = ConsentInput(given=True, statement="I agree to be cloned.", given_by="tester")
RATE = 16_000
TOKEN_SECONDS = 0.04
TEXT = "Hello there, how are you today?"


@dataclass(frozen=True)
class TonePrompt:
    f0_hz: float
    rms: float


class TonePromptEngine(EngineBase):
    """Deterministic prompt engine: every token is a short tone at the prompt's F0."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loaded = False
        self.calls = 0

    @property
    def capabilities(self) -> EngineCapabilities:
        return EngineCapabilities(
            engine=self._name,
            model_id=f"{self._name}-tones",
            model_version="1",
            sample_rate=RATE,
            max_tokens=200,
            native_batching=True,
            languages=("en-us",),
            clone_method="prompt",
            input_kind="text",
            streaming="chunk",
            native_controls=frozenset(),
            style_shape=None,
        )

    @property
    def ready(self) -> bool:
        return self._loaded

    def load(self) -> None:
        self._loaded = True

    def warmup(self) -> None:
        self.load()

    def tokenizer(self) -> Tokenizer:
        return CharTokenizer()

    def builtin_voices(self) -> dict[str, EngineVoice]:
        return {
            "tone_low": EngineVoice("tone_low", "a low tone", prompt=TonePrompt(110.0, 0.1)),
            "tone_high": EngineVoice("tone_high", "a high tone", prompt=TonePrompt(240.0, 0.1)),
        }

    def make_prompt(self, audio: np.ndarray, sample_rate: int) -> bytes:
        f0 = pitch_stats(audio, sample_rate).median_hz
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))
        return json.dumps({"f0_hz": round(f0, 3), "rms": round(rms, 6)}).encode()

    def load_prompt(self, blob: bytes) -> object:
        data = json.loads(blob)
        return TonePrompt(float(data["f0_hz"]), float(data["rms"]))

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        self.calls += 1
        out = []
        for item in batch:
            prompt = item.prompt
            if not isinstance(prompt, TonePrompt):
                raise InvalidInput("not a voice of this engine", field="voice")
            # One continuous tone at the prompt's pitch; each token sets the
            # loudness of its stretch.
            n = int(TOKEN_SECONDS * RATE)
            t = np.arange(n * len(item.token_ids)) / RATE
            loudness = np.repeat([0.2 + 0.05 * (tok % 3) for tok in item.token_ids], n)
            out.append((loudness * np.sin(2 * np.pi * prompt.f0_hz * t)).astype(np.float32))
        return out


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    made: dict[str, TonePromptEngine] = {}

    def factory(name: str) -> Callable[[EngineConfig], TonePromptEngine]:
        def create(config: EngineConfig) -> TonePromptEngine:
            made[name] = TonePromptEngine(name)
            return made[name]

        return create

    registry.register("tones", factory("tones"))
    registry.register("tones2", factory("tones2"))
    home = tmp_path_factory.mktemp("prompt-engine")
    rt = build_runtime(Settings(home=home, engines="tones,tones2", warm_cloning=False))
    try:
        yield rt
    finally:
        rt.close()
        registry.unregister("tones")
        registry.unregister("tones2")


def _dominant_hz(wav: bytes) -> float:
    audio, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return pitch_stats(audio, rate).median_hz


def test_prompt_voice_lifecycle(runtime: Runtime) -> None:
    voices = runtime.voices
    assert voices is not None
    record, job = voices.enroll(
        EnrollRequest(audio=REFERENCE.read_bytes(), name="Tone", owner="alice", consent=CONSENT)
    )
    assert job is None
    # The default engine made it: its identity, an opaque prompt, no style array.
    assert (record.engine, record.model_id, record.model_version) == ("tones", "tones-tones", "1")
    assert record.style is None and record.prompt is not None
    prompt = json.loads(record.prompt)
    assert 70 < prompt["f0_hz"] < 300  # the reference's voice, measured by the engine
    # Same report as a style clone: consent stored, similarity and WER present.
    assert record.consent.given_by == "tester"
    assert record.quality["clone_method"] == "prompt"
    assert {"similarity", "wer", "warnings", "instant_clone_s"} <= set(record.quality)

    # No model named: the voice's own engine speaks, at the prompt's pitch.
    speech = runtime.speech.synthesize(
        SpeechRequest(text="Hello there.", voice=record.id, owner="alice", language="en-us")
    )
    heard = _dominant_hz(speech.audio)
    assert abs(heard - prompt["f0_hz"]) < 0.05 * prompt["f0_hz"]

    # Another engine refuses it, by name or model id; unknown models list the known ones.
    for model in ("tones2", "tones2-tones"):
        with pytest.raises(VoiceModelMismatch):
            runtime.speech.synthesize(
                SpeechRequest(text="Hi.", voice=record.id, owner="alice", model=model)
            )
    with pytest.raises(UnknownModel) as excinfo:
        runtime.speech.synthesize(SpeechRequest(text="Hi.", voice=record.id, model="gpt-9"))
    assert {"tones", "tones2", "tts-1"} <= set(excinfo.value.limit)

    # Prompt voices are not refined (that searches a style space).
    with pytest.raises(InvalidInput):
        voices.start_refine(record.id, "alice")

    # Listed with its engine beside every engine's built-ins.
    listing = {(v.id, v.engine) for v in runtime.catalog.listing("alice")}
    assert {(record.id, "tones"), ("tone_low", "tones"), ("tone_low", "tones2")} <= listing

    # Deleting purges the prompt and the audio made with it.
    voices.delete(record.id, "alice")
    with pytest.raises(NotFound):
        runtime.speech.synthesize(SpeechRequest(text="Hello there.", voice=record.id))
    conn = sqlite3.connect(runtime.settings.db_path)
    assert conn.execute("SELECT COUNT(*) FROM voice_prompts").fetchone() == (0,)
    conn.close()


def test_builtins_and_aliases_per_engine(runtime: Runtime) -> None:
    low = runtime.speech.synthesize(SpeechRequest(text=TEXT, voice="tone_low", language="en-us"))
    high = runtime.speech.synthesize(
        SpeechRequest(text=TEXT, voice="tone_high", model="tones2", language="en-us")
    )
    assert abs(_dominant_hz(low.audio) - 110) < 6 and abs(_dominant_hz(high.audio) - 240) < 12
    # Identical text and voice name in two engines are two cache entries.
    other = runtime.speech.synthesize(
        SpeechRequest(text=TEXT, voice="tone_low", model="tones2", language="en-us")
    )
    assert other.cache == "miss"
    # tts-1 is the default engine.
    assert runtime.speech.engine_for("tts-1") == "tones"


def test_http_surface_shows_engines(runtime: Runtime, tmp_path: Path) -> None:
    app = create_app(Settings(home=tmp_path / "app", engines="tones,tones2"), runtime=runtime)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        models = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
        assert models["tones"]["clone_method"] == "prompt" and models["tones"]["default"]
        assert models["tts-1"]["engine"] == "tones" and models["tts-1"]["alias"]
        one = client.get("/v1/models/tones2")
        assert one.status_code == 200 and one.json()["model_id"] == "tones2-tones"
        assert client.get("/v1/models/nope").status_code == 404

        enrolled = client.post(
            "/v1/voices",
            files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
            data={
                "name": "Second",
                "consent": "true",
                "consent_statement": "I agree.",
                "model": "tones2",
            },
        )
        assert enrolled.status_code == 201, enrolled.text
        voice = enrolled.json()
        assert voice["engine"] == "tones2" and voice["model_id"] == "tones2-tones"
        listed = {v["id"]: v["engine"] for v in client.get("/v1/audio/voices").json()["voices"]}
        assert listed[voice["id"]] == "tones2"

        body = {"text": "Hello.", "voice": voice["id"], "language": "en-us"}
        assert client.post("/v1/tts", json=body).status_code == 200
        wrong = client.post("/v1/tts", json={**body, "model": "tones"})
        assert wrong.status_code == 409
        assert wrong.json()["error"]["code"] == "voice_model_mismatch"
        unknown = client.post("/v1/tts", json={**body, "model": "gpt-9"})
        assert unknown.status_code == 400 and "tones2" in unknown.json()["error"]["limit"]
        openai = client.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": "Hi.", "voice": "alloy", "response_format": "wav"},
        )
        assert openai.status_code == 200  # an alias with no such voice: the engine's default
        assert client.delete(f"/v1/voices/{voice['id']}").status_code == 200
