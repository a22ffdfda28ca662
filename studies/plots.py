"""Plots of the cloning studies, drawn from their results in studies/results.

They were drawn with the benchmark page while the studies lived in bench/;
the page now holds current figures only, so the studies' plots are redrawn
here (docs/studies.md shows them):

    python studies/plots.py [--results studies/results] [--img docs/img]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_pick_study(name: str) -> Callable[[dict[str, Any], Path], Path | None]:
    """Mean judge score of each selection policy's pick, one bar per case kind."""

    def plot(data: dict[str, Any], path: Path) -> Path | None:
        policies = data.get(name, {}).get("policies", {})
        if not policies:
            return None
        kinds = sorted({k for p in policies.values() for k in p["mean_norm"]})
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(policies) * len(kinds) / 2 + 1.5))
        height = 0.8 / len(kinds)
        for i, kind in enumerate(kinds):
            values = [float(p["mean_norm"].get(kind, 0.0)) for p in policies.values()]
            ax.barh([j + i * height for j in range(len(policies))], values, height, label=kind)
        ax.set_yticks(
            [j + 0.4 - height / 2 for j in range(len(policies))], list(policies), fontsize=7
        )
        ax.invert_yaxis()
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("normalized judge similarity of the pick (mean over cases)")
        ax.legend(fontsize=7)
        return _save(plt, fig, path)

    return plot


def plot_reference_robustness(data: dict[str, Any], path: Path) -> Path | None:
    """Normalized judge similarity vs reference SNR, length and clips pooled."""
    result = data.get("reference_robustness", {})
    panels = [k for k in ("noise", "length", "clips") if result.get(k)]
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        block = result[key]
        if key == "noise":
            for den, style in ((True, "o-"), (False, "s--")):
                pts = [t for t in block["table"] if t["denoiser"] is den]
                ax.plot(
                    [t["snr_db"] for t in pts],
                    [t["judge_norm"] for t in pts],
                    style,
                    label="denoised" if den else "as recorded",
                )
            clean = [t for t in block["table"] if t["snr_db"] is None]
            if clean:
                ax.axhline(clean[0]["judge_norm"], color="g", lw=0.8, label="clean clip")
            ax.axhline(block["best_builtin_norm"], color="k", lw=0.8, ls=":", label="best built-in")
            ax.set_xlabel("SNR of the reference (dB)")
            ax.invert_xaxis()
        else:
            field = "length_s" if key == "length" else "clips"
            xs = [t[field] for t in block["table"]]
            ax.plot(xs, [t["judge_norm"] for t in block["table"]], "o-", label="all speakers")
            paired = block["paired"]["judge_norm"]
            ax.plot([float(k) for k in paired], list(paired.values()), "s--", label="paired")
            base = statistics.fmean(b["judge_norm"] for b in block["baseline"].values())
            ax.axhline(base, color="k", lw=0.8, ls=":", label="best built-in")
            ax.set_xlabel("seconds of speech" if key == "length" else "recordings pooled")
            if key == "length":
                ax.set_xscale("log", base=2)
                ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.set_ylabel("normalized judge similarity")
        ax.set_title(key)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(plt, fig, path)


PLOTS: dict[str, Callable[[dict[str, Any], Path], Path | None]] = {
    "pick_study": plot_pick_study("pick_study"),
    "pick_study_auditions": plot_pick_study("pick_study_auditions"),
    "reference_robustness": plot_reference_robustness,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "studies" / "results")
    parser.add_argument("--img", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    data = {
        name: json.loads((args.results / f"{name}.json").read_text())
        for name in PLOTS
        if (args.results / f"{name}.json").exists()
    }
    for name, plot in PLOTS.items():
        drawn = plot(data, args.img / f"{name}.png")
        print(name, "->", drawn or "no result")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
