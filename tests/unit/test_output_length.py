"""The output-length pieces (service/speech/output_length.py, speech/encode.py encode_file_into):
a render held to its allowance stops before the piece that crosses it and
closes its source; a whole file written into a spool is a valid WAV."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest
import soundfile as sf

from voxclone.service.speech.encode import encode_file_into
from voxclone.service.speech.output_length import OutputOverEstimate, allowance, held_to, pace
from voxclone.service.speech.render_stats import RenderStats

RATE = 24_000


def _seconds(count: int) -> Iterator[np.ndarray]:
    for _ in range(count):
        yield np.full(RATE, 0.1, np.float32)


def test_a_render_past_its_allowance_stops_clearly_and_is_closed() -> None:
    source = _seconds(100)
    kept: list[np.ndarray] = []
    with pytest.raises(OutputOverEstimate) as caught:
        for piece in held_to(source, RATE, limit_s=3.5):
            kept.append(piece)
    assert len(kept) == 3  # the fourth second would cross 3.5 s: not passed on
    assert caught.value.status == 413 and caught.value.code == "output_over_estimate"
    assert next(source, None) is None  # closed: its cleanup ran
    assert sum(p.size for p in held_to(_seconds(3), RATE, limit_s=3.0)) == 3 * RATE


def test_the_allowance_and_the_pace_follow_the_planner() -> None:
    assert allowance(100.0) == pytest.approx(180.0)  # 1.5x + 30 s
    assert allowance(100.0, floor_s=0.0) == pytest.approx(150.0)
    assert pace(0.5, 0.5) == 0.5  # clamped at the slowest speed, as planned
    assert pace(1.0, 0.5, voice_speed=1.2) == pytest.approx(0.6)


def test_a_whole_wav_written_into_a_spool_has_its_real_sizes() -> None:
    def render(_stats: RenderStats) -> Iterator[np.ndarray]:
        return _seconds(3)

    with tempfile.TemporaryFile() as spool:
        encode_file_into("wav", RATE, RATE, render, spool)
        spool.seek(0)
        data = spool.read()
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == RATE and audio.size == 3 * RATE
    assert int.from_bytes(data[4:8], "little") == len(data) - 8
