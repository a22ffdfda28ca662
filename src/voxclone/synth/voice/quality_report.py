"""Per-voice quality report: how close and how clear a clone is, and why not.

* similarity — speaker-encoder cosine between a synthesized test sentence and
  the reference (the product encoder; the independent judge is for benchmarks
  only);
* wer — Whisper tiny.en word error rate of that sentence;
* warnings — the reference's own (noise, short, long) plus clipping, several
  speakers (windows of the reference that sound like different people), a
  distant match and poor intelligibility.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import soxr

from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.clone import SynthesizeFn, TranscribeFn, WerFn
from voxclone.synth.voice.encoder import SpeakerEncoder, cosine

TEST_SENTENCE = "Please call Stella and ask her to bring these things with her from the store."

CLIPPING_WARN = 0.001  # fraction of clipped samples worth mentioning (rejection is at 1 %)
SPEAKER_WINDOW_S = 3.0
MAX_WINDOWS = 12  # bounds the cost on long references
# Resemblyzer cosine between 3 s windows of one speaker rarely drops below
# this; windows of different people usually do (utterance-level means on
# our dev set: same 0.85, strangers 0.58).
SEVERAL_SPEAKERS_BELOW = 0.62
LOW_SIMILARITY = 0.65
HIGH_WER = 0.12


@dataclass(frozen=True)
class QualityReport:
    similarity: float | None
    wer: float | None
    warnings: list[str] = field(default_factory=list)
    reference_seconds: float = 0.0
    snr_db: float | None = None
    reference_pitch_hz: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("similarity", "wer", "snr_db", "reference_pitch_hz"):
            if out[key] is not None:
                out[key] = round(float(out[key]), 4)
        out["reference_seconds"] = round(float(out["reference_seconds"]), 2)
        return out


def speaker_consistency(
    encoder: SpeakerEncoder, x16k: np.ndarray, window_s: float = SPEAKER_WINDOW_S
) -> float | None:
    """Lowest cosine between any two overlapping windows (None if too short).

    Overlapping windows and all pairs, because a change of speaker inside a
    window blurs both sides: measured on two real speakers joined, the lowest
    pair fell to 0.44 with half-window hops, while each speaker alone stayed at
    0.78; with back-to-back windows and neighbours only it stayed at 0.63.
    """
    size = int(window_s * 16_000)
    if x16k.shape[0] < 2 * size:
        return None
    hop = max(size // 2, (x16k.shape[0] - size) // (MAX_WINDOWS - 1))
    windows = [x16k[i : i + size] for i in range(0, x16k.shape[0] - size + 1, hop)]
    vectors = np.stack([encoder.embed(w) for w in windows])
    sims = vectors @ vectors.T
    return float(sims[np.triu_indices(len(windows), k=1)].min())


def reference_warnings(reference: ReferenceAudio, consistency: float | None) -> list[str]:
    warnings = list(reference.warnings)
    if reference.clipping > CLIPPING_WARN:
        warnings.append(
            f"clipping: {reference.clipping:.2%} of the samples are clipped; "
            "record with lower input gain for a cleaner voice"
        )
    if consistency is not None and consistency < SEVERAL_SPEAKERS_BELOW:
        warnings.append(
            "possibly several speakers: parts of the reference sound like different people; "
            "use a recording of one person"
        )
    return warnings


class QualityReporter:
    def __init__(
        self,
        encoder: SpeakerEncoder,
        # (tokens, conditioning) -> audio: a style array for style engines, a
        # loaded prompt for prompt engines.
        synthesize: SynthesizeFn | Callable[[tuple[int, ...], Any], np.ndarray],
        test_tokens: tuple[int, ...],
        *,
        transcribe: TranscribeFn | None,
        word_error_rate: WerFn | None,
        test_sentence: str = TEST_SENTENCE,
        engine_rate: int = 24_000,
    ) -> None:
        self._encoder = encoder
        self._synthesize = synthesize
        self._tokens = test_tokens
        self._transcribe = transcribe
        self._wer = word_error_rate
        self._sentence = test_sentence
        self._rate = engine_rate

    @property
    def sample_rate(self) -> int:
        return self._rate

    def probe(self, style: Any) -> np.ndarray:
        """The test sentence spoken with ``style`` (or a prompt engine's loaded
        prompt), at the engine rate, before any post-processing."""
        return self._synthesize(self._tokens, style)

    def report(
        self,
        reference: ReferenceAudio,
        reference_embedding: np.ndarray,
        audio: np.ndarray,
        *,
        reference_pitch_hz: float | None = None,
    ) -> QualityReport:
        """Report on ``audio``: the test sentence as the voice will really sound
        (:meth:`probe`, then the same post-processing as live speech)."""
        audio16 = soxr.resample(audio, self._rate, 16_000).astype(np.float32)
        similarity = cosine(self._encoder.embed(audio16), reference_embedding)
        wer = None
        if self._transcribe is not None and self._wer is not None:
            wer = self._wer(self._sentence, self._transcribe(audio, self._rate))
        warnings = reference_warnings(
            reference, speaker_consistency(self._encoder, reference.samples16k)
        )
        if similarity < LOW_SIMILARITY:
            warnings.append(
                "the clone is only loosely similar to the reference "
                f"(similarity {similarity:.2f}); "
                "refining the voice may bring it closer"
            )
        if wer is not None and wer > HIGH_WER:
            warnings.append(f"the clone is hard to understand (word error rate {wer:.0%})")
        return QualityReport(
            similarity=similarity,
            wer=wer,
            warnings=warnings,
            reference_seconds=reference.speech_seconds,
            snr_db=reference.snr_db if np.isfinite(reference.snr_db) else None,
            reference_pitch_hz=reference_pitch_hz,
        )
