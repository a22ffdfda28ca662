"""A stream's first chunk in two pieces (head first) or whole: first audio, stalls, WER, level.

Two runtimes, one with Kokoro's ``head_piece`` option on (the default) and
one with it off, stream the same texts one after the other, interleaved, on
an idle server (the all-cores lane): the three-sentence paragraphs of
``bench/ttfa.py`` and the Harvard, short-first and long-first texts of
``studies/first_chunk.py``, in the default voice and a male one. Recorded per
stream: time to the first audio, the silence a listener playing from it hears
(``bench/_common.stream_pcm``), Whisper tiny.en's WER, and the level of the
first 0.5 s of speech against the same stream rendered whole (the head is
made from a short window, and the generator normalizes over its window).

    python studies/head_piece.py [--texts 8]

Writes studies/results/head_piece.json and .md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "studies"))

from first_chunk import HARVARD, LONG_FIRST, SHORT_FIRST  # noqa: E402

from _common import bench_home, stream_pcm, write_result  # noqa: E402
from ttfa import paragraphs  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.audio.join import audible_bounds  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "head_piece.json"
VOICES = ("clear_female", "am_michael")
MODES = ("whole", "head piece")
OPENING_S = 0.5


def opening_level_db(audio: np.ndarray, rate: int) -> float:
    """RMS level (dBFS) of the first ``OPENING_S`` of speech."""
    bounds = audible_bounds(audio, rate)
    if bounds is None:
        return float("-inf")
    start = bounds[0]
    part = audio[start : start + int(OPENING_S * rate)].astype(np.float64)
    return float(10.0 * np.log10(np.mean(part**2) + 1e-12))


def run(count: int) -> dict[str, Any]:
    texts = paragraphs(count) + list(SHORT_FIRST) + list(HARVARD) + list(LONG_FIRST)
    runtimes = {
        mode: build_runtime(
            Settings(
                home=bench_home("voxclone-head-piece-"),
                memory_cache_mb=0,
                disk_cache_mb=0,
                engine_options={"kokoro": {"head_piece": "true" if mode != "whole" else "false"}},
            ),
            warmup=True,
            with_voices=False,
        )
        for mode in MODES
    }
    transcriber = Transcriber()
    rows: list[dict[str, Any]] = []
    try:
        for text in texts:
            for voice in VOICES:
                levels: dict[str, float] = {}
                for mode, runtime in runtimes.items():
                    rate = runtime.speech.sample_rate
                    request = SpeechRequest(text=text, voice=voice, format="pcm")
                    streamed = stream_pcm(runtime.speech, request, rate)
                    levels[mode] = opening_level_db(streamed.audio, rate)
                    row = {
                        "mode": mode,
                        "voice": voice,
                        "text": text,
                        "ttfa_s": streamed.first_s,
                        "stall_s": streamed.stall_s,
                        "wer": word_error_rate(text, transcriber.transcribe(streamed.audio, rate)),
                        "opening_db": levels[mode],
                        "opening_vs_whole_db": levels[mode] - levels["whole"],
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        for runtime in runtimes.values():
            runtime.close()
    return {"rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        ttfa = sorted(r["ttfa_s"] for r in mine)
        shift = [r["opening_vs_whole_db"] for r in mine]
        out[mode] = {
            "streams": len(mine),
            "ttfa_p50": statistics.median(ttfa),
            "ttfa_p90": ttfa[min(len(ttfa) - 1, int(0.9 * len(ttfa)))],
            "mean_wer": float(np.mean([r["wer"] for r in mine])),
            "stall_p50": statistics.median(r["stall_s"] for r in mine),
            "stall_max": max(r["stall_s"] for r in mine),
            "opening_vs_whole_db_p50": statistics.median(shift),
            "opening_vs_whole_db_min": min(shift),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Each text streamed both ways, interleaved, idle server (all-cores lane), voices "
        f"{', '.join(VOICES)}; WER of the whole stream by Whisper tiny.en; opening level: "
        f"RMS of the first {OPENING_S} s of speech against the same stream rendered whole.",
        "",
        "| first chunk | streams | TTFA p50 s | TTFA p90 s | stall p50 / max s | WER "
        "| opening level vs whole, p50 / min dB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, s in result["summary"].items():
        lines.append(
            f"| {mode} | {s['streams']} | {s['ttfa_p50']:.3f} | {s['ttfa_p90']:.3f} | "
            f"{s['stall_p50']:.3f} / {s['stall_max']:.3f} | {s['mean_wer']:.1%} | "
            f"{s['opening_vs_whole_db_p50']:+.1f} / {s['opening_vs_whole_db_min']:+.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=8, help="bench/ttfa.py paragraphs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    result = run(args.texts)
    result["command"] = shlex.join(["python", "studies/head_piece.py", *sys.argv[1:]])
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
