"""What does Kokoro's warm-up buy? First-request latency with each warm-up size.

Issue #20 asks for the warm-up to be sized by what it buys. Each run is a fresh
process (a warm-up only matters once per process): it builds the speech
runtime (no cloning, caches off), runs one warm-up variant, then streams two
different three-sentence paragraphs through ``SpeechService.stream`` and
records the time to the first audio bytes and to the end of each.

Variants (each session = the single-thread worker session and the all-core
fast-lane session):
  * ``none``: no warm-up at all;
  * ``one``: one call of the warm-up phrase per session;
  * ``two``: two calls per session (the warm-up before this measurement).

    python studies/warmup_sizing.py [--repeat 3]

Writes studies/results/warmup_sizing.json and prints a table (medians).
"""

from __future__ import annotations

import time

PROCESS_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

RESULTS = ROOT / "studies" / "results" / "warmup_sizing.json"
VARIANTS = ("none", "one", "two")
# Calls per session for each variant.
CALLS = {"none": 0, "one": 1, "two": 2}


def child(variant: str) -> dict[str, Any]:
    from _common import bench_home
    from ttfa import paragraphs
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings
    from voxclone.service.speech.service import SpeechRequest
    from voxclone.synth.engine.kokoro.engine import KokoroEngine

    settings = Settings(
        home=bench_home("voxclone-warmup-"),
        memory_cache_mb=0,
        disk_cache_mb=0,
        warm_cloning=False,
    )
    runtime = build_runtime(settings, warmup=False, with_voices=False)
    loaded = time.perf_counter()
    engine = runtime.default.engine
    assert isinstance(engine, KokoroEngine)  # Kokoro's warm-up call is what is sized
    began = time.perf_counter()
    for _ in range(CALLS[variant]):
        engine.warmup_call()
    warmup_s = time.perf_counter() - began
    ready = time.perf_counter()
    requests = []
    for text in paragraphs(2):
        started = time.perf_counter()
        first = None
        _, parts = runtime.speech.stream(SpeechRequest(text=text, format="pcm"))
        for part in parts:
            if part and first is None:
                first = time.perf_counter() - started
        requests.append({"ttfa_s": first, "total_s": time.perf_counter() - started})
    runtime.close()
    return {
        "variant": variant,
        "load_s": loaded - PROCESS_START,
        "warmup_s": warmup_s,
        "ready_s": ready - PROCESS_START,
        "first": requests[0],
        "second": requests[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        for variant in VARIANTS:  # interleaved: drift in machine load hits every variant
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    table = {}
    for variant in VARIANTS:
        mine = [r for r in runs if r["variant"] == variant]

        def med(key: str, sub: str | None = None, rows: list[dict[str, Any]] = mine) -> float:
            values = [r[key][sub] if sub else r[key] for r in rows]
            return round(statistics.median(values), 3)

        table[variant] = {
            "warmup_s": med("warmup_s"),
            "ready_s": med("ready_s"),
            "first_ttfa_s": med("first", "ttfa_s"),
            "first_total_s": med("first", "total_s"),
            "second_ttfa_s": med("second", "ttfa_s"),
            "second_total_s": med("second", "total_s"),
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"medians": table, "runs": runs}, indent=2))
    lines = [
        f"`python studies/warmup_sizing.py --repeat {args.repeat}`: fresh process per run, "
        "variants interleaved, medians; first and second stream of a three-sentence "
        "paragraph after the warm-up.",
        "",
        "| warm-up | calls/session | warm-up s | ready s | 1st TTFA s | 1st total s "
        "| 2nd TTFA s | 2nd total s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant, row in table.items():
        lines.append(
            f"| {variant} | {CALLS[variant]} | {row['warmup_s']} | {row['ready_s']} | "
            f"{row['first_ttfa_s']} | {row['first_total_s']} | {row['second_ttfa_s']} | "
            f"{row['second_total_s']} |"
        )
    RESULTS.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
