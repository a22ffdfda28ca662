"""The torch-free Silero runner against the silero-vad package's own API.

Segments decide what a reference keeps, its speech seconds and its SNR; they
must not move when the package's torch wrapper is no longer used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxclone.synth.audio.vad import SpeechDetector, speech_timestamps

DATA = Path(__file__).resolve().parents[1] / "data"


def _clips() -> list[np.ndarray]:
    import soundfile as sf
    import soxr

    clips = []
    for wav in sorted(DATA.glob("*.wav"))[:3]:
        x, rate = sf.read(wav, dtype="float32", always_2d=True)
        clips.append(soxr.resample(x.mean(axis=1), rate, 16_000).astype(np.float32))
    # Speech cut with silences of several lengths, and a tail shorter than a window.
    first = clips[0][: 16_000 * 4]
    gaps = [np.zeros(n, np.float32) for n in (800, 2_400, 9_000)]
    spliced = np.concatenate([first[:16_000], gaps[0], first[16_000:32_000], gaps[1]])
    clips.append(np.concatenate([spliced, first[32_000:], gaps[2], first[:3_001]]))
    clips.append(0.001 * np.random.default_rng(0).standard_normal(20_000).astype(np.float32))
    return clips


@pytest.mark.parametrize(
    ("threshold", "min_speech_ms", "min_silence_ms"), [(0.5, 250, 100), (0.35, 100, 300)]
)
def test_segments_match_the_package(
    threshold: float, min_speech_ms: int, min_silence_ms: int
) -> None:
    torch = pytest.importorskip("torch")
    from silero_vad import get_speech_timestamps, load_silero_vad

    reference_model = load_silero_vad(onnx=True)
    ours = SpeechDetector(
        threshold=threshold, min_speech_ms=min_speech_ms, min_silence_ms=min_silence_ms
    )
    for clip in _clips():
        expected = get_speech_timestamps(
            torch.from_numpy(clip),
            reference_model,
            threshold=threshold,
            sampling_rate=16_000,
            min_speech_duration_ms=min_speech_ms,
            min_silence_duration_ms=min_silence_ms,
        )
        assert ours.speech_segments(clip) == [(s["start"], s["end"]) for s in expected]


def test_segment_rules_on_known_probabilities() -> None:
    # 512-sample windows: speech from window 2, a dip of 2 windows (< 100 ms:
    # kept inside), silence from window 12, then a one-window blip (< 250 ms:
    # dropped).
    probs = [0.1, 0.2] + [0.9] * 3 + [0.1] * 2 + [0.9] * 5 + [0.0] * 6 + [0.9, 0.1] + [0.0] * 4
    n = len(probs) * 512
    segments = speech_timestamps(probs, n, threshold=0.5, min_speech_ms=250, min_silence_ms=100)
    assert segments == [(2 * 512 - 480, 12 * 512 + 480)]
    # A segment running to the end is closed at the end of the audio.
    tail = [0.0] + [0.9] * 9
    assert speech_timestamps(tail, 5_000, threshold=0.5, min_speech_ms=250, min_silence_ms=100) == [
        (512 - 480, 5_000)
    ]
