"""Kokoro renders at most a few frames of silence at a chunk's edges (the
decoder's inputs are cropped after the prosody predictor), the words stay
intact, and the option turns it off. Marked ``models``: real Kokoro graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soxr

from installed_models import INSTALLED_MODELS
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import Engine, EngineConfig, SynthItem, TokenTiming
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model
from voxclone.synth.engine.kokoro.edge_silence import DEFAULT_KEEP_FRAMES
from voxclone.synth.voice.asr import word_error_rate
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine

pytestmark = pytest.mark.models

FRAME_S = 600 / 24_000
# A stream's first chunks (cut mid-sentence, so Kokoro gives the boundary
# token after them 6-11 frames) and a whole sentence.
FIRST_CHUNKS = ("The old bridge", "A quiet library", "The night train")
SENTENCE = "Request number seven arrived on a Tuesday morning."


def _engine(home: Path, edges: str | None) -> Engine:
    model = assemble_model(INSTALLED_MODELS, verify_existing=False)
    home.mkdir(parents=True)
    (home / MODEL_FILENAME).symlink_to(model)
    marker = model.with_suffix(".sha256")
    (home / marker.name).write_text(marker.read_text())
    options = {} if edges is None else {"edge_silence_frames": edges}
    engine = registry.create("kokoro", EngineConfig(home, options=options))
    engine.load()
    return engine


@pytest.fixture(scope="module")
def cropped(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return _engine(tmp_path_factory.mktemp("cropped") / "home", None)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return _engine(tmp_path_factory.mktemp("exported") / "home", "off")


def _speak(engine: Engine, text: str) -> tuple[np.ndarray, TokenTiming]:
    tokenizer = engine.tokenizer()
    tokens = tokenizer.token_ids(tokenizer.phonemize(text, "en-us"))
    style = engine.builtin_voices()["clear_female"].style
    timing = TokenTiming()
    audio = engine.synthesize([SynthItem(tokens, style, 1.0, timing=timing)])[0]
    assert timing.filled
    return audio, timing


def _lead_s(audio: np.ndarray) -> float:
    """Seconds before the first sample above -40 dBFS."""
    return float(np.flatnonzero(np.abs(audio) > 0.01)[0]) / 24_000


def test_a_first_chunk_renders_only_a_few_frames_of_edge_silence(
    cropped: Engine, exported: Engine
) -> None:
    for text in FIRST_CHUNKS:
        audio, timing = _speak(cropped, text)
        assert timing.starts_s is not None and timing.ends_s is not None
        # The first token starts after the kept lead; the trailing boundary
        # token keeps as many frames; the counts still add up to the audio.
        assert timing.starts_s[0] == pytest.approx(DEFAULT_KEEP_FRAMES * FRAME_S)
        tail_frames = (audio.size / 24_000 - timing.ends_s[-1]) / FRAME_S
        assert tail_frames == pytest.approx(DEFAULT_KEEP_FRAMES)
        assert _lead_s(audio) < 0.15, text

        full, full_timing = _speak(exported, text)
        assert full_timing.starts_s is not None
        # As exported: ~16 frames of lead (and up to 11 of tail): 0.3 s more.
        assert full_timing.starts_s[0] >= 0.3 and _lead_s(full) >= 0.3
        assert full.size - audio.size >= 0.3 * 24_000


def test_the_crop_keeps_every_word_and_the_voice(
    cropped: Engine, exported: Engine, transcriber: object
) -> None:
    for text in (*FIRST_CHUNKS, SENTENCE):
        audio, _ = _speak(cropped, text)
        heard = transcriber.transcribe(audio, 24_000)  # type: ignore[attr-defined]
        assert word_error_rate(text, heard) == 0.0, (text, heard)

    encoder = SpeakerEncoder()
    cropped_audio, _ = _speak(cropped, SENTENCE)
    exported_audio, _ = _speak(exported, SENTENCE)
    similarity = cosine(
        encoder.embed(soxr.resample(cropped_audio, 24_000, 16_000)),
        encoder.embed(soxr.resample(exported_audio, 24_000, 16_000)),
    )
    # studies/edge_silence.py: 0.971 at the lowest of 32 streams; a garbled or
    # silent crop falls far below.
    assert similarity > 0.93
