"""How long should a stream's first chunk be? Time to first audio, stalls and WER by rule.

For each text (the three-sentence paragraphs of ``bench/ttfa.py``, a few
whose first sentence is short, a few Harvard sentences and a few that open
with long words), streams it through the public speech service
(``SpeechService.stream``: the fast lane on an idle server) with each
first-chunk rule of ``RULES`` (the shipped one, shorter heads, and the rules
the shipped one replaced), interleaved, and records the first chunk's
tokens, the time to the first audio, the silence a listener playing from the
first audio hears while later parts are still rendering (a short head buys
first audio with less audio to cover the next chunk's render), and Whisper
tiny.en's WER on the whole stream.

    python studies/first_chunk.py [--texts 12] [--rules shipped "2 words" ...]

Writes studies/results/first_chunk.json and .md.
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

from _common import bench_home, stream_pcm, write_result  # noqa: E402
from ttfa import paragraphs  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.text import frontend  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "first_chunk.json"
NO_CAP = 10**6
# (first-chunk words, least words left behind, token cap): the shipped rule and
# shorter heads. 4 words and 3 without a cap lost to the shipped rule before
# (docs/studies.md); --rules picks others by name.
RULES = {
    "4 words (before)": (4, 1, NO_CAP),
    "3 words, no token cap": (3, 2, NO_CAP),
    "2 words": (2, 2, NO_CAP),
    "3 words, fewer above 12 tokens": (3, 2, 12),
    "shipped": (
        frontend.STREAM_FIRST_CHUNK_WORDS,
        frontend.STREAM_MIN_TAIL_WORDS,
        frontend.STREAM_FIRST_CHUNK_TOKENS,
    ),
}
SHORT_FIRST = (
    "Turn left here, please. The station is two blocks away.",
    "It was raining again today. We stayed inside and read.",
    "Call me back tomorrow morning. I will be at home.",
    "The meeting has been moved to Friday. Please tell the others.",
)
# Harvard sentences (IEEE 1969, public domain): their third word carries the
# sense, so a two-word head leaves a later chunk opening on a bare noun
# ("The birch | canoe slid ..." was heard "can you slit", tests/integration/
# test_wyoming.py with a 12-token cap).
HARVARD = (
    "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background.",
    "The small pup gnawed a hole in the sock. The fish twisted and turned on the bent hook.",
    "The box was thrown beside the parked truck. Four hours of steady work faced us.",
    "A large size in stockings is hard to sell. The boy was there when the sun rose.",
)
# Long opening words: where a word count and a token count disagree.
LONG_FIRST = (
    "Internationally recognized researchers demonstrated the effect again. Nobody expected it.",
    "Unfortunately, unforeseeable complications postponed the announcement. We will write soon.",
    "Extraordinarily complicated negotiations continued throughout the weekend. "
    "They ended on Monday.",
    "Telecommunications infrastructure modernization begins tomorrow. Expect short outages.",
)


def run(count: int, rules: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    texts = paragraphs(count) + list(SHORT_FIRST) + list(HARVARD) + list(LONG_FIRST)
    runtime = build_runtime(
        Settings(home=bench_home("voxclone-first-chunk-"), memory_cache_mb=0, disk_cache_mb=0),
        warmup=True,
        with_voices=False,
    )
    transcriber = Transcriber()
    rate = runtime.speech.sample_rate
    rows: list[dict[str, Any]] = []
    try:
        for text in texts:
            for label, (words, tail, cap) in rules.items():
                frontend.STREAM_FIRST_CHUNK_WORDS, frontend.STREAM_MIN_TAIL_WORDS = words, tail
                frontend.STREAM_FIRST_CHUNK_TOKENS = cap
                request = SpeechRequest(text=text, format="pcm")
                _, chunks = runtime.speech.plan(request, fast_start=True)
                first = next(iter(chunks))
                streamed = stream_pcm(runtime.speech, request, rate)
                row = {
                    "rule": label,
                    "text": text,
                    "first_chunk": first.text,
                    "first_chunk_tokens": len(first.token_ids),
                    "long_first_words": text in LONG_FIRST,
                    "ttfa_s": streamed.first_s,
                    "stall_s": streamed.stall_s,
                    "wer": word_error_rate(text, transcriber.transcribe(streamed.audio, rate)),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        runtime.close()
    return {"rows": rows, "summary": summarize(rows, list(rules))}


def summarize(rows: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    out = {}
    for label in labels:
        mine = [r for r in rows if r["rule"] == label]
        ttfa = sorted(r["ttfa_s"] for r in mine)
        out[label] = {
            "texts": len(mine),
            "ttfa_p50": statistics.median(ttfa),
            "ttfa_p90": ttfa[min(len(ttfa) - 1, int(0.9 * len(ttfa)))],
            "mean_wer": float(np.mean([r["wer"] for r in mine])),
            # A listener's silence after the first audio: a head too short
            # to cover the next chunk's render is heard as a gap.
            "stall_p50": statistics.median(r["stall_s"] for r in mine),
            "stall_max": max(r["stall_s"] for r in mine),
            "first_chunk_words": statistics.median(len(r["first_chunk"].split()) for r in mine),
            "first_chunk_tokens_max": max(r["first_chunk_tokens"] for r in mine),
        }
        long_first = [r for r in mine if r["long_first_words"]]
        if long_first:
            out[label]["long_first"] = {
                "texts": len(long_first),
                "ttfa_p50": statistics.median(r["ttfa_s"] for r in long_first),
                "first_chunk_tokens_p50": statistics.median(
                    r["first_chunk_tokens"] for r in long_first
                ),
                "mean_wer": float(np.mean([r["wer"] for r in long_first])),
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Each text streamed with every rule, interleaved, idle server (fast lane), "
        "default voice; WER of the whole stream by Whisper tiny.en. "
        "'long first words': the texts that open with long words.",
        "",
        "| first-chunk rule | texts | median first-chunk words | most first-chunk tokens "
        "| TTFA p50 s | TTFA p90 s | stall p50 / max s | WER "
        "| long first words: tokens p50 | TTFA p50 s | WER |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, s in result["summary"].items():
        name = label
        if label == "shipped":
            words, tail, cap = RULES[label]
            name = f"{words} words (fewer above {cap} tokens), ≥ {tail} left behind (shipped)"
        long_first = s.get("long_first")
        tail_cells = (
            f"{long_first['first_chunk_tokens_p50']:g} | {long_first['ttfa_p50']:.3f} | "
            f"{long_first['mean_wer']:.1%}"
            if long_first
            else "– | – | –"
        )
        lines.append(
            f"| {name} | {s['texts']} | {s['first_chunk_words']:g} | "
            f"{s.get('first_chunk_tokens_max', '–')} | {s['ttfa_p50']:.3f} | "
            f"{s['ttfa_p90']:.3f} | {s['stall_p50']:.3f} / {s['stall_max']:.3f} | "
            f"{s['mean_wer']:.1%} | {tail_cells} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=12, help="bench/ttfa.py paragraphs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--rules", nargs="+", choices=list(RULES), default=list(RULES), help="rules to compare"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    result = run(args.texts, {label: RULES[label] for label in args.rules})
    result["command"] = shlex.join(["python", "studies/first_chunk.py", *sys.argv[1:]])
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
