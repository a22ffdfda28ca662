"""Issue 17's acceptance floor: a clip with >= 1.5 s of speech at >= 10 dB SNR is never refused.

The clips are cut from the two real utterances in tests/data (Silero VAD does
not take synthetic tones for speech) to the shortest prefix that holds at
least 1.5 s of detected speech, then mixed, deterministically, with white,
pink or babble noise (the other test speaker, looped) at a given SNR over the
speech. studies/reference_robustness.py measures why the floor sits there: the
clone from a 10 dB clip still beats the best stock voice (docs/studies.md).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxclone.synth.audio.reference import prepare_reference
from voxclone.synth.audio.vad import SpeechDetector

DATA = Path(__file__).resolve().parent.parent / "data"
CLIPS = {
    "F": DATA / "librispeech_1088-129236-0000.wav",
    "M": DATA / "librispeech_3005-163389-0000.wav",
}
MAX_BYTES, MAX_SECONDS = 20 << 20, 60.0
RATE = 16_000
# The requirement, fixed here on purpose (not the module's constants, which may move).
FLOOR_SPEECH_S = 1.5


@pytest.fixture(scope="module")
def detector() -> SpeechDetector:
    return SpeechDetector()


def _read(path: Path) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32")
    assert sr == RATE
    return x.astype(np.float64)


def _wav(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x.astype(np.float32), RATE, format="WAV", subtype="FLOAT")
    return buf.getvalue()


def _speech_s(segments: list[tuple[int, int]]) -> float:
    return sum(e - s for s, e in segments) / RATE


def shortest_clip(x: np.ndarray, detector: SpeechDetector, speech_s: float) -> np.ndarray:
    """The shortest prefix (in 0.1 s steps, plus 0.3 s of tail) with ``speech_s`` of speech."""
    for end in np.arange(1.0, x.size / RATE, 0.1):
        clip = x[: int((end + 0.3) * RATE)]
        if _speech_s(detector.speech_segments(clip.astype(np.float32))) >= speech_s:
            return clip
    raise AssertionError("the test clip holds too little speech")


def noise_of(kind: str, n: int, other: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if kind == "white":
        noise = rng.standard_normal(n)
    elif kind == "pink":
        spectrum = np.fft.rfft(rng.standard_normal(n))
        freqs = np.fft.rfftfreq(n, 1 / RATE)
        spectrum[1:] /= np.sqrt(freqs[1:])
        spectrum[0] = 0.0
        noise = np.fft.irfft(spectrum, n)
    else:  # babble: another talker, looped from a random offset
        noise = np.resize(np.roll(other, -int(rng.integers(0, other.size))), n)
    return noise / np.sqrt(np.mean(noise**2))


@pytest.mark.parametrize("snr_db", [10.0, 15.0])
@pytest.mark.parametrize("kind", ["white", "pink", "babble"])
@pytest.mark.parametrize("sex", ["F", "M"])
def test_short_noisy_clip_at_the_floor_is_accepted(
    sex: str, kind: str, snr_db: float, detector: SpeechDetector
) -> None:
    x = _read(CLIPS[sex])
    other = _read(CLIPS["M" if sex == "F" else "F"])
    # 1.6 s: just above the floor, with room for the VAD's frame rounding.
    clip = shortest_clip(x, detector, FLOOR_SPEECH_S + 0.1)
    segments = detector.speech_segments(clip.astype(np.float32))
    power = float(np.mean(np.concatenate([clip[s:e] for s, e in segments]) ** 2))
    rng = np.random.default_rng(17)
    noisy = clip + noise_of(kind, clip.size, other, rng) * np.sqrt(power / 10 ** (snr_db / 10))
    noisy *= min(1.0, 0.9 / float(np.max(np.abs(noisy))))

    ref = prepare_reference(
        _wav(noisy), detector=detector, max_bytes=MAX_BYTES, max_seconds=MAX_SECONDS
    )  # must not raise

    assert ref.speech_seconds >= FLOOR_SPEECH_S
    assert not any("short reference" in w for w in ref.warnings)  # accepted, not warned
