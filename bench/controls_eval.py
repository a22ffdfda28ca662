"""Measure what the speaking controls and emotion presets really do.

Writes bench/results/controls.json and bench/results/controls.md (a markdown
table merged into docs/benchmarks.md): per emotion preset the measured median
F0, F0 range, speaking rate, loudness and Whisper tiny.en WER on the default
voice; WER at the corners of the speed × pitch × energy box; and the
comparison of pitch-shift methods (WORLD, PSOLA, style-vector prosody shift)
by interval accuracy, WER, resemblyzer similarity to the unshifted voice and
added time.

Run: ``python bench/controls_eval.py`` (about 5 minutes on 2 cores).
"""

from __future__ import annotations

import itertools
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from out_paths import RESULTS_DIR  # noqa: E402
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.audio.effects import loudness_lufs, measure_f0, pitch_shift, true_peak_dbfs
from voxclone.synth.controls import EMOTIONS, SpeechControls
from voxclone.synth.engine.base import SynthItem
from voxclone.synth.voice.asr import Transcriber, word_error_rate

SR = 24_000
VOICE = "clear_female"
SENTENCES = (
    "The museum opens at nine in the morning and closes at five.",
    "Turn left at the next corner and walk two blocks.",
    "She sells fresh bread at the market every Saturday.",
)
RESULTS = RESULTS_DIR
FEMALE_PACKS = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro")
# Style-space pitch: octaves per unit step along (female − male) prosody, fitted
# on the default voice (a 0.6 step moved F0 by about 0.57 octave).
STYLE_OCTAVES_PER_UNIT = 0.95


def active_seconds(audio: np.ndarray, frame: int = 480, floor_db: float = -35.0) -> float:
    """Seconds of 20 ms frames within ``floor_db`` of the loudest frame (speech, not pauses)."""
    n = len(audio) // frame
    if n == 0:
        return 0.0
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame).astype(np.float64) ** 2, axis=1))
    threshold = rms.max() * 10 ** (floor_db / 20)
    return float(np.count_nonzero(rms > threshold) * frame / SR)


def f0_stats(audio: np.ndarray) -> dict[str, float]:
    voiced = measure_f0(audio, SR)
    if voiced.size < 20:
        return {"f0_median_hz": 0.0, "f0_range_oct": 0.0, "voiced_fraction": 0.0}
    low, median, high = np.percentile(voiced, [10, 50, 90])
    frames = max(1, len(audio) // (SR // 200))
    return {
        "f0_median_hz": float(median),
        "f0_range_oct": float(np.log2(high / low)),
        "voiced_fraction": float(voiced.size / frames),
    }


def describe(audio: np.ndarray, text: str, transcriber: Transcriber) -> dict[str, float]:
    words = len(text.split())
    return {
        **f0_stats(audio),
        "words_per_s": words / max(active_seconds(audio), 1e-6),
        "loudness_lufs": loudness_lufs(audio, SR),
        "true_peak_dbfs": true_peak_dbfs(audio),
        "wer": word_error_rate(text, transcriber.transcribe(audio, SR)),
    }


def mean_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}


def presets(runtime: Runtime, transcriber: Transcriber) -> dict[str, dict[str, float]]:
    table = {}
    for emotion in EMOTIONS:
        rows = []
        for text in SENTENCES:
            request = SpeechRequest(
                text=text, voice=VOICE, controls=SpeechControls(emotion=emotion)
            )
            rows.append(describe(runtime.speech.render_audio(request), text, transcriber))
        table[emotion] = mean_rows(rows)
        print(emotion, {k: round(v, 3) for k, v in table[emotion].items()}, flush=True)
    return table


def corners(runtime: Runtime, transcriber: Transcriber) -> list[dict[str, float]]:
    text = SENTENCES[0]
    out = []
    for speed, pitch, energy in itertools.product((0.5, 2.0), (-0.5, 0.5), (0.8, 1.2)):
        controls = SpeechControls(speed=speed, pitch=pitch, energy=energy)
        audio = runtime.speech.render_audio(
            SpeechRequest(text=text, voice=VOICE, controls=controls)
        )
        row = {
            "speed": speed,
            "pitch": pitch,
            "energy": energy,
            **describe(audio, text, transcriber),
        }
        out.append(row)
        print("corner", {k: round(v, 3) for k, v in row.items()}, flush=True)
    return out


def pitch_methods(runtime: Runtime, transcriber: Transcriber) -> dict[str, dict[str, float]]:
    """Each method at ±0.25 and ±0.5 octave on every sentence, against the unshifted render."""
    import soxr
    from resemblyzer import VoiceEncoder, preprocess_wav

    encoder = VoiceEncoder("cpu", verbose=False)

    def embed(audio: np.ndarray) -> np.ndarray:
        return np.asarray(
            encoder.embed_utterance(preprocess_wav(soxr.resample(audio, SR, 16_000), 16_000))
        )

    engine = runtime.engine
    packs = engine.style_packs()
    style = runtime.catalog.resolve(VOICE, None).style
    assert style is not None  # a Kokoro voice: a style array
    female = np.mean([packs[name] for name in FEMALE_PACKS], axis=0)
    direction = np.zeros_like(style)
    direction[..., 128:] = female[..., 128:] - packs["jm_kumo"][..., 128:]

    rows: dict[str, list[dict[str, float]]] = {"world": [], "psola": [], "style": []}
    for text in SENTENCES:
        _, planned = runtime.speech.plan(SpeechRequest(text=text, voice=VOICE, language="en-us"))
        tokens = next(planned).token_ids
        base = engine.synthesize([SynthItem(tokens, style, 1.0)])[0]
        base_f0 = float(np.median(measure_f0(base, SR)))
        base_embedding = embed(base)
        for octaves in (-0.5, -0.25, 0.25, 0.5):
            for method in rows:
                started = time.perf_counter()
                if method == "style":
                    shifted_style = (style + (octaves / STYLE_OCTAVES_PER_UNIT) * direction).astype(
                        np.float32
                    )
                    audio = engine.synthesize([SynthItem(tokens, shifted_style, 1.0)])[0]
                    added = 0.0  # replaces the synthesis that happens anyway
                else:
                    audio = pitch_shift(base, SR, octaves, method=method)  # type: ignore[arg-type]
                    added = time.perf_counter() - started
                embedding = embed(audio)
                moved = float(np.log2(np.median(measure_f0(audio, SR)) / base_f0))
                rows[method].append(
                    {
                        "interval_error_pct": 100 * abs(moved - octaves) / abs(octaves),
                        "duration_ratio": len(audio) / len(base),
                        "wer": word_error_rate(text, transcriber.transcribe(audio, SR)),
                        "similarity": float(
                            embedding
                            @ base_embedding
                            / (np.linalg.norm(embedding) * np.linalg.norm(base_embedding))
                        ),
                        "added_seconds_per_audio_second": added / (len(base) / SR),
                    }
                )
    summary = {}
    for method, method_rows in rows.items():
        summary[method] = mean_rows(method_rows)
        summary[method]["max_interval_error_pct"] = max(
            r["interval_error_pct"] for r in method_rows
        )
        print(method, {k: round(v, 3) for k, v in summary[method].items()}, flush=True)
    return summary


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def markdown(result: dict[str, Any]) -> str:
    presets_rows = [
        [
            name,
            f"{row['f0_median_hz']:.0f}",
            f"{row['f0_range_oct']:.2f}",
            f"{row['voiced_fraction']:.2f}",
            f"{row['words_per_s']:.2f}",
            f"{row['loudness_lufs']:.1f}",
            _pct(row["wer"]),
        ]
        for name, row in result["presets"].items()
    ]
    corner_rows = [
        [
            f"{row['speed']}",
            f"{row['pitch']:+}",
            f"{row['energy']}",
            f"{row['f0_median_hz']:.0f}",
            f"{row['words_per_s']:.2f}",
            f"{row['loudness_lufs']:.1f}",
            f"{row['true_peak_dbfs']:.2f}",
            _pct(row["wer"]),
        ]
        for row in result["corners"]
    ]
    method_rows = [
        [
            name,
            f"{row['interval_error_pct']:.0f} % / {row['max_interval_error_pct']:.0f} %",
            _pct(row["wer"]),
            f"{row['similarity']:.3f}",
            f"{row['duration_ratio']:.3f}",
            f"{row['added_seconds_per_audio_second']:.3f}",
        ]
        for name, row in result["pitch_methods"].items()
    ]
    lines = [
        f"### Emotion presets ({result['voice']}, mean of {len(SENTENCES)} sentences)",
        "",
        *_table(
            [
                "preset",
                "median F0 (Hz)",
                "F0 range (oct, p10–p90)",
                "voiced fraction",
                "rate (words/s)",
                "loudness (LUFS)",
                "WER",
            ],
            presets_rows,
        ),
        "",
        "### Control corners (speed × pitch × energy, one sentence)",
        "",
        *_table(
            [
                "speed",
                "pitch (oct)",
                "energy",
                "median F0 (Hz)",
                "words/s",
                "LUFS",
                "true peak (dBFS)",
                "WER",
            ],
            corner_rows,
        ),
        "",
        f"### Pitch-shift methods (±0.25 and ±0.5 octave, {len(SENTENCES)} sentences)",
        "",
        *_table(
            [
                "method",
                "interval error mean / max",
                "WER",
                "similarity to unshifted (resemblyzer)",
                "duration ratio",
                "added s per s of audio",
            ],
            method_rows,
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    warnings.filterwarnings("ignore")
    runtime = build_runtime(
        Settings(home=Path(tempfile.mkdtemp(prefix="voxclone-bench-"))), warmup=True
    )
    transcriber = Transcriber()
    try:
        result = {
            "voice": VOICE,
            "presets": presets(runtime, transcriber),
            "corners": corners(runtime, transcriber),
            "pitch_methods": pitch_methods(runtime, transcriber),
        }
    finally:
        runtime.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "controls.json").write_text(json.dumps(result, indent=2))
    (RESULTS / "controls.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
