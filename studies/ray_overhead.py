"""One voxclone server vs the 2-replica Ray Serve app, on the same 2 cores.

Both run on 127.0.0.1 inside a loopback-only network namespace (this script
re-executes itself under ``unshare --net``; Ray binds replica ports on every
interface). Both are up at once; each gets cache-missing short sentences: a
warm-up, then ``--requests`` at ``--concurrency`` in alternating rounds, so a
machine whose speed drifts (shared with other work) treats both alike, and
they never serve requests at the same time. Reported: throughput, p50/p95
latency, statuses, the overhead ratio of the Ray path, and a scaling model
for N machines built from the throughput measured here (a model, not a
measurement).

    nice -n 10 python studies/ray_overhead.py                  # 20 requests at 4
    nice -n 10 python studies/ray_overhead.py --requests 40 --concurrency 8

Writes studies/results/ray_overhead.json and studies/results/ray_overhead.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import threading
import time
import wave
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # _common

from _common import RATE_LIMIT_OFF, bench_home, miss_text  # noqa: E402
from voxclone.devserver import free_loopback_port, running_server  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
READY_TIMEOUT_S = 600.0
WARMUP_REQUESTS = 2
ROUNDS = 4  # alternating slices per side (see interleaved)
MACHINES = (1, 2, 4, 8, 16)

# Same engine budget on both sides: two engine calls at a time, one ONNX
# thread each; caches off so every request synthesizes.
COMMON_ENV = {
    **RATE_LIMIT_OFF,
    "VOXCLONE_ONNX_THREADS": "1",
    "VOXCLONE_FAST_LANE_THREADS": "0",
    "VOXCLONE_WARM_CLONING": "false",
    "VOXCLONE_MEMORY_CACHE_MB": "0",
    "VOXCLONE_DISK_CACHE_MB": "0",
}


def wav_seconds(body: bytes) -> float:
    with wave.open(io.BytesIO(body)) as wav:
        return wav.getnframes() / float(wav.getframerate())


class Side:
    """Latencies, audio and busy time of one side, accumulated over rounds."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.audio: list[float] = []
        self.statuses: Counter[str] = Counter()
        self.wall = 0.0
        self.requests = 0

    def summary(self, concurrency: int) -> dict[str, Any]:
        lat = np.array(self.latencies) if self.latencies else np.array([float("nan")])
        return {
            "requests": self.requests,
            "concurrency": concurrency,
            "wall_s": round(self.wall, 2),
            "throughput_rps": round(len(self.latencies) / self.wall, 4),
            "audio_s_per_s": round(sum(self.audio) / self.wall, 3),
            "p50_s": round(float(np.percentile(lat, 50)), 3),
            "p95_s": round(float(np.percentile(lat, 95)), 3),
            "statuses": dict(self.statuses),
        }


def run_load(url: str, texts: list[str], concurrency: int, side: Side) -> None:
    """Send ``texts`` at ``concurrency``; add the 200s' latencies and the wall time."""
    queue = iter(texts)
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(timeout=600.0) as client:
            while True:
                with lock:
                    text = next(queue, None)
                if text is None:
                    return
                started = time.perf_counter()
                try:
                    resp = client.post(url + "/v1/tts", json={"text": text, "format": "wav"})
                    status = str(resp.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                elapsed = time.perf_counter() - started
                with lock:
                    side.statuses[status] += 1
                    if status == "200":
                        side.latencies.append(elapsed)
                        side.audio.append(wav_seconds(resp.content))

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    side.wall += time.perf_counter() - started
    side.requests += len(texts)


def interleaved(urls: dict[str, str], requests: int, concurrency: int) -> dict[str, Any]:
    """Both sides up; ``ROUNDS`` rounds alternate between them, first side alternating."""
    sides = {name: Side() for name in urls}
    for i, url in enumerate(urls.values()):  # warm-up, not counted
        warm = [miss_text(10_000 + 10 * i + k) for k in range(WARMUP_REQUESTS)]
        run_load(url, warm, WARMUP_REQUESTS, Side())
    per_round = max(1, requests // ROUNDS)
    n = 0
    for r in range(ROUNDS):
        order = list(urls) if r % 2 == 0 else list(reversed(urls))
        for name in order:
            texts = [miss_text(n + i) for i in range(per_round)]
            n += per_round
            run_load(urls[name], texts, concurrency, sides[name])
    return {name: side.summary(concurrency) for name, side in sides.items()}


@contextmanager
def single_server() -> Iterator[str]:
    home = bench_home("voxclone-ray-bench-single-")
    env = {**COMMON_ENV, "VOXCLONE_WORKERS": "2"}
    with running_server(home, env, timeout_s=READY_TIMEOUT_S) as server:
        yield server.url


@contextmanager
def ray_app(replicas: int) -> Iterator[str]:
    from voxclone.deploy.ray import local_app

    home = bench_home("voxclone-ray-bench-ray-")
    env = {
        **COMMON_ENV,
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_HOST": "127.0.0.1",
        "VOXCLONE_WORKERS": str(max(1, 2 // replicas)),
    }
    with local_app(
        port=free_loopback_port(),
        replicas=replicas,
        replica_cpus=2.0 / replicas,
        env=env,
        cluster_cpus=2,
    ) as url:
        yield url


def scaling_model(ray: dict[str, Any], replicas: int) -> dict[str, Any]:
    """Throughput for N machines like this one, each running ``replicas`` replicas.

    Assumes replicas are independent (true of synthesis: the shared state is a
    Redis lookup per request) and that the proxy, Redis and the network are not
    the bottleneck. A model from one machine's measurement, nothing more.
    """
    per_replica = ray["throughput_rps"] / replicas
    return {
        "per_replica_rps": round(per_replica, 4),
        "replicas_per_machine": replicas,
        "machines": {
            str(n): {
                "replicas": n * replicas,
                "throughput_rps": round(n * replicas * per_replica, 3),
                "audio_s_per_s": round(n * ray["audio_s_per_s"], 2),
            }
            for n in MACHINES
        },
    }


def markdown(result: dict[str, Any]) -> str:
    single, ray = result["single"], result["ray"]
    ratio = result["overhead"]
    rows = [
        f"| {name} | {r['throughput_rps']:.3f} | {r['audio_s_per_s']:.2f} | {r['p50_s']:.2f} "
        f"| {r['p95_s']:.2f} | {', '.join(f'{k}: {v}' for k, v in sorted(r['statuses'].items()))} |"
        for name, r in (("one server (2 workers)", single), (result["ray_label"], ray))
    ]
    model = result["model"]
    model_rows = [
        f"| {n} | {m['replicas']} | {m['throughput_rps']:.2f} | {m['audio_s_per_s']:.1f} |"
        for n, m in model["machines"].items()
    ]
    return "\n".join(
        [
            "# Ray Serve overhead",
            "",
            f"{single['requests']} cache-missing short sentences per side at concurrency "
            f"{single['concurrency']} (after {WARMUP_REQUESTS} warm-up requests), WAV, on "
            f"the same {result['cpus']} cores, loopback inside a network namespace. Both "
            f"sides run at once but are measured in {result['rounds']} alternating rounds, "
            "never together (the idle side, Ray's processes included, stays up). 1-minute "
            f"load average before / after: {result['load_average_1m'][0]} / "
            f"{result['load_average_1m'][1]}"
            + (
                " - the machine was shared with other work, so absolute figures are "
                "far below an idle machine's; the ratios are the result."
                if max(result["load_average_1m"]) > result["cpus"]
                else "."
            )
            + " Generated by `studies/ray_overhead.py`.",
            "",
            "| path | requests/s | audio s/s | p50 s | p95 s | statuses |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"Overhead of the Ray path: throughput ratio one server / Ray = "
            f"**{ratio['throughput_ratio']:.2f}**, p95 ratio Ray / one server = "
            f"**{ratio['p95_ratio']:.2f}**. Ray's own processes (GCS, raylet, controller, "
            "proxy) share the same 2 cores, so no gain is expected on one machine.",
            "",
            "## Scaling model (a model, not a measurement)",
            "",
            f"Per replica ({result['replica_cpus']:g} CPU): {model['per_replica_rps']:.3f} "
            f"requests/s as measured above; N machines like this one with "
            f"{model['replicas_per_machine']} replicas each, assuming linear scaling "
            "(replicas share nothing but a Redis lookup per request; proxy, Redis and "
            "network not saturated):",
            "",
            "| machines | replicas | requests/s | audio s/s |",
            "|---:|---:|---:|---:|",
            *model_rows,
            "",
        ]
    )


def inside(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    with single_server() as single_url, ray_app(args.replicas) as ray_url:
        sides = interleaved({"single": single_url, "ray": ray_url}, args.requests, args.concurrency)
    single, ray = sides["single"], sides["ray"]
    return {
        "command": "nice -n 10 python studies/ray_overhead.py"
        + (f" --requests {args.requests}" if args.requests != 20 else "")
        + (f" --concurrency {args.concurrency}" if args.concurrency != 4 else ""),
        "single": single,
        "ray": ray,
        "ray_label": f"Ray Serve, {args.replicas} replicas",
        "replica_cpus": 2.0 / args.replicas,
        "overhead": {
            "throughput_ratio": round(single["throughput_rps"] / ray["throughput_rps"], 3),
            "p95_ratio": round(ray["p95_s"] / single["p95_s"], 3),
        },
        "model": scaling_model(ray, args.replicas),
        "seconds": round(time.perf_counter() - started, 1),
        "rounds": ROUNDS,
        "load_average_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "cpus": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)  # result path
    args = parser.parse_args()
    if args.inside is not None:
        args.inside.write_text(json.dumps(inside(args)))
        return 0

    from voxclone.deploy.netns import loopback_argv, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"ray_overhead: {reason}", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "ray_overhead.json"
    argv = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--inside", str(out)]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    code = subprocess.run(loopback_argv(argv), env=env, check=False).returncode
    if code != 0:
        return code
    result = json.loads(out.read_text())
    out.write_text(json.dumps(result, indent=1))
    (RESULTS / "ray_overhead.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
