"""One recording re-encoded as the containers users upload (issue 47 item 3).

Each entry turns 16 kHz mono float audio into a file's bytes the way a user's
tools would make it: the lossless ones at the clip's rate, the lossy ones at
the rates their encoders and browsers use (MP3 and AAC at 44.1 kHz, Opus at
48 kHz), so the decoded rate, the encoder delay (MP3/AAC priming) and the
codec noise all differ from the WAV. Used by
tests/integration/test_container_decision.py and studies/container_decision.py.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import av
import numpy as np
import soundfile as sf

from voxclone.synth.audio.file_encode import encode
from voxclone.synth.audio.resample import resample

SOURCE_RATE = 16_000


def _soundfile(x: np.ndarray, rate: int, fmt: str, subtype: str) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, resample(x, SOURCE_RATE, rate), rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def _pyav(x: np.ndarray, rate: int, *, container: str, codec: str, bit_rate: int) -> bytes:
    samples = resample(x, SOURCE_RATE, rate)
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream: Any = out.add_stream(codec, rate=rate)
        stream.layout = "mono"
        stream.bit_rate = bit_rate
        for start in range(0, samples.shape[0], 8192):
            block = np.ascontiguousarray(samples[None, start : start + 8192])
            frame = av.AudioFrame.from_ndarray(block, format="flt", layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


CONTAINERS: dict[str, Callable[[np.ndarray], bytes]] = {
    "wav": lambda x: encode(x, SOURCE_RATE, "wav"),
    "flac": lambda x: encode(x, SOURCE_RATE, "flac"),
    # libmp3lame at 128 kb/s (the product's own MP3 encoder settings).
    "mp3": lambda x: encode(x, SOURCE_RATE, "mp3", out_rate=44_100),
    "m4a": lambda x: _pyav(x, 44_100, container="mp4", codec="aac", bit_rate=128_000),
    "ogg-vorbis": lambda x: _soundfile(x, 44_100, "OGG", "VORBIS"),
    "ogg-opus": lambda x: encode(x, SOURCE_RATE, "opus", out_rate=48_000),
    "webm": lambda x: _pyav(x, 48_000, container="webm", codec="libopus", bit_rate=64_000),
}
