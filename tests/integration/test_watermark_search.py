"""The watermark is found after a 0.9x / 1.1x playback-speed change, and the
speed search flags no unmarked speech (issue 49).

Speed here is what a player's "0.9x" does to a file that is saved again:
resampling, so tempo and pitch change together (bench/watermark.py's
attack). The plain detector reads none of these (0 % in docs/benchmarks.md
before the search); ``provenance.detect`` is what the API route and
``voxclone detect`` call.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxclone.service import provenance
from voxclone.synth.audio import watermark, watermark_search
from voxclone.synth.audio.resample import resample
from voxclone.synth.audio.timescale import time_stretch

DATA = Path(__file__).resolve().parents[1] / "data"
RATE = 24_000


def _recording(path: Path, rate: int = RATE) -> np.ndarray:
    x, sr = sf.read(path, dtype="float32", always_2d=True)
    return resample(x.mean(axis=1), sr, rate)


def _played_at(x: np.ndarray, speed: float, rate: int = RATE) -> np.ndarray:
    """``x`` played back at ``speed`` and saved at ``rate`` again."""
    return resample(x, round(rate * speed), rate)


def _wav(x: np.ndarray, rate: int = RATE) -> bytes:
    out = io.BytesIO()
    sf.write(out, x, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _recordings() -> list[Path]:
    return sorted(DATA.glob("*.wav"))


@pytest.fixture(scope="module")
def mark() -> watermark.PerthMark:
    return watermark.shared()


@pytest.fixture(scope="module")
def marked(mark: watermark.PerthMark) -> np.ndarray:
    return mark.embed(_recording(DATA / "librispeech_1088-129236-0000.wav"), RATE)


@pytest.mark.parametrize("tempo", [0.9, 1.1])
def test_a_tempo_change_that_keeps_the_pitch_is_read_plainly(
    mark: watermark.PerthMark, marked: np.ndarray, tempo: float
) -> None:
    """The other "0.9x": faster or slower speech at the same pitch (WSOLA,
    as a player's speed control or the product's own speed does). The mark
    sits in the spectrum of each frame, which this keeps: the plain read
    finds it, no search needed."""
    changed = time_stretch(marked, RATE, tempo)
    assert abs(changed.size / marked.size - 1 / tempo) < 0.02
    report = provenance.detect(_wav(changed), max_bytes=1 << 24, max_seconds=60.0)
    assert report.watermarked and report.payload is not None
    assert "speed" not in report.payload  # found by the plain read


@pytest.mark.parametrize("speed", [0.9, 1.1])
def test_mark_is_found_after_a_speed_change(
    mark: watermark.PerthMark, marked: np.ndarray, speed: float
) -> None:
    changed = _played_at(marked, speed)
    assert not mark.detect(changed, RATE).watermarked  # why the search exists
    report = provenance.detect(_wav(changed), max_bytes=1 << 24, max_seconds=60.0)
    assert report.watermarked
    assert report.confidence >= watermark_search.SEARCH_THRESHOLD
    assert report.payload is not None
    assert report.payload["watermark"] == watermark.WATERMARK_ID
    # The speed it was read at: one of the searched speeds next to it (2 % apart).
    assert float(report.payload["speed"]) == pytest.approx(speed, rel=0.021)


def test_unchanged_audio_takes_one_plain_read(
    mark: watermark.PerthMark, marked: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    plain = mark.detect(marked, RATE)

    def counted(audio: np.ndarray, rate: int) -> watermark.Detection:
        reads.append(rate)
        return plain

    monkeypatch.setattr(mark, "detect", counted)
    found = watermark_search.detect(mark, marked, RATE)
    assert found == watermark_search.SpeedDetection(True, plain.confidence, 1.0)
    assert reads == [RATE]  # no search: the plain path's cost is unchanged


def test_search_reads_a_bounded_window(
    mark: watermark.PerthMark, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = np.tile(_recording(_recordings()[0]), 4)  # ~39 s
    sizes: list[int] = []

    def unmarked(audio: np.ndarray, rate: int) -> watermark.Detection:
        sizes.append(audio.shape[0])
        return watermark.Detection(False, 0.0)

    monkeypatch.setattr(mark, "detect", unmarked)
    found = watermark_search.detect(mark, long, RATE)
    assert found == watermark_search.SpeedDetection(False, 0.0, 1.0)
    assert sizes[0] == long.size  # the plain read: the whole file
    window = int(watermark_search.SEARCH_WINDOW_S * RATE)
    assert sizes[1:] == [window] * len(watermark_search.SPEEDS)


def test_unmarked_recordings_stay_unmarked(mark: watermark.PerthMark) -> None:
    """Whole, as 3 s excerpts and played at 0.9x / 1.1x: the search's best
    speed stays below its threshold on every one."""
    checked = 0
    for path in _recordings():
        clean = _recording(path)
        excerpt = int(3.0 * RATE)
        pieces = [clean, _played_at(clean, 0.9), _played_at(clean, 1.1)]
        pieces += [clean[i : i + excerpt] for i in range(0, clean.size - excerpt + 1, excerpt)]
        for piece in pieces:
            found = watermark_search.detect(mark, piece, RATE)
            assert not found.watermarked, (path.name, piece.size, found)
            assert found.speed == 1.0
            checked += 1
    assert checked >= 10


def test_speeds_cover_0_9x_to_1_1x_within_1_percent() -> None:
    speeds = np.array((1.0, *watermark_search.SPEEDS))
    for speed in np.linspace(0.88, 1.13, 51):
        assert np.min(np.abs(np.log(speeds / speed))) <= np.log(1.0101), speed
