"""A marked stream's first audio waits only for a short head's mark (issue 49).

Marking is added to every stream's first audio. Before, the whole first
piece (about a second of speech) was marked before any of it went out; now
its first FIRST_HEAD_S is marked and sent first, the rest after, and the
stream is still marked throughout (the mark joins without a seam).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.service.speech.request import SpeechRequest
from voxclone.synth.audio import watermark

# speech/render.py FIRST_HEAD_S (0.2 s), written out so the test runs on code without it.
FIRST_HEAD_S = 0.2
TEXT = "The first words of a stream go out before the rest of its first sentence is marked."


def test_stream_sends_a_marked_head_first(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", memory_cache_mb=0, disk_cache_mb=0)
    assert settings.watermark
    runtime = build_runtime(settings, warmup=False)
    try:
        rate = runtime.speech.sample_rate
        _, parts = runtime.speech.stream(SpeechRequest(text=TEXT, format="pcm"))
        pieces = [p for p in parts if p]
    finally:
        runtime.close()
    first = np.frombuffer(pieces[0], np.int16)
    assert 0 < first.size <= int(FIRST_HEAD_S * rate), first.size / rate
    audio = np.frombuffer(b"".join(pieces), np.int16).astype(np.float32) / 32768.0
    assert audio.size > 2 * rate
    found = watermark.shared().detect(audio, rate)
    assert found.watermarked and found.confidence > 0.9
    # Each part, the head included, carries the mark from its first sample.
    head = watermark.shared().detect(audio[: int(FIRST_HEAD_S * rate)], rate)
    assert head.watermarked
