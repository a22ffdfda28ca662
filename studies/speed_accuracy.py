"""Does ``speed`` do what it says? Whole-file duration and WER across 0.5-2.0.

For a two-sentence text, each voice and each speed, speaks the text through
the public speech service (pauses and edges included, as a user gets the
file), and compares the file's duration with the duration at speed 1.0
divided by the speed; Whisper tiny.en WER checks that the words survive.
Writes studies/results/speed_accuracy.json and prints a table.

Run: ``python studies/speed_accuracy.py [--label NAME]`` (a few minutes on an
idle 2-core machine; ``--label`` as in studies/short_phrases.py).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # _common

from _common import bench_home  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.controls import SpeechControls  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TEXT = "The museum opens at nine in the morning. Turn left at the next corner and walk two blocks."
VOICES = ("clear_female", "clear_male")
SPEEDS = (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
TOLERANCE = 0.03


def measure(
    label: str, speeds: tuple[float, ...] = SPEEDS, voices: tuple[str, ...] = VOICES
) -> dict[str, Any]:
    home = bench_home("voxclone-bench-")
    runtime = build_runtime(
        Settings(home=home, memory_cache_mb=0, disk_cache_mb=0), warmup=False, with_voices=False
    )
    transcriber = Transcriber()
    out: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        for voice in voices:
            rows = {}
            for speed in sorted(set(speeds) | {1.0}):
                result = runtime.speech.synthesize(
                    SpeechRequest(
                        text=TEXT,
                        voice=voice,
                        controls=SpeechControls(speed=speed),
                        format="wav",
                        owner="bench",
                    )
                )
                audio, rate = sf.read(io.BytesIO(result.audio), dtype="float32")
                heard = transcriber.transcribe(np.asarray(audio), int(rate))
                rows[speed] = {"seconds": len(audio) / rate, "wer": word_error_rate(TEXT, heard)}
            base = rows[1.0]["seconds"]
            for speed, row in rows.items():
                row["ratio"] = row["seconds"] / base
                row["error"] = row["ratio"] * speed - 1.0  # 0 = exactly 1/speed as long
            out[voice] = {str(k): v for k, v in rows.items()}
    finally:
        runtime.close()
    worst = max(abs(r["error"]) for v in out.values() for r in v.values())
    return {
        "label": label,
        "command": f"python studies/speed_accuracy.py --label {label}",
        "text": TEXT,
        "tolerance": TOLERANCE,
        "worst_error": worst,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "voices": out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--speeds", help="comma-separated subset, e.g. 0.5,2.0")
    parser.add_argument("--voices", help="comma-separated subset of " + ",".join(VOICES))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    speeds = tuple(float(x) for x in args.speeds.split(",")) if args.speeds else SPEEDS
    voices = tuple(args.voices.split(",")) if args.voices else VOICES
    run = measure(args.label, speeds, voices)
    run["command"] = "python studies/speed_accuracy.py " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if v
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "speed_accuracy.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[args.label] = run
    path.write_text(json.dumps(runs, indent=2))
    print(f"{args.label}: worst error {run['worst_error']:+.1%}")
    for voice, rows in run["voices"].items():
        for speed, row in rows.items():
            print(
                f"  {voice:13s} speed {float(speed):4.2f}: {row['seconds']:.2f} s, "
                f"x{row['ratio']:.3f} (error {row['error']:+.1%}), WER {row['wer']:.1%}"
            )


if __name__ == "__main__":
    main()
