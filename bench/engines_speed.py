"""Speed of the engines side by side: Kokoro (int8 ONNX) and Pocket TTS (torch).

Pocket TTS's weights are operator-supplied and not reachable here, so its
model is the package's full-size ``english`` architecture with random weights
(bench/pocket_random_bundle.py): same layers, same sizes, so the
same arithmetic per frame — but the audio is noise. Its length is the
package's cap for the text (random weights never emit end-of-speech), which
is longer than real speech would be; RTF is per audio second either way.
Clone *quality* cannot be measured without the real weights.

Each engine runs in its own child process (so peak RSS is its own), on the
same sentences, one after the other:

* load: bundle/model files -> engine ready to run (Pocket: build + load
  weights; Kokoro: ONNX session), then warm-up;
* instant clone (Pocket): ``make_prompt`` on a 10 s reference, which includes
  Mimi encoding and prompting the LM (Kokoro's instant clone is a different
  method; bench/clone_eval.py measures it);
* per sentence: time to first audio and real-time factor of ``synthesize``
  (Kokoro, one chunk per sentence) or ``stream`` (Pocket, 80 ms frames);
* peak RSS of the child process.

    nice -n 10 python bench/engines_speed.py [--sentences 3] [--pocket-threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

RESULTS = RESULTS_DIR
IMG = IMG_DIR
REFERENCE = [
    ROOT / "tests" / "data" / "librispeech_1088-129236-0000.wav",
    ROOT / "tests" / "data" / "librispeech_3005-163389-0000.wav",
]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Every morning he opened his shop at seven and wound each of the forty clocks.",
    "A stranger arrived with a broken pocket watch and a story nobody believed.",
    "Children stopped by on their way to school to watch the pendulums swing.",
]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reference_10s() -> tuple[np.ndarray, int]:
    parts = []
    rate = 16_000
    for path in REFERENCE:
        audio, rate = sf.read(path, dtype="float32")
        parts.append(audio)
    joined = np.concatenate(parts)
    return joined[: 10 * rate], rate


def _child_kokoro(models_dir: Path, sentences: list[str]) -> dict[str, Any]:
    from voxclone.synth.engine.base import EngineConfig, SynthItem
    from voxclone.synth.engine.registry import create

    started = time.perf_counter()
    engine = create("kokoro", EngineConfig(models_dir=models_dir, threads=1))
    engine.load()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    engine.warmup()
    warm_s = time.perf_counter() - started
    voice = next(iter(engine.builtin_voices().values()))
    tok = engine.tokenizer()
    rows = []
    for text in sentences:
        ids = tok.token_ids(tok.phonemize(text, "en-us"))
        cpu = time.process_time()
        started = time.perf_counter()
        [audio] = engine.synthesize([SynthItem(token_ids=ids, style=voice.style)])
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
        seconds = audio.size / engine.capabilities.sample_rate
        # One chunk per sentence: the first audio is the whole sentence.
        rows.append(
            {"text": text, "audio_s": seconds, "wall_s": wall, "cpu_s": cpu, "ttfa_s": wall}
        )
    return {
        "engine": "kokoro",
        "variant": "int8 ONNX, 1 intra-op thread",
        "load_s": load_s,
        "warmup_s": warm_s,
        "clone_s": None,
        "clone_cpu_s": None,
        "sentences": rows,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _child_pocket(models_dir: Path, sentences: list[str], threads: int) -> dict[str, Any]:
    import torch

    from voxclone.synth.engine.base import SynthItem
    from voxclone.synth.engine.pocket.engine import PocketEngine

    started = time.perf_counter()
    engine = PocketEngine(models_dir, torch_threads=threads)
    engine.load()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    engine.warmup()
    warm_s = time.perf_counter() - started
    reference, rate = _reference_10s()
    clone_times = []
    clone_cpu = []
    blob = b""
    for _ in range(3):
        cpu = time.process_time()
        started = time.perf_counter()
        blob = engine.make_prompt(reference, rate)
        clone_times.append(time.perf_counter() - started)
        clone_cpu.append(time.process_time() - cpu)
    prompt = engine.load_prompt(blob)
    tok = engine.tokenizer()
    rows = []
    for text in sentences:
        ids = tok.token_ids(tok.phonemize(text, "en-us"))
        cpu = time.process_time()
        started = time.perf_counter()
        first = None
        samples = 0
        pieces = 0
        for piece in engine.stream(SynthItem(token_ids=ids, prompt=prompt)):
            if first is None:
                first = time.perf_counter() - started
            samples += piece.size
            pieces += 1
        wall = time.perf_counter() - started
        rows.append(
            {
                "text": text,
                "audio_s": samples / engine.sample_rate,
                "wall_s": wall,
                "cpu_s": time.process_time() - cpu,
                "ttfa_s": first,
                "pieces": pieces,
            }
        )
    params = sum(p.numel() for p in engine.model.parameters())
    service = _pocket_service_ttfa(models_dir, blob, sentences, threads)
    return {
        "service_stream": service,
        "engine": "pocket-tts",
        "variant": f"english architecture, random weights, torch {threads} thread(s)",
        "torch_threads": threads,
        "torch_version": torch.__version__,
        "parameters_m": params / 1e6,
        "load_s": load_s,
        "warmup_s": warm_s,
        "clone_s": statistics.median(clone_times),
        "clone_s_all": clone_times,
        "clone_cpu_s": statistics.median(clone_cpu),
        "prompt_bytes": len(blob),
        "sentences": rows,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _pocket_service_ttfa(
    models_dir: Path, blob: bytes, sentences: list[str], threads: int
) -> dict[str, Any]:
    """Time to first audio of a stream through the speech service (scheduler, joiner,
    encoder): the engine's 80 ms frames leave as they are made."""
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings
    from voxclone.service.catalog import ResolvedVoice
    from voxclone.service.speech.service import SpeechRequest

    settings = Settings(
        home=models_dir.parent,
        engines="pocket-tts",
        warm_cloning=False,
        engine_options={"pocket-tts": {"torch_threads": str(threads)}},
    )
    runtime = build_runtime(settings, with_voices=False)
    try:
        engine = runtime.engine
        voice = ResolvedVoice(
            "bench",
            "bench",
            1,
            None,
            "en-us",
            False,
            engine="pocket-tts",
            model_id=engine.capabilities.model_id,
            prompt=engine.load_prompt(blob),
        )
        firsts = []
        for text in sentences:
            started = time.perf_counter()
            _ctype, parts = runtime.speech.stream(
                SpeechRequest(text=text, language="en-us", format="pcm", voice_override=voice)
            )
            first = None
            for part in parts:
                if part and first is None:
                    first = time.perf_counter() - started
                    parts.close()  # type: ignore[attr-defined]
                    break
            firsts.append(first)
    finally:
        runtime.close()
    return {"ttfa_s": firsts, "ttfa_median_s": statistics.median(f for f in firsts if f)}


def _run_child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    rows = run["sentences"]
    audio = sum(r["audio_s"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    return {
        "engine": run["engine"],
        "variant": run["variant"],
        "load_s": round(run["load_s"], 3),
        "warmup_s": round(run["warmup_s"], 3),
        "clone_s": None if run["clone_s"] is None else round(run["clone_s"], 3),
        "rtf": round(wall / audio, 3),
        "cpu_per_audio_s": round(sum(r["cpu_s"] for r in rows) / audio, 3),
        "clone_cpu_s": None if run["clone_cpu_s"] is None else round(run["clone_cpu_s"], 3),
        "ttfa_median_s": round(statistics.median(r["ttfa_s"] for r in rows), 3),
        # Through the speech service (scheduler, joiner, encoder); Pocket only.
        "service_ttfa_median_s": (
            round(run["service_stream"]["ttfa_median_s"], 3) if "service_stream" in run else None
        ),
        "audio_s": round(audio, 2),
        "peak_rss_mb": round(run["peak_rss_mb"], 1),
    }


def _markdown(summaries: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "Kokoro vs Pocket TTS on this machine's 2 cores, same sentences, one child process "
        "per engine (peak RSS is that process's). Pocket TTS runs the package's full-size "
        f"`english` architecture ({meta['pocket_parameters_m']:.0f} M parameters) with "
        "**random weights**: its speed is the real model's, its audio is noise.",
        "",
        "**Pocket TTS clone quality cannot be measured here**: the weights that make its "
        "speech and its voice cloning are operator-supplied (CC-BY-4.0, on a model hub this "
        "environment cannot reach), so no similarity, WER or listening number exists for it "
        "in this repository.",
        "",
        f"Load average while it ran: {meta['loadavg_before']:.1f} before, "
        f"{meta['loadavg_after']:.1f} after, on 2 cores: other work shared the CPU, so "
        "every time below is inflated, CPU seconds too (cache and core contention).",
        "",
        "| engine | variant | load s | warm-up s | instant clone s (10 s ref) | clone CPU s | "
        "RTF | CPU s per audio s | TTFA median s (engine) | TTFA median s (service stream) | "
        "audio s | peak RSS MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        clone = "—" if s["clone_s"] is None else f"{s['clone_s']:.3f}"
        clone_cpu = "—" if s["clone_cpu_s"] is None else f"{s['clone_cpu_s']:.3f}"
        lines.append(
            f"| {s['engine']} | {s['variant']} | {s['load_s']:.3f} | {s['warmup_s']:.3f} | "
            f"{clone} | {clone_cpu} | {s['rtf']:.3f} | {s['cpu_per_audio_s']:.3f} | "
            f"{s['ttfa_median_s']:.3f} | "
            f"{'—' if s.get('service_ttfa_median_s') is None else s['service_ttfa_median_s']} | "
            f"{s['audio_s']:.1f} | {s['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Kokoro's time to first audio is a whole sentence (one call per chunk); Pocket TTS "
        "streams 80 ms frames, so its first audio comes after the text prompt and one frame; "
        "the service column is the same through `SpeechService.stream` (scheduler, joiner, "
        "encoder), where frames leave as they are made. "
        "Random Pocket weights never end a sentence early, so each sentence runs to the "
        "package's length cap (tokens / 3 s + 2 s): more audio per sentence than real speech, "
        "same cost per audio second. Kokoro's instant clone (a different method) is in "
        '"Instant clone and refine times".',
        "",
    ]
    lines += _scaled(summaries)
    return "\n".join(lines)


def _kokoro_idle_rtf() -> float | None:
    """Kokoro engine RTF (1 thread, 5 s text) from bench/rtf.py's last result, if any."""
    try:
        runs = json.loads((RESULTS / "rtf.json").read_text())["runs"]
        one = next(r for r in runs if r["threads"] == 1)
        return float(one["texts"]["5s"]["rtf"]["engine"])
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None


def _scaled(summaries: list[dict[str, Any]]) -> list[str]:
    """Same-run ratios, and Pocket's compute-bound figures scaled by Kokoro's slowdown."""
    kokoro = next((s for s in summaries if s["engine"] == "kokoro"), None)
    if kokoro is None:
        return []
    lines = [
        "Same-run ratios (Pocket ÷ Kokoro; both slowed by the same load):",
        "",
        "| variant | RTF ratio | CPU per audio s ratio |",
        "|---|---:|---:|",
    ]
    for s in summaries:
        if s["engine"] != "kokoro":
            lines.append(
                f"| {s['variant']} | {s['rtf'] / kokoro['rtf']:.2f} | "
                f"{s['cpu_per_audio_s'] / kokoro['cpu_per_audio_s']:.2f} |"
            )
    idle = _kokoro_idle_rtf()
    if idle:
        slow = kokoro["rtf"] / idle
        lines += [
            "",
            f"Rough idle-machine estimate: Kokoro's engine RTF was {kokoro['rtf']:.2f} here and "
            f"{idle:.3f} in `bench/rtf.py`'s last run (1 thread, a quieter machine), a slowdown of "
            f"{slow:.1f}×. Dividing Pocket's compute-bound times by the same factor (an "
            "assumption, not a measurement):",
            "",
            "| variant | RTF | instant clone s (10 s ref) | TTFA s |",
            "|---|---:|---:|---:|",
        ]
        for s in summaries:
            if s["engine"] != "kokoro" and s["clone_s"] is not None:
                lines.append(
                    f"| {s['variant']} | {s['rtf'] / slow:.2f} | {s['clone_s'] / slow:.2f} | "
                    f"{s['ttfa_median_s'] / slow:.2f} |"
                )
        lines += [
            "",
            "Re-run on a quiet machine to replace the estimate with a measurement "
            "(the issue's target: instant clone ≤ 1.5 s on 2 cores for a 10 s reference).",
        ]
    return [*lines, ""]


def _plot(summaries: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        "kokoro"
        if s["engine"] == "kokoro"
        else "pocket\n" + s["variant"].split(", ")[-1].replace(" thread(s)", " thr")
        for s in summaries
    ]
    metrics = [
        ("RTF (lower is faster)", "rtf"),
        ("time to first audio, s", "ttfa_median_s"),
        ("load + warm-up, s", None),
        ("peak RSS, MB", "peak_rss_mb"),
    ]
    fig, axes = plt.subplots(1, len(metrics), figsize=(13, 3.4))
    for ax, (title, key) in zip(axes, metrics, strict=True):
        values = [(s["load_s"] + s["warmup_s"]) if key is None else s[key] for s in summaries]
        ax.bar(range(len(values)), values, color=["#4c72b0", "#dd8452", "#c44e52"][: len(values)])
        ax.set_xticks(range(len(values)), labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.suptitle("Kokoro vs Pocket TTS (random weights) on 2 shared cores", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--pocket-threads", default="1,2", help="torch threads to try, e.g. 1,2")
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite the page section and plot from the JSON"
    )
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sentences = SENTENCES[: args.sentences]
    if args.render_only:
        saved = json.loads((RESULTS / "engines_speed.json").read_text())
        (RESULTS / "engines_speed.md").write_text(_markdown(saved["summary"], saved["meta"]))
        _plot(saved["summary"], IMG / "engines_speed.png")
        return 0

    if args.child is not None:
        kind, models_dir = args.child[0], Path(args.child[1])
        if kind == "kokoro":
            out = _child_kokoro(models_dir, sentences)
        else:
            out = _child_pocket(models_dir, sentences, int(args.child[2]))
        print(json.dumps(out))
        return 0

    from _common import bench_home
    from pocket_random_bundle import make_random_bundle
    from voxclone.synth.engine.pocket.bundle import install_bundle
    from voxclone.synth.engine.pocket.loading import check_bundle

    load_before = os.getloadavg()[0]
    kokoro_home = bench_home("voxclone-engines-")
    with tempfile.TemporaryDirectory(prefix="voxclone-pocket-bench-") as tmp:
        started = time.perf_counter()
        make_random_bundle(Path(tmp) / "bundle", config="english", name="english-random")
        pocket_models = Path(tmp) / "models"
        install_bundle(Path(tmp) / "bundle", pocket_models, engine="pocket-tts", check=check_bundle)
        print(
            f"random english bundle ready in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
        runs = [_run_child(["kokoro", str(kokoro_home / "models")])]
        for threads in [int(t) for t in args.pocket_threads.split(",") if t]:
            runs.append(_run_child(["pocket", str(pocket_models), str(threads)]))
    summaries = [_summary(r) for r in runs]
    pocket = next(r for r in runs if r["engine"] == "pocket-tts")
    meta = {
        "command": "nice -n 10 python bench/engines_speed.py " + " ".join(sys.argv[1:]).strip(),
        "sentences": sentences,
        "pocket_parameters_m": pocket["parameters_m"],
        "reference_s": 10.0,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg()[0],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "engines_speed.json").write_text(
        json.dumps({"meta": meta, "summary": summaries, "runs": runs}, indent=2) + "\n"
    )
    (RESULTS / "engines_speed.md").write_text(_markdown(summaries, meta))
    _plot(summaries, IMG / "engines_speed.png")
    for s in summaries:
        print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
