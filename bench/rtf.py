"""Speed of the synthesis path: model load, real-time factor, and voxclone's overhead.

Compares, in one run on the same phoneme ids and style vector:
  * ``raw``: one onnxruntime session called the simplest possible way;
  * ``engine``: voxclone's Kokoro engine (``synthesize`` per chunk);
  * ``service``: the whole SpeechService path (text normalization, G2P,
    scheduler, joining with pauses) that HTTP and the CLI use.
The overhead ratio is service time / raw time. G2P is included in ``service``
but not in ``raw`` (raw gets precomputed ids), so the ratio is an upper bound
on what voxclone adds.

    python bench/rtf.py [--repeat 3] [--threads 1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.engine.base import SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.engine import KokoroEngine, style_row  # noqa: E402

TEXT_5S = "The quick brown fox jumps over the lazy dog, and then it runs into the forest."
TEXT_30S = (
    "Once upon a time, in a small village at the edge of a great forest, there lived an old "
    "clockmaker. Every morning he opened his shop at seven, swept the floor, and wound each of "
    "the forty clocks that hung on the walls. Children from the village often stopped by on their "
    "way to school, pressing their noses against the window to watch the pendulums swing. One "
    "winter day, a stranger arrived with a broken pocket watch and a story nobody believed. "
    "He said the watch had stopped at the exact moment his luck ran out."
)


def _time(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def run(repeat: int, threads: int) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix="voxclone-bench-"))
    settings = Settings(home=home, onnx_threads=threads, memory_cache_mb=0, disk_cache_mb=0)
    started = time.perf_counter()
    runtime = build_runtime(settings, warmup=False)
    build_s = time.perf_counter() - started
    load_s = runtime.engine.load_seconds
    started = time.perf_counter()
    runtime.engine.warmup()
    warmup_s = time.perf_counter() - started

    speech = runtime.speech
    # The voice a request naming none speaks with (the English default since
    # the standard packs: Settings.default_voice is "" unless set).
    voice_name = runtime.speech.default_voice(runtime.speech.default_engine)
    assert voice_name is not None
    voice = runtime.catalog.resolve(voice_name, None)
    style = voice.style
    assert style is not None  # Kokoro's voices are style arrays
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    engine = runtime.engine
    assert isinstance(engine, KokoroEngine)  # the raw baseline runs Kokoro's own graph
    raw = ort.InferenceSession(str(engine.assets.model_path), sess_options=opts)

    results: dict[str, object] = {
        "threads": threads,
        "model_load_s": round(load_s or 0.0, 3),
        "runtime_build_s": round(build_s, 3),
        "warmup_s": round(warmup_s, 3),
        "texts": {},
    }
    for label, text in (("5s", TEXT_5S), ("30s", TEXT_30S)):
        request = SpeechRequest(text=text, voice=voice_name)
        _, planned = speech.plan(request)
        chunks = list(planned)
        items = [SynthItem(c.token_ids, style, 1.0) for c in chunks]

        def call_raw(items: list[SynthItem] = items) -> float:
            total = 0
            for item in items:
                audio = raw.run(
                    None,
                    {
                        "tokens": np.array([[0, *item.token_ids, 0]], dtype=np.int64),
                        "style": style_row(style, len(item.token_ids)).reshape(1, 256),
                        "speed": np.array([1.0], dtype=np.float32),
                    },
                )[0]
                total += audio.size
            return total

        def call_engine(items: list[SynthItem] = items) -> None:
            for item in items:
                runtime.engine.synthesize([item])

        def call_service(request: SpeechRequest = request) -> None:
            speech.render_audio(request)

        samples = call_raw()
        audio_s = samples / 24_000
        service_audio_s = speech.render_audio(request).size / 24_000
        t_raw = _time(call_raw, repeat)
        t_engine = _time(call_engine, repeat)
        t_service = _time(call_service, repeat)
        med = {
            k: statistics.median(v)
            for k, v in (("raw", t_raw), ("engine", t_engine), ("service", t_service))
        }
        results["texts"][label] = {  # type: ignore[index]
            "chars": len(text),
            "chunks": len(chunks),
            "audio_s_model": round(audio_s, 2),
            "audio_s_service": round(service_audio_s, 2),
            "seconds": {k: round(v, 3) for k, v in med.items()},
            "rtf": {k: round(v / audio_s, 3) for k, v in med.items()},
            "overhead_engine_vs_raw": round(med["engine"] / med["raw"], 3),
            "overhead_service_vs_raw": round(med["service"] / med["raw"], 3),
        }
        print(label, json.dumps(results["texts"][label]), flush=True)  # type: ignore[index]
    runtime.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--quick", action="store_true", help="one repeat, one thread setting")
    parser.add_argument("--out", default=str(RESULTS_DIR / "rtf.json"))
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.threads = 1, [1]
    runs = [run(args.repeat, t) for t in args.threads]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": "python " + " ".join(sys.argv), "runs": runs}, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
