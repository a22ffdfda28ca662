"""Render docs/benchmarks.md (plus PNG plots) from the JSON/Markdown in bench/results/.

Reads every ``*.json`` and ``*.md`` there, describes the machine, writes the
page with one section per topic — every table headed by the exact command
that produced it — and merges all raw results into ``all.json`` next to them.
A missing result becomes a line saying so; a failed script (recorded by
``run_all.py`` in ``run_all.json``) is shown with its error.

    python bench/render_page.py [--results bench/results] [--out docs/benchmarks.md]
                                [--img docs/img]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import users_report  # noqa: E402

# Result name -> the command that produces it when nothing better is recorded.
DEFAULT_COMMANDS = {
    # Release check of the container image (tests/container, docs/deploy.md).
    "container_image": "make image && make image-smoke",
    "rtf": "python bench/rtf.py",
    "peers": "python bench/peers.py",
    "ttfa": "python bench/ttfa.py",
    "builtin_voices": "python bench/choose_builtins.py",
    "voice_table": "python bench/voice_table.py",
    "clone_eval": "python bench/clone_eval.py",
    "controls": "python bench/controls_eval.py",
    "load": "python bench/load.py",
    "soak": "python bench/soak.py",
    "users": "python bench/users.py",
    "word_timestamps": "nice -n 15 python bench/word_timestamps.py",
    "engines_speed": "nice -n 10 python bench/engines_speed.py",
}
# Files this script (or run_all) writes; never read back as results.
OWN_FILES = {"all.json", "run_all.json"}
LIBRARIES = ("onnxruntime", "numpy", "torch", "kokoro-onnx", "piper-tts", "matplotlib")


# -- inputs ------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    cpu_model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / (1 << 20), 1)
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = "not installed"
    return {
        "cpu_model": cpu_model,
        "cores_usable": usable,
        "cores_total": os.cpu_count(),
        "memory_gib": memory_gib,
        "os": platform.platform(),
        "versions": versions,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def load_results(results_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(name -> parsed JSON, name -> Markdown text) for everything in the folder."""
    data: dict[str, Any] = {}
    for path in sorted(results_dir.glob("*.json")):
        if path.name in OWN_FILES:
            continue
        try:
            data[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            data[path.stem] = {"unreadable": type(exc).__name__}
    markdown = {p.stem: p.read_text() for p in sorted(results_dir.glob("*.md"))}
    return data, markdown


def load_runs(results_dir: Path) -> dict[str, Any]:
    path = results_dir / "run_all.json"
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text()).get("scripts", {}))
    except (OSError, json.JSONDecodeError):
        return {}


# -- helpers -----------------------------------------------------------------------------
def command_for(name: str, data: dict[str, Any], runs: dict[str, Any]) -> str:
    """The exact command behind a result: what its JSON says (written by the run that
    produced it, so a standalone re-run is not misattributed), else what run_all ran."""
    recorded = data.get(name, {})
    if isinstance(recorded, dict) and recorded.get("command"):
        return str(recorded["command"])
    if name in runs and runs[name].get("command"):
        return str(runs[name]["command"])
    return DEFAULT_COMMANDS.get(name, f"(unknown producer of {name})")


def heading(command: str) -> str:
    return f"Produced by `{command}`:\n"


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, int | float):
        return f"{value:.{digits}f}"
    return str(value)


def missing(name: str, runs: dict[str, Any]) -> str:
    run = runs.get(name)
    if run and run.get("status") not in (None, "ok"):
        return (
            f"_Not available: `{run.get('command')}` {run.get('status')}"
            + (f" — {run['error']}" if run.get("error") else "")
            + "._\n"
        )
    return f"_No result yet: run `{DEFAULT_COMMANDS.get(name, name)}`._\n"


def image(out_page: Path, img: Path | None, alt: str) -> str:
    if img is None:
        return ""
    return f"\n![{alt}]({os.path.relpath(img, out_page.parent)})\n"


# -- plots -------------------------------------------------------------------------------
def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_rtf(data: dict[str, Any], path: Path) -> Path | None:
    series: dict[str, list[tuple[float, float]]] = {}
    for system, res in data.get("peers", {}).get("systems", {}).items():
        for row in res.get("texts", {}).values():
            series.setdefault(f"{system} (peers.py)", []).append((row["audio_s"], row["rtf"]))
    for run in data.get("rtf", {}).get("runs", []):
        for row in run.get("texts", {}).values():
            for path_name, value in row.get("rtf", {}).items():
                label = f"{path_name}, {run.get('threads')} thr (rtf.py)"
                series.setdefault(label, []).append((row["audio_s_model"], value))
    if not series:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("audio length (s)")
    ax.set_ylabel("real-time factor (lower is faster)")
    ax.set_title("RTF vs text length")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


TTFA_PATHS = ("service", "http")


def plot_ttfa(data: dict[str, Any], path: Path) -> Path | None:
    ttfa = data.get("ttfa", {})
    series = {
        k: ttfa[k]["samples"]
        for k in TTFA_PATHS
        if isinstance(ttfa.get(k), dict) and ttfa[k].get("samples")
    }
    if not series:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, samples in series.items():
        ax.hist(samples, bins=min(20, max(5, len(samples))), alpha=0.6, label=label)
    ax.axvline(float(ttfa.get("target_s", 0.8)), color="red", linestyle="--", label="target")
    ax.set_xlabel("time to first audio (s)")
    ax.set_ylabel("requests")
    ax.set_title("Streaming TTFA")
    ax.legend()
    return _save(plt, fig, path)


def plot_ttfa_stages(data: dict[str, Any], path: Path) -> Path | None:
    """Stacked bars: the median first-audio stages of each TTFA path."""
    ttfa = data.get("ttfa", {})
    staged = {k: ttfa[k]["stages"] for k in TTFA_PATHS if ttfa.get(k, {}).get("stages")}
    if not staged:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 2.8))
    names = list(dict.fromkeys(stage for st in staged.values() for stage in st))
    paths = list(staged)
    left = [0.0] * len(paths)
    for stage in names:
        widths = [float(staged[p].get(stage, 0.0)) for p in paths]
        ax.barh(paths, widths, left=left, label=stage)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.axvline(float(ttfa.get("target_s", 0.8)), color="red", linestyle="--", label="target")
    ax.set_xlabel("seconds to first audio (median of each stage)")
    ax.set_title("Where the time to first audio goes")
    ax.legend(fontsize=7, ncol=4)
    return _save(plt, fig, path)


def plot_peers(data: dict[str, Any], path: Path) -> Path | None:
    systems = {k: v for k, v in data.get("peers", {}).get("systems", {}).items() if "texts" in v}
    if not systems:
        return None
    plt = _pyplot()
    labels = list(next(iter(systems.values()))["texts"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    width = 0.8 / len(systems)
    for i, (system, res) in enumerate(systems.items()):
        xs = [j + i * width for j in range(len(labels))]
        axes[0].bar(
            xs, [res["texts"].get(lbl, {}).get("rtf", 0) for lbl in labels], width, label=system
        )
        axes[1].bar(
            xs, [res["texts"].get(lbl, {}).get("ttfa_s", 0) for lbl in labels], width, label=system
        )
    for ax, title in zip(axes, ("RTF (1 thread)", "time to first audio (s)"), strict=True):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))], labels)
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    return _save(plt, fig, path)


def plot_clone(data: dict[str, Any], path: Path) -> Path | None:
    speakers = data.get("clone_eval", {}).get("speakers", [])
    # Methods are whatever per-speaker entries carry a judge score (builtin,
    # instant, instant_top<k>, refined), in the order clone_eval wrote them.
    methods = [
        m
        for m, v in (speakers[0].items() if speakers else [])
        if isinstance(v, dict) and "judge_norm" in v
    ]
    if not methods:
        return None
    plt = _pyplot()
    names = [str(s.get("speaker", i)) for i, s in enumerate(speakers)] + ["mean"]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(names)), 3.8))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        values = [float(s[method].get("judge_norm", 0)) for s in speakers]
        values.append(statistics.fmean(values))
        ax.bar([j + i * width for j in range(len(names))], values, width, label=method)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=45, fontsize=7)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_ylabel("normalized judge similarity")
    ax.set_title("Clone identity per speaker (0 = stranger, 1 = same speaker)")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


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


# -- sections ----------------------------------------------------------------------------
def section_machine(machine: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    return (
        f"## Machine\n\n- CPU: {machine['cpu_model']} — {machine['cores_usable']} usable cores "
        f"({machine['cores_total']} online)\n- Memory: {machine['memory_gib']} GiB\n"
        f"- OS: {machine['os']}\n- Libraries: {versions}\n- Date: {machine['date']}\n"
    )


def section_runs(runs: dict[str, Any]) -> str:
    if not runs:
        return ""
    rows = [
        [f"`{r.get('command')}`", r.get("status"), fmt(r.get("seconds"), 1), r.get("error") or ""]
        for r in runs.values()
    ]
    return "## Scripts in this run\n\n" + table(["command", "status", "seconds", "error"], rows)


def speed_rtf(data: dict[str, Any], runs: dict[str, Any]) -> str:
    rtf = data.get("rtf")
    if not rtf or "runs" not in rtf:
        return "### Real-time factor and overhead\n\n" + missing("rtf", runs)
    out = ["### Real-time factor and overhead\n", heading(command_for("rtf", data, runs))]
    rows = []
    for run in rtf["runs"]:
        for label, row in run.get("texts", {}).items():
            r = row.get("rtf", {})
            rows.append(
                [
                    run.get("threads"),
                    label,
                    row.get("chars"),
                    fmt(row.get("audio_s_model"), 2),
                    fmt(r.get("raw")),
                    fmt(r.get("engine")),
                    fmt(r.get("service")),
                    fmt(row.get("overhead_engine_vs_raw"), 2),
                    fmt(row.get("overhead_service_vs_raw"), 2),
                ]
            )
    out.append(
        table(
            [
                "threads",
                "text",
                "chars",
                "audio s",
                "RTF raw",
                "RTF engine",
                "RTF service",
                "engine/raw",
                "service/raw",
            ],
            rows,
        )
    )
    loads = [
        [
            run.get("threads"),
            fmt(run.get("model_load_s")),
            fmt(run.get("warmup_s")),
            fmt(run.get("runtime_build_s")),
        ]
        for run in rtf["runs"]
    ]
    out.append(
        "\nModel load and warm-up:\n\n"
        + table(["threads", "model load s", "warm-up s", "runtime build s"], loads)
    )
    return "\n".join(out)


def speed_peers(data: dict[str, Any], runs: dict[str, Any]) -> str:
    peers = data.get("peers")
    title = "### voxclone vs kokoro-onnx vs Piper (same texts, same run, 1 thread each)\n\n"
    if not peers or "systems" not in peers:
        return title + missing("peers", runs)
    out = [title + heading(command_for("peers", data, runs))]
    rows = []
    for system, res in peers["systems"].items():
        if "texts" not in res:
            rows.append([system, "error", res.get("error", ""), "", "", "", ""])
            continue
        for label, row in res["texts"].items():
            rows.append(
                [
                    system,
                    label,
                    fmt(row["audio_s"], 2),
                    fmt(row["rtf"]),
                    fmt(row["ttfa_s"]),
                    fmt(res.get("peak_rss_mb"), 0),
                    fmt(res.get("load_and_warmup_s"), 2),
                ]
            )
    out.append(
        table(["system", "text", "audio s", "RTF", "TTFA s", "peak RSS MB", "load+warm-up s"], rows)
    )
    ratio_rows = []
    for pair, res in peers.get("ratios", {}).items():
        for label, r in res.get("texts", {}).items():
            ratio_rows.append(
                [
                    pair,
                    label,
                    fmt(r.get("rtf"), 2),
                    fmt(r.get("ttfa_s"), 2),
                    fmt(res.get("peak_rss"), 2),
                ]
            )
    if ratio_rows:
        out.append(
            "\nRatios (voxclone ÷ peer; below 1 means voxclone is faster or smaller):\n\n"
            + table(["pair", "text", "RTF ratio", "TTFA ratio", "peak RSS ratio"], ratio_rows)
        )
    out.append(
        "\nvoxclone's numbers include text normalization, G2P, the scheduler and "
        "post-processing; kokoro-onnx drives the same int8 model file with the same style "
        "vector; Piper (joe, medium) is the speed reference, a different and smaller model.\n"
    )
    return "\n".join(out)


def speed_ttfa(data: dict[str, Any], runs: dict[str, Any]) -> str:
    ttfa = data.get("ttfa")
    title = "### Time to first audio (streaming)\n\n"
    if not ttfa:
        return title + missing("ttfa", runs)
    out = [title + heading(command_for("ttfa", data, runs))]
    rows = []
    for path_name in TTFA_PATHS:
        res = ttfa.get(path_name, {})
        if "p50" in res:
            rows.append(
                [
                    path_name,
                    res["n"],
                    fmt(res["p50"]),
                    fmt(res["p90"]),
                    fmt(res["max"]),
                    "yes" if res["meets_target"] else "no",
                ]
            )
        else:
            rows.append(
                [path_name, "—", "—", "—", "—", res.get("skipped") or res.get("error") or "no data"]
            )
    out.append(
        table(
            ["path", "requests", "p50 s", "p90 s", "max s", f"p50 ≤ {ttfa.get('target_s', 0.8)} s"],
            rows,
        )
    )
    staged = {k: ttfa[k]["stages"] for k in TTFA_PATHS if ttfa.get(k, {}).get("stages")}
    if staged:
        names = list(dict.fromkeys(stage for st in staged.values() for stage in st))
        out.append(
            "\nMedian seconds of each stage of the first audio (the service's "
            "`voxclone_first_audio_stage_seconds`; `transport` = what an HTTP client "
            "waited beyond them):\n"
        )
        out.append(
            table(
                ["path", *names],
                [[path, *(fmt(st.get(n)) for n in names)] for path, st in staged.items()],
            )
        )
    return "\n".join(out)


def speed_cloning(data: dict[str, Any], runs: dict[str, Any]) -> str:
    """Instant-clone and refine times, taken from clone_eval's per-speaker rows."""
    title = "### Instant clone and refine times\n\n"
    speakers = data.get("clone_eval", {}).get("speakers", [])
    instant = [
        float(r["instant"]["clone_s"]) for r in speakers if "clone_s" in r.get("instant", {})
    ]
    refine = [
        float(r["refined"]["refine_s"]) for r in speakers if "refine_s" in r.get("refined", {})
    ]
    if not instant and not refine:
        return title + missing("clone_eval", runs)
    rows = [
        [name, len(values), fmt(statistics.median(values), 2), fmt(max(values), 2)]
        for name, values in (("instant clone", instant), ("refine", refine))
        if values
    ]
    return (
        title
        + heading(command_for("clone_eval", data, runs))
        + "\n"
        + table(["step", "speakers", "median s", "max s"], rows)
    )


def section_builtins(data: dict[str, Any], runs: dict[str, Any]) -> str:
    res = data.get("builtin_voices")
    title = "## Built-in voices: round-trip WER\n\n"
    if not res or "results" not in res:
        return title + missing("builtin_voices", runs)
    rows = sorted(
        (
            [
                name,
                f"{row['wer']:.1%}",
                ", ".join(f"{k} {v:g}" for k, v in row.get("weights", {}).items()),
            ]
            for name, row in res["results"].items()
        ),
        key=lambda r: float(r[1].rstrip("%")),
    )
    return (
        title
        + heading(command_for("builtin_voices", data, runs))
        + f"\nWhisper tiny.en on {len(res.get('sentences', []))} Harvard sentences per voice.\n\n"
        + table(["voice / blend", "WER", "recipe"], rows)
    )


def section_markdown(
    title: str,
    name: str,
    data: dict[str, Any],
    markdown: dict[str, str],
    runs: dict[str, Any],
    extra: str = "",
) -> str:
    head = f"## {title}\n\n"
    if name not in markdown:
        return head + missing(name, runs) + extra
    return (
        head
        + heading(command_for(name, data, runs))
        + "\n"
        + demote_headings(markdown[name].strip())
        + "\n"
        + extra
    )


def section_cache(data: dict[str, Any], runs: dict[str, Any]) -> str:
    """Cache hits against misses, from load.py's two traffic kinds at each client count."""
    title = "## Cache\n\n"
    levels = data.get("load", {}).get("levels", [])
    by_key = {(lv.get("traffic"), lv.get("concurrency")): lv for lv in levels}
    rows = []
    for (traffic, clients), miss in sorted(
        by_key.items(), key=lambda kv: (str(kv[0][0]), int(kv[0][1] or 0))
    ):
        hit = by_key.get(("hit", clients))
        if traffic != "miss" or hit is None:
            continue
        speedup = (
            hit["throughput_rps"] / miss["throughput_rps"] if miss.get("throughput_rps") else None
        )
        headers = ", ".join(f"{k} {v}" for k, v in hit.get("cache_headers", {}).items())
        rows.append(
            [
                clients,
                fmt(miss.get("throughput_rps"), 2),
                fmt(hit.get("throughput_rps"), 2),
                fmt(speedup, 1),
                fmt(miss.get("p50_s")),
                fmt(hit.get("p50_s")),
                headers,
            ]
        )
    if not rows:
        return title + missing("load", runs)
    header = ["clients", "miss req/s", "hit req/s", "hit ÷ miss", "miss p50 s", "hit p50 s"]
    return (
        title
        + heading(command_for("load", data, runs))
        + "\n"
        + table([*header, "X-Cache of hit traffic"], rows)
    )


def section_users(
    data: dict[str, Any], runs: dict[str, Any], plot: Path | None, out_page: Path
) -> str:
    """Simulated users and the capacity derived from them (bench/users.py)."""
    title = "## Many users: capacity\n\n"
    res = data.get("users")
    if not isinstance(res, dict) or "levels" not in res:
        return title + missing("users", runs)
    return (
        title
        + heading(command_for("users", data, runs))
        + f"\nMeasured {res.get('when', 'at an unrecorded time')}.\n\n"
        + users_report.markdown(res)
        + image(out_page, plot, "many users: latency and outcomes per level")
    )


def demote_headings(markdown: str, levels: int = 2) -> str:
    """Nest a script's own Markdown under this page's section headings."""
    return "\n".join(
        "#" * levels + line if line.startswith("#") else line for line in markdown.splitlines()
    )


# Cloning runs shown under the main clone_eval table, with their own commands.
CLONE_SUBSECTIONS = {
    "clone_eval_split": "Robustness set: single recordings split in halves",
    "clone_eval_cem": "Continuous search (CEM) instead of auditions",
    "clone_eval_repitched": "Ablation: the refine winner re-pitched after the choice",
    "pick_study": "Which instant pick carries over to the judge (policies replayed)",
    "pick_study_auditions": "Which refine audition policy carries over (policies replayed)",
    "reference_robustness": "Reference robustness: noise, length, several recordings",
    "reference_clips": "Several recordings per voice: 1, 2 and 3 clips",
    "pick_fit": "Pick objective fitted by leave-one-speaker-out cross-validation",
    "rate_follow": "Speaking rate: a clone's pace follows its reference",
    "clone_latency": "Enrollment latency through a warm server",
    "report_calibration": "Quality-report warnings calibrated on real references",
    "atlas_size": "Atlas size: 250, 500 and 1,000 voices",
}
KNOWN_MARKDOWN = {"clone_eval", "controls", "load", "voice_table", *CLONE_SUBSECTIONS}


def result_block(
    title: str, name: str, data: dict[str, Any], markdown: dict[str, str], runs: dict[str, Any]
) -> str:
    """A level-3 section: a script's command, then its own markdown one level down."""
    return (
        f"### {title}\n\n"
        + heading(command_for(name, data, runs))
        + "\n"
        + demote_headings(markdown[name].strip(), 3)
        + "\n"
    )


def clone_subsections(
    data: dict[str, Any],
    markdown: dict[str, str],
    runs: dict[str, Any],
    out_page: Path,
    plots: dict[str, Path | None],
) -> str:
    parts = []
    for name, title in CLONE_SUBSECTIONS.items():
        if name in markdown:
            # A script that draws its own plot leaves it as img/<name>.png.
            own = out_page.parent / "img" / f"{name}.png"
            plot = plots.get(name) or (own if own.exists() else None)
            parts.append(
                "\n" + result_block(title, name, data, markdown, runs) + image(out_page, plot, name)
            )
    return "".join(parts)


def section_other(
    data: dict[str, Any],
    markdown: dict[str, str],
    runs: dict[str, Any],
    out_page: Path,
    img_dir: Path,
) -> str:
    """Markdown from scripts this page has no section for yet (e.g. a soak test)."""
    extra = sorted(set(markdown) - KNOWN_MARKDOWN)
    if not extra:
        return ""
    parts = ["## Other results\n"]
    for name in extra:
        parts.append(
            result_block(name, name, data, markdown, runs)
            + "".join(image(out_page, png, name) for png in sorted(img_dir.glob(f"{name}*.png")))
        )
    return "\n".join(parts)


# -- the page ----------------------------------------------------------------------------
def render(results_dir: Path, out_page: Path, img_dir: Path) -> str:
    data, markdown = load_results(results_dir)
    runs = load_runs(results_dir)
    machine = machine_info()
    img_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path | None] = {}
    makers: dict[str, Callable[[dict[str, Any], Path], Path | None]] = {
        "rtf_vs_length": plot_rtf,
        "ttfa_hist": plot_ttfa,
        "ttfa_stages": plot_ttfa_stages,
        "peers": plot_peers,
        "clone_similarity": plot_clone,
        "pick_study": plot_pick_study("pick_study"),
        "pick_study_auditions": plot_pick_study("pick_study_auditions"),
        "reference_robustness": plot_reference_robustness,
        "users": lambda d, p: users_report.plot(d.get("users") or {}, p),
    }
    for name, maker in makers.items():
        try:
            plots[name] = maker(data, img_dir / f"{name}.png")
        except Exception as exc:  # a broken plot must not cost the whole page
            plots[name] = None
            print(f"plot {name} failed: {type(exc).__name__}: {exc}")
    load_png = img_dir / "load.png"
    sections = [
        "# Benchmarks\n\n"
        f"Generated {machine['date']} by `make bench` / `make bench-quick` "
        "(`python bench/run_all.py`). "
        "Raw numbers: `bench/results/all.json`; compare two runs with "
        "`python bench/compare.py old.json new.json`.\n",
        section_machine(machine),
        section_runs(runs),
        "## Speed\n",
        speed_rtf(data, runs) + image(out_page, plots["rtf_vs_length"], "RTF vs text length"),
        speed_peers(data, runs) + image(out_page, plots["peers"], "voxclone vs peers"),
        speed_ttfa(data, runs)
        + image(out_page, plots["ttfa_hist"], "TTFA distribution")
        + image(out_page, plots["ttfa_stages"], "TTFA stages"),
        speed_cloning(data, runs),
        section_builtins(data, runs),
        section_markdown(
            "Voice table: every built-in voice in its language", "voice_table", data, markdown, runs
        ),
        section_markdown(
            "Cloning",
            "clone_eval",
            data,
            markdown,
            runs,
            image(out_page, plots["clone_similarity"], "clone identity per speaker")
            + clone_subsections(data, markdown, runs, out_page, plots),
        ),
        section_markdown("Controls", "controls", data, markdown, runs),
        section_markdown(
            "Load",
            "load",
            data,
            markdown,
            runs,
            image(out_page, load_png if load_png.exists() else None, "load"),
        ),
        section_cache(data, runs),
        section_users(data, runs, plots["users"], out_page),
        section_other(data, markdown, runs, out_page, img_dir),
    ]
    page = "\n".join(s for s in sections if s)
    out_page.parent.mkdir(parents=True, exist_ok=True)
    out_page.write_text(page)
    merged = {"generated": machine["date"], "machine": machine, "scripts": runs, "results": data}
    (results_dir / "all.json").write_text(json.dumps(merged, indent=1, default=str))
    return page


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--img", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    render(args.results, args.out, args.img)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
