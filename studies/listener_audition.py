"""Would auditioning renders with a product listener choose a better clone than the pick?

Reads a ceiling-study result written with ``--listener campplus`` (every
candidate render scored by the independent judge against *other* recordings of
the speaker, by GE2E against the enrollment print ("heard") and by the chosen
product listener against the enrollment clip ("listener")), and replays the
choice an enrollment-time audition would make: in each candidate pool, the
render the listener (GE2E, CAM++ or their z-scored mean) finds closest to the
enrollment clip. The judge only scores the choice; it never makes it.

Which pool and listener to ship is itself a choice fitted on these speakers,
so it is reported leave one speaker out: for each speaker, the configuration
with the best mean on the others, scored on that speaker.

    python studies/listener_audition.py studies/results/listener_audition_ceiling.json \
        --out studies/results/listener_audition.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

POOLS: dict[str, tuple[str, ...]] = {
    "packs": ("packs",),
    "top10": ("top10",),
    "top10+packs": ("top10", "packs"),
    "top50": ("top50",),
    "top50+packs": ("top50", "packs"),
    # The encoder's pick (before the stock check) heard beside its neighbours.
    "pick+top5": ("unchecked", "top5"),
    "pick+top10": ("unchecked", "top10"),
    "pick+top20": ("unchecked", "top20"),
    # The served pick (a built-in where the stock check replaced the clone)
    # heard beside the encoder's neighbours: one audition for both choices.
    "served+top10": ("pick", "top10"),
    "served+top5": ("pick", "top5"),
}
LISTENERS = ("ge2e", "campplus", "ensemble")


def _z(values: np.ndarray) -> np.ndarray:
    spread = float(values.std())
    return (values - values.mean()) / (spread if spread > 1e-9 else 1.0)


def choose(cands: list[dict[str, Any]], pool: tuple[str, ...], listener: str) -> dict[str, Any]:
    """The candidate of ``pool`` the listener hears closest to the enrollment clip."""
    members = [c for c in cands if set(c["sets"]) & set(pool)]
    for name in pool:
        if name in ("top5", "top20"):
            # ceiling.py adds the atlas neighbours in rank order, so the
            # top-50's candidates in list order are ranks 1..50.
            ranked = [c for c in cands if "top50" in c["sets"]][: int(name[3:])]
            members += [c for c in ranked if c not in members]
    ge2e = np.array([c["heard"] for c in members])
    cam = np.array([c["listener"] for c in members])
    score = {"ge2e": ge2e, "campplus": cam, "ensemble": _z(ge2e) + _z(cam)}[listener]
    return members[int(np.argmax(score))]


def with_stock_check(row: dict[str, Any], chosen: dict[str, Any], preference: float) -> float:
    """The chosen render's score after the product's stock check, emulated:
    where the check replaced the encoder's pick with a built-in voice, that
    built-in stays unless GE2E hears the chosen render closer by more than
    ``preference`` (the product's rule, on this study's sentence)."""
    if row.get("stock_voice") is None:
        return float(chosen["norm"])
    stock = next(c for c in row["candidates"] if c["label"] == "pick")
    return float(chosen["norm"] if chosen["heard"] > stock["heard"] + preference else stock["norm"])


def replay(rows: list[dict[str, Any]], preference: float = 0.03) -> dict[str, dict[str, float]]:
    """Per configuration ("pool/listener"), per speaker: the chosen render's
    normalized judge score minus the product pick's."""
    gains: dict[str, dict[str, float]] = {}
    for pool_name, pool in POOLS.items():
        for listener in LISTENERS:
            key = f"{pool_name}/{listener}"
            gains[key] = {
                row["speaker"]: choose(row["candidates"], pool, listener)["norm"] - row["pick_norm"]
                for row in rows
            }
            gains[key + "+stock"] = {
                row["speaker"]: with_stock_check(
                    row, choose(row["candidates"], pool, listener), preference
                )
                - row["pick_norm"]
                for row in rows
            }
    return gains


def leave_one_out(gains: dict[str, dict[str, float]]) -> tuple[dict[str, float], dict[str, str]]:
    """Each speaker's gain under the configuration the other speakers chose."""
    speakers = sorted(next(iter(gains.values())))
    held: dict[str, float] = {}
    chosen: dict[str, str] = {}
    for out in speakers:
        best = max(
            gains,
            key=lambda k: np.mean([g for s, g in gains[k].items() if s != out]),
        )
        held[out] = gains[best][out]
        chosen[out] = best
    return held, chosen


def markdown(rows: list[dict[str, Any]], source: str) -> str:
    gains = replay(rows)
    held, chosen = leave_one_out(gains)
    speakers = [r["speaker"] for r in rows]
    picks = {r["speaker"]: r["pick_norm"] for r in rows}
    lines = [
        "# Listener audition replay (issue 38)",
        "",
        f"Source: `{source}` ({len(rows)} fit + validation speakers; the judge scores, "
        "the listener chooses). Gain = chosen render's normalized judge score minus "
        f"the product pick's (pick mean {np.mean(list(picks.values())):.3f}).",
        "",
        "| pool / listener | mean gain | speakers better | worse | min | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, per in gains.items():
        g = np.array([per[s] for s in speakers])
        lines.append(
            f"| {key} | {g.mean():+.3f} | {int((g > 0.01).sum())} | {int((g < -0.01).sum())} "
            f"| {g.min():+.3f} | {g.max():+.3f} |"
        )
    g = np.array([held[s] for s in speakers])
    lines += [
        "",
        f"**Leave one speaker out** (configuration chosen on the others): mean gain "
        f"{g.mean():+.3f}, better {int((g > 0.01).sum())}, worse {int((g < -0.01).sum())} "
        f"of {len(speakers)}.",
        "",
        "| speaker | split | sex | pick | chosen config | held-out gain |",
        "|---|---|---|---:|---|---:|",
    ]
    for r in rows:
        s = r["speaker"]
        lines.append(
            f"| {s} | {r['split']} | {r['sex']} | {picks[s]:.3f} | {chosen[s]} | {held[s]:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="ceiling.py --listener output")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = [
        r
        for r in json.loads(args.result.read_text())["speakers"]
        if all("listener" in c for c in r["candidates"])
    ]
    text = markdown(rows, str(args.result))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
