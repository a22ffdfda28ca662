"""Codec padding is cut before a reference is prepared (issue 47 item 3): one
recording gives the same 16 kHz speech, sample-aligned, as WAV and as an M4A
whose AAC priming the decoder hands back (no edit list in the file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from container_clips import CONTAINERS
from voxclone.synth.audio.decode import audible_span, decode_audio
from voxclone.synth.audio.reference import prepare_reference
from voxclone.synth.audio.vad import SILERO_WINDOW, SpeechDetector

CLIP = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
LIMITS = {"max_bytes": 20 << 20, "max_seconds": 60.0}


def _lag(a: np.ndarray, b: np.ndarray, reach: int = 1024) -> int:
    """The shift of ``b`` against ``a`` (samples) that correlates them best."""
    n = min(a.shape[0], b.shape[0]) - 2 * reach
    scores = [
        float(np.dot(a[reach : reach + n], b[reach + k : reach + k + n]))
        for k in range(-reach, reach + 1)
    ]
    return int(np.argmax(scores)) - reach


def test_audible_span_cuts_digital_silence_at_both_ends() -> None:
    tone = 0.1 * np.sin(np.linspace(0, 200, 4000, dtype=np.float32)) + 0.01
    padded = np.concatenate([np.full(1024, 2e-5), tone, np.zeros(300)]).astype(np.float32)
    assert audible_span(padded) == (1024, 1024 + 4000)
    silent = np.zeros(500, np.float32)
    assert audible_span(silent) == (0, 500)  # silence stays for the quality checks to refuse


def test_m4a_priming_does_not_shift_the_reference() -> None:
    x, rate = sf.read(CLIP, dtype="float32")
    m4a = CONTAINERS["m4a"](x)
    samples, m4a_rate = decode_audio(m4a, **LIMITS)  # type: ignore[arg-type]
    # The decoder hands the AAC priming back: 1024 near-silent samples at 44.1 kHz.
    assert samples.shape[0] / m4a_rate > x.shape[0] / rate + 0.02
    detector = SpeechDetector()
    wav_ref = prepare_reference(CONTAINERS["wav"](x), detector=detector, **LIMITS)  # type: ignore[arg-type]
    m4a_ref = prepare_reference(m4a, detector=detector, **LIMITS)  # type: ignore[arg-type]
    # The same speech on the same VAD frame grid (Silero's 512-sample frames:
    # the VAD may keep one frame more or less). Before the cut: -140 samples,
    # the M4A's speech 23 ms late at 44.1 kHz, so every frame held other audio.
    assert _lag(wav_ref.samples16k, m4a_ref.samples16k) % SILERO_WINDOW == 0
    # The upload's length is still reported whole.
    assert m4a_ref.original_seconds == pytest.approx(samples.shape[0] / m4a_rate)
