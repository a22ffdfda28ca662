"""Decode an uploaded audio file (bytes) into mono float32 samples.

The container is recognised from its first bytes; a client-supplied file name
or MIME type is never trusted. libsndfile (via ``soundfile``) handles what it
can read (WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF); PyAV decodes MP4/M4A (AAC),
WebM/Matroska (Opus from browser MediaRecorder) and raw ADTS AAC, and is the
fallback for WAV/MP3/Ogg variants libsndfile cannot open.

Untrusted input, so every path is bounded:

* the byte size is checked before anything is parsed;
* the duration the header declares (frame count, stream duration) is checked
  before samples are decoded;
* decoding stops as soon as the decoded length passes the cap, for streams
  whose header lies or carries no duration (decompression bombs);
* PyAV is always told which demuxer to use, so FFmpeg never probes the bytes
  itself (its playlist-style demuxers could otherwise be steered to open
  other resources).
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass

import numpy as np
import soundfile as sf

from voxclone.errors import AudioQualityError, PayloadTooLarge, UnsupportedMedia
from voxclone.synth.audio.file_encode import load_codecs

ACCEPTED_FORMATS = "WAV, FLAC, MP3, Ogg (Vorbis or Opus), M4A/AAC, WebM/Opus"

# Header values outside these bounds are treated as corrupt: they would make
# the sample cap (seconds x rate x channels) meaningless or huge.
_MIN_RATE = 1_000
_MAX_RATE = 384_000
_MAX_CHANNELS = 32
_SF_BLOCK_FRAMES = 65_536
# Formats whose header frame count is exact (not an estimate), so a shortfall
# when decoding proves truncation.
_EXACT_LENGTH_FORMATS = frozenset({"WAV", "WAVEX", "FLAC", "AIFF"})

# Below this magnitude a sample is digital silence (codec padding), not sound:
# -80 dBFS (audible_span).
_DIGITAL_SILENCE = 1e-4

# WAV writers that stream to a pipe put one of these in the size fields when
# the final length is unknown; they mean "unknown", not "4 GiB".
_WAV_UNKNOWN_SIZES = (0, 0xFFFFFFFF)
# A header may round the data size; anything beyond this shortfall means the
# file was cut off.
_TRUNCATION_TOLERANCE_BYTES = 64


@dataclass(frozen=True)
class Container:
    name: str  # human-readable, used in messages
    soundfile: bool  # libsndfile can read it
    av_format: str | None  # FFmpeg demuxer to force, None when PyAV is not used


_WAV = Container("WAV", True, "wav")
_AIFF = Container("AIFF", True, "aiff")
_FLAC = Container("FLAC", True, "flac")
_OGG = Container("Ogg", True, "ogg")
_MP3 = Container("MP3", True, "mp3")
_MP4 = Container("MP4/M4A", False, "mp4")
_MATROSKA = Container("WebM/Matroska", False, "matroska")
_ADTS = Container("AAC (ADTS)", False, "aac")


def decode_audio(data: bytes, *, max_bytes: int, max_seconds: float) -> tuple[np.ndarray, int]:
    """Return ``(samples, sample_rate)``: mono float32 in [-1, 1].

    Raises PayloadTooLarge (too many bytes or seconds), UnsupportedMedia
    (not audio, unknown container, corrupt or truncated data) and
    AudioQualityError (decodes to zero samples).
    """
    if len(data) > max_bytes:
        raise PayloadTooLarge(
            f"audio file is {len(data)} bytes; at most {max_bytes} bytes are accepted",
            field="audio",
            limit=max_bytes,
            value=len(data),
        )
    if not data:
        raise UnsupportedMedia("audio file is empty", field="audio")
    container = sniff_container(data)
    if container is None:
        raise UnsupportedMedia(
            f"audio format not recognised; accepted formats: {ACCEPTED_FORMATS}",
            field="audio",
        )
    if container is _WAV:
        _check_wav_header(data, max_seconds)

    samples, rate = _decode_container(data, container, max_seconds)
    return _finish(samples), rate


def sniff_container(data: bytes) -> Container | None:
    """Recognise the container from magic bytes; None when unknown."""
    head = data[:16]
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return _WAV
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return _AIFF
    if head[:4] == b"fLaC":
        return _FLAC
    if head[:4] == b"OggS":
        return _OGG
    if head[4:8] == b"ftyp":
        return _MP4
    if head[:4] == b"\x1a\x45\xdf\xa3":  # EBML magic: WebM and Matroska
        return _MATROSKA
    if head[:3] == b"ID3":
        # An ID3v2 tag precedes MPEG audio (rarely ADTS); look past it.
        return _sniff_after_id3(data)
    return _sniff_frame_sync(head)


def _sniff_after_id3(data: bytes) -> Container | None:
    if len(data) < 10:
        return None
    size_bytes = data[6:10]
    # The tag size is a "synchsafe" integer: 7 bits per byte.
    tag_size = 0
    for b in size_bytes:
        tag_size = (tag_size << 7) | (b & 0x7F)
    offset = 10 + tag_size + (10 if data[5] & 0x10 else 0)  # optional footer
    found = _sniff_frame_sync(data[offset : offset + 4])
    # Some encoders pad after the tag; libsndfile/FFmpeg resync, so an ID3
    # tag followed by anything is treated as MP3 and left to the decoder.
    return found or _MP3


def _sniff_frame_sync(head: bytes) -> Container | None:
    if len(head) < 3 or head[0] != 0xFF or (head[1] & 0xE0) != 0xE0:
        return None
    layer = (head[1] >> 1) & 0x03
    if layer == 0:
        # ADTS (AAC) shares the 12-bit sync with MPEG audio but has layer 00.
        return _ADTS
    bitrate_index, rate_index = head[2] >> 4, (head[2] >> 2) & 0x03
    version = (head[1] >> 3) & 0x03
    # Reserved values: these bytes only look like a frame header by chance.
    if version == 1 or bitrate_index == 0x0F or rate_index == 0x03:
        return None
    return _MP3


# --------------------------------------------------------------------------- WAV header


def _check_wav_header(data: bytes, max_seconds: float) -> None:
    """Refuse a RIFF/WAVE file whose declared duration is too long, or that is cut off.

    libsndfile silently shrinks an oversized data-chunk length to what is
    present, so the declared length is read here, before any decoding.
    """
    if data[:4] != b"RIFF":
        return  # RF64 keeps its sizes in a ds64 chunk; the decode cap covers it.
    fmt: tuple[int, int, int] | None = None  # channels, rate, block_align
    pos = 12
    while pos + 8 <= len(data):
        chunk_id = data[pos : pos + 4]
        (chunk_size,) = struct.unpack_from("<I", data, pos + 4)
        body = pos + 8
        if chunk_id == b"fmt " and chunk_size >= 16 and body + 16 <= len(data):
            _tag, channels, rate, _bps, block_align = struct.unpack_from("<HHIIH", data, body)
            fmt = (channels, rate, block_align)
        elif chunk_id == b"data":
            if fmt is None:
                raise UnsupportedMedia(
                    "WAV file has no format chunk before its data", field="audio"
                )
            _check_wav_data(fmt, chunk_size, available=len(data) - body, max_seconds=max_seconds)
            return
        pos = body + chunk_size + (chunk_size & 1)  # chunks are word-aligned
    raise UnsupportedMedia("WAV file is truncated or has no audio data", field="audio")


def _check_wav_data(
    fmt: tuple[int, int, int], declared: int, *, available: int, max_seconds: float
) -> None:
    channels, rate, block_align = fmt
    if (
        not (_MIN_RATE <= rate <= _MAX_RATE)
        or not (1 <= channels <= _MAX_CHANNELS)
        or block_align == 0
    ):
        raise UnsupportedMedia(
            "WAV header is corrupt (sample rate or channel count)", field="audio"
        )
    if declared in _WAV_UNKNOWN_SIZES:
        return
    declared_seconds = declared / block_align / rate
    _check_declared_duration(declared_seconds, max_seconds)
    if declared - available > _TRUNCATION_TOLERANCE_BYTES:
        raise UnsupportedMedia(
            f"WAV file is truncated: the header declares {declared_seconds:.1f} s "
            f"but only {available / block_align / rate:.1f} s are present",
            field="audio",
        )


def _check_declared_duration(seconds: float, max_seconds: float) -> None:
    if seconds > max_seconds:
        raise _too_long(seconds, max_seconds)


def _too_long(seconds: float, max_seconds: float) -> PayloadTooLarge:
    shown = "more than " if math.isinf(seconds) else ""
    measured = max_seconds if math.isinf(seconds) else seconds
    return PayloadTooLarge(
        f"audio is {shown}{measured:.1f} s long; at most {max_seconds:g} s are accepted",
        field="audio",
        limit=max_seconds,
        value=None if math.isinf(seconds) else round(seconds, 2),
    )


# --------------------------------------------------------------------------- decoding


def _decode_container(
    data: bytes, container: Container, max_seconds: float
) -> tuple[np.ndarray, int]:
    if container.soundfile:
        try:
            sound_file = sf.SoundFile(io.BytesIO(data))
        except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
            if container.av_format is None:
                raise _undecodable(container) from exc
            # libsndfile refuses some variants (e.g. unusual WAV codecs); FFmpeg may not.
        else:
            with sound_file:
                try:
                    return _decode_soundfile(sound_file, max_seconds)
                except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
                    # It opened but broke mid-stream: corrupt, not an unknown variant.
                    raise _undecodable(container) from exc
    assert container.av_format is not None
    try:
        return _decode_pyav(data, container.av_format, max_seconds)
    except (load_codecs().FFmpegError, OSError, ValueError, EOFError) as exc:
        raise _undecodable(container) from exc


def _undecodable(container: Container) -> UnsupportedMedia:
    return UnsupportedMedia(
        f"the {container.name} data could not be decoded (corrupt, truncated or not audio)",
        field="audio",
    )


def _decode_soundfile(f: sf.SoundFile, max_seconds: float) -> tuple[np.ndarray, int]:
    rate, channels = int(f.samplerate), int(f.channels)
    _check_rate_and_channels(rate, channels)
    # For MP3 the frame count is libsndfile's estimate; the cap below still
    # bounds the work when that estimate is wrong.
    declared = int(f.frames)
    if declared > 0:
        _check_declared_duration(declared / rate, max_seconds)
    cap = _sample_cap(max_seconds, rate)
    blocks: list[np.ndarray] = []
    total = 0
    for block in f.blocks(blocksize=_SF_BLOCK_FRAMES, dtype="float32", always_2d=True):
        blocks.append(_downmix(block.T))
        total += block.shape[0]
        if total > cap:
            raise _too_long(math.inf, max_seconds)
    # Lossless containers state an exact frame count; far fewer decoded frames
    # means the file was cut off (libsndfile reads what is there and stops).
    if f.format in _EXACT_LENGTH_FORMATS and total < declared * 0.98:
        raise UnsupportedMedia("audio file is truncated", field="audio")
    samples = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.float32)
    return samples, rate


def _decode_pyav(data: bytes, av_format: str, max_seconds: float) -> tuple[np.ndarray, int]:
    av = load_codecs()
    with av.open(io.BytesIO(data), mode="r", format=av_format) as container:
        if not container.streams.audio:
            raise UnsupportedMedia("the file contains no audio stream", field="audio")
        stream = container.streams.audio[0]
        codec = stream.codec_context
        if codec is None:
            # FFmpeg found an audio stream in a codec it has no decoder for.
            raise UnsupportedMedia(
                "the audio codec in this file is not supported; send WAV (PCM), FLAC, "
                "MP3, Ogg or M4A",
                field="audio",
            )
        rate = int(codec.sample_rate or 0)
        channels = int(codec.channels or 0)
        _check_rate_and_channels(rate, channels)
        declared = _declared_seconds(container, stream)
        if declared is not None:
            _check_declared_duration(declared, max_seconds)
        # Planar float keeps every channel separate so the downmix is a plain mean.
        resampler = av.AudioResampler(format="fltp")
        cap = _sample_cap(max_seconds, rate)
        chunks: list[np.ndarray] = []
        total = 0
        for frame in container.decode(stream):
            if frame.sample_rate != rate:
                raise UnsupportedMedia("audio changes sample rate mid-stream", field="audio")
            for converted in resampler.resample(frame):
                mono = _downmix(converted.to_ndarray())
                chunks.append(mono)
                total += mono.shape[0]
            if total > cap:
                raise _too_long(math.inf, max_seconds)
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return samples, rate


def _declared_seconds(container: object, stream: object) -> float | None:
    """Stream duration, else container duration, in seconds; None when unknown."""
    duration = getattr(stream, "duration", None)
    time_base = getattr(stream, "time_base", None)
    if duration is not None and time_base is not None and duration > 0:
        return float(duration * time_base)
    container_duration = getattr(container, "duration", None)
    if container_duration is not None and container_duration > 0:
        return container_duration / 1_000_000  # AV_TIME_BASE is microseconds
    return None


def audible_span(samples: np.ndarray) -> tuple[int, int]:
    """``[start, end)`` of ``samples`` from the first to the last audible sample:
    what is left when the leading and trailing digital silence is cut.

    Lossy encoders pad the start (encoder delay / priming) and the end of a
    stream; a decoder that finds no edit list or gapless tag in the file gives
    that padding back as samples. An FFmpeg-made M4A (AAC) decoded 1024
    samples at 44.1 kHz of |x| < 4e-5 before the speech: the whole reference
    23 ms late against the WAV of the same recording, which moved the speaker
    embedding to cosine 0.994 (studies/container_decision.py). Cut at both
    ends, every container starts at the first audible sample. The threshold
    (-80 dBFS, ~3 LSB of 16-bit) lies above codec padding and below a
    recording's noise floor (the quietest 10 ms of the two LibriSpeech clips
    in tests/data: -64 and -61 dBFS RMS). Audio silent throughout: the whole.
    """
    audible = np.flatnonzero(np.abs(samples) >= _DIGITAL_SILENCE)
    if audible.size == 0:
        return 0, int(samples.shape[0])
    return int(audible[0]), int(audible[-1]) + 1


def _check_rate_and_channels(rate: int, channels: int) -> None:
    if not (_MIN_RATE <= rate <= _MAX_RATE):
        raise UnsupportedMedia(
            f"unsupported sample rate {rate} Hz; accepted: {_MIN_RATE}-{_MAX_RATE} Hz",
            field="audio",
        )
    if not (1 <= channels <= _MAX_CHANNELS):
        raise UnsupportedMedia(
            f"unsupported channel count {channels}; accepted: 1-{_MAX_CHANNELS}", field="audio"
        )


def _sample_cap(max_seconds: float, rate: int) -> int:
    return math.ceil(max_seconds * rate)


def _downmix(channels_first: np.ndarray) -> np.ndarray:
    """Mean over channels; input shaped (channels, samples)."""
    if channels_first.shape[0] == 1:
        return np.asarray(channels_first[0], dtype=np.float32)
    return channels_first.mean(axis=0, dtype=np.float32)


def _finish(samples: np.ndarray) -> np.ndarray:
    if samples.size == 0:
        raise AudioQualityError("audio contains no samples", field="audio", value=0.0)
    if not np.all(np.isfinite(samples)):
        # Only float formats can carry these; such a file is corrupt, and
        # zeroing the values would hide that from the user.
        raise UnsupportedMedia("audio contains invalid (NaN or infinite) samples", field="audio")
    peak = float(np.max(np.abs(samples)))
    if peak > 1.0:
        # Float files may legitimately go above full scale. Scaling keeps the
        # waveform intact; hard-limiting would fake clipping.
        samples = samples / peak
    return samples.astype(np.float32, copy=False)
