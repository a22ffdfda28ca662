"""voxclone as a library (voxclone.load): the shipped Kokoro model, no server.

One load for the module (Kokoro loads in a few seconds); each test speaks
through the facade and checks the audio itself, not only that a call returned.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import voxclone
from voxclone.bootstrap import Runtime
from voxclone.errors import InvalidInput, NotFound, VoxcloneError
from voxclone.library import Voxclone

pytestmark = pytest.mark.models

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Voxclone]:
    home = tmp_path_factory.mktemp("library-home")
    with voxclone.load(home, workers=1) as loaded:
        yield loaded


def test_load_builds_the_composition_roots_runtime_on_the_given_home(
    tts: Voxclone, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert isinstance(tts.runtime, Runtime)
    assert tts.runtime.settings.workers == 1
    assert tts.runtime.voices is None  # cloning not asked for
    assert tts.runtime.settings.home.name.startswith("library-home")
    assert "clear_female" in tts.voices()
    assert "en-us" in tts.languages


def test_synthesize_returns_float32_speech_at_the_engine_rate(tts: Voxclone) -> None:
    audio = tts.synthesize(SENTENCE)
    assert audio.sample_rate == tts.sample_rate == 24_000
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    # About 2-4 s for this sentence at the default pace; speech, not silence.
    assert 1.5 < audio.duration_s < 6.0
    assert np.isfinite(audio.samples).all()
    assert 0.05 < float(np.abs(audio.samples).max()) <= 1.0
    rms = float(np.sqrt(np.mean(audio.samples.astype(np.float64) ** 2)))
    assert rms > 0.01


def test_voice_and_speed_change_the_audio(tts: Voxclone) -> None:
    normal = tts.synthesize(SENTENCE, voice="clear_male")
    fast = tts.synthesize(SENTENCE, voice="clear_male", speed=1.5)
    other = tts.synthesize(SENTENCE, voice="clear_female")
    # 1.5x the pace: about two thirds of the length (pauses scale too).
    assert 0.55 < fast.duration_s / normal.duration_s < 0.8
    assert normal.samples.size != other.samples.size or not np.allclose(
        normal.samples, other.samples
    )


def test_wav_bytes_hold_the_same_audio(tts: Voxclone) -> None:
    audio = tts.synthesize("Hello from the library.")
    data = audio.wav()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    decoded, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == audio.sample_rate
    assert decoded.shape == audio.samples.shape
    # 16-bit PCM: equal to the float samples within one quantization step.
    assert float(np.abs(decoded - audio.samples).max()) < 1.0 / 16384
    resampled, rate16 = sf.read(io.BytesIO(audio.encode("wav", sample_rate=16_000)))
    assert rate16 == 16_000
    assert abs(len(resampled) - audio.samples.size * 16 / 24) < 32


def test_bad_requests_raise_the_services_errors(tts: Voxclone) -> None:
    with pytest.raises(NotFound):
        tts.synthesize(SENTENCE, voice="no_such_voice")
    with pytest.raises(InvalidInput) as too_fast:
        tts.synthesize(SENTENCE, speed=9.0)
    assert too_fast.value.field == "speed"
    with pytest.raises(InvalidInput):
        tts.synthesize("   ")


def test_clone_without_cloning_loaded_says_how_to_get_it(tts: Voxclone, tmp_path: Path) -> None:
    clip = tmp_path / "reference.wav"
    clip.write_bytes(tts.synthesize("A short reference.").wav())
    with pytest.raises(VoxcloneError, match="cloning=True"):
        tts.clone(clip, name="someone", consent_statement="I agree.")


def test_clone_enrolls_a_voice_that_synthesize_then_speaks_with(tmp_path: Path) -> None:
    clip = Path(__file__).parents[1] / "data" / "librispeech_1088-129236-0000.wav"
    with voxclone.load(tmp_path / "home", cloning=True, workers=1) as tts:
        voice_id = tts.clone(
            clip, name="reader", consent_statement="I agree to have my voice cloned."
        )
        assert "reader" in tts.voices()
        by_name = tts.synthesize(SENTENCE, voice="reader")
        by_id = tts.synthesize(SENTENCE, voice=voice_id)
    # The name and the id are the same stored voice.
    assert 1.5 < by_name.duration_s < 6.0
    assert abs(by_name.duration_s - by_id.duration_s) < 0.05
    assert np.sqrt(np.mean(by_name.samples.astype(np.float64) ** 2)) > 0.01


def test_the_library_prices_output_like_the_server(tts: Voxclone) -> None:
    # Issue #45: one word read as a 199-character respelling, ~6,000 characters
    # of it at half speed: ~11 h of audio. Refused before any render, as the
    # server refuses it (before: the library had no cap and rendered on).
    from voxclone.errors import PayloadTooLarge
    from voxclone.synth.text.lexicon import Pronunciation

    respelling = ("zorbulat " * 22).strip()
    tts.runtime.lexicon.put(tts.owner, Pronunciation("qux", "en", respelling=respelling))
    with pytest.raises(PayloadTooLarge) as caught:
        tts.synthesize(" ".join(["qux"] * 1500), speed=0.5)
    assert caught.value.field == "text"
    assert caught.value.limit == tts.runtime.settings.max_output_s
    tts.runtime.lexicon.delete(tts.owner, "en", "qux")
