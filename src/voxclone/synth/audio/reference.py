"""Turn an uploaded voice sample into a clean 16 kHz speech reference.

decode -> mono -> codec padding cut -> clipping check -> 16 kHz -> VAD -> SNR grading (denoise
below ``DENOISE_BELOW_DB``, warn below ``WARN_SNR_DB``, refuse below
``MIN_SNR_DB``) -> trim silences -> length checks (and the best window when
too long) -> loudness. Every rejection is an AudioQualityError that names the
measured value and the allowed limit, so the user knows what to fix.

The limits are set so that no clip with >= 1.5 s of speech at >= 10 dB SNR is
refused (every clip of the dev evaluation data is accepted; the noisiest, a
LibriSpeech audiobook clip, measures 6.2 dB; tests/unit/test_reference_floor.py
holds the floor). studies/reference_robustness.py measured, with the independent
judge (docs/benchmarks.md, "Reference robustness"; 2-3 speakers per curve, so
a first measurement, not a final one): a denoised clone from babble + pink
noise at 20/15/10/5 dB never fell below the best stock voice (normalized 0.41
clean, 0.43 at 10 dB, 0.30 at 5 dB vs 0.04 for the stock voice), and 1.5 s of
speech gave 0.47 against 0.46 from 12 s (stock voice 0.19; flat in between).
So refusing above 5 dB or 1.5 s would refuse clones better than what the user
would get instead; where below 5 dB the clone falls under a stock voice is not
measured yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from voxclone.errors import AudioQualityError
from voxclone.synth.audio.decode import audible_span, decode_audio
from voxclone.synth.audio.denoise import Denoiser
from voxclone.synth.audio.quality import (
    clipping_ratio,
    estimate_snr_db,
    frame_powers,
    loudness_normalize,
    speech_frame_mask,
)
from voxclone.synth.audio.resample import resample
from voxclone.synth.audio.vad import Segment, SpeechDetector, trimmed_to_original

REFERENCE_RATE = 16_000
MAX_CLIPPING = 0.01
# Refused below this SNR (see the module docstring): 10 dB clips and the dev
# set's noisiest real clip (6.2 dB) are accepted, and at 5 dB the measured
# clones still beat the best stock voice.
MIN_SNR_DB = 5.0
WARN_SNR_DB = 20.0
# RNNoise runs below this SNR; cleaner clips are left alone so the denoiser's
# own artefacts never touch a good recording (a choice, not yet measured).
DENOISE_BELOW_DB = 25.0
MIN_SPEECH_S = 1.5
# No warning for short speech above that floor: over 63 enrollments of the
# evaluation speakers (studies/report_calibration.py), the old "very short"
# (< 3 s) and "short" (< 5 s) warnings fired 10 and 12 times and came with a
# clone no closer than the stock voice 0 and 1 times, against 22 % of all
# enrollments; the length curve of studies/reference_robustness.py is flat
# from 1.5 to 12 s too. The report still shows the seconds used.
TARGET_LUFS = -23.0

_FRAME_S = 0.02
_FRAME = round(_FRAME_S * REFERENCE_RATE)


@dataclass(kw_only=True)
class ReferenceAudio:
    """A speech reference ready for the speaker encoder.

    ``used_window`` is set when only part of a long upload was kept: its
    (start, end) in seconds of the uploaded audio.
    """

    samples16k: np.ndarray
    sample_rate: int = REFERENCE_RATE
    speech_seconds: float
    original_seconds: float
    snr_db: float
    clipping: float
    warnings: list[str] = field(default_factory=list)
    used_window: tuple[float, float] | None = None
    denoised: bool = False


def combine_references(references: Sequence[ReferenceAudio]) -> ReferenceAudio:
    """Several clips of one speaker seen as one reference (for the quality report):
    speech joined, seconds summed, the worst SNR and clipping, every clip's warnings."""
    if len(references) == 1:
        return references[0]
    warnings = [
        f"recording {i + 1}: {warning}"
        for i, ref in enumerate(references)
        for warning in ref.warnings
    ]
    return ReferenceAudio(
        samples16k=np.concatenate([ref.samples16k for ref in references]),
        speech_seconds=sum(ref.speech_seconds for ref in references),
        original_seconds=sum(ref.original_seconds for ref in references),
        snr_db=min(ref.snr_db for ref in references),
        clipping=max(ref.clipping for ref in references),
        warnings=warnings,
        denoised=any(ref.denoised for ref in references),
    )


_DEFAULT_DENOISER = Denoiser()


def prepare_reference(
    data: bytes,
    *,
    detector: SpeechDetector,
    max_bytes: int,
    max_seconds: float,
    min_speech_s: float = MIN_SPEECH_S,
    max_speech_s: float = 30.0,
    denoiser: Denoiser | None = _DEFAULT_DENOISER,
    min_snr_db: float = MIN_SNR_DB,
) -> ReferenceAudio:
    """Decode, check and trim an uploaded reference clip (see module docstring).

    ``denoiser`` None keeps noisy clips as they are, and ``min_snr_db`` moves
    the refusal (both for benchmarks that measure where the limits belong)."""
    samples, rate = decode_audio(data, max_bytes=max_bytes, max_seconds=max_seconds)
    original_seconds = samples.shape[0] / rate
    # One canonical PCM whatever the container: codec padding cut (decode.py
    # audible_span), so the VAD frames and the encoder's windows fall on the
    # same speech in a WAV and an M4A of one recording; ``lead_s`` keeps the
    # reported window in seconds of the upload.
    start, end = audible_span(samples)
    samples, lead_s = samples[start:end], start / rate

    # Measured at the decoded rate: resampling rounds off the flat tops.
    clipping = clipping_ratio(samples)
    if clipping > MAX_CLIPPING:
        raise AudioQualityError(
            f"{clipping:.1%} of the audio is clipped (distorted by recording too loud); "
            f"at most {MAX_CLIPPING:.0%} is allowed. Record again with lower input gain.",
            field="audio",
            limit=MAX_CLIPPING,
            value=round(clipping, 4),
        )

    x16k = resample(samples, rate, REFERENCE_RATE)
    segments = detector.speech_segments(x16k)
    if not segments:
        raise AudioQualityError(
            "no speech was detected in the audio; upload a recording of one person speaking",
            field="audio",
            limit=min_speech_s,
            value=0.0,
        )

    warnings: list[str] = []
    snr_db = estimate_snr_db(x16k, REFERENCE_RATE, segments)
    if snr_db < min_snr_db:
        raise AudioQualityError(
            f"the recording is too noisy: signal-to-noise ratio {snr_db:.1f} dB, "
            f"at least {min_snr_db:g} dB is required. Record in a quieter place.",
            field="audio",
            limit=min_snr_db,
            value=round(snr_db, 1),
        )
    # Denoised after trimming (below), so only the speech that is kept pays for it.
    denoised = denoiser is not None and snr_db < DENOISE_BELOW_DB
    if snr_db < WARN_SNR_DB:
        warnings.append(
            f"noisy reference: signal-to-noise ratio {snr_db:.1f} dB (below {WARN_SNR_DB:g} dB); "
            + (
                "the noise was removed before cloning, but the voice may be less similar; "
                if denoised
                else "the cloned voice may carry the noise; "
            )
            + "record again in a quieter room, closer to the microphone"
        )

    trimmed = detector.trim_segments(x16k, REFERENCE_RATE, segments)
    speech_seconds = _seconds(trimmed.segments)
    if speech_seconds < min_speech_s:
        raise AudioQualityError(
            f"only {speech_seconds:.1f} s of speech found; at least {min_speech_s:g} s is needed",
            field="audio",
            limit=min_speech_s,
            value=round(speech_seconds, 2),
        )

    audio = trimmed.samples
    used_window: tuple[float, float] | None = None
    max_len = round(max_speech_s * REFERENCE_RATE)
    if audio.shape[0] > max_len:
        first, last = best_window(audio, trimmed.segments, max_len)
        used_window = (
            lead_s + trimmed_to_original(first, trimmed.pieces) / REFERENCE_RATE,
            lead_s + trimmed_to_original(last, trimmed.pieces) / REFERENCE_RATE,
        )
        total_speech = speech_seconds
        audio = audio[first:last]
        speech_seconds = _seconds(_clip_segments(trimmed.segments, first, last))
        warnings.append(
            f"long reference: {total_speech:.1f} s of speech; only the best {max_speech_s:g} s "
            f"window ({used_window[0]:.1f}-{used_window[1]:.1f} s of the upload) was used"
        )

    if denoised:
        assert denoiser is not None
        # RNNoise (~0.15 s of CPU per second of audio on this machine) learns the
        # noise from the short pauses trimming keeps between phrases.
        audio = denoiser.denoise(audio, REFERENCE_RATE)

    return ReferenceAudio(
        samples16k=loudness_normalize(audio, REFERENCE_RATE, TARGET_LUFS),
        speech_seconds=speech_seconds,
        original_seconds=original_seconds,
        snr_db=snr_db,
        clipping=clipping,
        warnings=warnings,
        used_window=used_window,
        denoised=denoised,
    )


def best_window(audio: np.ndarray, segments: list[Segment], length: int) -> tuple[int, int]:
    """The [start, end) of at most ``length`` samples with the cleanest, steadiest speech.

    Windows start at a speech onset (so no word is cut at the front) and end
    at the last speech offset that fits. Each is scored by its local SNR
    (speech level over the quietest tenth of its frames) minus half the
    spread of its speech-frame levels in dB: a window with shouting, a
    door slam or a noisy stretch scores lower.
    """
    n = audio.shape[0]
    powers = frame_powers(audio, REFERENCE_RATE, _FRAME_S)
    speech = speech_frame_mask(segments, powers.size, _FRAME)
    levels_db = 10.0 * np.log10(np.maximum(powers, 1e-12))

    candidates: list[tuple[int, int]] = []
    for onset, _ in segments:
        end = _last_offset_within(segments, onset, onset + length) or min(n, onset + length)
        candidates.append((onset, end))
    candidates.append((n - length, n))  # the tail, in case every onset is too late

    best, best_score = candidates[0], -math.inf
    for start, end in candidates:
        score = _window_score(levels_db, powers, speech, start // _FRAME, end // _FRAME)
        # Prefer more speech when scores tie closely: a few dB per 10 s.
        score += 0.3 * (end - start) / REFERENCE_RATE
        if score > best_score:
            best, best_score = (start, end), score
    return best


def _last_offset_within(segments: list[Segment], onset: int, limit: int) -> int | None:
    ends = [end for _, end in segments if onset < end <= limit]
    return max(ends) if ends else None


def _window_score(
    levels_db: np.ndarray, powers: np.ndarray, speech: np.ndarray, first: int, last: int
) -> float:
    window_powers = powers[first:last]
    window_speech = speech[first:last]
    if not window_speech.any():
        return -math.inf
    speech_power = float(np.mean(window_powers[window_speech]))
    floor = float(np.percentile(window_powers, 10))
    local_snr = 10.0 * math.log10(max(speech_power, 1e-12) / max(floor, 1e-12))
    spread = float(np.std(levels_db[first:last][window_speech]))
    return local_snr - 0.5 * spread


def _clip_segments(segments: list[Segment], start: int, end: int) -> list[Segment]:
    return [(max(s, start), min(e, end)) for s, e in segments if min(e, end) > max(s, start)]


def _seconds(segments: list[Segment]) -> float:
    return sum(e - s for s, e in segments) / REFERENCE_RATE
