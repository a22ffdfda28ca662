"""Every supported language, spoken by the real Kokoro engine.

We have an English-only ASR, so other languages are checked by what can be
measured without one: no phoneme dropped on the way to token ids, audio that
is not silent, and a speaking rate per syllable inside the range of real
speech. English also gets the Whisper round trip.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from voxclone.config import Settings
from voxclone.models_location import default_models_dir
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import Engine, EngineConfig, SynthItem
from voxclone.synth.text.frontend import Chunk, TextFrontend

pytestmark = pytest.mark.models

SAMPLE_RATE = 24_000
SAMPLES = {
    "en-us": "The museum opens at nine in the morning.",
    "en-gb": "Please call Stella and ask her to bring these things with her.",
    "es": "El museo abre a las 9 de la mañana y cuesta 12 euros.",
    "fr": "Le musée ouvre à neuf heures et l'entrée coûte 80 euros.",
    "it": "Il museo apre alle nove del mattino, con 28 sale.",
    "pt-br": "O museu abre às nove horas da manhã e tem 42 salas.",
    "hi": "संग्रहालय सुबह ९ बजे खुलता है।",
    "ja": "博物館は朝九時に開きます。入場料は800円です。",
    "zh": "博物馆早上九点开门，门票25元。",
}
# Vowel symbols of Kokoro's alphabet (misaki's diphthong letters included): one run = one syllable.
_VOWELS = "aeiouyæøœɐɑɒɔəɚɛɜɤɨɪɯʊʌᵻAIOQWYɝ"
_NUCLEUS = re.compile(f"[{_VOWELS}]+")


@pytest.fixture(scope="module")
def engine() -> Engine:
    built = registry.create(
        "kokoro", EngineConfig(default_models_dir(Settings().home))
    )  # installed
    built.load()
    return built


@pytest.fixture(scope="module")
def frontend(engine: Engine) -> TextFrontend:
    return TextFrontend(engine.tokenizer(), max_tokens=engine.capabilities.max_tokens)


def _speak(engine: Engine, chunks: list[Chunk], voice: str = "jf_alpha") -> np.ndarray:
    pack = engine.style_packs()[voice]
    parts = engine.synthesize([SynthItem(c.token_ids, pack, 1.0) for c in chunks])
    return np.concatenate(parts)


@pytest.mark.parametrize("language", list(SAMPLES))
def test_language_is_spoken_at_a_plausible_rate(
    language: str, engine: Engine, frontend: TextFrontend
) -> None:
    chunks = list(frontend.plan(SAMPLES[language], language))
    phonemes = " ".join(c.phonemes for c in chunks)
    # Coverage: every phoneme symbol has a token id (nothing silently lost).
    assert sum(len(c.token_ids) for c in chunks) == sum(len(c.phonemes) for c in chunks)
    audio = _speak(engine, chunks)
    seconds = audio.size / SAMPLE_RATE
    rms = float(np.sqrt(np.mean(audio**2)))
    syllables = len(_NUCLEUS.findall(phonemes))
    per_syllable = seconds / max(syllables, 1)
    rate_ms = per_syllable * 1000
    print(f"\n{language}: {syllables} syl, {seconds:.2f} s, {rate_ms:.0f} ms/syl, rms {rms:.3f}")
    assert rms > 0.01
    # Conversational speech runs ~4-8 syllables per second; allow slack both ways.
    assert 0.08 <= per_syllable <= 0.40, per_syllable


def test_english_round_trip_through_whisper(engine: Engine, frontend: TextFrontend) -> None:
    from voxclone.synth.voice.asr import Transcriber, word_error_rate

    text = SAMPLES["en-gb"]
    audio = _speak(engine, list(frontend.plan(text, "en-gb")), voice="jm_kumo")
    hypothesis = Transcriber().transcribe(audio, SAMPLE_RATE)
    assert word_error_rate(text, hypothesis) <= 0.25, hypothesis


def test_mixed_language_sentence_is_one_chunk_of_speech(
    engine: Engine, frontend: TextFrontend
) -> None:
    chunks = list(frontend.plan("She said こんにちは and smiled.", "en-us"))
    assert len(chunks) == 1
    audio = _speak(engine, chunks)
    assert 1.0 <= audio.size / SAMPLE_RATE <= 5.0
