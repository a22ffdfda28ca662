"""The first requests after a start: does the background cloning load slow them?

A fresh ``voxclone serve`` (caches off) gets a series of three-sentence
paragraphs (``bench/ttfa.py``), one at a time with a pause between them, as an
interactive user sends them; the HTTP time to first audio of each request is
recorded by its position in the series. Servers with the cloning models
loading in the background (the default) and with ``VOXCLONE_WARM_CLONING=false``
alternate, so both see the same machine.

    python studies/second_request.py [--runs 2] [--requests 8] [--gap 1.0]

Writes studies/results/second_request.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))  # _common, ttfa

from _common import bench_home, write_result  # noqa: E402
from ttfa import http_first_audio, paragraphs  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "second_request.json"
MODES = {"cloning loads in the background": "true", "no cloning load": "false"}


def series(warm_cloning: str, count: int, gap_s: float) -> list[float]:
    import httpx

    from voxclone.devserver import running_server

    env = {
        "VOXCLONE_MEMORY_CACHE_MB": "0",
        "VOXCLONE_DISK_CACHE_MB": "0",
        "VOXCLONE_WARM_CLONING": warm_cloning,
    }
    out = []
    with (
        running_server(bench_home("voxclone-second-"), env, timeout_s=180.0) as server,
        httpx.Client(base_url=server.url, timeout=120.0) as client,
    ):
        for text in paragraphs(count):
            first = http_first_audio(client, text)
            assert first is not None, "the stream ended without audio"
            out.append(first)
            time.sleep(gap_s)
    return out


def markdown(result: dict[str, Any]) -> str:
    count = result["requests"]
    lines = [
        f"HTTP time to first audio (s) by position after a fresh start, {result['runs']} "
        f"runs per mode (interleaved), {result['gap_s']:g} s between requests.",
        "",
        "| mode | " + " | ".join(f"#{i + 1}" for i in range(count)) + " |",
        "|---|" + "---:|" * count,
    ]
    for mode, runs in result["modes"].items():
        medians = [statistics.median(run[i] for run in runs) for i in range(count)]
        lines.append(f"| {mode} (median) | " + " | ".join(f"{m:.2f}" for m in medians) + " |")
        for n, run in enumerate(runs, 1):
            lines.append(f"| {mode}, run {n} | " + " | ".join(f"{t:.2f}" for t in run) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between requests")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    modes: dict[str, list[list[float]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        for mode, flag in MODES.items():
            modes[mode].append(series(flag, args.requests, args.gap))
            print(mode, [round(t, 3) for t in modes[mode][-1]], flush=True)
    result = {
        "command": " ".join(["python studies/second_request.py", *sys.argv[1:]]),
        "runs": args.runs,
        "requests": args.requests,
        "gap_s": args.gap,
        "modes": modes,
    }
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
