"""Encoding a render's audio: as a stream of bytes, as one file, with word times.

The whole-file path uses the stream encoder into a spooled buffer and fixes
the WAV sizes at the end, so a long file is never held as audio samples.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO

import numpy as np

from voxclone.runtime.metrics import Metrics
from voxclone.service.captions import WordTrack
from voxclone.service.speech.render_stats import RenderStats
from voxclone.synth.audio.file_encode import encode, parse_format
from voxclone.synth.audio.stream_encode import open_stream_encoder
from voxclone.synth.text.wordtimes import WordTime

# A streamed FLAC header cannot carry the final frame count, which many
# readers need in a downloaded file: whole FLAC files are encoded in one go.
WHOLE_FILE_FORMATS = frozenset({"flac"})

# Renders audio into the stats it is given (called once the header is out).
Render = Callable[[RenderStats], Iterator[np.ndarray]]

# A whole file is held in memory up to this size, then on disk.
SPOOL_BYTES = 32 << 20


def spooled() -> tempfile.SpooledTemporaryFile[bytes]:
    """A buffer for a whole file: memory first, disk past ``SPOOL_BYTES``."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)


def encode_stream(
    fmt: str,
    rate: int,
    out_rate: int,
    render: Render,
    *,
    stream: bool,
    metrics: Metrics | None = None,
) -> Iterator[bytes]:
    """The encoded bytes of ``render``'s audio (engine ``rate``) as they come;
    for a ``stream`` the first audio's stages go to ``metrics`` once its first
    bytes are out of the encoder."""
    encoder = open_stream_encoder(fmt, rate, out_rate=out_rate)
    stats = RenderStats()
    try:
        yield encoder.header()
        pieces = render(stats)
        # Streams only: a whole file's client waits for the whole file.
        staged = not stream
        for audio in pieces:
            fed = time.perf_counter()
            data = encoder.feed(audio)
            if data:
                if not staged and stats.first_audio_stages is not None:
                    staged = True
                    stats.first_audio_stages.encode = time.perf_counter() - fed
                    if metrics is not None:
                        metrics.observe_first_audio_stages(stats.first_audio_stages.as_dict())
                yield data
        final = encoder.finish()
        if final:
            yield final
    finally:
        encoder.close()


def encode_file(fmt: str, rate: int, out_rate: int, render: Render) -> bytes:
    """``render``'s whole audio as one file of format ``fmt``."""
    with spooled() as spool:
        encode_file_into(fmt, rate, out_rate, render, spool)
        spool.seek(0)
        return spool.read()


def encode_file_into(
    fmt: str,
    rate: int,
    out_rate: int,
    render: Render,
    out: IO[bytes],
) -> None:
    """``render``'s whole audio as one file of format ``fmt``, written into
    ``out`` (seekable) as it is made: a speech job's hours of audio go to
    disk, not memory (FLAC excepted: WHOLE_FILE_FORMATS)."""
    kind = parse_format(fmt).value
    if kind in WHOLE_FILE_FORMATS:
        pieces = list(render(RenderStats()))
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        out.write(encode(audio, rate, kind, out_rate=out_rate))
        return
    start = out.tell()
    header_len = 0
    for index, part in enumerate(encode_stream(fmt, rate, out_rate, render, stream=False)):
        if index == 0:
            header_len = len(part)
        out.write(part)
    if kind == "wav":
        _close_wav_sizes_in(out, start, header_len)


def _close_wav_sizes_in(out: IO[bytes], start: int, header_len: int) -> None:
    """:func:`close_wav_sizes` on the WAV file written into ``out`` from ``start``,
    in place (two 4-byte writes, not a copy of the file)."""
    end = out.seek(0, 2)
    out.seek(start)
    head = out.read(max(header_len, 12) + 8)
    data_at = head.find(b"data", 12)
    if head[:4] == b"RIFF" and data_at >= 0:
        size = end - start
        out.seek(start + 4)
        out.write((size - 8).to_bytes(4, "little"))
        out.seek(start + data_at + 4)
        out.write((size - data_at - 8).to_bytes(4, "little"))
    out.seek(end)


def encode_captioned(
    fmt: str, rate: int, out_rate: int, pieces: Iterator[np.ndarray], track: WordTrack
) -> Iterator[tuple[bytes, list[WordTime]]]:
    """(encoded audio, the words whose speech has been sent by the end of that
    audio) as ``pieces`` (rendered with ``track``) come."""
    encoder = open_stream_encoder(fmt, rate, out_rate=out_rate)
    sent = 0
    try:
        header = encoder.header()
        for audio in pieces:
            data = header + encoder.feed(audio)
            header = b""
            fresh, sent = track.words[sent:], len(track.words)
            if data or fresh:
                yield data, fresh
        final = encoder.finish()
        fresh = track.words[sent:]
        if final or fresh:
            yield final, fresh
    finally:
        encoder.close()


def close_wav_sizes(data: bytes, header_len: int) -> bytes:
    """Replace the open-ended sizes a streaming WAV header carries with real ones."""
    buf = bytearray(data)
    data_at = buf.find(b"data", 12, max(header_len, 12) + 8)
    if buf[:4] != b"RIFF" or data_at < 0:
        return bytes(buf)
    buf[4:8] = (len(buf) - 8).to_bytes(4, "little")
    buf[data_at + 4 : data_at + 8] = (len(buf) - data_at - 8).to_bytes(4, "little")
    return bytes(buf)
