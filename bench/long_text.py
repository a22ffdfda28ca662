"""Long text end to end: `voxclone say` on ~20,000 characters, RTF and peak memory.

Shows that a book-chapter-sized input streams through the planner in order
with bounded memory: peak RSS should not grow with the text length. Runs the
real CLI in a subprocess and samples its RSS.

    python bench/long_text.py [--chars 20000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import soundfile as sf

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARAGRAPH = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. "
    "He polished the great lens, trimmed the wick, and wrote the weather in his log. "
    "Ships passed far out at sea, and their lights blinked back at him like distant stars. "
    "On the twelfth of March, 1891, a storm rolled in from the west, and the waves rose "
    "higher than the rocks. He kept the lamp burning through the night.\n\n"
)


def _peak_rss_mb(proc: subprocess.Popen[bytes]) -> float:
    handle = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, handle.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.5)
    return peak / (1 << 20)


def run(chars: int) -> dict[str, object]:
    text = (PARAGRAPH * (chars // len(PARAGRAPH) + 1))[:chars]
    work = Path(tempfile.mkdtemp(prefix="voxclone-long-"))
    (work / "text.txt").write_text(text)
    out = work / "out.mp3"
    command = [sys.executable, "-m", "voxclone.api.cli", "say", "-", "-o", str(out)]
    env = {"VOXCLONE_HOME": str(work / "home"), "PATH": "/usr/bin:/bin"}
    started = time.perf_counter()
    with open(work / "text.txt", "rb") as stdin:
        proc = subprocess.Popen(command, stdin=stdin, env=env, cwd=ROOT)
        peak = _peak_rss_mb(proc)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"voxclone say failed with exit code {proc.returncode}")
    audio_s = sf.info(str(out)).duration
    return {
        "chars": chars,
        "wall_s": round(seconds, 1),
        "audio_s": round(audio_s, 1),
        "rtf_including_start_up": round(seconds / audio_s, 3),
        "peak_rss_mb": round(peak, 1),
        "output_mb": round(out.stat().st_size / (1 << 20), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="2,000 and 6,000 characters")
    args = parser.parse_args()
    sizes = [2_000, 6_000] if args.quick else [2_000, args.chars]
    runs = [run(n) for n in sizes]
    command = "python bench/long_text.py" + (" --quick" if args.quick else "")
    results = RESULTS_DIR
    results.mkdir(parents=True, exist_ok=True)
    (results / "long_text.json").write_text(
        json.dumps({"command": command, "runs": runs}, indent=1)
    )
    lines = [
        "Long text through `voxclone say` (MP3 out); peak RSS of the whole CLI process.",
        "",
        "| characters | audio s | wall s | RTF incl. start-up | peak RSS MB | output MB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['chars']} | {r['audio_s']} | {r['wall_s']} | {r['rtf_including_start_up']} "
            f"| {r['peak_rss_mb']} | {r['output_mb']} |"
        )
    (results / "long_text.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
