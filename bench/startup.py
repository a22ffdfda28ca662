"""Start-up: time to ready (speech, then cloning), per stage, and a one-shot ``say``.

Each run starts ``voxclone serve`` (the README's command, on a throw-away home
that reuses the assembled model) and polls ``/readyz`` (speech) and
``/readyz?capability=cloning`` every 50 ms from process start; the stage
seconds come from ``/readyz``'s ``detail.startup_s`` (the composition root's
own timing). Then ``voxclone say "Hi." -o x.wav`` runs in-process (``--local``:
no server to lean on) for wall time and peak RSS, and kokoro-onnx
loads the same int8 model and speaks the same text in a fresh process, as the
reference a new user would compare with.

    python bench/startup.py [--repeat 5]

Writes bench/results/startup.json, .md and docs/img/startup.png (stacked stages).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import bench_home  # noqa: E402
from voxclone.devserver import start_server  # noqa: E402

RESULTS = RESULTS_DIR / "startup.json"
MARKDOWN = RESULTS.with_suffix(".md")
PLOT = IMG_DIR / "startup.png"
SERVE = "import sys; from voxclone.api.cli import main; sys.exit(main(['serve']))"
TEXT = "Hi."
NOT_STAGES = ("speech_ready_s", "cloning_ready_s", "server_peak_rss_mib")


def _status(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), {}
    except OSError:
        return 0, {}


def serve_once(timeout_s: float = 300.0) -> dict[str, Any]:
    """Seconds from process start to speech-ready and cloning-ready, and the stages."""
    home = bench_home("voxclone-startup-")
    with ExitStack() as stack:
        started = time.perf_counter()
        server = start_server(home, {"VOXCLONE_LOG_FORMAT": "json"}, stack, launcher=SERVE)
        speech_s = cloning_s = None
        detail: dict[str, Any] = {}
        while time.perf_counter() - started < timeout_s:
            if server.process.poll() is not None:
                raise RuntimeError(f"server exited; log:\n{server.log_tail()}")
            if speech_s is None:
                code, body = _status(server.url + "/readyz")
                if code == 200:
                    speech_s = time.perf_counter() - started
            if speech_s is not None:
                code, body = _status(server.url + "/readyz?capability=cloning")
                if code == 200:
                    cloning_s = time.perf_counter() - started
                    detail = body["detail"]
                    break
            time.sleep(0.05)
        if cloning_s is None:
            raise RuntimeError(f"not ready in {timeout_s} s; log:\n{server.log_tail()}")
        rss = _peak_rss_mib(server.process.pid)
    return {
        "speech_ready_s": speech_s,
        "cloning_ready_s": cloning_s,
        **detail["startup_s"],
        "server_peak_rss_mib": rss,
    }


def _peak_rss_mib(pid: int) -> float | None:
    """The serving process's peak RSS so far (Linux /proc; None elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def say_once(home: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "VOXCLONE_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}
    code = (
        "import sys; from voxclone.api.cli import main; "
        f"sys.exit(main(['say', {TEXT!r}, '-o', {str(out)!r}, '--local']))"
    )
    return _timed_child([sys.executable, "-c", code], env)


def kokoro_onnx_once() -> dict[str, float]:
    """kokoro-onnx: load the same int8 model and speak TEXT (bench/peers.py's setup,
    which warms up with one sentence as its README does)."""
    code = f"""
import sys; sys.path.insert(0, {str(ROOT / "bench")!r})
from peers import KokoroOnnxCandidate, _model_path
KokoroOnnxCandidate(_model_path()).render({TEXT!r})
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return _timed_child([sys.executable, "-c", code], env)


def _timed_child(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    # /usr/bin/time is not on every machine: wait4 gives the child's own peak RSS.
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        err = process.stderr.read().decode(errors="replace") if process.stderr else ""
        raise RuntimeError(f"{argv[-1][:80]} failed: {err[-2000:]}")
    return {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024}


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows if r.get(key) is not None)


def _markdown(result: dict[str, Any]) -> str:
    serve, say, peer = result["serve"], result["say"], result["kokoro_onnx"]
    stages = [k for k in serve[0] if k not in NOT_STAGES]
    lines = [
        f"`{result['meta']['command']}` — {len(serve)} runs, medians; load average "
        f"{result['meta']['loadavg_before']:.1f} before, {result['meta']['loadavg_after']:.1f} "
        "after (2 cores).",
        "",
        "| measure | median s | target |",
        "|---|---:|---:|",
        f"| `voxclone serve` → speech ready (/readyz 200) | {_median(serve, 'speech_ready_s'):.2f}"
        " | ≤ 3 |",
        f"| → cloning ready (/readyz?capability=cloning 200) | "
        f"{_median(serve, 'cloning_ready_s'):.2f} | — |",
    ]
    for stage in stages:
        lines.append(f"| stage `{stage}` | {_median(serve, stage):.2f} | |")
    say_wall, peer_wall = _median(say, "wall_s"), _median(peer, "wall_s")
    say_rss, peer_rss = _median(say, "peak_rss_mb"), _median(peer, "peak_rss_mb")
    lines += [
        f'| `voxclone say "{TEXT}" -o x.wav` (no server) wall | {say_wall:.2f} | ≤ 1.5 |',
        f"| kokoro-onnx load + speak, same model and text | {peer_wall:.2f} | |",
        f"| ratio say / kokoro-onnx | {say_wall / peer_wall:.2f} | |",
        "",
        f"Peak RSS: `say` {say_rss:.0f} MiB, kokoro-onnx {peer_rss:.0f} MiB "
        f"(ratio {say_rss / peer_rss:.2f}).",
    ]
    if all(r.get("server_peak_rss_mib") for r in serve):
        lines.append(
            f"Peak RSS of `voxclone serve` once cloning is ready: "
            f"{_median(serve, 'server_peak_rss_mib'):.0f} MiB."
        )
    return "\n".join(lines) + "\n"


def _plot(serve: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [k for k in serve[0] if k not in NOT_STAGES]
    other = max(
        0.0,
        _median(serve, "speech_ready_s")
        - sum(_median(serve, s) for s in stages if not s.startswith("cloning")),
    )
    fig, ax = plt.subplots(figsize=(7, 2.4))
    left = 0.0
    for name, width in [("imports, store, app", other)] + [(s, _median(serve, s)) for s in stages]:
        ax.barh(0, width, left=left, label=name)
        left += width
    ax.axvline(3.0, color="k", linestyle="--", linewidth=1, label="speech target 3 s")
    ax.set_yticks([])
    ax.set_xlabel("seconds from process start (median)")
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # Some sandboxes set this; a user's Python caches bytecode, and without the
    # cache every call compiles voxclone's ~100 modules again (~0.3 s of a
    # `say`, cProfile's builtins.compile). The children run as on a user's machine.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    load_before = os.getloadavg()[0]
    serve = [serve_once() for _ in range(args.repeat)]
    home = bench_home("voxclone-say-")
    with tempfile.TemporaryDirectory() as tmp:
        # Untimed first calls: the first `say` in a home creates its database,
        # and both first runs write their bytecode caches.
        say_once(home, Path(tmp) / "first.wav")
        kokoro_onnx_once()
        say = [say_once(home, Path(tmp) / f"say{i}.wav") for i in range(args.repeat)]
        peer = [kokoro_onnx_once() for _ in range(args.repeat)]
    result = {
        "meta": {
            "command": "python bench/startup.py " + " ".join(sys.argv[1:]).strip(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
            "text": TEXT,
        },
        "serve": serve,
        "say": say,
        "kokoro_onnx": peer,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    MARKDOWN.write_text(_markdown(result))
    _plot(serve, PLOT)
    print(MARKDOWN.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
