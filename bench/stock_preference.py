"""How much should the stock check prefer a built-in voice to the clone?

The stock check (``CloningPipeline.closer_stock``) replaces a clone with the
built-in voice of its pitch gate that the product encoder hears closest to the
reference, unless the clone is heard closer by more than a preference
(``STOCK_PREFERENCE``). The clone is the encoder's own pick among the atlas
voices, so its heard similarity carries the optimism of that choice; the
preference is the correction, and it is fitted here, leave-one-speaker-out.

Input: ``bench/clone_eval.py --no-stock-check`` runs (the clone as it was
before any switch; each row keeps what the stock check hears from every
built-in of the gate, ``stock_heard``, and the judge's score of every toned
built-in, ``builtin_toned_sims``). For a preference d a speaker's score is the
judge's for the closest-heard built-in when that one is heard at more than
(clone − d), else the clone's. Reported per set as the issue's margin: mean
normalized judge similarity − the run's best toned built-in per sex.

    python bench/stock_preference.py --fit DEV.json SPLIT.json [--test HELD.json]

``--fit`` runs choose the preference (pooled speakers; per fold for the
leave-one-speaker-out figures); ``--test`` runs only receive the preference
chosen on every fit speaker. Writes bench/results/stock_preference.{json,md}.
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
from voxclone.synth.voice.pipeline import STOCK_PREFERENCE  # noqa: E402

GRID = tuple(round(0.01 * i, 2) for i in range(16))  # 0 … 0.15


@dataclass(frozen=True)
class Speaker:
    name: str
    set: str
    clone_heard: float
    clone_judge: float  # normalized
    stock: str  # the built-in of the gate the encoder hears closest
    stock_heard: float
    stock_judge: float  # normalized, with the same tone match
    baseline: float  # the run's best toned built-in per sex, normalized

    def score(self, preference: float) -> float:
        switched = self.stock_heard > self.clone_heard - preference
        return self.stock_judge if switched else self.clone_judge


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

        stock = max(heard, key=heard.__getitem__)
        out.append(
            Speaker(
                name=row["speaker"],
                set=label,
                clone_heard=float(instant["probe_similarity"]),
                clone_judge=float(instant["judge_norm"]),
                stock=stock,
                stock_heard=float(heard[stock]),
                stock_judge=normalized(float(row["builtin_toned_sims"][stock])),
                baseline=float(row["builtin_best_per_sex_toned"]["judge_norm"]),
            )
        )
    return out


def mean_score(speakers: list[Speaker], preference: float) -> float:
    return float(np.mean([s.score(preference) for s in speakers]))


def best_preference(speakers: list[Speaker]) -> float:
    """The grid's preference with the best mean judge score (the smallest on a tie)."""
    scores = [mean_score(speakers, d) for d in GRID]
    return GRID[int(np.argmax(scores))]


def margin(speakers: list[Speaker], scores: list[float]) -> float:
    return float(np.mean(scores) - np.mean([s.baseline for s in speakers]))


def study(fit: dict[str, list[Speaker]], test: dict[str, list[Speaker]]) -> dict[str, Any]:
    pooled = [s for group in fit.values() for s in group]
    folds: dict[str, float] = {}
    for i, held in enumerate(pooled):
        folds[held.name] = best_preference(pooled[:i] + pooled[i + 1 :])
    chosen = best_preference(pooled)
    sets: dict[str, Any] = {}
    for label, group in {**fit, **test}.items():
        cross = [s.score(folds[s.name]) for s in group] if label in fit else None
        sets[label] = {
            "role": "fit" if label in fit else "test",
            "speakers": len(group),
            "margin_by_preference": {
                f"{d:.2f}": margin(group, [s.score(d) for s in group]) for d in GRID
            },
            "margin_no_check": margin(group, [s.clone_judge for s in group]),
            "margin_loso": None if cross is None else margin(group, cross),
            "margin_chosen": margin(group, [s.score(chosen) for s in group]),
            "switched_at_chosen": [
                {"speaker": s.name, "to": s.stock, "judge_gain": s.stock_judge - s.clone_judge}
                for s in group
                if s.stock_heard > s.clone_heard - chosen
            ],
            "rows": [
                {
                    "speaker": s.name,
                    "lead": s.clone_heard - s.stock_heard,
                    "stock": s.stock,
                    "judge_gain": s.stock_judge - s.clone_judge,
                }
                for s in group
            ],
        }
    return {
        "grid": list(GRID),
        "chosen_on_all_fit_speakers": chosen,
        "fold_choices": dict(Counter(f"{d:.2f}" for d in folds.values())),
        "product_preference": STOCK_PREFERENCE,
        "sets": sets,
    }


def markdown(result: dict[str, Any]) -> str:
    sets = result["sets"]
    shown = [f"{d:.2f}" for d in result["grid"] if round(d * 100) % 2 == 0]
    lines = [
        "Margin = mean normalized judge similarity − the best toned built-in per sex; "
        "the stock check switches when a built-in is heard at more than (clone − preference).",
        "",
        "| set | role | speakers | no check | "
        + " | ".join(f"d={d}" for d in shown)
        + " | leave-one-speaker-out | d chosen on all fit speakers |",
        "|---|---|---:|---:|" + "---:|" * len(shown) + "---:|---:|",
    ]
    for label, s in sets.items():
        loso = "—" if s["margin_loso"] is None else f"{s['margin_loso']:+.3f}"
        lines.append(
            f"| {label} | {s['role']} | {s['speakers']} | {s['margin_no_check']:+.3f} | "
            + " | ".join(f"{s['margin_by_preference'][d]:+.3f}" for d in shown)
            + f" | {loso} | {s['margin_chosen']:+.3f} |"
        )
    folds = ", ".join(f"{d} ×{n}" for d, n in sorted(result["fold_choices"].items()))
    lines += [
        "",
        f"Preference chosen on all fit speakers: {result['chosen_on_all_fit_speakers']:.2f} "
        f"(folds: {folds}); the product's: {result['product_preference']:.2f}.",
        "",
        "| set | speaker | clone's lead (encoder) | closest built-in | judge: built-in − clone |",
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
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/stock_preference.json")
    args = parser.parse_args(argv)

    def load(paths: list[Path]) -> dict[str, list[Speaker]]:
        return {p.stem: speakers_of(json.loads(p.read_text()), p.stem) for p in paths}

    result = study(load(args.fit), load(args.test))
    result["command"] = "python bench/stock_preference.py " + " ".join(
        (["--fit"] + [str(p) for p in args.fit])
        + ((["--test"] + [str(p) for p in args.test]) if args.test else [])
    )
    md = markdown(result)
    write_result(args.out, result, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
