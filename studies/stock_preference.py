"""How much should the stock check prefer a built-in voice to the clone, and
how many built-ins should it hear?

The stock check (``StockCheck.compare``) hears the first k voices
of a shortlist (built-ins of the reference's sex and language, closest by the
atlas's embeddings: synth/voice/stock_voices.py) and replaces a clone with the
one the product encoder hears closest to the reference, unless the clone is
heard closer by more than a preference (``STOCK_PREFERENCE``). The clone is
the encoder's own pick among the atlas voices, so its heard similarity carries
the optimism of that choice; the preference is the correction. Both, d and k,
are fitted here, leave-one-speaker-out.

Input: ``bench/clone_eval.py --no-stock-check`` runs (the clone as it was
before any switch; each row keeps what a stock check hears of the first
voices of its shortlist, ``stock_shortlist`` / ``stock_heard``, and the
judge's score of every toned built-in, ``builtin_toned_sims``). For (k, d) a
speaker's score is the judge's for the closest-heard of the first k built-ins
when that one is heard at more than (clone − d), else the clone's. Reported
per set as the issue's margin: mean normalized judge similarity − the run's
best toned built-in per sex.

    python studies/stock_preference.py --fit FIT.json VALIDATION.json [--test HELD.json]

``--fit`` runs choose (k, d) (pooled speakers; per fold for the
leave-one-speaker-out figures); ``--test`` runs only receive the pair chosen
on every fit speaker. Fit on the fit and validation splits of
bench/speaker_splits.py only. Writes studies/results/stock_preference.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402
from voxclone.synth.engine.kokoro.standard_voices import CHARACTER_VOICES  # noqa: E402
from voxclone.synth.voice.stock_check import STOCK_PREFERENCE  # noqa: E402
from voxclone.synth.voice.stock_voices import SHORTLIST  # noqa: E402

GRID = tuple(round(0.01 * i, 2) for i in range(16))  # 0 … 0.15
# Shortlist lengths tried (each costs a probe hearing per enrollment).
LENGTHS = (1, 2, 3, 4, 6, 8)


@dataclass(frozen=True)
class Speaker:
    name: str
    set: str
    clone_heard: float
    clone_judge: float  # normalized
    heard: tuple[tuple[str, float, float], ...]  # shortlist order: (name, heard, judge)
    baseline: float  # the run's best toned built-in per sex, normalized

    def closest(self, length: int) -> tuple[str, float, float]:
        """(name, heard, normalized judge) of the closest heard of the first ``length``."""
        return max(self.heard[:length], key=lambda h: h[1])

    def switched(self, preference: float, length: int = SHORTLIST) -> bool:
        return self.closest(length)[1] > self.clone_heard - preference

    def score(self, preference: float, length: int = SHORTLIST) -> float:
        if self.switched(preference, length):
            return self.closest(length)[2]
        return self.clone_judge


def speakers_of(result: dict[str, Any], label: str) -> list[Speaker]:
    if result.get("stock_check", True):
        raise SystemExit(f"{label}: a clone_eval run with the stock check on; use --no-stock-check")
    same = float(result["same_speaker_mean"])
    stranger = result["stranger_same_sex_mean"]
    out = []
    for row in result["speakers"]:
        instant = row["instant"]
        heard = instant.get("stock_heard") or {}
        if not heard or "probe_similarity" not in instant:
            continue  # no built-in in the gate, or no probe: nothing to switch to

        def normalized(sim: float, sex: str = row["sex"]) -> float:
            return (sim - float(stranger[sex])) / (same - float(stranger[sex]))

        # The product compares with no character voice (stock_voices.py); runs
        # that heard one replay the shortlist without it.
        order = [n for n in instant.get("stock_shortlist") or heard if n not in CHARACTER_VOICES]
        toned = row["builtin_toned_sims"]
        out.append(
            Speaker(
                name=row["speaker"],
                set=label,
                clone_heard=float(instant["probe_similarity"]),
                clone_judge=float(instant["judge_norm"]),
                heard=tuple((n, float(heard[n]), normalized(float(toned[n]))) for n in order),
                baseline=float(row["builtin_best_per_sex_toned"]["judge_norm"]),
            )
        )
    return out


def mean_score(speakers: list[Speaker], preference: float, length: int = SHORTLIST) -> float:
    return float(np.mean([s.score(preference, length) for s in speakers]))


def best_preference(speakers: list[Speaker], length: int = SHORTLIST) -> float:
    """The grid's preference with the best mean judge score (the smallest on a tie)."""
    scores = [mean_score(speakers, d, length) for d in GRID]
    return GRID[int(np.argmax(scores))]


def best_pair(speakers: list[Speaker]) -> tuple[int, float]:
    """(length, preference) with the best mean judge score; on a tie the
    shortest list (fewer renders), then the smallest preference."""
    best: tuple[float, int, float] | None = None
    for length in LENGTHS:
        d = best_preference(speakers, length)
        score = mean_score(speakers, d, length)
        if best is None or score > best[0] + 1e-12:
            best = (score, length, d)
    assert best is not None
    return best[1], best[2]


def margin(speakers: list[Speaker], scores: list[float]) -> float:
    return float(np.mean(scores) - np.mean([s.baseline for s in speakers]))


def study(fit: dict[str, list[Speaker]], test: dict[str, list[Speaker]]) -> dict[str, Any]:
    pooled = [s for group in fit.values() for s in group]
    # Per fold: the preference for the product's shortlist, and the (k, d) pair.
    folds: dict[str, float] = {}
    pair_folds: dict[str, tuple[int, float]] = {}
    length_folds: dict[int, dict[str, float]] = {k: {} for k in LENGTHS}
    for i, held in enumerate(pooled):
        rest = pooled[:i] + pooled[i + 1 :]
        folds[held.name] = best_preference(rest)
        pair_folds[held.name] = best_pair(rest)
        for k in LENGTHS:
            length_folds[k][held.name] = best_preference(rest, k)
    chosen = best_preference(pooled)
    chosen_pair = best_pair(pooled)
    sets: dict[str, Any] = {}
    for label, group in {**fit, **test}.items():
        in_fit = label in fit
        cross = [s.score(folds[s.name]) for s in group] if in_fit else None
        cross_pair = (
            [s.score(pair_folds[s.name][1], pair_folds[s.name][0]) for s in group]
            if in_fit
            else None
        )
        sets[label] = {
            "role": "fit" if in_fit else "test",
            "speakers": len(group),
            "baseline_mean": float(np.mean([s.baseline for s in group])),
            "clone_mean": float(np.mean([s.clone_judge for s in group])),
            "margin_by_preference": {
                f"{d:.2f}": margin(group, [s.score(d) for s in group]) for d in GRID
            },
            "margin_loso_by_length": {
                str(k): margin(group, [s.score(length_folds[k][s.name], k) for s in group])
                for k in LENGTHS
            }
            if in_fit
            else None,
            "margin_no_check": margin(group, [s.clone_judge for s in group]),
            "margin_loso": None if cross is None else margin(group, cross),
            "margin_loso_pair": None if cross_pair is None else margin(group, cross_pair),
            "margin_chosen": margin(group, [s.score(chosen) for s in group]),
            "margin_product": margin(group, [s.score(STOCK_PREFERENCE) for s in group]),
            "switched_at_product": [
                {
                    "speaker": s.name,
                    "to": s.closest(SHORTLIST)[0],
                    "judge_gain": s.closest(SHORTLIST)[2] - s.clone_judge,
                }
                for s in group
                if s.switched(STOCK_PREFERENCE)
            ],
            "rows": [
                {
                    "speaker": s.name,
                    "lead": s.clone_heard - s.closest(SHORTLIST)[1],
                    "stock": s.closest(SHORTLIST)[0],
                    "judge_gain": s.closest(SHORTLIST)[2] - s.clone_judge,
                }
                for s in group
            ],
        }
    fitted = [v for label, v in sets.items() if label in fit]
    total = sum(v["speakers"] for v in fitted)

    def pooled_mean(key: str, sub: str | None = None) -> float:
        return sum(v["speakers"] * (v[key] if sub is None else v[key][sub]) for v in fitted) / total

    return {
        "fit_speakers_pooled": {
            "speakers": total,
            "margin_no_check": pooled_mean("margin_no_check"),
            "margin_loso": pooled_mean("margin_loso"),
            "margin_loso_pair": pooled_mean("margin_loso_pair"),
            "margin_product": pooled_mean("margin_product"),
            "margin_loso_by_length": {
                str(k): pooled_mean("margin_loso_by_length", str(k)) for k in LENGTHS
            },
        },
        "grid": list(GRID),
        "lengths": list(LENGTHS),
        "product_shortlist": SHORTLIST,
        "chosen_on_all_fit_speakers": chosen,
        "pair_chosen_on_all_fit_speakers": list(chosen_pair),
        "fold_choices": dict(Counter(f"{d:.2f}" for d in folds.values())),
        "pair_fold_choices": dict(Counter(f"k={k} d={d:.2f}" for k, d in pair_folds.values())),
        "product_preference": STOCK_PREFERENCE,
        "sets": sets,
    }


def markdown(result: dict[str, Any]) -> str:
    sets = result["sets"]
    shown = [f"{d:.2f}" for d in result["grid"] if round(d * 100) % 2 == 0]
    k = result["product_shortlist"]
    lines = [
        "Margin = mean normalized judge similarity − the best toned built-in per sex; "
        f"the stock check hears the first k built-ins of its shortlist (product: k={k}) and "
        "switches when the closest is heard at more than (clone − preference d).",
        "",
        "| set | role | speakers | no check | "
        + " | ".join(f"d={d}" for d in shown)
        + " | leave-one-speaker-out d | d chosen on all fit speakers | product d |",
        "|---|---|---:|---:|" + "---:|" * len(shown) + "---:|---:|---:|",
    ]
    for label, s in sets.items():
        loso = "—" if s["margin_loso"] is None else f"{s['margin_loso']:+.3f}"
        lines.append(
            f"| {label} | {s['role']} | {s['speakers']} | {s['margin_no_check']:+.3f} | "
            + " | ".join(f"{s['margin_by_preference'][d]:+.3f}" for d in shown)
            + f" | {loso} | {s['margin_chosen']:+.3f} | {s['margin_product']:+.3f} |"
        )
    folds = ", ".join(f"{d} ×{n}" for d, n in sorted(result["fold_choices"].items()))
    pair_folds = ", ".join(f"{p} ×{n}" for p, n in sorted(result["pair_fold_choices"].items()))
    pair_k, pair_d = result["pair_chosen_on_all_fit_speakers"]
    lines += [
        "",
        f"Preference chosen on all fit speakers (k={k}): "
        f"{result['chosen_on_all_fit_speakers']:.2f} (folds: {folds}); the product's: "
        f"{result['product_preference']:.2f}. Shortlist length and preference chosen together: "
        f"k={pair_k}, d={pair_d:.2f} (folds: {pair_folds}).",
        "",
        "Leave-one-speaker-out margin by shortlist length (d chosen per fold):",
        "",
        "| set | " + " | ".join(f"k={n}" for n in result["lengths"]) + " | (k, d) per fold |",
        "|---|" + "---:|" * (len(result["lengths"]) + 1),
    ]
    for label, s in sets.items():
        if s["margin_loso_by_length"] is None:
            continue
        lines.append(
            f"| {label} | "
            + " | ".join(f"{s['margin_loso_by_length'][str(n)]:+.3f}" for n in result["lengths"])
            + f" | {s['margin_loso_pair']:+.3f} |"
        )
    p = result["fit_speakers_pooled"]
    lines += [
        f"| all fit speakers ({p['speakers']}) | "
        + " | ".join(f"{p['margin_loso_by_length'][str(n)]:+.3f}" for n in result["lengths"])
        + f" | {p['margin_loso_pair']:+.3f} |",
        "",
        f"All fit speakers pooled: no check {p['margin_no_check']:+.3f}; leave-one-speaker-out "
        f"d at k={k} {p['margin_loso']:+.3f}; (k, d) per fold {p['margin_loso_pair']:+.3f}; "
        f"the product's (k={k}, d={result['product_preference']:.2f}) in sample "
        f"{p['margin_product']:+.3f}.",
    ]
    lines += [
        "",
        f"| set | speaker | clone's lead (encoder, k={k}) | closest built-in | "
        "judge: built-in − clone |",
        "|---|---|---:|---|---:|",
    ]
    for label, s in sets.items():
        for row in sorted(s["rows"], key=lambda r: r["lead"]):
            lines.append(
                f"| {label} | {row['speaker']} | {row['lead']:+.3f} | {row['stock']} | "
                f"{row['judge_gain']:+.3f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, nargs="+", required=True)
    parser.add_argument("--test", type=Path, nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=ROOT / "studies/results/stock_preference.json")
    args = parser.parse_args(argv)

    def load(paths: list[Path]) -> dict[str, list[Speaker]]:
        return {p.stem: speakers_of(json.loads(p.read_text()), p.stem) for p in paths}

    result = study(load(args.fit), load(args.test))
    result["command"] = "python studies/stock_preference.py " + " ".join(
        (["--fit"] + [str(p) for p in args.fit])
        + ((["--test"] + [str(p) for p in args.test]) if args.test else [])
    )
    md = markdown(result)
    write_result(args.out, result, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
