"""How long should a stream's first chunk be? Time to first audio and WER by rule.

For each text (the three-sentence paragraphs of ``bench/ttfa.py``, a few
whose first sentence is short and a few that open with long words), streams
it through the public speech service (``SpeechService.stream``: the fast
lane on an idle server) with the shipped first-chunk rule (3 words, fewer
while they exceed the token cap), the same without the token cap, and the
rule before both (4 words, any tail), interleaved, and records the first
chunk's tokens, the time to the first audio and Whisper tiny.en's WER on
the whole stream.

    python studies/first_chunk.py [--texts 12]

Writes studies/results/first_chunk.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import bench_home, stream_pcm  # noqa: E402
from ttfa import paragraphs  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.text import frontend  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "first_chunk.json"
NO_CAP = 10**6
# (first-chunk words, least words left behind, token cap): two earlier rules and the shipped one.
RULES = {
    "4 words (before)": (4, 1, NO_CAP),
    "3 words, no token cap": (
        frontend.STREAM_FIRST_CHUNK_WORDS,
        frontend.STREAM_MIN_TAIL_WORDS,
        NO_CAP,
    ),
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
# Long opening words: where a word count and a token count disagree.
LONG_FIRST = (
    "Internationally recognized researchers demonstrated the effect again. Nobody expected it.",
    "Unfortunately, unforeseeable complications postponed the announcement. We will write soon.",
    "Extraordinarily complicated negotiations continued throughout the weekend. "
    "They ended on Monday.",
    "Telecommunications infrastructure modernization begins tomorrow. Expect short outages.",
)


def run(count: int) -> dict[str, Any]:
    texts = paragraphs(count) + list(SHORT_FIRST) + list(LONG_FIRST)
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
            for label, (words, tail, cap) in RULES.items():
                frontend.STREAM_FIRST_CHUNK_WORDS, frontend.STREAM_MIN_TAIL_WORDS = words, tail
                frontend.STREAM_FIRST_CHUNK_TOKENS = cap
                request = SpeechRequest(text=text, format="pcm")
                _, chunks = runtime.speech.plan(request, fast_start=True)
                first = next(iter(chunks))
                audio, ttfa, _ = stream_pcm(runtime.speech, request)
                row = {
                    "rule": label,
                    "text": text,
                    "first_chunk": first.text,
                    "first_chunk_tokens": len(first.token_ids),
                    "long_first_words": text in LONG_FIRST,
                    "ttfa_s": ttfa,
                    "wer": word_error_rate(text, transcriber.transcribe(audio, rate)),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        runtime.close()
    return {"rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for label in RULES:
        mine = [r for r in rows if r["rule"] == label]
        ttfa = sorted(r["ttfa_s"] for r in mine)
        out[label] = {
            "texts": len(mine),
            "ttfa_p50": statistics.median(ttfa),
            "ttfa_p90": ttfa[min(len(ttfa) - 1, int(0.9 * len(ttfa)))],
            "mean_wer": float(np.mean([r["wer"] for r in mine])),
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
        "| TTFA p50 s | TTFA p90 s | WER | long first words: tokens p50 | TTFA p50 s | WER |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
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
            f"{s['ttfa_p90']:.3f} | {s['mean_wer']:.1%} | {tail_cells} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=12, help="bench/ttfa.py paragraphs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    result = run(args.texts)
    result["command"] = " ".join(["python studies/first_chunk.py", *sys.argv[1:]])
    args.out.write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
