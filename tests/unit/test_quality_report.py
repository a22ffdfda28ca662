"""Quality-report warnings with a stand-in encoder (no models)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.quality_report import reference_warnings, speaker_consistency

SR = 16_000


class PitchEncoder:
    """Fake speaker encoder: 'speaker' = whether the dominant frequency is above 300 Hz."""

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        spectrum = np.abs(np.fft.rfft(x16k))
        peak_hz = np.argmax(spectrum) * SR / len(x16k)
        return np.array([1.0, 0.0] if peak_hz < 300 else [0.0, 1.0], np.float32)


def tone(hz: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def reference(x: np.ndarray, **kwargs: Any) -> ReferenceAudio:
    defaults: dict[str, Any] = dict(
        speech_seconds=len(x) / SR, original_seconds=len(x) / SR, snr_db=30.0, clipping=0.0
    )
    defaults.update(kwargs)
    return ReferenceAudio(samples16k=x, **defaults)


def test_one_voice_is_consistent_and_two_voices_are_not() -> None:
    encoder = cast(Any, PitchEncoder())
    assert speaker_consistency(encoder, tone(200, 9.0)) == 1.0
    mixed = np.concatenate([tone(200, 6.0), tone(500, 6.0)])
    assert speaker_consistency(encoder, mixed) == 0.0
    assert speaker_consistency(encoder, tone(200, 4.0)) is None  # too short to judge


def test_warnings_name_several_speakers_clipping_and_keep_the_reference_ones() -> None:
    x = tone(200, 9.0)
    clean = reference_warnings(reference(x), 0.9)
    assert clean == []
    noisy = reference(x, clipping=0.005, warnings=["noisy reference: SNR 17 dB"])
    warnings = reference_warnings(noisy, 0.3)
    assert warnings[0].startswith("noisy reference")
    assert any(w.startswith("clipping") for w in warnings)
    assert any("several speakers" in w for w in warnings)


class _FakeEncoder:
    def embed(self, x16k: np.ndarray) -> np.ndarray:
        return np.array([1.0, 0.0], np.float32)


def _reporter(transcripts: dict[int, str]) -> Any:
    """A reporter whose 'engine' returns a tone per sentence and whose 'ASR' reads it back."""
    from voxclone.synth.voice.asr import word_error_rate
    from voxclone.synth.voice.quality_report import QualityReporter

    def synthesize(tokens: tuple[int, ...], style: np.ndarray) -> np.ndarray:
        return np.full(2400, tokens[0] / 1000.0, np.float32)

    def transcribe(audio: np.ndarray, rate: int) -> str:
        return transcripts[int(round(float(audio[0]) * 1000))]

    return QualityReporter(
        cast(Any, _FakeEncoder()),
        synthesize,
        (1,),
        transcribe=transcribe,
        word_error_rate=word_error_rate,
        confirm_tokens=(2,),
    )


def _report(
    transcripts: dict[int, str], stock: tuple[str, float] | None = ("clear_female", 0.55)
) -> Any:
    reporter = _reporter(transcripts)
    x = tone(200, 9.0)
    probe = reporter.probe(np.zeros(4, np.float32))
    return reporter.report(
        reference(x),
        np.array([1.0, 0.0], np.float32),
        probe,
        style=np.zeros(4, np.float32),
        stock=stock,
    )


def test_two_slips_on_the_test_sentence_alone_do_not_warn() -> None:
    from voxclone.synth.voice.quality_report import CONFIRM_SENTENCE, TEST_SENTENCE

    # The case from the field: "Stella" and one more word misheard (13 %), the
    # voice otherwise clear. The old report warned "hard to understand" here.
    slipped = TEST_SENTENCE.replace("Stella", "Stela").replace("bring", "bin")
    report = _report({1: slipped, 2: CONFIRM_SENTENCE})
    assert report.wer is not None and report.wer < 0.12
    assert not any("hard to understand" in w for w in report.warnings), report.warnings


def test_a_clone_unclear_on_both_sentences_warns_and_says_what_to_do() -> None:
    report = _report({1: "please coal sella ask bring thing", 2: "the son was worn so we said"})
    warning = next(w for w in report.warnings if "hard to understand" in w)
    assert "another recording" in warning and "--no-tone-match" in warning


def test_report_shows_the_gain_over_the_closest_stock_voice() -> None:
    from voxclone.synth.voice.quality_report import CONFIRM_SENTENCE, TEST_SENTENCE

    report = _report({1: TEST_SENTENCE, 2: CONFIRM_SENTENCE})
    out = report.to_dict()
    assert out["stock_voice"] == "clear_female"
    assert out["gain_over_stock"] == round(report.similarity - 0.55, 4)


def test_a_clone_close_to_its_stock_voice_is_reported_without_a_warning() -> None:
    """The margin warning stopped predicting what a listener hears once clones
    became blends (studies/report_calibration.py: right 1 time in 13); the
    report still names the stock voice and the margin."""
    from voxclone.synth.voice.quality_report import CONFIRM_SENTENCE, TEST_SENTENCE

    clear = {1: TEST_SENTENCE, 2: CONFIRM_SENTENCE}
    # The fake encoder makes the clone's similarity 1.0.
    close = _report(clear, stock=("kenji", 0.97))
    assert close.warnings == []
    assert close.to_dict()["stock_voice"] == "kenji"
    assert close.to_dict()["gain_over_stock"] == 0.03
    # No stock voice to compare with (a prompt engine): the absolute rule
    # (similarity < 0.65) still applies; not here, at 1.0.
    assert _report(clear, stock=None).warnings == []


def test_reference_warnings_say_what_to_do() -> None:
    noisy = reference(tone(200, 9.0), clipping=0.005)
    for warning in reference_warnings(noisy, 0.3):
        assert any(
            hint in warning for hint in ("lower input gain", "another recording", "quieter")
        ), warning
