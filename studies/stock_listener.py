"""Which listener should hear the stock check: GE2E, CAM++ or their ensemble?

Replays ``bench/clone_eval.py --no-stock-check`` runs (fit and validation
splits only): each speaker is cloned again as the product does it (renders come
from clone_eval's ``--render-cache``, so nothing new is synthesized), and the
clone's probe and its shortlisted built-ins' probes (each with the reference's
tone) are heard against the reference by each listener. The judge's scores of
the clone and of every toned built-in are the run's own. Then
``studies/stock_preference.py``'s study runs once per listener: shortlist length
and preference fitted per fold, leave-one-speaker-out.

Every listener's cosines are put on GE2E's scale (standardized over all the
replayed cosines, no labels, then GE2E's mean and spread) so that one
preference grid serves all three; the ensemble averages the two standardized
cosines, as bench/listener_eer.py does.

    python studies/stock_listener.py --fit FIT.json VALIDATION.json SINGLES.json \
        --render-cache /tmp/h3/renders

Writes studies/results/stock_listener.{json,md}; ``--heard`` caches the
replayed cosines (JSON) so the study can be re-run without any model.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import stock_preference as sp  # noqa: E402

from _common import write_result  # noqa: E402

LISTENERS = ("ge2e", "campplus", "ensemble")


def replay(paths: list[Path], render_cache: Path) -> dict[str, Any]:
    """{set: {speaker: {listener: {"clone": cos, "stock": {name: cos}}}}} for ge2e and campplus."""
    import soxr

    import clone_eval as ce
    from voxclone.synth.engine.base import EngineConfig, SynthItem
    from voxclone.synth.voice.listener import make_listener
    from voxclone.synth.voice.pipeline import CloningPipeline

    settings = ce.Settings()
    engine = ce.registry.create(
        "kokoro", EngineConfig(ce.MODELS_DIR, options=settings.engine_options.get("kokoro", {}))
    )
    engine.load()
    g2p = engine.tokenizer()
    synth = ce.RenderCache(
        lambda tok, pack: engine.synthesize([SynthItem(tok, pack, 1.0)])[0], render_cache
    )
    probe_tokens = g2p.token_ids(g2p.phonemize(ce.TEST_SENTENCE, "en-us"))

    def probe(pack: np.ndarray) -> np.ndarray:
        return synth(probe_tokens, pack)

    encoder = ce.SpeakerEncoder()
    encoder.load()
    listeners = {
        "ge2e": make_listener("ge2e", models_dir=ce.MODELS_DIR, encoder=encoder),
        "campplus": make_listener("campplus", models_dir=ce.MODELS_DIR, encoder=encoder),
    }
    if listeners["campplus"].name != "campplus":
        raise SystemExit("CAM++ weights missing: run `make listener-weights` first")
    atlas = ce.VoiceAtlas.load(engine.atlas_packs(), None, comparison=ce.catalog_comparison)
    pipeline = CloningPipeline(
        ce.InstantCloner(atlas, encoder),
        probe=probe,
        sample_rate=24_000,
        calibrator=ce.PitchCalibrator(atlas, probe, 24_000),
        stock_check=False,
    )
    detector = ce.SpeechDetector()
    by_speaker = ce.utterances_by_speaker(ce.DEFAULT_EVALDATA)
    out: dict[str, Any] = {}
    for path in paths:
        result = json.loads(path.read_text())
        heard_set: dict[str, Any] = {}
        for row in result["speakers"]:
            stored = row["instant"].get("stock_heard")
            if not stored:
                continue
            speaker, enroll = row["speaker"], Path(row["enroll_file"])
            if enroll.stem.startswith(speaker + "_") and enroll.stem[-2:] in ("_a", "_b"):
                # A --split-singles half of the speaker's one recording.
                raw = ce.load_wav16(ce.DEFAULT_EVALDATA / by_speaker[speaker][0]["file"])
                half = len(raw) // 2
                audio = raw[:half] if enroll.stem.endswith("_a") else raw[half:]
            else:
                audio = ce.load_wav16(ce.DEFAULT_EVALDATA / enroll)
            if row["reference"]["ingestion_bypassed"]:
                reference: Any = ce.BypassedReference(audio, len(audio) / 16_000)
            else:
                buf = io.BytesIO()
                sf.write(buf, audio, 16_000, format="WAV")
                reference = ce.prepare_reference(
                    buf.getvalue(), detector=detector, max_bytes=50 << 20, max_seconds=600.0
                )
            cloned = pipeline.clone([reference], match_tone=True, language=ce.LANGUAGE)
            assert cloned.voice.probe is not None
            heard = pipeline.stock.heard(
                cloned.print, cloned.print.spectrum, language=ce.LANGUAGE, shortlist=ce.STOCK_HEARD
            )

            def as_heard(p: np.ndarray, tone: Any) -> np.ndarray:
                x = p if tone is None else tone.apply(p, 24_000)
                return soxr.resample(x, 24_000, 16_000).astype(np.float32)

            per: dict[str, Any] = {}
            for key, listener in listeners.items():
                ref = listener.embed(reference.samples16k, 16_000)
                clone = listener.embed(as_heard(cloned.voice.probe, cloned.tone), 16_000)
                per[key] = {
                    "clone": listener.similarity(ref, clone),
                    "stock": {
                        h.name: listener.similarity(
                            ref, listener.embed(as_heard(h.probe, h.tone), 16_000)
                        )
                        for h in heard
                    },
                }
            per["shortlist"] = [h.name for h in heard]
            per["stored_ge2e_clone"] = row["instant"]["probe_similarity"]
            per["stored_ge2e_stock"] = stored
            heard_set[speaker] = per
            print(speaker, json.dumps({k: per[k]["clone"] for k in listeners}), flush=True)
        out[path.stem] = heard_set
    return out


def on_ge2e_scale(heard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per listener (ge2e, campplus, ensemble): {set: {speaker: (clone, {name: cos})}},
    every listener's cosines standardized over all replayed trials and put on GE2E's scale."""
    raw = {
        k: np.array(
            [
                c
                for group in heard.values()
                for per in group.values()
                for c in [per[k]["clone"], *per[k]["stock"].values()]
            ]
        )
        for k in ("ge2e", "campplus")
    }
    mu = {k: float(v.mean()) for k, v in raw.items()}
    sd = {k: float(v.std()) for k, v in raw.items()}

    def z(k: str, c: float) -> float:
        return (c - mu[k]) / sd[k]

    def scaled(kind: str, per: dict[str, Any], name: str | None) -> float:
        def cos(k: str) -> float:
            return float(per[k]["clone"] if name is None else per[k]["stock"][name])

        score = (
            z(kind, cos(kind))
            if kind != "ensemble"
            else 0.5 * sum(z(k, cos(k)) for k in ("ge2e", "campplus"))
        )
        return mu["ge2e"] + sd["ge2e"] * score

    out: dict[str, dict[str, Any]] = {}
    for kind in LISTENERS:
        out[kind] = {
            label: {
                speaker: (
                    scaled(kind, per, None),
                    {n: scaled(kind, per, n) for n in per["shortlist"]},
                )
                for speaker, per in group.items()
            }
            for label, group in heard.items()
        }
    return out


def speakers_for(
    runs: dict[str, dict[str, Any]], scaled: dict[str, Any]
) -> dict[str, list[sp.Speaker]]:
    """stock_preference's speakers, heard by the replayed listener instead."""
    out: dict[str, list[sp.Speaker]] = {}
    for label, result in runs.items():
        group = []
        for s in sp.speakers_of(result, label):
            clone, stock = scaled[label][s.name]
            heard = tuple((n, stock[n], judge) for n, _, judge in s.heard)
            group.append(replace(s, clone_heard=clone, heard=heard))
        out[label] = group
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Stock check heard by each listener (clone probe and shortlisted built-ins' probes "
        "against the reference; cosines on GE2E's scale), judged by the independent judge. "
        "Margin = mean normalized judge similarity − best toned built-in per sex; "
        "leave-one-speaker-out over the fit + validation speakers, shortlist length and "
        "preference re-fitted per fold for each listener.",
        "",
        "| listener | speakers | no check | k=2, d per fold | (k, d) per fold | "
        "(k, d) on all | fold choices |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for kind, r in result["listeners"].items():
        p = r["fit_speakers_pooled"]
        k, d = r["pair_chosen_on_all_fit_speakers"]
        folds = ", ".join(f"{c} ×{n}" for c, n in sorted(r["pair_fold_choices"].items()))
        lines.append(
            f"| {kind} | {p['speakers']} | {p['margin_no_check']:+.3f} | {p['margin_loso']:+.3f} "
            f"| {p['margin_loso_pair']:+.3f} | k={k} d={d:.2f} | {folds} |"
        )
    lines += [
        "",
        "Against GE2E, speaker by speaker (out of fold, (k, d) per fold): mean difference, "
        "speakers better / worse, 95 % bootstrap interval over speakers, mean without the "
        "speaker that moved most.",
        "",
        "| listener | mean Δ | better | worse | 95 % interval | without the largest |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for kind, v in result["vs_ge2e"].items():
        lo, hi = v["ci95"]
        lines.append(
            f"| {kind} | {v['mean']:+.3f} | {v['better']} | {v['worse']} | "
            f"[{lo:+.3f}, {hi:+.3f}] | {v['mean_without_largest']:+.3f} |"
        )
    # The rule this study decides by: a listener replaces GE2E only when its
    # gain is above zero across speakers (interval) and not one speaker's doing.
    winners = [
        k
        for k, v in result["vs_ge2e"].items()
        if v["ci95"][0] > 0 and v["mean_without_largest"] > 0.02
    ]
    lines += [
        "",
        "Decision rule: a listener replaces GE2E when its 95 % interval lies above 0 and its "
        "mean gain without the speaker that moved most stays above +0.02. "
        + (f"Passes: {', '.join(winners)}." if winners else "No listener passes: GE2E stays."),
    ]
    lines += ["", "Per speaker, out of fold ((k, d) per fold), judge normalized margin:", ""]
    lines += ["| speaker | " + " | ".join(result["listeners"]) + " |"]
    lines += ["|---|" + "---:|" * len(result["listeners"])]
    for speaker in result["per_speaker"]["ge2e"]:
        lines.append(
            f"| {speaker} | "
            + " | ".join(f"{result['per_speaker'][k][speaker]:+.3f}" for k in result["listeners"])
            + " |"
        )
    lines += [
        "",
        f"GE2E replay vs the runs' stored cosines: max |Δ| {result['ge2e_replay_error']:.4f}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, nargs="+", required=True)
    parser.add_argument("--render-cache", type=Path, default=Path("/tmp/h3/renders"))
    parser.add_argument("--heard", type=Path, default=Path("/tmp/h12_heard.json"))
    parser.add_argument("--out", type=Path, default=ROOT / "studies/results/stock_listener.json")
    args = parser.parse_args(argv)
    if args.heard.exists():
        heard = json.loads(args.heard.read_text())
    else:
        heard = replay(args.fit, args.render_cache)
        args.heard.write_text(json.dumps(heard))
    runs = {p.stem: json.loads(p.read_text()) for p in args.fit}
    error = max(
        max(
            [abs(per["ge2e"]["clone"] - per["stored_ge2e_clone"])]
            + [
                abs(c - per["ge2e"]["stock"][n])
                for n, c in per["stored_ge2e_stock"].items()
                if n in per["ge2e"]["stock"]  # character voices: not in the product's list
            ]
        )
        for group in heard.values()
        for per in group.values()
    )
    scaled = on_ge2e_scale(heard)
    result: dict[str, Any] = {"listeners": {}, "per_speaker": {}, "ge2e_replay_error": error}
    for kind in LISTENERS:
        fit = speakers_for(runs, scaled[kind])
        study = sp.study(fit, {})
        result["listeners"][kind] = {
            k: study[k]
            for k in (
                "fit_speakers_pooled",
                "pair_chosen_on_all_fit_speakers",
                "pair_fold_choices",
                "chosen_on_all_fit_speakers",
                "fold_choices",
            )
        }
        # Out-of-fold per speaker with (k, d) re-fitted per fold.
        pooled = [s for g in fit.values() for s in g]
        per: dict[str, float] = {}
        for i, held in enumerate(pooled):
            k, d = sp.best_pair(pooled[:i] + pooled[i + 1 :])
            per[held.name] = held.score(d, k) - held.baseline
        result["per_speaker"][kind] = per
    # Paired against GE2E, speaker by speaker (out of fold): how many moved, and
    # a bootstrap interval over speakers for the mean difference.
    rng = np.random.default_rng(0)
    names = list(result["per_speaker"]["ge2e"])
    result["vs_ge2e"] = {}
    for kind in LISTENERS[1:]:
        diff = np.array(
            [result["per_speaker"][kind][n] - result["per_speaker"]["ge2e"][n] for n in names]
        )
        boot = [float(rng.choice(diff, len(diff)).mean()) for _ in range(10_000)]
        result["vs_ge2e"][kind] = {
            "mean": float(diff.mean()),
            "better": int((diff > 1e-9).sum()),
            "worse": int((diff < -1e-9).sum()),
            "ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "mean_without_largest": float(np.delete(diff, np.argmax(np.abs(diff))).mean()),
        }
    result["command"] = "python studies/stock_listener.py --fit " + " ".join(map(str, args.fit))
    write_result(args.out, result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
