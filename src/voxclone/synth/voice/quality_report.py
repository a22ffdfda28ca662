"""Per-voice quality report: how close and how clear a clone is, and why not.

* similarity — speaker-encoder cosine between the test sentence spoken by the
  voice (as it will speak: the built-in that replaced the clone, if one did)
  and the reference (the product encoder; the independent judge is for
  benchmarks only). The report's one similarity of the voice: it also carried
  ``clone_similarity``, the clone's own figure where a built-in replaced it,
  so a replaced voice showed two different "similarity" numbers (issue 46);
  the verdict's sentence names the clone's figure where it explains why;
* wer — Whisper tiny.en word error rate of that sentence;
* warnings — the reference's own (noise, short, long) plus clipping, several
  speakers (windows of the reference that sound like different people), a
  distant match and poor intelligibility.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import soxr

from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.clone import SynthesizeFn, TranscribeFn, WerFn
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine, crop_averaged_embedding
from voxclone.synth.voice.stock_move import MovedVoice

if TYPE_CHECKING:
    from voxclone.synth.voice.stock_check import StockComparison

TEST_SENTENCE = "Please call Stella and ask her to bring these things with her from the store."
# Heard only when the test sentence alone suggests a problem: a name like
# "Stella" and fifteen words make one sentence a noisy judge (two slips =
# 13 %), so a second sentence of everyday words confirms it before we warn.
CONFIRM_SENTENCE = "The sun was warm, so we sat by the lake and talked about the new house."

CLIPPING_WARN = 0.001  # fraction of clipped samples worth mentioning (rejection is at 1 %)
SPEAKER_WINDOW_S = 3.0
MAX_WINDOWS = 12  # bounds the cost on long references
# Resemblyzer cosine between 3 s windows of one speaker rarely drops below
# this; windows of different people usually do (utterance-level means on
# our dev set: same 0.85, strangers 0.58).
SEVERAL_SPEAKERS_BELOW = 0.62
# No identity warning on a style engine's clone. A margin over the closest
# stock voice below 0.08 (product encoder) was a useful warning for
# nearest-voice clones (63 enrollments of the evaluation speakers,
# studies/report_calibration.py: right 44 % of the time at a 22 % base rate,
# caught 79 %); for the blended clones of today it fired 13 times and was
# right once (8 %, below the 17 % base rate), and no threshold of it or of the
# similarity did better than chance (AUC 0.48 and 0.63): the blend raises
# the encoder's similarity whether or not a listener hears the person.
# Re-fitted against the standard voices (the stock check's one comparison, 17
# fit and validation speakers, studies/report_calibration.py --clone-eval,
# studies/results/report_calibration_catalog.md): the margin below a threshold
# chosen leave-one-speaker-out fired 13 times, right 38 % of the time at a 41 %
# base rate; the similarity fired once, wrongly. The report keeps both figures
# and names the stock voice, with no identity warning.
# Without a stock voice to compare with (prompt engines): the absolute rule.
LOW_SIMILARITY = 0.65
# Word error rate above which a clone is called hard to understand. It is
# judged on the test sentence and, only when that one fails, on both
# sentences together (30 words): the field report of a clean 31.6 dB
# reference warned at 2 slips in 15 words (13 %), which the second sentence
# now outvotes. Not yet re-fitted on the eval set.
HIGH_WER = 0.12


@dataclass(frozen=True)
class QualityReport:
    similarity: float | None
    wer: float | None
    warnings: list[str] = field(default_factory=list)
    reference_seconds: float = 0.0
    snr_db: float | None = None
    reference_pitch_hz: float | None = None
    # The closest built-in voice of the reference's sex and its similarity: how
    # much the voice gains over simply picking a stock voice. From the stock
    # check's comparison when one ran (heard like ``similarity``), else from
    # the atlas's embeddings.
    stock_voice: str | None = None
    stock_similarity: float | None = None
    # The one sentence that says which voice this is and why, from the stock
    # check's comparison.
    verdict: str | None = None

    @property
    def gain_over_stock(self) -> float | None:
        if self.similarity is None or self.stock_similarity is None:
            return None
        return self.similarity - self.stock_similarity

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        gain = self.gain_over_stock
        out["gain_over_stock"] = None if gain is None else round(float(gain), 4)
        keys = ("similarity", "wer", "snr_db", "reference_pitch_hz", "stock_similarity")
        for key in keys:
            if out[key] is not None:
                out[key] = round(float(out[key]), 4)
        out["reference_seconds"] = round(float(out["reference_seconds"]), 2)
        return out


def stock_verdict(comparison: StockComparison, moved: MovedVoice | None = None) -> str:
    """Which voice this is and why, from the stock check's one comparison (the
    clone and the closest built-in of the reference's sex, heard alike) and,
    when that built-in won, the blend that speaks (``moved``)."""
    best, clone = comparison.best, comparison.clone_similarity
    figures = f"similarity {clone:.2f} for the clone, {best.similarity:.2f} for {best.name}"
    if comparison.replaced and moved is not None:
        return (
            f"made from this recording starting from the built-in voice {best.name}, heard "
            f"about as close to the reference as the instant clone ({figures}; a clone is "
            f"kept as it is when heard closer by more than {comparison.preference:.2f}): "
            f"{moved.clone_share:.0%} of the clone's timbre, the reference's pitch and tone, "
            f"similarity {moved.similarity:.2f}"
        )
    if comparison.replaced:
        return (
            f"speaks as the built-in voice {best.name}, given this recording's tone: it is "
            f"heard about as close to the reference as the clone ({figures}; a clone is kept "
            f"when it is heard closer by more than {comparison.preference:.2f})"
        )
    if comparison.lead > comparison.preference:
        return (
            f"speaks as its own clone, heard {comparison.lead:.2f} closer to the reference "
            f"than {best.name}, the closest built-in voice of the same sex ({figures})"
        )
    closer = "closer than" if comparison.lead < 0 else "about as close as"
    return (
        f"speaks as its own clone, kept as asked: the built-in voice {best.name} is heard "
        f"{closer} the clone ({figures})"
    )


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
            "upload another recording with one person only"
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
        confirm_tokens: tuple[int, ...] | None = None,
        confirm_sentence: str = CONFIRM_SENTENCE,
    ) -> None:
        self._encoder = encoder
        self._synthesize = synthesize
        self._tokens = test_tokens
        self._transcribe = transcribe
        self._wer = word_error_rate
        self._sentence = test_sentence
        self._rate = engine_rate
        self._confirm_tokens = confirm_tokens
        self._confirm_sentence = confirm_sentence

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
        style: np.ndarray | None = None,
        heard: Callable[[np.ndarray], np.ndarray] | None = None,
        stock: tuple[str, float] | None = None,
        comparison: StockComparison | None = None,
        moved: MovedVoice | None = None,
    ) -> QualityReport:
        """Report on ``audio``: the test sentence as the voice will really sound
        (:meth:`probe`, then the same post-processing as live speech).

        With ``style`` (and ``heard``, the same post-processing), a test
        sentence that scores above :data:`HIGH_WER` is confirmed on a second
        sentence and the reported WER is the word-weighted rate over both.
        ``stock`` is (name, similarity) of the closest built-in voice;
        ``comparison`` (the stock check's) replaces it, and gives the verdict
        with ``moved`` (the built-in moved toward the reference that speaks).
        """
        if comparison is not None:
            stock = (comparison.best.name, comparison.best.similarity)
        audio16 = soxr.resample(audio, self._rate, 16_000).astype(np.float32)
        # Heard as the stock check hears (crop-averaged): a replaced voice's
        # similarity is then its stock similarity, one figure (issue 46).
        similarity = cosine(crop_averaged_embedding(self._encoder, audio16), reference_embedding)
        wer = None
        if self._transcribe is not None and self._wer is not None:
            wer = self._wer(self._sentence, self._transcribe(audio, self._rate))
            if wer > HIGH_WER and style is not None and self._confirm_tokens:
                wer = self._confirmed_wer(wer, style, heard)
        warnings = reference_warnings(
            reference, speaker_consistency(self._encoder, reference.samples16k)
        )
        if stock is None and similarity < LOW_SIMILARITY:
            warnings.append(
                "the clone is only loosely similar to the reference "
                f"(similarity {similarity:.2f}); run a refinement (--refine, or Refine in the "
                "web UI), or upload a longer recording of the same person"
            )
        if wer is not None and wer > HIGH_WER:
            warnings.append(
                f"the clone is hard to understand (word error rate {wer:.0%} over two test "
                "sentences); upload another recording with clear, unhurried speech, or try "
                "without tone matching (--no-tone-match) if the recording sounds muffled"
            )
        return QualityReport(
            similarity=similarity,
            wer=wer,
            warnings=warnings,
            reference_seconds=reference.speech_seconds,
            snr_db=reference.snr_db if np.isfinite(reference.snr_db) else None,
            reference_pitch_hz=reference_pitch_hz,
            stock_voice=None if stock is None else stock[0],
            stock_similarity=None if stock is None else float(stock[1]),
            verdict=None if comparison is None else stock_verdict(comparison, moved),
        )

    def _confirmed_wer(
        self,
        first: float,
        style: np.ndarray,
        heard: Callable[[np.ndarray], np.ndarray] | None,
    ) -> float:
        assert self._transcribe is not None and self._wer is not None
        assert self._confirm_tokens is not None
        second = self._synthesize(self._confirm_tokens, style)
        if heard is not None:
            second = heard(second)
        wer2 = self._wer(self._confirm_sentence, self._transcribe(second, self._rate))
        n1 = len(self._sentence.split())
        n2 = len(self._confirm_sentence.split())
        return (first * n1 + wer2 * n2) / (n1 + n2)
