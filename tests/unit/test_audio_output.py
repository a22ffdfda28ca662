"""Encoding to every output format, whole-file and streaming, decoded back."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
import soundfile as sf
import soxr

from voxclone.errors import InvalidInput
from voxclone.synth.audio.file_encode import (
    SUPPORTED_RATES,
    AudioFormat,
    content_type,
    encode,
    file_extension,
)
from voxclone.synth.audio.join import PieceJoiner, join_with_pauses
from voxclone.synth.audio.stream_encode import open_stream_encoder

ENGINE_SR = 24000
ALL_FORMATS = [f.value for f in AudioFormat]
# Codecs whose frames pad the end / prime the start (AAC: 1024 priming samples +
# up to one 1024-sample frame; streamed MP3: LAME delay + up to one frame, since a
# stream cannot carry the gapless info frame).
_CODEC_SLACK_SAMPLES = {"aac": 2048 + 1024, "mp3": 1105 + 1152}


def speechlike(seconds: float, sr: int = ENGINE_SR) -> np.ndarray:
    """Harmonic tone at ~150 Hz with a slow amplitude envelope, peak about 0.5."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = 150.0 * (1.0 + 0.03 * np.sin(2 * np.pi * 5.0 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 20))
    envelope = 0.5 + 0.4 * np.sin(2 * np.pi * 1.3 * t)
    y = harmonics * envelope
    return (0.5 * y / np.max(np.abs(y))).astype(np.float32)


def decode(data: bytes, fmt: str, pcm_rate: int) -> tuple[np.ndarray, int]:
    """Decode with soundfile where it reads the format (it reports the declared
    rate), else with PyAV."""
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, pcm_rate
    if fmt in ("wav", "opus", "flac"):
        y, rate = sf.read(io.BytesIO(data), dtype="float32")
        return y, rate
    chunks: list[np.ndarray] = []
    rate = 0
    with av.open(io.BytesIO(data), "r") as container:
        for frame in container.decode(audio=0):
            samples: np.ndarray = frame.to_ndarray().reshape(-1)
            if samples.dtype.kind == "i":  # FLAC decodes to s16/s32
                samples = samples / float(2 ** (8 * samples.dtype.itemsize - 1))
            chunks.append(samples.astype(np.float32))
            rate = frame.sample_rate
    return np.concatenate(chunks), rate


def expected_rate(fmt: str, requested: int) -> int:
    if fmt == "opus" and requested not in (16000, 24000, 48000):
        return 48000  # documented: Opus has no 22.05/44.1 kHz mode
    return requested


def assert_duration(fmt: str, decoded: int, rate: int, seconds: float, *, slack: int = 0) -> None:
    got = decoded / rate
    tolerance = max(0.02 * seconds, 0.060) + slack / rate
    assert abs(got - seconds) <= tolerance, f"{fmt}@{rate}: {got:.3f}s vs {seconds:.3f}s"


def rms_db(x: np.ndarray) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + 1e-12))


@pytest.mark.parametrize("rate", SUPPORTED_RATES)
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_encode_every_format_and_rate_round_trips(fmt: str, rate: int) -> None:
    x = speechlike(1.5)
    data = encode(x, ENGINE_SR, fmt, out_rate=rate)
    y, got_rate = decode(data, fmt, rate)
    assert got_rate == expected_rate(fmt, rate)
    # Whole-file MP3 carries the gapless info frame, so only AAC needs codec slack.
    assert_duration(
        fmt, len(y), got_rate, 1.5, slack=_CODEC_SLACK_SAMPLES["aac"] if fmt == "aac" else 0
    )
    # The audio itself survived: level within 1.5 dB (lossy codecs, resampling).
    assert abs(rms_db(y) - rms_db(x)) < 1.5


def test_mp3_whole_file_is_gapless() -> None:
    x = speechlike(1.0)
    y, rate = decode(encode(x, ENGINE_SR, "mp3"), "mp3", ENGINE_SR)
    assert abs(len(y) - len(x)) <= 1


def test_wav_pcm16_is_exact_at_engine_rate() -> None:
    x = speechlike(0.5)
    y, rate = sf.read(io.BytesIO(encode(x, ENGINE_SR, "wav")), dtype="float32")
    assert rate == ENGINE_SR
    np.testing.assert_allclose(y, x, atol=1.0 / 32767)


@pytest.mark.parametrize(
    ("subtype", "expected"), [("PCM_24", "PCM_24"), ("FLOAT", "FLOAT"), ("PCM_16", "PCM_16")]
)
def test_wav_subtypes(subtype: str, expected: str) -> None:
    data = encode(speechlike(0.3), ENGINE_SR, "wav", wav_subtype=subtype)
    assert sf.info(io.BytesIO(data)).subtype == expected


def test_pcm_is_raw_s16le() -> None:
    x = np.array([0.0, 0.5, -0.5, 1.5], dtype=np.float32)
    data = encode(x, ENGINE_SR, "pcm")
    assert np.frombuffer(data, "<i2").tolist() == [0, 16384, -16384, 32767]


def test_bad_format_and_rate_are_rejected_with_allowed_values() -> None:
    with pytest.raises(InvalidInput) as bad_format:
        encode(speechlike(0.1), ENGINE_SR, "ogg-vorbis")
    assert bad_format.value.field == "response_format"
    assert "mp3" in bad_format.value.limit
    with pytest.raises(InvalidInput) as bad_rate:
        encode(speechlike(0.1), ENGINE_SR, "wav", out_rate=32000)
    assert bad_rate.value.field == "sample_rate"
    assert bad_rate.value.limit == list(SUPPORTED_RATES)


def test_format_names_are_case_insensitive_and_typed() -> None:
    assert content_type("MP3") == "audio/mpeg"
    assert content_type(AudioFormat.OPUS) == "audio/ogg"
    assert {content_type(f) for f in ALL_FORMATS} == {
        "audio/wav",
        "audio/mpeg",
        "audio/ogg",
        "audio/flac",
        "audio/pcm",
        "audio/aac",
    }
    assert file_extension("flac") == "flac"


# ------------------------------------------------------------------ streaming


@pytest.mark.parametrize("rate", [24000, 44100, 16000])
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_stream_concatenation_decodes_to_full_duration(fmt: str, rate: int) -> None:
    pieces = [speechlike(s) for s in (0.7, 0.45, 0.9)]
    encoder = open_stream_encoder(fmt, ENGINE_SR, out_rate=rate)
    parts = [encoder.header()] + [encoder.feed(p) for p in pieces] + [encoder.finish()]
    data = b"".join(parts)
    # Streamed FLAC declares an unknown length, which libsndfile's one-shot read
    # cannot size a buffer for; decode it with FFmpeg, as players do.
    y, got_rate = decode(data, "ffmpeg" if fmt == "flac" else fmt, rate)
    assert got_rate == expected_rate(fmt, rate)
    seconds = sum(len(p) for p in pieces) / ENGINE_SR
    assert_duration(fmt, len(y), got_rate, seconds, slack=_CODEC_SLACK_SAMPLES.get(fmt, 0))


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_stream_emits_bytes_before_finish(fmt: str) -> None:
    encoder = open_stream_encoder(fmt, ENGINE_SR, out_rate=ENGINE_SR)
    header = encoder.header()
    first = encoder.feed(speechlike(0.8))
    second = encoder.feed(speechlike(0.8))
    last = encoder.finish()
    assert len(first) > 0 and len(second) > 0
    # Most of the audio left during feed(), not at the end.
    assert len(header) + len(first) + len(second) > 2 * len(last)


def test_wav_stream_header_declares_unknown_length() -> None:
    encoder = open_stream_encoder("wav", ENGINE_SR)
    header = encoder.header()
    assert header[:4] == b"RIFF" and header[8:12] == b"WAVE"
    assert header[4:8] == b"\xff\xff\xff\xff" and header[-4:] == b"\xff\xff\xff\xff"


def test_stream_resampling_has_no_seams_at_chunk_boundaries() -> None:
    x = speechlike(1.0)
    # Odd chunk sizes so boundaries fall everywhere in the resampler's phase.
    bounds = [0, 1001, 1777, 5003, 9000, 13331, len(x)]
    encoder = open_stream_encoder("pcm", ENGINE_SR, out_rate=44100)
    data = b"".join(encoder.feed(x[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
    data += encoder.finish()
    streamed = np.frombuffer(data, "<i2").astype(np.float32) / 32767.0
    whole = soxr.resample(x, ENGINE_SR, 44100, quality="HQ")
    assert abs(len(streamed) - len(whole)) <= 2
    n = min(len(streamed), len(whole))
    assert np.max(np.abs(streamed[:n] - whole[:n])) < 2e-3


def test_feed_after_finish_is_an_error() -> None:
    encoder = open_stream_encoder("pcm", ENGINE_SR)
    encoder.finish()
    with pytest.raises(RuntimeError):
        encoder.feed(speechlike(0.1))


def test_stream_rejects_unsupported_rate() -> None:
    with pytest.raises(InvalidInput) as err:
        open_stream_encoder("mp3", ENGINE_SR, out_rate=8000)
    assert err.value.field == "sample_rate"


# ------------------------------------------------------------------ joining


def tone_piece(
    lead_s: float, tone_s: float, trail_s: float, *, hz: float = 200.0, phase: float = 0.0
) -> np.ndarray:
    """Silence, an abruptly starting/ending 0.5-amplitude tone, silence."""
    t = np.arange(int(round(tone_s * ENGINE_SR))) / ENGINE_SR
    tone = 0.5 * np.sin(2 * np.pi * hz * t + phase)
    return np.concatenate(
        [np.zeros(int(round(lead_s * ENGINE_SR))), tone, np.zeros(int(round(trail_s * ENGINE_SR)))]
    ).astype(np.float32)


def audible_runs(
    y: np.ndarray, threshold: float = 1e-3, min_gap_s: float = 0.02
) -> list[tuple[int, int]]:
    """[start, end) ranges where |y| > threshold, merging short gaps (zero crossings)."""
    loud = np.nonzero(np.abs(y) > threshold)[0]
    runs: list[tuple[int, int]] = []
    for index in map(int, loud):
        if runs and index - runs[-1][1] < min_gap_s * ENGINE_SR:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    return runs


def test_join_honours_pause_lengths_between_audible_parts() -> None:
    # Tone edges on the 10 ms analysis grid so the expected gaps are exact.
    pieces = [
        (tone_piece(0.20, 0.50, 0.30), 0.40),
        (tone_piece(0.01, 0.40, 0.00), 0.15),  # short pads: joiner must add silence
        (tone_piece(0.30, 0.30, 0.30), 0.25),
    ]
    joined = join_with_pauses(pieces, ENGINE_SR)
    runs = audible_runs(joined)
    assert len(runs) == 3
    gaps = [(b[0] - a[1]) / ENGINE_SR for a, b in zip(runs, runs[1:], strict=False)]
    assert gaps == pytest.approx([0.40, 0.15], abs=0.003)
    # The final pause is kept as trailing silence; leading silence shrinks to the pad.
    assert (len(joined) - runs[-1][1]) / ENGINE_SR == pytest.approx(0.25, abs=0.003)
    assert runs[0][0] / ENGINE_SR == pytest.approx(0.030, abs=0.003)


def test_join_has_no_clicks_at_joins() -> None:
    # Tones that end and start abruptly, out of phase: a plain concatenation jumps by ~1.0.
    a = tone_piece(0.0, 0.3, 0.0, hz=200.0, phase=np.pi / 2)
    b = tone_piece(0.0, 0.3, 0.0, hz=310.0, phase=-np.pi / 2)
    max_tone_step = 2 * np.pi * 310.0 * 0.5 / ENGINE_SR
    naive = np.concatenate([a, b])
    assert np.max(np.abs(np.diff(naive))) > 0.5
    for pause in (0.0, 0.2):
        joined = join_with_pauses([(a, pause), (b, pause)], ENGINE_SR)
        steps = np.abs(np.diff(np.concatenate([[0.0], joined, [0.0]])))
        assert np.max(steps) < 2.0 * max_tone_step, pause


def test_crossfade_shortens_by_the_overlap() -> None:
    a, b = tone_piece(0.0, 0.3, 0.0), tone_piece(0.0, 0.2, 0.0)
    joined = join_with_pauses([(a, 0.0), (b, 0.0)], ENGINE_SR, crossfade_ms=10)
    assert len(joined) == len(a) + len(b) - int(0.010 * ENGINE_SR)


def test_piece_joiner_emits_each_piece_immediately_and_keeps_only_a_short_tail() -> None:
    joiner = PieceJoiner(ENGINE_SR, crossfade_ms=10)
    piece = tone_piece(0.0, 0.5, 0.0)
    out = joiner.feed(piece, 0.0)
    assert len(out) == len(piece) - int(0.010 * ENGINE_SR)
    out = joiner.feed(piece, 0.3)
    # Everything of this piece is out, plus the pause minus the pad kept for the next piece.
    assert len(out) == len(piece) + int(0.3 * ENGINE_SR) - int(0.030 * ENGINE_SR)
    assert len(joiner.finish()) == int(0.030 * ENGINE_SR)


def test_silent_piece_contributes_only_its_pause() -> None:
    pieces = [
        (tone_piece(0, 0.2, 0), 0.1),
        (np.zeros(ENGINE_SR, dtype=np.float32), 0.5),
        (tone_piece(0, 0.2, 0), 0.0),
    ]
    runs = audible_runs(join_with_pauses(pieces, ENGINE_SR))
    assert (runs[1][0] - runs[0][1]) / ENGINE_SR == pytest.approx(0.6, abs=0.003)


def test_negative_pause_is_rejected() -> None:
    with pytest.raises(InvalidInput) as err:
        PieceJoiner(ENGINE_SR).feed(tone_piece(0, 0.1, 0), -1.0)
    assert err.value.field == "pause"
