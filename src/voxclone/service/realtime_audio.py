"""What a realtime session sends: its ``output_format`` encoders and the
per-character alignment of the audio it sends.

Formats are ElevenLabs' names: ``pcm_<rate>`` (16-bit little-endian mono),
``mp3_44100_128`` and ``ulaw_8000`` (G.711 for telephony). Each context keeps
one encoder for all its clauses, so an MP3 stream has no encoder-delay gap
between clauses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from voxclone.errors import InvalidInput
from voxclone.synth.audio.stream_encode import open_stream_encoder
from voxclone.synth.audio.ulaw import UlawStreamEncoder
from voxclone.synth.text.wordtimes import WordTime

PCM_RATES: tuple[int, ...] = (16000, 22050, 24000, 44100, 48000)
OUTPUT_FORMATS: tuple[str, ...] = (
    *(f"pcm_{rate}" for rate in PCM_RATES),
    "mp3_44100_128",
    "ulaw_8000",
)


class AudioOut(Protocol):
    """What a session needs of an encoder (mu-law has no ``AudioFormat``)."""

    def feed(self, chunk: np.ndarray) -> bytes: ...

    def finish(self) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class OutputFormat:
    name: str
    kind: str  # "pcm", "mp3" or "ulaw"
    rate: int


def parse_output_format(name: str | None) -> OutputFormat:
    """``output_format`` as asked (default ``mp3_44100_128``, as ElevenLabs');
    an unknown one is a 4xx naming the ones served."""
    name = name or "mp3_44100_128"
    if name not in OUTPUT_FORMATS:
        raise InvalidInput(
            f"output_format {name[:40]!r} is not served; use one of {', '.join(OUTPUT_FORMATS)}",
            field="output_format",
            limit=list(OUTPUT_FORMATS),
        )
    kind, rate = name.split("_")[:2]
    return OutputFormat(name, kind, int(rate))


def open_output_encoder(fmt: OutputFormat, sr_in: int) -> AudioOut:
    """A stream encoder from the engine's float audio at ``sr_in`` to ``fmt``."""
    if fmt.kind == "ulaw":
        return UlawStreamEncoder(sr_in)
    return open_stream_encoder(fmt.kind, sr_in, out_rate=fmt.rate)


def char_alignment(words: Sequence[WordTime], offset_s: float) -> dict[str, list[object]] | None:
    """ElevenLabs' alignment of ``words`` (times in the clause's audio) in the
    message whose audio starts ``offset_s`` into the clause: each word's time
    shared evenly by its characters, the space before a word spanning the gap
    since the previous word. Times in ms from the message's first sample
    (clamped at 0: a word begun in the previous message starts at once)."""
    if not words:
        return None
    chars: list[object] = []
    starts: list[object] = []
    durations: list[object] = []
    previous_end: float | None = None
    for word in words:
        start = max(0.0, word.start_s - offset_s) * 1000.0
        end = max(start, (word.end_s - offset_s) * 1000.0)
        if previous_end is not None:
            chars.append(" ")
            starts.append(round(previous_end))
            durations.append(max(0, round(start - previous_end)))
        text = word.word or " "
        step = (end - start) / len(text)
        for i, ch in enumerate(text):
            chars.append(ch)
            starts.append(round(start + i * step))
            durations.append(max(0, round(step)))
        previous_end = end
    return {"chars": chars, "charStartTimesMs": starts, "charsDurationsMs": durations}
