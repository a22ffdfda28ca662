"""One recording re-encoded as the containers users upload (issue 47 item 3).

Each entry turns 16 kHz mono float audio into a file's bytes the way a user's
tools would make it: the lossless ones at the clip's rate, the lossy ones at
the rates their encoders and browsers use (MP3 and AAC at 44.1 kHz, Opus at
48 kHz), so the decoded rate, the encoder delay (MP3/AAC priming) and the
codec noise all differ from the WAV. Used by
tests/integration/test_container_decision.py and studies/container_decision.py.

The lossy files of the decision test are frozen in tests/data/containers/
(:func:`frozen_clip`): a lossy encoder's bytes change with the build of its
library, and a fresh install's PyAV 18.1.1 (bundled FFmpeg/LAME) made an MP3 of
clip 3005 whose clone's lead was 0.1104 against 0.0976-0.1037 for 18.1.0's
(same decode, same decision; spread 0.022 over the bound 0.017, CI of
2026-12-07). Regenerate with ``python tests/container_clips.py`` (and say which
PyAV made them).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
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


# Made by PyAV 18.1.0 and soundfile 0.14.0 (libsndfile's Vorbis) on 2026-12-07
# from tests/data/librispeech_3005-163389-0000.wav.
FROZEN_DIR = Path(__file__).with_name("data") / "containers"
FROZEN_SOURCE = Path(__file__).with_name("data") / "librispeech_3005-163389-0000.wav"
LOSSY = ("mp3", "m4a", "ogg-vorbis", "ogg-opus", "webm")


def frozen_clip(name: str) -> bytes:
    """FROZEN_SOURCE as the lossy container ``name``, as it was encoded once."""
    return (FROZEN_DIR / f"3005-163389-0000.{name}").read_bytes()


if __name__ == "__main__":
    source, rate = sf.read(FROZEN_SOURCE, dtype="float32")
    assert rate == SOURCE_RATE
    FROZEN_DIR.mkdir(exist_ok=True)
    for lossy in LOSSY:
        (FROZEN_DIR / f"3005-163389-0000.{lossy}").write_bytes(CONTAINERS[lossy](source))
    print(f"wrote {len(LOSSY)} clips with PyAV {av.__version__}", file=sys.stderr)
