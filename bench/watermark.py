"""The output watermark (issue 49): robustness, false positives, quality, cost.

Renders product speech (``SpeechService.render_audio``: plan, engine, post,
join and the renderer's chunk-by-chunk marking) for several built-in voices
and sentences twice, from a runtime with marking on and one with it off
(caches off, so both really render), then measures:

* **detection** (the product's: synth/audio/watermark_search.py, the plain
  read and, when it finds nothing, the search over playback speeds) of the
  marked renders after each attack (MP3 64 and 128 kbps, Opus as the product
  encodes it, resampling to 16 kHz, 0.9x / 1.1x playback speed, white noise
  at +20 dB SNR, a 3 s excerpt, 0.9x then MP3 64 kbps), and the **false positives** on the unmarked
  renders under the same attacks;
* **false positives on real recordings**: every clip of the dev set
  (``../shared/evaldata``, read here only, never by tests) and tests/data,
  whole, cut into non-overlapping 3 s excerpts and played at 0.9x / 1.1x,
  with the speed search's best score on them (what its threshold,
  ``SEARCH_THRESHOLD``, must stay above: the margin);
* **quality**: DNSMOS P.808 / OVRL (bench/voice_table.py's Dnsmos) and WER
  (Whisper tiny.en, the product's transcriber) marked vs unmarked;
* **cost**: CPU and wall ms per audio second of marking (0.5 s stream
  chunks, the renderer's path) and of detection (marked renders: the plain
  read only; unmarked ones: the plain read and every speed); the CPU and wall time to
  mark each stream's first 0.2 s head (what marking adds to first audio:
  service/speech/render.py FIRST_HEAD_S) and its whole first piece; and the
  streams' first audio marked vs unmarked (pcm, the same texts, alternating
  which goes first: on a loaded host the engine's own spread is far larger
  than the mark).

    nice -n 10 python bench/watermark.py [--quick] [--detection-only]

``--detection-only`` measures detection (robustness, false positives, its
cost) and keeps the quality and first-audio figures of the last full result
(bench/results/watermark.json; the Markdown says from when): they do not
depend on the detector.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_result  # noqa: E402
from voxclone.service.speech.render import FIRST_HEAD_S  # noqa: E402
from voxclone.synth.audio import watermark, watermark_search  # noqa: E402
from voxclone.synth.audio.resample import resample  # noqa: E402

RATE = 24_000
EVALDATA = ROOT.parent / "shared" / "evaldata"
TEST_DATA = ROOT / "tests" / "data"
EXCERPT_S = 3.0
VOICES = ("af_heart", "am_michael", "bf_emma", "bm_george")
SENTENCES = (
    "The quarterly report is due on Friday, so please send me your figures by Thursday noon.",
    "A gentle breeze moved through the old orchard as the sun went down behind the hills.",
    "Turn left at the second light, then follow the signs to the harbour car park.",
)
TTFA_TEXTS = (
    "Good morning, and welcome back to the program. Today we look at rivers.",
    "The library opens at nine. Bring your card if you want to borrow a book.",
    "Our next train to the coast leaves from platform four in ten minutes.",
    "Please hold while I check the booking. It should only take a moment.",
    "The museum's new wing shows paintings from the northern coast.",
    "Remember to water the tomatoes before the afternoon gets too hot.",
    "The meeting moved to Wednesday, in the small room by the kitchen.",
    "Thanks for calling. Your parcel left the depot early this morning.",
    "Rain is expected after lunch, so the picnic moves indoors.",
    "She tuned the violin twice before the concert finally began.",
    "The ferry crossing takes about forty minutes in calm weather.",
    "Add the flour slowly, stirring all the time, until it thickens.",
)


# -- attacks -----------------------------------------------------------------------
def _pyav_roundtrip(x: np.ndarray, rate: int, codec: str, container: str, kbps: int) -> np.ndarray:
    from voxclone.synth.audio.file_encode import _pyav_bytes

    data = _pyav_bytes(x, rate, codec=codec, container=container, bit_rate=kbps * 1000)
    return _decode(data)


def _decode(data: bytes) -> np.ndarray:
    from voxclone.synth.audio.decode import decode_audio

    samples, rate = decode_audio(data, max_bytes=1 << 30, max_seconds=3600)
    return resample(samples, rate, RATE)


def _opus(x: np.ndarray, rate: int) -> np.ndarray:
    from voxclone.synth.audio.file_encode import encode

    return _decode(encode(x, rate, "opus"))  # as the product sends it


def _speed(x: np.ndarray, factor: float, rate: int = RATE) -> np.ndarray:
    # Played back at ``factor`` (0.9: slower, 11 % longer) and saved again:
    # tempo and pitch both change.
    return resample(x, int(round(rate * factor)), rate)


def _noise(x: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    power = float(np.mean(x.astype(np.float64) ** 2))
    noise = rng.normal(0.0, np.sqrt(power / 10 ** (snr_db / 10)), x.size)
    return (x + noise).astype(np.float32)


def _excerpt(x: np.ndarray, rate: int) -> np.ndarray:
    n = int(EXCERPT_S * rate)
    start = max(0, (x.size - n) // 2)
    return x[start : start + n]


ATTACKS: dict[str, Callable[[np.ndarray], tuple[np.ndarray, int]]] = {
    "none": lambda x: (x, RATE),
    "mp3_64k": lambda x: (_pyav_roundtrip(x, RATE, "libmp3lame", "mp3", 64), RATE),
    "mp3_128k": lambda x: (_pyav_roundtrip(x, RATE, "libmp3lame", "mp3", 128), RATE),
    "opus": lambda x: (_opus(x, RATE), RATE),
    "resample_16k": lambda x: (resample(x, RATE, 16_000), 16_000),
    "speed_0.9": lambda x: (_speed(x, 0.9), RATE),
    "speed_1.1": lambda x: (_speed(x, 1.1), RATE),
    "speed_0.9+mp3_64k": lambda x: (
        _pyav_roundtrip(_speed(x, 0.9), RATE, "libmp3lame", "mp3", 64),
        RATE,
    ),
    "noise_20db": lambda x: (_noise(x, 20.0, seed=x.size), RATE),
    "trim_3s": lambda x: (_excerpt(x, RATE), RATE),
}


# -- renders -----------------------------------------------------------------------
def _runtime(marked: bool) -> Any:
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings

    home = Path(tempfile.mkdtemp(prefix="voxclone-bench-wm-"))
    settings = Settings(home=home, watermark=marked, memory_cache_mb=0, disk_cache_mb=0)
    return build_runtime(settings, warmup=True)


def _render(runtime: Any, text: str, voice: str) -> np.ndarray:
    from voxclone.service.speech.request import SpeechRequest

    return np.asarray(runtime.speech.render_audio(SpeechRequest(text=text, voice=voice)))


def _first_audio(runtime: Any, text: str) -> tuple[float, np.ndarray]:
    """Seconds to the stream's first bytes, and its first piece (pcm16)."""
    from voxclone.service.speech.request import SpeechRequest

    started = time.perf_counter()
    _, parts = runtime.speech.stream(SpeechRequest(text=text, format="pcm"))
    first_s, first = None, b""
    for part in parts:  # drained: the next request starts on an idle engine
        if part and first_s is None:
            first_s, first = time.perf_counter() - started, part
    assert first_s is not None
    return first_s, np.frombuffer(first, np.int16).astype(np.float32) / 32768.0


# -- measurements --------------------------------------------------------------------
def _cpu_wall(fn: Callable[[], object], repeats: int = 3) -> tuple[float, float]:
    """Median CPU and wall seconds of ``fn``."""
    cpu, wall = [], []
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def cost(
    mark: watermark.PerthMark, clips: list[np.ndarray], marked: list[np.ndarray]
) -> dict[str, float]:
    audio = np.concatenate(clips)
    seconds = audio.size / RATE

    def stream() -> None:
        marker = watermark.StreamMarker(mark, RATE)
        for piece in np.array_split(audio, max(1, int(seconds / 0.5))):
            marker.push(piece)

    mark_cpu, mark_wall = _cpu_wall(stream)
    return {
        "audio_s": round(seconds, 2),
        "mark_cpu_ms_per_s": 1000 * mark_cpu / seconds,
        "mark_wall_ms_per_s": 1000 * mark_wall / seconds,
        **detection_cost(mark, clips, marked),
    }


def detection_cost(
    mark: watermark.PerthMark, clean: list[np.ndarray], marked: list[np.ndarray]
) -> dict[str, float]:
    """CPU and wall ms per audio second of the product's detection: on the
    marked renders (the plain read finds the mark: no search), on the
    unmarked ones (the plain read and every speed: each render is shorter
    than the search's window, so this is its cost per second at most) and
    on all unmarked renders joined (the search reads only its window)."""
    rows: dict[str, float] = {}
    for label, clips in (("marked", marked), ("unmarked", clean)):
        seconds = sum(x.size for x in clips) / RATE
        cpu, wall = _cpu_wall(partial(_detect_all, mark, clips))
        rows[f"detect_{label}_cpu_ms_per_s"] = 1000 * cpu / seconds
        rows[f"detect_{label}_wall_ms_per_s"] = 1000 * wall / seconds
    joined = np.concatenate(clean)
    cpu, _ = _cpu_wall(lambda: _detect(mark, joined, RATE))
    rows["joined_unmarked_s"] = joined.size / RATE
    rows["detect_joined_unmarked_cpu_ms_per_s"] = 1000 * cpu * RATE / joined.size
    return rows


def _detect_all(mark: watermark.PerthMark, clips: list[np.ndarray]) -> object:
    return [_detect(mark, x, RATE) for x in clips]


def _detect(mark: watermark.PerthMark, x: np.ndarray, rate: int) -> watermark_search.SpeedDetection:
    return watermark_search.detect(mark, x, rate)


SCORES: list[dict[str, Any]] = []  # every unmarked read, per speed: kept in the result


def _read(mark: watermark.PerthMark, x: np.ndarray, rate: int) -> tuple[bool, float, float]:
    """Unmarked audio's verdict (as watermark_search.detect gives it), its
    plain score and the search's best score over every speed."""
    plain = mark.detect(x, rate)
    scores = [score for _, score in watermark_search.speed_scores(mark, x, rate)]
    SCORES.append({"seconds": round(x.size / rate, 2), "plain": plain.confidence, "speeds": scores})
    best = max(scores)
    flagged = plain.watermarked or best >= watermark_search.SEARCH_THRESHOLD
    return flagged, plain.confidence, best


def robustness(
    mark: watermark.PerthMark, marked: list[np.ndarray], clean: list[np.ndarray]
) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for name, attack in ATTACKS.items():
        hits = [_detect(mark, *attack(x)) for x in marked]
        plain_hits = [mark.detect(*attack(x)) for x in marked]
        false = [_read(mark, *attack(x)) for x in clean]
        rows[name] = {
            "detected": sum(d.watermarked for d in hits) / len(hits),
            "detected_plain": sum(d.watermarked for d in plain_hits) / len(hits),
            "median_confidence": statistics.median(d.confidence for d in hits),
            "speeds_read": sorted({d.speed for d in hits if d.watermarked}),
            "false_positive": sum(f for f, _, _ in false) / len(false),
            "clean_max_confidence": max(p for _, p, _ in false),
            "clean_max_search": max(b for _, _, b in false),
        }
        print(name, rows[name], flush=True)
    return rows


def recordings(quick: bool) -> list[tuple[str, np.ndarray, int]]:
    files: list[Path] = []
    manifest = EVALDATA / "manifest.json"
    if manifest.is_file():
        files += [EVALDATA / f["file"] for f in json.loads(manifest.read_text())["files"]]
    files += sorted(TEST_DATA.glob("*.wav"))
    if quick:
        files = files[::5]
    out = []
    for path in files:
        x, sr = sf.read(path, dtype="float32", always_2d=True)
        out.append((path.name, x.mean(axis=1), sr))
    return out


def false_positives(mark: watermark.PerthMark, quick: bool) -> dict[str, Any]:
    clips = recordings(quick)
    whole = [_read(mark, x, sr) for _, x, sr in clips]
    excerpts = []
    for _, x, sr in clips:
        n = int(EXCERPT_S * sr)
        excerpts += [_read(mark, x[i : i + n], sr) for i in range(0, x.size - n + 1, n)]
    sped = [_read(mark, _speed(x, f, sr), sr) for _, x, sr in clips for f in (0.9, 1.1)]
    flagged = [name for (name, _, _), d in zip(clips, whole, strict=True) if d[0]]
    every = whole + excerpts + sped
    return {
        "recordings": len(clips),
        "recordings_flagged": len(flagged),
        "flagged": flagged,
        "recordings_max_confidence": max(p for _, p, _ in whole),
        "excerpts_3s": len(excerpts),
        "excerpts_flagged": sum(f for f, _, _ in excerpts),
        "excerpts_max_confidence": max(p for _, p, _ in excerpts),
        "sped_recordings": len(sped),
        "sped_flagged": sum(f for f, _, _ in sped),
        "sped_max_confidence": max(p for _, p, _ in sped),
        # The search's threshold against unmarked speech: the margin.
        "search_flagged": sum(b >= watermark_search.SEARCH_THRESHOLD for _, _, b in every),
        "search_max": max(b for _, _, b in every),
        "search_p99": float(np.percentile([b for _, _, b in every], 99)),
        "search_threshold": watermark_search.SEARCH_THRESHOLD,
        "seconds": round(sum(x.size / sr for _, x, sr in clips), 1),
    }


def quality(marked: list[np.ndarray], clean: list[np.ndarray], texts: list[str]) -> dict[str, Any]:
    from voice_table import Dnsmos
    from voxclone.synth.voice.asr import Transcriber, word_error_rate

    dnsmos, asr = Dnsmos(), Transcriber()
    rows: dict[str, dict[str, float]] = {}
    for label, clips in (("unmarked", clean), ("marked", marked)):
        scores = [dnsmos.score(x) for x in clips]
        wers = [
            word_error_rate(t, asr.transcribe(x, RATE)) for x, t in zip(clips, texts, strict=True)
        ]
        rows[label] = {
            "p808": statistics.mean(s["p808"] for s in scores),
            "ovrl": statistics.mean(s["ovrl"] for s in scores),
            "wer": statistics.mean(wers),
        }
    snr = [
        10 * np.log10(np.sum(c.astype(np.float64) ** 2) / max(1e-20, np.sum((m - c) ** 2)))
        for m, c in zip(marked, clean, strict=True)
        if m.size == c.size
    ]
    rows["change"] = {
        "p808": rows["marked"]["p808"] - rows["unmarked"]["p808"],
        "ovrl": rows["marked"]["ovrl"] - rows["unmarked"]["ovrl"],
        "wer": rows["marked"]["wer"] - rows["unmarked"]["wer"],
        "snr_db_median": float(np.median(snr)) if snr else float("nan"),
    }
    return rows


def _mark_stream(mark: watermark.PerthMark, piece: np.ndarray) -> object:
    return watermark.StreamMarker(mark, RATE).push(piece)


def first_audio(marked_rt: Any, clean_rt: Any, mark: watermark.PerthMark, n: int) -> dict[str, Any]:
    """Streams' first audio, each text marked and unmarked (which goes first
    alternates; caches are off), and the time to mark each first piece's
    head by itself (what marking adds to first audio)."""
    on: list[float] = []
    off: list[float] = []
    diffs: list[float] = []
    mark_cpu: list[float] = []
    mark_wall: list[float] = []
    sizes: list[float] = []
    whole_cpu: list[float] = []
    whole_wall: list[float] = []
    for i, text in enumerate(TTFA_TEXTS[:n]):
        pairs = ((marked_rt, on), (clean_rt, off))
        order = pairs if i % 2 == 0 else pairs[::-1]
        piece = np.zeros(0, np.float32)
        for runtime, samples in order:
            seconds, first = _first_audio(runtime, text)
            samples.append(seconds)
            if runtime is clean_rt:
                piece = first
        diffs.append(on[-1] - off[-1])
        # The unmarked first piece, marked as the renderer marks it.
        head = piece[: int(FIRST_HEAD_S * RATE)]  # what first audio waits for
        c, w = _cpu_wall(partial(_mark_stream, mark, head), 5)
        mark_cpu.append(c)
        mark_wall.append(w)
        c, w = _cpu_wall(partial(_mark_stream, mark, piece), 5)
        whole_cpu.append(c)
        whole_wall.append(w)
        sizes.append(piece.size / RATE)
    return {
        "requests_each": n,
        "marked_p50_s": statistics.median(on),
        "unmarked_p50_s": statistics.median(off),
        "difference_p50_ms": 1000 * statistics.median(diffs),
        "first_piece_s_p50": statistics.median(sizes),
        "head_s": FIRST_HEAD_S,
        "mark_head_cpu_ms_p50": 1000 * statistics.median(mark_cpu),
        "mark_head_wall_ms_p50": 1000 * statistics.median(mark_wall),
        "mark_head_wall_ms_max": 1000 * max(mark_wall),
        "mark_first_piece_cpu_ms_p50": 1000 * statistics.median(whole_cpu),
        "mark_first_piece_wall_ms_p50": 1000 * statistics.median(whole_wall),
    }


def markdown(result: dict[str, Any]) -> str:
    every = range(
        result["false_positives"]["recordings"]
        + result["false_positives"]["excerpts_3s"]
        + result["false_positives"]["sped_recordings"]
    )
    rob, fp, q, c, f = (
        result["robustness"],
        result["false_positives"],
        result["quality"],
        result["cost"],
        result["first_audio"],
    )
    lines = [
        f"PerTh (`{result['watermark']}`) on {result['renders']} product renders "
        f"({len(result['voices'])} voices x {result['sentences']} sentences, 24 kHz), "
        f"load {result['load_before'][0]:.1f} -> {result['load_after'][0]:.1f} on "
        f"{os.cpu_count()} cores. Speed: played back 0.9x / 1.1x (tempo and pitch); "
        "noise: white, +20 dB SNR; opus: the product's Opus. Detection: the plain read "
        "(confidence >= 0.5 is marked), then, when it finds nothing, the search over "
        f"{len(watermark_search.SPEEDS)} playback speeds {min(watermark_search.SPEEDS):.2f}x.."
        f"{max(watermark_search.SPEEDS):.2f}x (a speed counts at "
        f">= {watermark_search.SEARCH_THRESHOLD}; synth/audio/watermark_search.py).\n",
        "| attack | detected (marked) | plain read alone | median confidence | "
        "false positives (unmarked) | unmarked: best speed's score |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in rob.items():
        lines.append(
            f"| {name} | {row['detected']:.0%} | {row['detected_plain']:.0%} | "
            f"{row['median_confidence']:.2f} | {row['false_positive']:.0%} | "
            f"{row['clean_max_search']:.2f} |"
        )
    lines += [
        "",
        f"Real recordings: {fp['recordings_flagged']} of {fp['recordings']} flagged "
        f"(max confidence {fp['recordings_max_confidence']:.2f}); "
        f"{fp['excerpts_flagged']} of {fp['excerpts_3s']} non-overlapping 3 s excerpts "
        f"(max {fp['excerpts_max_confidence']:.2f}); {fp['sped_flagged']} of "
        f"{fp['sped_recordings']} played at 0.9x / 1.1x; {fp['seconds']:.0f} s of speech. "
        f"The speed search's best score on all {len(every)} of these: max "
        f"{fp['search_max']:.2f}, p99 {fp['search_p99']:.2f} ({fp['search_flagged']} at or "
        f"above its threshold {fp['search_threshold']}: margin "
        f"{fp['search_threshold'] - fp['search_max']:.2f}"
        + ("; every one flagged above is the plain read's)." if not fp["search_flagged"] else ")."),
        "",
        f"{result.get('carried', '')}Quality, unmarked -> marked: DNSMOS P.808 "
        f"{q['unmarked']['p808']:.3f} -> "
        f"{q['marked']['p808']:.3f} ({q['change']['p808']:+.3f}), OVRL "
        f"{q['unmarked']['ovrl']:.3f} -> {q['marked']['ovrl']:.3f} "
        f"({q['change']['ovrl']:+.3f}), WER (Whisper tiny.en) {q['unmarked']['wer']:.3f} -> "
        f"{q['marked']['wer']:.3f}; the mark sits {q['change']['snr_db_median']:.1f} dB "
        "below the speech (median).",
        "",
        f"Cost (CPU time; wall at this load): marking {c['mark_cpu_ms_per_s']:.1f} ms per audio s "
        f"(wall {c['mark_wall_ms_per_s']:.1f}); detection of marked audio (the plain read) "
        f"{c['detect_marked_cpu_ms_per_s']:.1f} ms (wall {c['detect_marked_wall_ms_per_s']:.1f}), "
        f"of unmarked audio (the plain read and every speed) "
        f"{c['detect_unmarked_cpu_ms_per_s']:.1f} ms (wall "
        f"{c['detect_unmarked_wall_ms_per_s']:.1f}) for files up to the search's "
        f"{watermark_search.SEARCH_WINDOW_S:.0f} s window, "
        f"{c['detect_joined_unmarked_cpu_ms_per_s']:.1f} ms for a {c['joined_unmarked_s']:.0f} s "
        f"file (the search reads its central {watermark_search.SEARCH_WINDOW_S:.0f} s). "
        "Added to a stream's first audio: marking "
        f"its {f['head_s']:.1f} s head, {f['mark_head_cpu_ms_p50']:.1f} ms CPU, "
        f"{f['mark_head_wall_ms_p50']:.1f} ms wall (p50; max {f['mark_head_wall_ms_max']:.1f}); "
        f"marking the whole first piece ({f['first_piece_s_p50']:.2f} s) took "
        f"{f['mark_first_piece_cpu_ms_p50']:.1f} ms CPU, "
        f"{f['mark_first_piece_wall_ms_p50']:.1f} ms wall. Streams' first audio, "
        f"{f['requests_each']} texts each marked and unmarked: marked "
        f"{1000 * f['marked_p50_s']:.0f} ms, unmarked {1000 * f['unmarked_p50_s']:.0f} ms p50, "
        f"paired difference {f['difference_p50_ms']:+.0f} ms p50 (end to end through two "
        "runtimes on a shared host: engine noise included; the head's mark is what marking "
        "itself adds).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--detection-only",
        action="store_true",
        help="measure detection only; keep the last result's quality and first-audio figures",
    )
    args = parser.parse_args()
    earlier: dict[str, Any] = {}
    if args.detection_only:
        earlier = json.loads((RESULTS_DIR / "watermark.json").read_text())
    load_before = os.getloadavg()
    voices = VOICES[:2] if args.quick else VOICES
    sentences = SENTENCES[:2] if args.quick else SENTENCES
    marked_rt, clean_rt = _runtime(True), _runtime(False)
    mark = watermark.shared()
    try:
        marked, clean, texts = [], [], []
        for voice in voices:
            for text in sentences:
                marked.append(_render(marked_rt, text, voice))
                clean.append(_render(clean_rt, text, voice))
                texts.append(text)
        print(f"{len(marked)} renders", flush=True)
        if args.detection_only:
            first = earlier["first_audio"]
        else:
            first = first_audio(marked_rt, clean_rt, mark, 4 if args.quick else 12)
        print(first, flush=True)
    finally:
        marked_rt.close()
        clean_rt.close()
    command = "nice -n 10 python bench/watermark.py" + (" --quick" if args.quick else "")
    result: dict[str, Any] = {
        "command": command + (" --detection-only" if args.detection_only else ""),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "watermark": watermark.WATERMARK_ID,
        "voices": list(voices),
        "sentences": len(sentences),
        "renders": len(marked),
        "load_before": load_before,
        "cost": cost(mark, clean, marked),
        "first_audio": first,
        "robustness": robustness(mark, marked, clean),
        "false_positives": false_positives(mark, args.quick),
        "quality": earlier["quality"] if earlier else quality(marked, clean, texts),
    }
    if earlier:
        # Quality and first audio do not depend on the detector: from the last full run.
        when = earlier.get("measured", earlier["date"])
        result["measured"] = when
        result["carried"] = f"Quality and first audio: from the run of {when[:16]}Z. "

    result["load_after"] = os.getloadavg()
    # The unmarked reads that came nearest the search's threshold, per speed
    # (the tail sets it; all of them would be ~10k lines of JSON).
    top = sorted(SCORES, key=lambda r: -max(r["speeds"]))[:20]
    result["unmarked_reads_top20"] = {
        "speeds": [round(s, 4) for s in watermark_search.SPEEDS],
        "reads": [{**r, "speeds": [round(v, 4) for v in r["speeds"]]} for r in top],
    }
    write_result(RESULTS_DIR / "watermark.json", result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
