"""Does a bigger atlas clone better? Normalized judge similarity of the instant
clone at several atlas sizes (issue #17: "measure at 500 / 1,000 / 2,000").

The atlas build is prefix-stable (``scripts/build_atlas.py``): the first N
voices of a bigger build are exactly an N-voice build. So one grown atlas
(``--atlas``, e.g. ``scripts/build_atlas.py --voices 1000 --resume <shipped>``)
is cut to each size, and ``bench/clone_eval.py`` runs the instant clone on the
same dev speakers with each (``--no-refine --variants instant``). A size
whose ``clone_eval`` output already exists in ``--work`` is reused.

``--carry`` an earlier result keeps its sizes that this run does not measure
(marked as carried in the table), so a new size can be added without
re-running the old ones; a size measured in both is compared (``reproduced``):
the pipeline and the judge are deterministic, so the same figure says the two
runs can share one curve.

    python studies/atlas_size.py --atlas grown.npz --sizes 250,500,1000 --speakers-list A,B,...
    python studies/atlas_size.py --atlas grown2000.npz --sizes 1000,2000 --speakers-list A,B,... \
        --carry studies/results/atlas_size.json

Writes studies/results/atlas_size.json, .md and docs/img/atlas_size.png.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import save_figure, write_result  # noqa: E402
from voxclone.synth.voice.atlas import ROW_COLUMNS  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "atlas_size.json"
PLOT = ROOT / "docs" / "img" / "atlas_size.png"
PER_VOICE = set(ROW_COLUMNS)  # the atlas's per-voice columns


def cut(atlas: Path, size: int, out: Path) -> Path:
    """The first ``size`` voices of ``atlas`` (itself a ``--voices size`` build)."""
    data = np.load(atlas, allow_pickle=False)
    if data["embeddings"].shape[0] < size:
        raise SystemExit(f"{atlas} has fewer than {size} voices")
    np.savez_compressed(out, **{k: data[k][:size] if k in PER_VOICE else data[k] for k in data})
    return out


def evaluate(atlas: Path, size: int, work: Path, speakers: str, cache: Path) -> dict[str, Any]:
    out = work / f"clone_eval_atlas{size}.json"
    if not out.exists():
        subset = cut(atlas, size, work / f"atlas{size}.npz")
        command = [
            sys.executable,
            str(ROOT / "bench" / "clone_eval.py"),
            "--admit-rejected",
            "--no-refine",
            "--variants",
            "instant",
            "--speakers-list",
            speakers,
            "--atlas",
            str(subset),
            "--builtin-cache",
            str(cache),
            "--out",
            str(out),
        ]
        subprocess.run(command, check=True)
    run = json.loads(out.read_text())
    return {
        "size": size,
        "instant_norm": run["summary"]["instant"]["judge_norm"],
        "best_per_sex_norm": run["summary"]["builtin_best_per_sex"]["judge_norm"],
        "toned_best_per_sex_norm": run["summary"]
        .get("builtin_best_per_sex_toned", {})
        .get("judge_norm"),
        "per_speaker": {s["speaker"]: s["instant"]["judge_norm"] for s in run["speakers"]},
        "wer": run["summary"]["instant"]["wer"],
    }


def markdown(result: dict[str, Any]) -> str:
    rows = result["sizes"]
    lines = [
        f"Instant clone on {len(rows[0]['per_speaker'])} dev speakers (judge normalized, "
        "held-out utterances); the same speakers and code at every size, atlas cut from one "
        "prefix-stable build.",
        "",
        "| atlas voices | instant (normalized) | − best built-in per sex | − same, toned | "
        "speakers better than at the smallest size | WER |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    base = rows[0]["per_speaker"]
    for r in rows:
        better = sum(r["per_speaker"][s] > base[s] + 1e-9 for s in base)
        toned = r["toned_best_per_sex_norm"]
        toned_gap = "—" if toned is None else f"{r['instant_norm'] - toned:+.3f}"
        carried = " (earlier run)" if r.get("carried") else ""
        lines.append(
            f"| {r['size']}{carried} | {r['instant_norm']:.3f} | "
            f"{r['instant_norm'] - r['best_per_sex_norm']:+.3f} | "
            f"{toned_gap} | "
            f"{better} of {len(base)} | {r['wer']:.1%} |"
        )
    for check in result.get("reproduced", []):
        lines.append(
            f"\nMeasured again at {check['size']} voices: {check['now']:.4f} normalized "
            f"(earlier run {check['before']:.4f}; largest per-speaker difference "
            f"{check['max_speaker_diff']:.4f})."
        )
    return "\n".join(lines) + "\n"


def carry(
    earlier: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Any]]:
    """``rows`` plus the earlier result's sizes not among them (marked carried),
    and a comparison for each size measured in both."""
    previous = {r["size"]: r for r in earlier["sizes"]}
    measured = {r["size"]: r for r in rows}
    checks = []
    for size in sorted(measured.keys() & previous.keys()):
        now, before = measured[size], previous[size]
        checks.append(
            {
                "size": size,
                "now": now["instant_norm"],
                "before": before["instant_norm"],
                "max_speaker_diff": max(
                    abs(now["per_speaker"][s] - before["per_speaker"][s])
                    for s in now["per_speaker"]
                ),
            }
        )
    kept = [{**r, "carried": True} for size, r in previous.items() if size not in measured]
    return sorted(kept + rows, key=lambda r: r["size"]), checks


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["sizes"]
    sizes = [r["size"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for speaker in rows[0]["per_speaker"]:
        ax.plot(sizes, [r["per_speaker"][speaker] for r in rows], color="0.8", linewidth=0.8)
    ax.plot(sizes, [r["instant_norm"] for r in rows], "o-", color="tab:blue", label="mean")
    ax.plot(
        sizes,
        [r["best_per_sex_norm"] for r in rows],
        "--",
        color="tab:gray",
        label="best built-in per sex",
    )
    ax.set_xscale("log")
    ax.minorticks_off()  # only the measured sizes are labelled
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("atlas voices")
    ax.set_ylabel("normalized judge similarity")
    ax.set_title("Instant clone vs atlas size (grey: each speaker)")
    ax.legend(loc="lower right")
    save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atlas", type=Path, required=True, help="the biggest (grown) atlas")
    parser.add_argument("--sizes", default="250,500,1000")
    parser.add_argument("--speakers-list", required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/voxclone-atlas-size"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--carry", type=Path, help="an earlier atlas_size.json to extend")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    cache = args.work / "builtin_cache.npz"
    rows = [evaluate(args.atlas, n, args.work, args.speakers_list, cache) for n in sizes]
    command = (
        f"python studies/atlas_size.py --atlas ATLAS --sizes {args.sizes} "
        f"--speakers-list {args.speakers_list}"
    )
    result: dict[str, Any] = {"command": command, "sizes": rows}
    if args.carry is not None:
        earlier = json.loads(args.carry.read_text())
        rows, checks = carry(earlier, rows)
        result.update(
            command=f"{command} --carry {args.carry.name}",
            sizes=rows,
            reproduced=checks,
            carried_from=earlier.get("command"),
        )
    write_result(args.out, result, markdown(result))
    plot(result, PLOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
