"""The long-form benchmark's analysis (bench/long_form_audio.py) and report
(bench/long_form.py) on synthetic audio: no server, no model."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

audio = importlib.import_module("long_form_audio")
long_form = importlib.import_module("long_form")

SR = 16_000


def _speech_like(seconds: float, pauses: list[tuple[float, float]]) -> np.ndarray:
    """A 200 Hz tone (amplitude 0.3) with digital silence over each (start s, length s)."""
    t = np.arange(int(seconds * SR)) / SR
    x = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    for start, length in pauses:
        x[int(start * SR) : int((start + length) * SR)] = 0.0
    return x


def test_windows_cover_the_recording_and_are_cut_in_pauses() -> None:
    # A pause every 2 s (0.3 s long): a 28 s target always has one within 3 s.
    pauses = [(t + 1.7, 0.3) for t in range(0, 100, 2)]
    x = _speech_like(100.0, pauses)
    windows = audio.cut_windows(x, SR)
    assert windows[0].start == 0 and windows[-1].end == len(x)
    assert all(a.end == b.start for a, b in zip(windows, windows[1:], strict=False))
    for w in windows[:-1]:
        assert 25 * SR <= w.end - w.start <= 31 * SR
        assert abs(float(x[w.end])) == 0.0  # the cut falls in a pause, not in speech


def test_windows_keep_their_length_at_a_rate_whose_frame_is_not_10_ms() -> None:
    # 22,050 Hz (Piper): a 10 ms frame is 220.5 samples, rounded to 220.
    rate = 22_050
    t = np.arange(rate * 1800) / rate
    x = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    x[(t % 2.0) >= 1.7] = 0.0  # a pause every 2 s
    windows = audio.cut_windows(x, rate)
    lengths = [(w.end - w.start) / rate for w in windows[:-1]]
    assert min(lengths) >= 25.0 and max(lengths) <= 31.0


def test_a_short_tail_joins_the_last_window() -> None:
    x = _speech_like(62.0, [(t + 1.7, 0.3) for t in range(0, 62, 2)])
    windows = audio.cut_windows(x, SR)
    assert len(windows) == 2 and windows[-1].end == len(x)


def test_window_wer_partitions_the_reference_and_localises_errors() -> None:
    reference = "one two three four five six seven eight nine ten eleven twelve"
    exact = audio.window_wer(
        reference, ["one two three four", "five six seven eight", "nine ten eleven twelve"]
    )
    assert [r["wer"] for r in exact] == [0.0, 0.0, 0.0]
    assert sum(r["ref_words"] for r in exact) == 12
    # The middle window lost two words: the errors are its own, not its neighbours'.
    lossy = audio.window_wer(
        reference, ["one two three four", "five eight", "nine ten eleven twelve"]
    )
    assert [r["errors"] for r in lossy] == [0, 2, 0]
    assert lossy[1]["wer"] == pytest.approx(0.5)
    # A window heard as nothing: its words are deletions there, the others stay clean.
    silent = audio.window_wer(reference, ["one two three four", "", "nine ten eleven twelve"])
    assert [r["errors"] for r in silent] == [0, 4, 0]
    assert sum(r["ref_words"] for r in silent) == 12


def test_gap_stats_measure_pauses_long_gaps_and_clicks() -> None:
    pauses = [(2.0, 0.5), (5.0, 0.5), (8.0, 3.0)]
    x = _speech_like(14.0, pauses)
    stats = audio.gap_stats(x, SR)
    assert stats["gaps"] == 3 and stats["long_gaps"] == 1
    assert stats["max_s"] == pytest.approx(3.0, abs=0.02)
    assert stats["median_s"] == pytest.approx(0.5, abs=0.02)
    # A 200 Hz tone at 0.3 steps at most 0.024 a sample at 16 kHz: no clicks;
    # a jump straight to 0.5 at a silence edge is one.
    assert stats["clicks"] == 0
    x[int(2.5 * SR)] = 0.5
    assert audio.gap_stats(x, SR)["clicks"] >= 1


def test_drift_reports_slope_range_and_the_ends() -> None:
    minutes = [m + 0.25 for m in range(30)]
    values = [0.1 + 0.002 * m for m in minutes]  # +0.02 every 10 minutes
    d = audio.drift(minutes, values)
    assert d["slope_per_10min"] == pytest.approx(0.02, abs=1e-6)
    assert d["range"] == pytest.approx(0.058, abs=1e-6)
    assert d["first_5min"] == pytest.approx(0.1 + 0.002 * 2.25, abs=1e-6)
    assert d["last_5min"] < d["max"] + 1e-9 and d["last_5min"] > d["first_5min"]
    assert audio.drift([1.0], [float("nan")]) == {"n": 0}


def test_analyse_scores_each_window_with_the_given_ears() -> None:
    x = _speech_like(70.0, [(t + 1.7, 0.3) for t in range(0, 70, 2)])
    heard = iter(["alpha beta", "gamma delta", "epsilon"])
    result = audio.analyse(
        x,
        SR,
        "alpha beta gamma delta epsilon",
        lambda clip, sr: next(heard),
        lambda clip, sr: np.array([1.0, 0.0]),
        lambda clip, sr: -20.0,
    )
    assert [w["wer"] for w in result["windows"]] == [0.0, 0.0, 0.0]
    assert result["wer"] == 0.0
    assert result["similarity_drift"]["min"] == pytest.approx(1.0)
    assert result["lufs_drift"]["range"] == 0.0


def test_text_is_whole_paragraphs_of_the_public_domain_book() -> None:
    three = long_form.load_text(3.0)
    thirty = long_form.load_text(30.0)
    assert "#" not in three and three.startswith("CHAPTER I.")
    assert 600 <= len(three.split()) < 800
    assert 6_000 <= len(thirty.split()) < 6_500
    assert thirty.startswith(three)


def test_report_states_what_did_not_run(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "piper.json").write_text('{"system": "piper", "error": "not installed: piper"}')
    meta = {"minutes": 3.0, "words": 480, "chars": 2600, "cores": 2}
    result = long_form.report(parts, meta, "python bench/long_form.py --quick", tmp_path)
    md = (tmp_path / "bench" / "results" / "long_form.md").read_text()
    assert "| Piper joe (1 thread) | not run: not installed: piper |" in md
    assert result["systems"]["piper"]["error"].startswith("not installed")
    assert not (tmp_path / "docs" / "img" / "long_form.png").exists()  # nothing to plot


def test_a_stopped_stream_keeps_the_minutes_that_arrived(tmp_path: Path) -> None:
    import json
    import time

    import soundfile as sf

    pcm = (np.sin(np.arange(24_000 * 3) / 10.0) * 8000).astype("<i2").tobytes()
    (tmp_path / "stream.pcm").write_bytes(pcm)
    begun = {"date": "2026-12-06 12:00Z", "loadavg_before": 3.0, "t0": time.time() - 60}
    (tmp_path / "stream.started.json").write_text(json.dumps(begun))
    assert long_form.salvage_stream(tmp_path)
    x, sr = sf.read(str(tmp_path / "stream.flac"))
    assert sr == 24_000 and len(x) == 24_000 * 3
    timing = json.loads((tmp_path / "stream.render.json").read_text())
    assert timing["partial"] is True and 55 <= timing["wall_s"] <= 70
    assert timing["rtf"] == pytest.approx(timing["wall_s"] / 3.0, rel=0.01)
    assert not long_form.salvage_stream(tmp_path / "elsewhere")


def test_a_recording_cut_short_is_scored_against_the_text_it_reached() -> None:
    reference = "one two three four five six seven eight nine ten eleven twelve"
    heard = ["one two three four", "five six seven eight"]
    # Closed: the unspoken rest counts as deletions in the last window.
    assert [r["errors"] for r in audio.window_wer(reference, heard)] == [0, 4]
    cut = audio.window_wer(reference, heard, open_end=True)
    assert [r["errors"] for r in cut] == [0, 0] and sum(r["ref_words"] for r in cut) == 8


def test_a_failed_route_keeps_the_other_routes_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled job beside a finished stream lost the stream's 30 minutes."""
    import contextlib
    import json

    def route(system: str, running: object, text: str, parts: Path) -> tuple[Any, int, dict]:
        if system == "job":
            raise RuntimeError("speech job ended cancelled: None")
        return np.zeros(24_000, np.float32), 24_000, {"wall_s": 2.0}

    monkeypatch.setattr(long_form, "server", lambda: contextlib.nullcontext(None))
    monkeypatch.setattr(long_form, "render_route", route)
    for together in (True, False):
        long_form.render(["job", "stream"], "text", tmp_path, together=together)
        assert (tmp_path / "stream.flac").exists()
        assert "cancelled" in json.loads((tmp_path / "job.json").read_text())["error"]
        (tmp_path / "stream.flac").unlink()
