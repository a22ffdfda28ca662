"""A noisy reference is graded: denoised with a warning, denoised quietly, kept
noisy without a denoiser, or refused. Four whole enrollment preparations of a
10 s clip with RNNoise: about 1 s of CPU, more than a test in tests/unit may
take (the rest of the reference checks are in tests/unit/test_audio_ingest.py,
whose fixtures this uses)."""

from __future__ import annotations

import numpy as np
import pytest
import test_audio_ingest as ingest

from voxclone.errors import AudioQualityError
from voxclone.synth.audio.reference import (
    DENOISE_BELOW_DB,
    MIN_SNR_DB,
    WARN_SNR_DB,
    prepare_reference,
)
from voxclone.synth.audio.vad import SpeechDetector

# The unit module's fixtures (a detector, the female LibriSpeech clip at 16 kHz).
detector, speech = ingest.detector, ingest.speech
LIMITS, wav_bytes = ingest.LIMITS, ingest.wav_bytes


def test_noisy_reference_is_graded_denoised_warned_or_refused(
    speech: np.ndarray, detector: SpeechDetector
) -> None:
    rng = np.random.default_rng(5)
    power = np.mean(speech**2)

    def with_noise(snr_db: float) -> bytes:
        noise = rng.standard_normal(speech.shape[0]) * np.sqrt(power / 10 ** (snr_db / 10))
        return wav_bytes(speech + noise, 16_000)

    # 10 dB was refused by the old 15 dB floor: now denoised and accepted, with a warning.
    ref = prepare_reference(with_noise(10), detector=detector, **LIMITS)
    assert ref.denoised and MIN_SNR_DB <= ref.snr_db < WARN_SNR_DB
    assert any(w.startswith("noisy reference") and "removed" in w for w in ref.warnings)
    # Denoised below DENOISE_BELOW_DB, but no warning above WARN_SNR_DB.
    ref = prepare_reference(with_noise(22.5), detector=detector, **LIMITS)
    assert ref.denoised and WARN_SNR_DB <= ref.snr_db < DENOISE_BELOW_DB
    assert not any(w.startswith("noisy reference") for w in ref.warnings)
    # Without a denoiser the warning says the noise stays in.
    ref = prepare_reference(with_noise(12), detector=detector, denoiser=None, **LIMITS)
    assert not ref.denoised
    assert any("carry the noise" in w for w in ref.warnings)
    # Hopeless: refused, naming the limit.
    with pytest.raises(AudioQualityError, match="noisy") as err:
        prepare_reference(with_noise(MIN_SNR_DB - 4), detector=detector, **LIMITS)
    assert err.value.limit == MIN_SNR_DB and err.value.value < MIN_SNR_DB
