"""Incremental encoders for streaming speech sentence by sentence.

Usage: ``enc = open_stream_encoder("mp3", 24000, out_rate=44100)``; send
``enc.header()``, then ``enc.feed(chunk)`` for each piece of audio as it is
synthesized, then ``enc.finish()``. Every call returns the bytes that are ready
now (possibly empty); concatenated they form one valid file.

Every format really streams (bytes leave on each ``feed``):

- pcm: raw s16le, nothing held back.
- wav: a RIFF header whose RIFF and data sizes are 0xFFFFFFFF ("unknown
  length"), which browsers, ffmpeg and libsndfile read to the end of the data.
- mp3: ``lameenc``; holds back at most about one MP3 frame plus LAME's look-ahead.
  A stream cannot carry the Xing/LAME gapless frame, so decoders play ~50-100 ms
  of extra leading/trailing silence, as with any streamed MP3.
- opus (Ogg), aac (ADTS), flac: PyAV muxing into a write-only sink. The Ogg
  muxer closes a page every 100 ms of audio so at most that much waits for the
  next ``feed``; ADTS and FLAC frames are written as soon as they are encoded.

Resampling to the output rate uses one ``soxr.ResampleStream`` per stream, which
keeps filter state across chunks so there is no click at chunk boundaries.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Protocol, cast

import lameenc
import numpy as np
import soxr

from voxclone.errors import InvalidInput
from voxclone.synth.audio.file_encode import (
    AAC_BITRATE_BPS,
    MP3_BITRATE_BPS,
    WAV_SUBTYPES,
    AudioFormat,
    as_mono_float32,
    check_rate,
    content_type,
    load_codecs,
    opus_encoding_rate,
    parse_format,
    to_pcm16,
)

if TYPE_CHECKING:
    from av.audio.stream import AudioStream


MP3_BITRATE_KBPS = MP3_BITRATE_BPS // 1000
# LAME quality 2 = near-best psychoacoustics; speech is cheap enough to afford it.
_LAME_QUALITY = 2
# Ogg page length bound in microseconds: the most audio an Opus stream holds back.
_OGG_PAGE_DURATION_US = 100_000
_UNKNOWN_LENGTH = 0xFFFFFFFF


class StreamEncoder(Protocol):
    """An encoder that turns successive audio chunks into successive bytes of one file."""

    format: AudioFormat
    sample_rate: int  # rate of the encoded audio
    content_type: str

    def header(self) -> bytes: ...

    def feed(self, chunk: np.ndarray) -> bytes: ...

    def finish(self) -> bytes: ...

    def close(self) -> None: ...


class _ChunkResampler:
    """Stateful resampler from the engine rate to the output rate (identity when equal)."""

    def __init__(self, sr_in: int, sr_out: int) -> None:
        self._stream: soxr.ResampleStream | None = None
        if sr_in != sr_out:
            self._stream = soxr.ResampleStream(sr_in, sr_out, 1, dtype="float32", quality="HQ")

    def push(self, chunk: np.ndarray, *, last: bool = False) -> np.ndarray:
        if self._stream is None:
            return chunk
        return np.asarray(self._stream.resample_chunk(chunk, last=last), dtype=np.float32)


class _BaseStreamEncoder:
    """Shared plumbing: input validation, resampling, and the finished state."""

    def __init__(self, audio_format: AudioFormat, sr_in: int, encoded_rate: int) -> None:
        self.format = audio_format
        self.sample_rate = encoded_rate
        self.content_type = content_type(audio_format)
        self._resampler = _ChunkResampler(sr_in, encoded_rate)
        self._finished = False

    def header(self) -> bytes:
        return b""

    def feed(self, chunk: np.ndarray) -> bytes:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        samples = self._resampler.push(as_mono_float32(chunk))
        return self._encode(samples) if samples.size else b""

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        tail = self._resampler.push(np.zeros(0, dtype=np.float32), last=True)
        data = self._encode(tail) if tail.size else b""
        return data + self._flush()

    def close(self) -> None:
        self._finished = True

    def _encode(self, samples: np.ndarray) -> bytes:
        raise NotImplementedError

    def _flush(self) -> bytes:
        return b""


class PcmStreamEncoder(_BaseStreamEncoder):
    def __init__(self, sr_in: int, out_rate: int) -> None:
        super().__init__(AudioFormat.PCM, sr_in, out_rate)

    def _encode(self, samples: np.ndarray) -> bytes:
        return to_pcm16(samples).tobytes()


class WavStreamEncoder(_BaseStreamEncoder):
    """WAV with an open-ended RIFF header, then raw sample data."""

    _BITS = {"PCM_16": 16, "PCM_24": 24, "FLOAT": 32}

    def __init__(self, sr_in: int, out_rate: int, subtype: str = "PCM_16") -> None:
        if subtype not in WAV_SUBTYPES:
            raise InvalidInput(
                f"Unsupported WAV subtype {subtype!r}; allowed: {', '.join(WAV_SUBTYPES)}.",
                field="wav_subtype",
                limit=list(WAV_SUBTYPES),
            )
        super().__init__(AudioFormat.WAV, sr_in, out_rate)
        self._subtype = subtype

    def header(self) -> bytes:
        bits = self._BITS[self._subtype]
        format_tag = 3 if self._subtype == "FLOAT" else 1  # 3 = IEEE float, 1 = integer PCM
        block_align = bits // 8
        fmt_chunk = struct.pack(
            "<4sIHHIIHH",
            b"fmt ",
            16,
            format_tag,
            1,
            self.sample_rate,
            self.sample_rate * block_align,
            block_align,
            bits,
        )
        return (
            struct.pack("<4sI4s", b"RIFF", _UNKNOWN_LENGTH, b"WAVE")
            + fmt_chunk
            + struct.pack("<4sI", b"data", _UNKNOWN_LENGTH)
        )

    def _encode(self, samples: np.ndarray) -> bytes:
        if self._subtype == "PCM_16":
            return to_pcm16(samples).tobytes()
        if self._subtype == "FLOAT":
            return samples.astype("<f4").tobytes()
        as_int32 = np.round(np.clip(samples, -1.0, 1.0) * 8388607.0).astype("<i4")
        # Little-endian 24-bit = the three low bytes of each little-endian int32.
        return as_int32.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()


class Mp3StreamEncoder(_BaseStreamEncoder):
    """CBR mono MP3 through lameenc (emits complete frames as they fill)."""

    def __init__(self, sr_in: int, out_rate: int) -> None:
        super().__init__(AudioFormat.MP3, sr_in, out_rate)
        self._lame = lameenc.Encoder()
        self._lame.set_bit_rate(MP3_BITRATE_KBPS)
        self._lame.set_in_sample_rate(out_rate)
        self._lame.set_channels(1)
        self._lame.set_quality(_LAME_QUALITY)

    def _encode(self, samples: np.ndarray) -> bytes:
        return bytes(self._lame.encode(to_pcm16(samples).tobytes()))

    def _flush(self) -> bytes:
        return bytes(self._lame.flush())


class _ByteSink:
    """Write-only file object for PyAV. Having no ``seek`` tells the muxer it
    cannot go back, so it writes everything in order and we can forward it."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def write(self, data: bytes) -> int:
        self._pending += data
        return len(data)

    def take(self) -> bytes:
        data = bytes(self._pending)
        self._pending.clear()
        return data


class PyAVStreamEncoder(_BaseStreamEncoder):
    """Encoder + muxer from PyAV writing to an in-memory sink drained on every call."""

    def __init__(
        self,
        audio_format: AudioFormat,
        sr_in: int,
        encoded_rate: int,
        *,
        codec: str,
        container: str,
        sample_format: str,
        bit_rate: int | None = None,
        container_options: dict[str, str] | None = None,
    ) -> None:
        super().__init__(audio_format, sr_in, encoded_rate)
        self._sink = _ByteSink()
        # flush_packets: push every muxed packet to the sink instead of buffering 32 KiB.
        options = {"flush_packets": "1", **(container_options or {})}
        self._av = load_codecs()
        self._container = self._av.open(self._sink, "w", format=container, options=options)
        self._stream = cast("AudioStream", self._container.add_stream(codec, rate=encoded_rate))
        self._stream.layout = "mono"
        if bit_rate is not None:
            self._stream.bit_rate = bit_rate
        self._sample_format = sample_format
        self._closed = False

    def header(self) -> bytes:
        self._container.start_encoding()
        return self._sink.take()

    def _encode(self, samples: np.ndarray) -> bytes:
        data = to_pcm16(samples) if self._sample_format == "s16" else samples
        frame = self._av.AudioFrame.from_ndarray(
            data[None, :], format=self._sample_format, layout="mono"
        )
        frame.sample_rate = self.sample_rate
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.take()

    def _flush(self) -> bytes:
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._close_container()
        return self._sink.take()

    def close(self) -> None:
        super().close()
        self._close_container()

    def _close_container(self) -> None:
        if not self._closed:
            self._closed = True
            self._container.close()


def open_stream_encoder(
    fmt: str | AudioFormat,
    sr_in: int,
    *,
    out_rate: int | None = None,
    wav_subtype: str = "PCM_16",
) -> StreamEncoder:
    """Create the streaming encoder for ``fmt``; input chunks are mono at ``sr_in`` Hz."""
    audio_format = parse_format(fmt)
    rate = check_rate(out_rate if out_rate is not None else sr_in)
    if audio_format is AudioFormat.PCM:
        return PcmStreamEncoder(sr_in, rate)
    if audio_format is AudioFormat.WAV:
        return WavStreamEncoder(sr_in, rate, wav_subtype)
    if audio_format is AudioFormat.MP3:
        return Mp3StreamEncoder(sr_in, rate)
    if audio_format is AudioFormat.OPUS:
        return PyAVStreamEncoder(
            audio_format,
            sr_in,
            opus_encoding_rate(rate),
            codec="libopus",
            container="ogg",
            sample_format="flt",
            container_options={"page_duration": str(_OGG_PAGE_DURATION_US)},
        )
    if audio_format is AudioFormat.AAC:
        return PyAVStreamEncoder(
            audio_format,
            sr_in,
            rate,
            codec="aac",
            container="adts",
            sample_format="fltp",
            bit_rate=AAC_BITRATE_BPS,
        )
    return PyAVStreamEncoder(
        audio_format, sr_in, rate, codec="flac", container="flac", sample_format="s16"
    )
