"""Word timestamps on real speech: Kokoro's own durations, checked against the
audio (energy), against Whisper's word times, and through speed changes."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from voxclone.service.speech.service import CaptionedResult, SpeechRequest
from voxclone.synth.controls import SpeechControls
from voxclone.synth.engine.base import SynthItem, TokenTiming
from voxclone.synth.voice.asr import normalize_for_wer

pytestmark = pytest.mark.models

TWO_SENTENCES = "In 1984 the library opened its doors. Then 42 readers came on the first day."


def _captioned(
    runtime: object, text: str, speed: float = 1.0
) -> tuple[CaptionedResult, np.ndarray]:
    result = runtime.speech.synthesize_captioned(  # type: ignore[attr-defined]
        SpeechRequest(text=text, format="wav", controls=SpeechControls(speed=speed))
    )
    audio, sr = sf.read(io.BytesIO(result.audio), dtype="float32")
    assert sr == 24_000
    return result, audio


@pytest.fixture(scope="module")
def normal(runtime: object) -> tuple[CaptionedResult, np.ndarray]:
    return _captioned(runtime, TWO_SENTENCES)


def test_kokoro_durations_add_up_to_its_audio(runtime: object) -> None:
    engine = runtime.engines["kokoro"].engine  # type: ignore[attr-defined]
    tokens = engine.tokenizer().token_ids("ðɪs ɪz ɐ tˈɛst.")
    pack = next(iter(engine.style_packs().values()))
    timing = TokenTiming()
    audio = engine.synthesize([SynthItem(tokens, pack, 1.0, timing=timing)])[0]
    assert timing.filled and timing.starts_s is not None and timing.ends_s is not None
    assert len(timing.ends_s) == len(tokens)
    # Frames of 600 samples; the trailing boundary token ends the audio.
    assert np.all(np.diff(timing.starts_s) > 0) and timing.ends_s[-1] < len(audio) / 24_000
    assert np.allclose(np.round(timing.ends_s * 24_000) % 600, 0)


def test_words_are_the_original_ones_in_order_inside_the_audio(
    normal: tuple[CaptionedResult, np.ndarray],
) -> None:
    result, audio = normal
    words = [w.word for w in result.words]
    assert words == [
        "In",
        "1984",
        "the",
        "library",
        "opened",
        "its",
        "doors",
        "Then",
        "42",
        "readers",
        "came",
        "on",
        "the",
        "first",
        "day",
    ]
    starts = [w.start_s for w in result.words]
    assert starts == sorted(starts)
    assert all(w.start_s < w.end_s for w in result.words)
    assert all(
        a.end_s <= b.start_s + 1e-6 for a, b in zip(result.words, result.words[1:], strict=False)
    )
    assert result.words[-1].end_s <= len(audio) / 24_000
    assert result.duration_s == pytest.approx(len(audio) / 24_000, abs=1e-3)


def _frame_db(audio: np.ndarray, sr: int = 24_000, frame_s: float = 0.01) -> np.ndarray:
    n = int(sr * frame_s)
    frames = audio[: len(audio) // n * n].reshape(-1, n)
    return 20 * np.log10(np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)) + 1e-9)


def test_the_pause_between_sentences_lies_between_their_words(
    normal: tuple[CaptionedResult, np.ndarray],
) -> None:
    result, audio = normal
    silent = _frame_db(audio) <= -45
    runs, start = [], None  # silent runs of 250 ms or more: (start s, end s)
    for i, quiet in enumerate([*silent, False]):
        if quiet and start is None:
            start = i
        elif not quiet and start is not None:
            if i - start >= 25 and start > 0 and i < len(silent):
                runs.append((start * 0.01, i * 0.01))
            start = None
    assert runs, "no pause between the sentences"
    doors = next(w for w in result.words if w.word == "doors")
    then = next(w for w in result.words if w.word == "Then")
    # The inserted pause: the long silence nearest the sentence boundary (a
    # shifted or unscaled time base would put the words inside it or far off).
    boundary = (doors.end_s + then.start_s) / 2
    gap_start, gap_end = min(runs, key=lambda r: abs((r[0] + r[1]) / 2 - boundary))
    # Within one 10 ms frame plus Kokoro's fade of a word's last phoneme.
    assert doors.end_s <= gap_start + 0.06
    assert then.start_s >= gap_end - 0.06


def test_speed_two_puts_the_words_at_about_half_the_time(
    runtime: object, normal: tuple[CaptionedResult, np.ndarray]
) -> None:
    slow, _ = normal
    fast, audio = _captioned(runtime, TWO_SENTENCES, speed=2.0)
    assert [w.word for w in fast.words] == [w.word for w in slow.words]
    ratios = [f.start_s / s.start_s for f, s in zip(fast.words[1:], slow.words[1:], strict=True)]
    assert 0.4 < float(np.median(ratios)) < 0.6
    assert fast.words[-1].end_s <= len(audio) / 24_000


def test_word_starts_agree_with_whisper(
    normal: tuple[CaptionedResult, np.ndarray], transcriber: object
) -> None:
    result, audio = normal
    heard = transcriber.transcribe_words(audio, 24_000)  # type: ignore[attr-defined]
    ours = {
        normalize_for_wer(w.word)[0]: w.start_s for w in result.words if normalize_for_wer(w.word)
    }
    errors = [
        abs(ours[key] - start)
        for word, start, _ in heard
        for key in normalize_for_wer(word)[:1]
        if key in ours
    ]
    assert len(errors) >= 8  # Whisper heard most words
    # bench/word_timestamps.py measures the full distribution; this is a bound.
    assert float(np.median(errors)) < 0.15
