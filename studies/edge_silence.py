"""How much of a chunk's edge silence should Kokoro's decoder render?

Streams each text (the three-sentence paragraphs of ``bench/ttfa.py`` and the
short- and long-opening texts of ``studies/first_chunk.py``) in two voices
through the public speech service (``SpeechService.stream``; the fast lane on
an idle server) of one runtime per setting of the Kokoro engine option
``edge_silence_frames`` ("off" = all of it, as exported), the settings
interleaved per text, and records:
  * time to the first audio and to the end of the stream;
  * Whisper tiny.en's WER on the whole stream;
  * the product speaker encoder's cosine to the "off" stream of the same text
    and voice (how much the voice moved), and the loudness difference.

    python studies/edge_silence.py [--texts 8] [--settings off,2,4,8]

Writes studies/results/edge_silence.json and .md.
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
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from first_chunk import LONG_FIRST, SHORT_FIRST  # noqa: E402

from _common import bench_home, stream_pcm, write_result  # noqa: E402
from ttfa import paragraphs  # noqa: E402
from voxclone.bootstrap import Runtime, build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.synth.audio.effects import loudness_lufs  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "edge_silence.json"
VOICES = ("clear_female", "clear_male")
REFERENCE = "off"


def _runtime(setting: str) -> Runtime:
    settings = Settings(
        home=bench_home(f"voxclone-edges-{setting}-"),
        memory_cache_mb=0,
        disk_cache_mb=0,
        engine_options={"kokoro": {"edge_silence_frames": setting}},
    )
    return build_runtime(settings, warmup=True, with_voices=False)


def run(count: int, settings: list[str]) -> dict[str, Any]:
    if REFERENCE not in settings:
        settings = [REFERENCE, *settings]
    texts = paragraphs(count) + list(SHORT_FIRST) + list(LONG_FIRST)
    runtimes = {setting: _runtime(setting) for setting in settings}
    transcriber = Transcriber()
    encoder = SpeakerEncoder()
    rows: list[dict[str, Any]] = []
    try:
        rate = runtimes[REFERENCE].speech.sample_rate
        for text in texts:
            for voice in VOICES:
                reference: tuple[np.ndarray, float] | None = None
                for setting in settings:
                    streamed = stream_pcm(
                        runtimes[setting].speech,
                        SpeechRequest(text=text, voice=voice, format="pcm"),
                        rate,
                    )
                    audio, ttfa, total = streamed.audio, streamed.first_s, streamed.total_s
                    embedding = encoder.embed(soxr.resample(audio, rate, 16_000))
                    loudness = loudness_lufs(audio, rate)
                    if setting == REFERENCE:
                        reference = (embedding, loudness)
                    assert reference is not None
                    row = {
                        "setting": setting,
                        "voice": voice,
                        "text": text,
                        "ttfa_s": ttfa,
                        "total_s": total,
                        "audio_s": audio.size / rate,
                        "wer": word_error_rate(text, transcriber.transcribe(audio, rate)),
                        "cosine_to_off": cosine(embedding, reference[0]),
                        "loudness_change_db": loudness - reference[1],
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        for runtime in runtimes.values():
            runtime.close()
    return {"rows": rows, "summary": summarize(rows, settings)}


def summarize(rows: list[dict[str, Any]], settings: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in settings:
        mine = [r for r in rows if r["setting"] == setting]
        ttfa = sorted(r["ttfa_s"] for r in mine)
        out[setting] = {
            "streams": len(mine),
            "ttfa_p50": statistics.median(ttfa),
            "ttfa_p90": ttfa[min(len(ttfa) - 1, int(0.9 * len(ttfa)))],
            "total_s_p50": statistics.median(r["total_s"] for r in mine),
            "total_s_sum": sum(r["total_s"] for r in mine),
            "mean_wer": float(np.mean([r["wer"] for r in mine])),
            "cosine_to_off_mean": float(np.mean([r["cosine_to_off"] for r in mine])),
            "cosine_to_off_min": float(np.min([r["cosine_to_off"] for r in mine])),
            "loudness_change_db": float(np.mean([r["loudness_change_db"] for r in mine])),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Each text streamed in two voices with every setting, interleaved, idle server "
        "(fast lane); WER of the whole stream by Whisper tiny.en; cosine: the product "
        "speaker encoder, against the stream with all edge silence ('off').",
        "",
        "| edge silence frames | streams | TTFA p50 s | TTFA p90 s | stream p50 s "
        "| all streams s | WER | cosine to off (min) | loudness dB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for setting, s in result["summary"].items():
        lines.append(
            f"| {setting} | {s['streams']} | {s['ttfa_p50']:.3f} | {s['ttfa_p90']:.3f} | "
            f"{s['total_s_p50']:.2f} | {s['total_s_sum']:.1f} | {s['mean_wer']:.1%} | "
            f"{s['cosine_to_off_mean']:.3f} ({s['cosine_to_off_min']:.3f}) | "
            f"{s['loudness_change_db']:+.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=8, help="bench/ttfa.py paragraphs")
    parser.add_argument("--settings", default="off,2,4,8")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    result = run(args.texts, [s.strip() for s in args.settings.split(",") if s.strip()])
    result["command"] = " ".join(["python studies/edge_silence.py", *sys.argv[1:]])
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
