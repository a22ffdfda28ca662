"""How accurate are the word timestamps? Ours (Kokoro's own durations) vs Whisper's.

For 20 sentences (plain words, numbers, abbreviations, two-sentence texts),
speaks each through the public speech service with word timestamps
(``synthesize_captioned``), transcribes the audio with Whisper tiny.en with
word timestamps (faster-whisper, the ASR the WER checks use), pairs the words
both sides agree on (difflib on lower-cased letters and digits) and reports
the absolute difference of word starts and ends: median and p90 in ms.
Whisper's own word times come from cross-attention and are themselves only
accurate to a few tens of ms, so this is an upper bound on our error as much
as a measure of it.

Writes bench/results/word_timestamps.json and prints a summary.

Run: ``python bench/word_timestamps.py [--speeds 1.0 1.5]`` (about a minute
per speed on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import time
import warnings
from typing import Any

import numpy as np
import soundfile as sf

from _common import bench_home
from out_paths import RESULTS_DIR  # noqa: E402
from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.controls import SpeechControls
from voxclone.synth.voice.asr import Transcriber

RESULTS = RESULTS_DIR
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "The museum opens at nine in the morning and closes at five.",
    "She sells fresh bread at the market every Saturday.",
    "We need three tickets for the train to the city.",
    "The weather was cold, but the sky was bright and clear.",
    "My brother plays the guitar in a small band.",
    "Turn left at the next corner and walk two blocks.",
    "A cup of hot tea helps me relax in the evening.",
    "The children built a castle out of sand on the beach.",
    "In 1984 the library opened its doors to the public.",
    "The package weighs 12 pounds and costs 30 dollars.",
    "Dr. Smith will see you at the clinic on Main Street.",
    "Our flight leaves at 7 in the morning from gate 22.",
    "He finished the race in second place after 3 hours.",
    "It rained all night. The river rose above its banks.",
    "Close the window, please. The wind is getting stronger.",
    "Reading a good book is the best way to spend a quiet afternoon.",
    "The engineers tested the bridge before they opened it to traffic.",
    "Every morning she walks her dog around the lake.",
]


def _key(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


def _pairs(ours: list[Any], heard: list[tuple[str, float, float]]) -> list[tuple[Any, Any]]:
    a = [_key(w.word) for w in ours]
    b = [_key(w[0]) for w in heard]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [
        (ours[blk.a + k], heard[blk.b + k])
        for blk in matcher.get_matching_blocks()
        for k in range(blk.size)
    ]


def measure(speeds: tuple[float, ...], voice: str) -> dict[str, Any]:
    home = bench_home("voxclone-bench-")
    runtime = build_runtime(
        Settings(home=home, memory_cache_mb=0, disk_cache_mb=0), warmup=False, with_voices=False
    )
    transcriber = Transcriber()
    out: dict[str, Any] = {"voice": voice, "sentences": len(SENTENCES), "speeds": {}}
    started = time.perf_counter()
    try:
        for speed in speeds:
            start_err: list[float] = []
            end_err: list[float] = []
            words_total = 0
            for text in SENTENCES:
                result = runtime.speech.synthesize_captioned(
                    SpeechRequest(
                        text=text,
                        voice=voice,
                        controls=SpeechControls(speed=speed),
                        format="wav",
                        owner="bench",
                    )
                )
                audio, sr = sf.read(io.BytesIO(result.audio), dtype="float32")
                heard = transcriber.transcribe_words(audio, sr)
                words_total += len(result.words)
                for ours, (_, h_start, h_end) in _pairs(list(result.words), heard):
                    start_err.append(abs(ours.start_s - h_start) * 1000)
                    end_err.append(abs(ours.end_s - h_end) * 1000)
            s, e = np.array(start_err), np.array(end_err)
            out["speeds"][str(speed)] = {
                "words": words_total,
                "paired_with_asr": len(s),
                "start_median_ms": round(float(np.median(s)), 1),
                "start_p90_ms": round(float(np.percentile(s, 90)), 1),
                "end_median_ms": round(float(np.median(e)), 1),
                "end_p90_ms": round(float(np.percentile(e, 90)), 1),
            }
    finally:
        runtime.close()
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def overhead(runs: int = 5) -> dict[str, Any]:
    """Engine time per call with and without the timing slot, interleaved so
    the machine's load hits both alike (the durations are computed anyway;
    asking for them copies T + 2 floats)."""
    from voxclone.synth.engine.base import SynthItem, TokenTiming
    from voxclone.synth.engine.kokoro.engine import KokoroEngine

    engine = KokoroEngine(bench_home("voxclone-bench-") / "models")
    engine.load()
    tokens = engine.tokenizer().token_ids(
        engine.tokenizer().phonemize(SENTENCES[1] + " " + SENTENCES[4], "en-us")
    )
    pack = next(iter(engine.style_packs().values()))
    plain: list[float] = []
    timed: list[float] = []
    for _ in range(runs):
        for sink, with_timing in ((plain, False), (timed, True)):
            item = SynthItem(tokens, pack, 1.0, timing=TokenTiming() if with_timing else None)
            started = time.perf_counter()
            audio = engine.synthesize([item])[0]
            sink.append(time.perf_counter() - started)
    seconds = audio.size / 24_000
    return {
        "tokens": len(tokens),
        "audio_s": round(seconds, 2),
        "rtf_plain": round(float(np.median(plain)) / seconds, 3),
        "rtf_with_timing": round(float(np.median(timed)) / seconds, 3),
        "load_s": round(engine.load_seconds or 0.0, 3),
    }


def render_markdown(result: dict[str, Any]) -> str:
    lines = [
        "Word timestamps (Kokoro's predicted token durations, mapped to words and "
        "through speed, joins and pauses) against Whisper tiny.en's word times "
        f"(faster-whisper, `word_timestamps=True`) on {result['sentences']} sentences, "
        f"voice `{result['voice']}`: absolute difference per word both sides agree on.",
        "",
        "| speed | words | paired with ASR | start median ms | start p90 ms "
        "| end median ms | end p90 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for speed, row in result["speeds"].items():
        lines.append(
            f"| {speed} | {row['words']} | {row['paired_with_asr']} | "
            f"{row['start_median_ms']} | {row['start_p90_ms']} | "
            f"{row['end_median_ms']} | {row['end_p90_ms']} |"
        )
    if "overhead" in result:
        o = result["overhead"]
        lines += [
            "",
            f"Cost of asking for the durations (`--overhead`, {o['tokens']} tokens, "
            f"{o['audio_s']} s of audio, calls interleaved): RTF {o['rtf_plain']} without, "
            f"{o['rtf_with_timing']} with the timing slot.",
        ]
    lines += [
        "",
        "Whisper's word times are themselves approximate (cross-attention, tens of "
        "ms), so the figures bound our error from above rather than measure it "
        "exactly. Accuracy is not a timing figure: the run was niced and the "
        "machine shared.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--speeds", type=float, nargs="+", default=[1.0, 1.5])
    parser.add_argument("--voice", default="clear_female")
    parser.add_argument(
        "--overhead", action="store_true", help="also time engine calls with/without timing"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    result = measure(tuple(args.speeds), args.voice)
    if args.overhead:
        result["overhead"] = overhead()
    result["reference"] = "faster-whisper tiny.en word_timestamps=True"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "word_timestamps.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "word_timestamps.md").write_text(render_markdown(result))
    for speed, row in result["speeds"].items():
        print(
            f"speed {speed}: {row['paired_with_asr']}/{row['words']} words paired; "
            f"start median {row['start_median_ms']} ms, p90 {row['start_p90_ms']} ms; "
            f"end median {row['end_median_ms']} ms, p90 {row['end_p90_ms']} ms"
        )


if __name__ == "__main__":
    main()
