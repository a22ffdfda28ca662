"""Render docs/benchmarks.md (plus PNG plots) from the JSON/Markdown in bench/results/.

The page holds the product's current figures, at most ``page_parts.PAGE_LINES``
lines: one section per benchmark that ``run_all.py`` runs, every table headed
by the exact command that produced it and the date of its result; a result's
own Markdown is cut to a budget and linked in full. Any other ``*.md`` in
bench/results (a new benchmark's, say) appears under "Other results" without
editing this file. Study results are not repeated (docs/studies.md tells them).
A missing result becomes a line saying so; a failed script (recorded by
``run_all.py`` in ``run_all.json``) is shown with its error. All raw results
are merged into ``all.json`` next to them.

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

from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR
sys.path.insert(0, str(Path(__file__).resolve().parent))

import page_parts  # noqa: E402
import users_report  # noqa: E402

# Result name -> the command that produces it when nothing better is recorded.
DEFAULT_COMMANDS = {
    # Release check of the container image (tests/container, docs/deploy.md).
    "container_image": "make image && make image-smoke",
    "rtf": "python bench/rtf.py",
    "peers": "python bench/peers.py",
    "ttfa": "python bench/ttfa.py",
    "voice_table": "python bench/voice_table.py",
    "clone_eval": "python bench/clone_eval.py",
    "controls": "python bench/controls_eval.py",
    "speed_curve": "python bench/speed_curve.py",
    "realtime": "python bench/realtime.py",
    "load": "python bench/load.py",
    "soak": "python bench/soak.py",
    "users": "python bench/users.py",
    "word_timestamps": "nice -n 15 python bench/word_timestamps.py",
    "engines_speed": "nice -n 10 python bench/engines_speed.py",
    "startup": "python bench/startup.py",
    "overload": "python bench/overload.py",
    "clone_latency": "python bench/clone_latency.py",
    "long_form": "python bench/long_form.py",
    "mutation": "make mutants",
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


# Key under which render() hands each result's date to the sections (never a result name).
DATES = "__dates__"


def heading(command: str, when: str | None = None) -> str:
    return f"Produced by `{command}`" + (f" (result of {when})" if when else "") + ":\n"


def produced(name: str, data: dict[str, Any], runs: dict[str, Any]) -> str:
    """The line above a result's table: its command and the date of the result."""
    return heading(command_for(name, data, runs), data.get(DATES, {}).get(name))


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
    # The test split's run (the Cloning section's table), else the last dev run.
    run = data.get("clone_catalog_test") or data.get("clone_eval") or {}
    speakers = run.get("speakers", [])
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


# -- sections ----------------------------------------------------------------------------
def section_machine(machine: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    return (
        f"## Machine\n\n- CPU: {machine['cpu_model']} — {machine['cores_usable']} usable cores "
        f"({machine['cores_total']} online)\n- Memory: {machine['memory_gib']} GiB\n"
        f"- OS: {machine['os']}\n- Libraries: {versions}\n- Date: {machine['date']}\n"
    )


def _script_exists(command: str | None) -> bool:
    """Whether the script a recorded command ran is still in the tree (a
    renamed or retired benchmark's row would name a file that is gone)."""
    words = (command or "").split()
    return len(words) > 1 and (ROOT / words[1]).is_file()


def section_runs(runs: dict[str, Any]) -> str:
    rows = [
        [f"`{r.get('command')}`", r.get("status"), fmt(r.get("seconds"), 1), r.get("error") or ""]
        for r in runs.values()
        if _script_exists(r.get("command"))
    ]
    if not rows:
        return ""
    return "## Scripts of the last `bench/run_all.py` run\n\n" + table(
        ["command", "status", "seconds", "error"], rows
    )


def speed_rtf(data: dict[str, Any], runs: dict[str, Any]) -> str:
    rtf = data.get("rtf")
    if not rtf or "runs" not in rtf:
        return "### Real-time factor and overhead\n\n" + missing("rtf", runs)
    out = ["### Real-time factor and overhead\n", produced("rtf", data, runs)]
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
    out = [title + produced("peers", data, runs)]
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
    out = [title + produced("ttfa", data, runs)]
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
        return title + missing("clone_eval", runs) + deep_refine_paragraph()
    rows = [
        [name, len(values), fmt(statistics.median(values), 2), fmt(max(values), 2)]
        for name, values in (("instant clone", instant), ("refine", refine))
        if values
    ]
    latency = data.get("clone_latency", {})
    speakable = [float(r["answer_s"]) for r in latency.get("rows", []) if r.get("wait") is False]
    through_api = ""
    if speakable:
        meta = latency.get("meta", {})
        through_api = (
            f"Through the API (`{command_for('clone_latency', data, runs)}`, "
            f"{meta.get('date', '?')}, load {fmt(meta.get('loadavg_before'), 1)} before): "
            f"speakable (`wait=false`, upload included) median "
            f"{fmt(statistics.median(speakable), 2)} s, max {fmt(max(speakable), 2)} s "
            f"over {len(speakable)} clips (issue 47: <= 1.5 s on a quiet host).\n\n"
        )
    return (
        title
        + produced("clone_eval", data, runs)
        + "\n"
        + table(["step", "speakers", "median s", "max s"], rows)
        + "\n"
        + through_api
        + deep_refine_paragraph()
    )


DEEP_REFINE_RESULTS = ROOT / "studies" / "results" / "deep_refine_gain_test.json"
# The same settings run again on the test split to add DNSMOS (it was not
# recorded in the scored run); its identity figures are a second look, not a choice.
DEEP_REFINE_DNSMOS = ROOT / "studies" / "results" / "deep_refine_gain_test_dnsmos.json"


def deep_refine_paragraph() -> str:
    """Issue 47's held-out figures, from the study's scored run (docs/studies.md
    tells the rest); empty when the study has not been run."""
    try:
        summary = json.loads(DEEP_REFINE_RESULTS.read_text())["summary"]
    except (OSError, KeyError, json.JSONDecodeError):
        return ""

    def arm(name: str) -> str:
        return f"{summary[f'instant_{name}']:.3f} -> {summary[f'deep_{name}']:.3f}"

    text = (
        f"Deep refine (issue 47), test split scored once, {summary['speakers']} speakers "
        f"(normalized): judge {arm('judge')}, GE2E {arm('ge2e')}, CAM++ {arm('campplus')}, "
        f"WER {summary['instant_wer']:.0%} -> {summary['deep_wer']:.0%}, "
        f"{summary['refine_s_mean']:.0f} s per voice at load {summary['host_load_1min']:.1f}"
    )
    try:
        again = json.loads(DEEP_REFINE_DNSMOS.read_text())["summary"]
        text += (
            f"; DNSMOS P.808 {again['instant_p808']:.2f} -> {again['deep_p808']:.2f} "
            f"(the same settings run again for it)"
        )
    except (OSError, KeyError, json.JSONDecodeError):
        pass
    return text + " (docs/studies.md, *Deep refine*; `studies/results/deep_refine_gain_test*`).\n"


def section_voice_table(data: dict[str, Any], runs: dict[str, Any], link: str) -> str:
    """Each language's default voice and the OpenAI names, from voice_table.json;
    the full table (every voice) is linked."""
    title = "## Voice table: every built-in voice in its language\n\n"
    res = data.get("voice_table")
    if not isinstance(res, dict) or "rows" not in res:
        return title + missing("voice_table", runs)
    rows = {(r["voice"], r["language"]): r for r in res["rows"]}

    def error(row: dict[str, Any]) -> str:
        return "—" if row.get("wer") is None else f"{row['wer']:.1%}"

    per_language = []
    for language, voice in res.get("defaults", {}).items():
        group = [r for r in res["rows"] if r["language"] == language and r.get("native", True)]
        row = rows.get((voice, language), {})
        others = [r["p808"] for r in group if r["voice"] != voice]
        spread = f"{min(others):.2f}–{max(others):.2f}" if others else "—"
        per_language.append(
            [language, f"**{voice}**", fmt(row.get("p808"), 2), error(row), len(group), spread]
        )
    english = {r["voice"]: r for r in res["rows"] if r["language"] in ("en-us", "en-gb")}
    openai = [
        [name, voice, fmt(english.get(voice, {}).get("p808"), 2), error(english.get(voice, {}))]
        for name, voice in res.get("openai", {}).items()
    ]
    return (
        title
        + produced("voice_table", data, runs)
        + "\nDefault voice per language: the best predicted naturalness (DNSMOS P.808) among "
        "native voices whose words Whisper gets right (WER; CER for Japanese and "
        f"Mandarin; — = not scored). Every voice's scores: [voice_table.md]({link}).\n\n"
        + table(
            ["language", "default", "P.808", "WER", "native voices", "others' P.808"],
            per_language,
        )
        + "\nOpenAI voice names:\n\n"
        + table(["OpenAI name", "speaks as", "P.808", "WER"], openai)
    )


def section_markdown(
    title: str,
    name: str,
    data: dict[str, Any],
    markdown: dict[str, str],
    runs: dict[str, Any],
    extra: str = "",
    budget: int = 10_000,
    link: str = "",
) -> str:
    """A script's own Markdown under a page heading, cut to ``budget`` lines."""
    head = f"## {title}\n\n"
    if name not in markdown:
        return head + missing(name, runs) + extra
    body = page_parts.excerpt(demote_headings(markdown[name].strip()), budget, link)
    return head + produced(name, data, runs) + "\n" + body + extra


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
        + produced("load", data, runs)
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
        + produced("users", data, runs)
        + f"\nMeasured {res.get('when', 'at an unrecorded time')}.\n\n"
        + users_report.markdown(res)
        + image(out_page, plot, "many users: latency and outcomes per level")
    )


def demote_headings(markdown: str, levels: int = 2) -> str:
    """Nest a script's own Markdown under this page's section headings."""
    return "\n".join(
        "#" * levels + line if line.startswith("#") else line for line in markdown.splitlines()
    )


KNOWN_MARKDOWN = {
    "clone_catalog_test",
    "clone_latency",  # a line under "Instant clone and refine times"
    "listener_eer",
    "controls",
    "load",
    "voice_table",
    "watermark",
    "long_form",
    "speed_curve",  # its own section ("Speed curve"), not again under "Other results"
}


# -- the page ----------------------------------------------------------------------------
# Lines each result's own Markdown may take on the page (the rest is linked).
BUDGETS = {
    "watermark": 19,
    "clone_catalog_test": 20,
    "listener_eer": 18,
    "controls": 16,
    "load": 22,
    "speed_curve": 10,
    "long_form": 12,
    "realtime": 14,
}


def _existing(path: Path) -> Path | None:
    return path if path.exists() else None


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
        "users": lambda d, p: users_report.plot(d.get("users") or {}, p),
    }
    for name, maker in makers.items():
        try:
            plots[name] = maker(data, img_dir / f"{name}.png")
        except Exception as exc:  # a broken plot must not cost the whole page
            plots[name] = None
            print(f"plot {name} failed: {type(exc).__name__}: {exc}")
    dated = {**data, DATES: page_parts.result_dates(results_dir, data)}

    def link(name: str, suffix: str = ".md") -> str:
        return page_parts.relative_link(out_page, results_dir / f"{name}{suffix}")

    def section(title: str, name: str, extra: str = "") -> str:
        return section_markdown(
            title, name, dated, markdown, runs, extra, BUDGETS.get(name, 40), link(name)
        )

    load_png = img_dir / "load.png"
    studies = page_parts.relative_link(out_page, ROOT / "docs" / "studies.md")
    sections = [
        "# Benchmarks\n\n"
        f"Generated {machine['date']} from `bench/results/` by `python bench/render_page.py`; "
        "`make bench` / `make bench-quick` (`python bench/run_all.py`) run the benchmarks "
        "first. Every table says which command produced it and when: results come from "
        "different runs. This page holds current figures only; how the product's choices "
        f"were made, and the figures behind them, is in [studies.md]({studies}) "
        "(scripts in `studies/`). Raw numbers: `bench/results/all.json`; compare two runs "
        "with `python bench/compare.py old.json new.json`.\n",
        section_machine(machine),
        section_runs(runs),
        "## Speed\n",
        speed_rtf(dated, runs) + image(out_page, plots["rtf_vs_length"], "RTF vs text length"),
        speed_peers(dated, runs) + image(out_page, plots["peers"], "voxclone vs peers"),
        speed_ttfa(dated, runs)
        + image(out_page, plots["ttfa_hist"], "TTFA distribution")
        + image(out_page, plots["ttfa_stages"], "TTFA stages"),
        speed_cloning(dated, runs),
        section_voice_table(dated, runs, link("voice_table")),
        # The test split (bench/speaker_splits.py), scored once per final
        # cloning change: the figure a speaker nobody fitted on would get.
        section(
            "Cloning",
            "clone_catalog_test",
            image(out_page, plots["clone_similarity"], "clone identity per speaker"),
        ),
        section("Speaker listeners", "listener_eer"),
        section("Controls", "controls"),
        section("Speed curve: every built-in voice", "speed_curve"),
        section("Load", "load", image(out_page, load_png if load_png.exists() else None, "load")),
        section_cache(dated, runs),
        section_users(dated, runs, plots["users"], out_page),
        # Issue 48: voice agents' stream-input sessions.
        section(
            "Voice agents: stream-input sessions",
            "realtime",
            image(out_page, _existing(img_dir / "realtime.png"), "voice-agent sessions"),
        ),
        # Issue 49: PerTh's robustness, false positives, quality change and cost.
        section("Watermark", "watermark"),
        # Issue 50: 30 minutes of a book, drift of WER, speaker and loudness.
        section(
            "Long form: 30 minutes of a book",
            "long_form",
            image(out_page, _existing(img_dir / "long_form.png"), "long-form drift per window"),
        ),
    ]
    page = "\n".join(s for s in sections if s)
    rest = sorted(n for n in set(markdown) - KNOWN_MARKDOWN if not page_parts.is_study_result(n))
    skipped = sorted(n for n in markdown if page_parts.is_study_result(n))
    note = (
        f" Not shown: {', '.join(f'`{n}`' for n in skipped)}, the fit and validation "
        f"runs that studies read ([studies.md]({studies}) says what they found)."
        if skipped
        else ""
    )

    def own_plots(name: str) -> str:
        pngs = sorted(img_dir.glob(f"{name}*.png"))
        return ", ".join(f"[{p.name}]({page_parts.relative_link(out_page, p)})" for p in pngs)

    def others(lines_left: int) -> str:
        return page_parts.other_results(
            rest,
            markdown,
            dated[DATES],
            lambda name: produced(name, dated, runs),
            link,
            lines_left,
            lambda text: demote_headings(text.strip(), 3),
            own_plots,
            note,
        )

    lines_left = page_parts.PAGE_LINES - page.count("\n") - 1
    tail = others(lines_left)
    while tail and page.count("\n") + tail.count("\n") + 1 > page_parts.PAGE_LINES:
        shorter = others(lines_left - len(rest))  # one line less per entry
        if shorter == tail:
            break  # every entry at its minimum: the page runs over rather than drop one
        lines_left -= len(rest)
        tail = shorter
    page += "\n" + tail
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
    parser.add_argument("--img", type=Path, default=IMG_DIR)
    args = parser.parse_args()
    render(args.results, args.out, args.img)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
