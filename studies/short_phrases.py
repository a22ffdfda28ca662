"""Are very short utterances intelligible? Whisper tiny.en WER on 2-4 word phrases.

Speaks each phrase through the public speech service (``voxclone say``'s path:
text front end, engine, post-processing, joiner) with the default female and
male voices, transcribes it with the bundled Whisper tiny.en and scores the
word error rate. Writes studies/results/short_phrases.json (and prints a table).

Run: ``python studies/short_phrases.py [--label NAME]`` (about 2 minutes on an
idle 2-core machine). ``--label`` names the run inside the JSON, so a run on
an older checkout (``PYTHONPATH=<old>/src``) and one on this one can sit side
by side (``before`` / ``after``).
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
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
VOICES = ("clear_female", "clear_male")
PHRASES = (
    "Hello there.",
    "Thank you.",
    "Good morning, Sam.",
    "See you soon.",
    "Yes, please.",
    "No, thanks.",
    "Good night.",
    "How are you?",
    "Welcome back.",
    "Call me later.",
    "Where is it?",
    "Open the door.",
    "Happy birthday, Anna.",
    "That sounds great.",
    "Let's go home.",
    "Wait a minute.",
    "Nice to meet you.",
    "Good luck.",
    "Turn it off.",
    "I love this song.",
)


def measure(label: str) -> dict[str, Any]:
    home = bench_home("voxclone-bench-")
    runtime = build_runtime(
        Settings(home=home, memory_cache_mb=0, disk_cache_mb=0), warmup=False, with_voices=False
    )
    transcriber = Transcriber()
    per_voice: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        for voice in VOICES:
            rows = []
            for phrase in PHRASES:
                result = runtime.speech.synthesize(
                    SpeechRequest(text=phrase, voice=voice, format="wav", owner="bench")
                )
                audio, rate = sf.read(io.BytesIO(result.audio), dtype="float32")
                heard = transcriber.transcribe(np.asarray(audio), int(rate))
                rows.append(
                    {
                        "text": phrase,
                        "heard": heard,
                        "wer": word_error_rate(phrase, heard),
                        "seconds": round(len(audio) / rate, 3),
                    }
                )
            per_voice[voice] = {
                "wer": float(np.mean([r["wer"] for r in rows])),
                "phrases_wrong": sum(r["wer"] > 0 for r in rows),
                "rows": rows,
            }
    finally:
        runtime.close()
    return {
        "label": label,
        "command": f"python studies/short_phrases.py --label {label}",
        "elapsed_s": round(time.perf_counter() - started, 1),
        "voices": per_voice,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    run = measure(args.label)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "short_phrases.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[args.label] = run
    path.write_text(json.dumps(runs, indent=2, ensure_ascii=False))
    for voice, data in run["voices"].items():
        print(f"{args.label} {voice}: WER {data['wer']:.1%}, {data['phrases_wrong']}/20 wrong")
        for row in data["rows"]:
            if row["wer"] > 0:
                print(f"   {row['text']!r} -> {row['heard']!r}")


if __name__ == "__main__":
    main()
