"""The speed curve for every built-in voice: is a file at ``speed`` 1/speed as long?

Each built-in voice (Kokoro's 54 standard voices and the two clear blends: 56)
speaks one sentence of its own language through the public library
(``voxclone.load().synthesize``, the whole file as a user gets it: edges and
pauses included) at speed 1.0 and at each measured speed; the error is
``duration(speed) * speed / duration(1.0) - 1`` (0: exactly 1/speed as long).
The target is ±3 % at every speed for every voice. English voices are also
transcribed at the fastest speed (Whisper tiny.en WER), so a fix that keeps
durations exact must not cost the words.

    python bench/speed_curve.py                     # 56 voices, ~50 min on 2 busy cores
    python bench/speed_curve.py --resume            # go on after an interrupted run
    python bench/speed_curve.py --voices af_heart zf_xiaoxiao --out /tmp/s.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import voxclone  # noqa: E402
from _common import bench_home, write_result  # noqa: E402

SPEEDS = (0.5, 2.0)
TOLERANCE = 0.03
# One sentence per language (Harvard-style, as bench/voice_table.py's), about
# 2-3 s at speed 1.0: long enough that a frame of rounding is under 1 %.
SENTENCES: dict[str, str] = {
    "en-us": "The source of the huge river is the clear spring.",
    "en-gb": "The source of the huge river is the clear spring.",
    "es": "Mi hermana prepara una sopa de verduras los domingos.",
    "fr": "Ma sœur prépare une soupe de légumes le dimanche.",
    "hi": "मेरी बहन रविवार को सब्ज़ियों का सूप बनाती है।",
    "it": "Mia sorella prepara una zuppa di verdure la domenica.",
    "ja": "姉は日曜日に野菜のスープを作ります。",
    "pt-br": "Minha irmã prepara uma sopa de legumes aos domingos.",
    "zh": "我姐姐星期天做蔬菜汤。",
}
ENGLISH = ("en-us", "en-gb")


def builtin_voices(tts: voxclone.Voxclone) -> list[tuple[str, str]]:
    """(voice, language) for every built-in of the default engine; a voice
    without a language (the clear blends) speaks American English."""
    listing = tts.runtime.catalog.listing(tts.owner)
    return [(v.name, v.language or "en-us") for v in listing if v.builtin]


def measure(
    tts: voxclone.Voxclone, voice: str, language: str, speeds: tuple[float, ...], asr: Any
) -> dict[str, Any]:
    text = SENTENCES[language]
    base = tts.synthesize(text, voice=voice, language=language, speed=1.0)
    row: dict[str, Any] = {"voice": voice, "language": language, "seconds_1": base.duration_s}
    for speed in speeds:
        audio = tts.synthesize(text, voice=voice, language=language, speed=speed)
        row[f"error_{speed:g}"] = audio.duration_s * speed / base.duration_s - 1.0
        if asr is not None and language in ENGLISH and speed == max(speeds):
            from voxclone.synth.voice.asr import word_error_rate

            heard = asr.transcribe(np.asarray(audio.samples), audio.sample_rate)
            row[f"wer_{speed:g}"] = word_error_rate(text, heard)
    return row


def markdown(result: dict[str, Any]) -> str:
    speeds = result["speeds"]
    rows = result["rows"]
    worst = {s: max(abs(r[f"error_{s:g}"]) for r in rows) for s in speeds}
    outside = [
        r["voice"]
        for r in rows
        if any(abs(r[f"error_{s:g}"]) > result["tolerance"] for s in speeds)
    ]
    lines = [
        f"Duration error at each speed, `duration(speed) × speed / duration(1.0) − 1`, "
        f"{len(rows)} built-in voices, one sentence of each voice's language, the whole "
        f"file as the library returns it ({result['when']}, {result['seconds']} s). "
        f"Target ±{result['tolerance']:.0%}.",
        "",
        "| speed | worst error | mean error | voices outside ±3 % |",
        "|---:|---:|---:|---:|",
    ]
    for s in speeds:
        errors = [r[f"error_{s:g}"] for r in rows]
        bad = sum(abs(e) > result["tolerance"] for e in errors)
        lines.append(f"| {s:g} | {worst[s]:+.1%} | {np.mean(errors):+.1%} | {bad} |")
    wer_key = f"wer_{max(speeds):g}"
    wers = [r[wer_key] for r in rows if wer_key in r]
    if wers:
        lines += [
            "",
            f"Whisper tiny.en WER at speed {max(speeds):g}, {len(wers)} English voices: "
            f"mean {np.mean(wers):.1%}, worst {max(wers):.1%}.",
        ]
    lines += ["", "Outside the target: " + (", ".join(outside) or "none"), ""]
    lines += ["| voice | language | s at 1.0 | " + " | ".join(f"{s:g}" for s in speeds) + " |"]
    lines += ["|---|---|---:|" + "---:|" * len(speeds)]
    for r in rows:
        cells = " | ".join(f"{r[f'error_{s:g}']:+.1%}" for s in speeds)
        lines.append(f"| {r['voice']} | {r['language']} | {r['seconds_1']:.2f} | {cells} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--voices", nargs="*", help="only these voices")
    parser.add_argument("--speeds", nargs="*", type=float, default=list(SPEEDS))
    parser.add_argument("--no-asr", action="store_true", help="durations only")
    parser.add_argument("--workers", type=int, default=2, help="voices measured at once")
    parser.add_argument(
        "--resume", action="store_true", help="keep the voices an interrupted run measured"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "speed_curve.json")
    args = parser.parse_args()
    speeds = tuple(args.speeds)
    # No caches: every render is a render; ``workers`` engine threads, one voice each.
    workers = max(1, args.workers)
    tts = voxclone.load(
        bench_home("voxclone-speed-"), memory_cache_mb=0, disk_cache_mb=0, workers=workers
    )
    asr = None
    if not args.no_asr:
        from voxclone.synth.voice.asr import Transcriber

        asr = Transcriber()
    started = time.perf_counter()
    builtin_voices_order = builtin_voices(tts)
    partial = args.out.with_suffix(".partial.json")
    done: dict[str, dict[str, Any]] = {}
    if args.resume and partial.exists():
        done = {r["voice"]: r for r in json.loads(partial.read_text())}
    jobs = [
        (voice, language)
        for voice, language in builtin_voices_order
        if (not args.voices or voice in args.voices) and voice not in done
    ]
    lock = threading.Lock()

    def one(job: tuple[str, str]) -> None:
        row = measure(tts, *job, speeds, asr)
        cells = " ".join(f"{s:g}:{row[f'error_{s:g}']:+.1%}" for s in speeds)
        print(f"{job[0]:14s} {job[1]:6s} {cells}", flush=True)
        with lock:
            done[job[0]] = row
            # Written after every voice: a long run on a busy host keeps what it measured.
            partial.write_text(json.dumps(list(done.values()), indent=1))

    try:
        # The engine is thread-safe; each call runs on one thread.
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, jobs))
    finally:
        tts.close()
    order = [voice for voice, _ in builtin_voices_order]
    rows = sorted(done.values(), key=lambda r: order.index(r["voice"]))
    partial.unlink(missing_ok=True)
    result = {
        "command": "python bench/speed_curve.py",
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.perf_counter() - started, 1),
        "speeds": list(speeds),
        "tolerance": TOLERANCE,
        "worst_error": max(abs(r[f"error_{s:g}"]) for r in rows for s in speeds),
        "sentences": SENTENCES,
        "rows": rows,
    }
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
