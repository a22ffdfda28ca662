"""Whole-file encoding of mono float audio to every output format we serve.

Input is mono float audio in [-1, 1] (the engine produces float32 at 24 kHz).
Each format goes through the library that produces the most correct file:

- WAV, FLAC, Ogg-Opus: libsndfile (``soundfile``).
- MP3: PyAV's ``libmp3lame``. Not ``lameenc``, because only a muxer that can
  seek back writes the Xing/LAME info frame carrying encoder delay and padding;
  without it every decoder plays 50-110 ms of extra silence and reports a wrong
  duration. (Streaming MP3 has no such choice and uses ``lameenc``; see
  ``stream_encode``.)
- AAC: PyAV's native ``aac`` encoder in an ADTS stream (``audio/aac``), the
  container that browsers and OpenAI clients accept and that needs no seeking.
- PCM: raw signed 16-bit little-endian mono, as OpenAI's ``pcm`` format.
"""

from __future__ import annotations

import io
from enum import StrEnum
from types import ModuleType
from typing import TYPE_CHECKING, cast

import numpy as np
import soundfile as sf
import soxr

from voxclone.errors import InvalidInput

if TYPE_CHECKING:
    from av.audio.stream import AudioStream


def load_codecs() -> ModuleType:
    """PyAV (FFmpeg), imported where Opus, AAC, MP4 or an odd input container
    is first met: ~75 ms of import that a one-shot WAV ``say`` never needs
    (issue #20). A serving process calls this at start instead, so its first
    such request does not pay it (bootstrap.build_runtime)."""
    import av

    return av


SUPPORTED_RATES: tuple[int, ...] = (16000, 22050, 24000, 44100, 48000)

# Rates libopus can run at. Other requested rates are encoded at 48 kHz: Opus
# decoders output 48 kHz whatever the header says, so 48 kHz is the rate the
# client really gets, and it loses nothing from a 22.05/44.1 kHz request.
OPUS_NATIVE_RATES: tuple[int, ...] = (8000, 12000, 16000, 24000, 48000)
OPUS_FALLBACK_RATE = 48000

MP3_BITRATE_BPS = 128_000
AAC_BITRATE_BPS = 96_000
WAV_SUBTYPES: tuple[str, ...] = ("PCM_16", "PCM_24", "FLOAT")


class AudioFormat(StrEnum):
    WAV = "wav"
    MP3 = "mp3"
    OPUS = "opus"
    FLAC = "flac"
    PCM = "pcm"
    AAC = "aac"


_CONTENT_TYPES: dict[AudioFormat, str] = {
    AudioFormat.WAV: "audio/wav",
    AudioFormat.MP3: "audio/mpeg",
    AudioFormat.OPUS: "audio/ogg",
    AudioFormat.FLAC: "audio/flac",
    # audio/L16 would promise big-endian samples (RFC 2586); ours are little-endian.
    AudioFormat.PCM: "audio/pcm",
    AudioFormat.AAC: "audio/aac",
}

_EXTENSIONS: dict[AudioFormat, str] = {
    AudioFormat.WAV: "wav",
    AudioFormat.MP3: "mp3",
    AudioFormat.OPUS: "opus",
    AudioFormat.FLAC: "flac",
    AudioFormat.PCM: "pcm",
    AudioFormat.AAC: "aac",
}


def parse_format(fmt: str | AudioFormat) -> AudioFormat:
    """Return the AudioFormat named by ``fmt`` (case-insensitive) or raise InvalidInput."""
    if isinstance(fmt, AudioFormat):
        return fmt
    try:
        return AudioFormat(str(fmt).strip().lower())
    except ValueError:
        allowed = [f.value for f in AudioFormat]
        raise InvalidInput(
            f"Unsupported response_format {fmt!r}; allowed: {', '.join(allowed)}.",
            field="response_format",
            limit=allowed,
            value=str(fmt),
        ) from None


def check_rate(rate: int) -> int:
    """Return ``rate`` if it is an output rate we serve, else raise InvalidInput."""
    if rate not in SUPPORTED_RATES:
        raise InvalidInput(
            f"Unsupported sample_rate {rate}; allowed: {', '.join(map(str, SUPPORTED_RATES))}.",
            field="sample_rate",
            limit=list(SUPPORTED_RATES),
            value=rate,
        )
    return rate


def content_type(fmt: str | AudioFormat) -> str:
    """MIME type to send with audio of format ``fmt``."""
    return _CONTENT_TYPES[parse_format(fmt)]


def file_extension(fmt: str | AudioFormat) -> str:
    """File-name extension (without dot) for downloads of format ``fmt``."""
    return _EXTENSIONS[parse_format(fmt)]


def opus_encoding_rate(rate: int) -> int:
    """The rate an Opus stream is encoded at when ``rate`` is requested."""
    return rate if rate in OPUS_NATIVE_RATES else OPUS_FALLBACK_RATE


def as_mono_float32(x: np.ndarray) -> np.ndarray:
    """Validate engine output and return it as contiguous 1-D float32 without NaN/inf."""
    arr = np.asarray(x)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InvalidInput(f"Audio must be mono (1-D); got shape {arr.shape}.", field="audio")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        arr = np.nan_to_num(arr, nan=0.0, posinf=1.0, neginf=-1.0)
    return arr


def to_pcm16(x: np.ndarray) -> np.ndarray:
    """Float [-1, 1] → int16, clipping (the limiter upstream keeps us below full scale)."""
    return np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype("<i2")


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    if sr_in == sr_out:
        return x
    return np.asarray(soxr.resample(x, sr_in, sr_out, quality="HQ"), dtype=np.float32)


def encode(
    x: np.ndarray,
    sr: int,
    fmt: str | AudioFormat,
    *,
    out_rate: int | None = None,
    wav_subtype: str = "PCM_16",
) -> bytes:
    """Encode mono audio ``x`` at ``sr`` Hz into ``fmt`` at ``out_rate`` (default: ``sr``)."""
    audio_format = parse_format(fmt)
    rate = check_rate(out_rate if out_rate is not None else sr)
    if wav_subtype not in WAV_SUBTYPES:
        raise InvalidInput(
            f"Unsupported WAV subtype {wav_subtype!r}; allowed: {', '.join(WAV_SUBTYPES)}.",
            field="wav_subtype",
            limit=list(WAV_SUBTYPES),
        )
    samples = as_mono_float32(x)
    if audio_format is AudioFormat.OPUS:
        rate = opus_encoding_rate(rate)
    samples = resample(samples, sr, rate)

    if audio_format is AudioFormat.PCM:
        return to_pcm16(samples).tobytes()
    if audio_format is AudioFormat.WAV:
        return _soundfile_bytes(samples, rate, "WAV", wav_subtype)
    if audio_format is AudioFormat.FLAC:
        return _soundfile_bytes(samples, rate, "FLAC", "PCM_16")
    if audio_format is AudioFormat.OPUS:
        return _soundfile_bytes(samples, rate, "OGG", "OPUS")
    if audio_format is AudioFormat.MP3:
        return _pyav_bytes(
            samples, rate, codec="libmp3lame", container="mp3", bit_rate=MP3_BITRATE_BPS
        )
    return _pyav_bytes(samples, rate, codec="aac", container="adts", bit_rate=AAC_BITRATE_BPS)


def _soundfile_bytes(samples: np.ndarray, rate: int, container: str, subtype: str) -> bytes:
    buf = io.BytesIO()
    # Integer subtypes clip on their own; keep float WAV untouched (values > 1 are legal there).
    sf.write(buf, samples, rate, format=container, subtype=subtype)
    return buf.getvalue()


# PyAV splits frames to the codec's frame size itself; this only bounds memory per call.
_PYAV_FRAME_SAMPLES = 8192


def _pyav_bytes(
    samples: np.ndarray, rate: int, *, codec: str, container: str, bit_rate: int
) -> bytes:
    av = load_codecs()
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = cast("AudioStream", out.add_stream(codec, rate=rate))
        stream.layout = "mono"
        stream.bit_rate = bit_rate
        for start in range(0, len(samples), _PYAV_FRAME_SAMPLES):
            block = samples[start : start + _PYAV_FRAME_SAMPLES]
            frame = av.AudioFrame.from_ndarray(block[None, :], format="fltp", layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()
