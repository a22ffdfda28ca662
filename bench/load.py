"""Load test: throughput and latency of a real voxclone server at 1, 4, 16 clients.

Starts the server itself as a subprocess on a free 127.0.0.1 port with a
throwaway VOXCLONE_HOME, waits for /readyz, then drives ``POST /v1/tts`` with
async httpx clients for a bounded time per concurrency level, for

* cache-miss traffic: every request a new short sentence (engine-bound);
* cache-hit traffic: one request repeated after a warm-up call (service-bound).

Explicit backpressure (429/503) is counted apart from real errors, which must
stay at zero. The server's RSS (with children) is sampled before and after.

    python bench/load.py            # 20 s per level
    python bench/load.py --quick    # 5 s per level
    python bench/load.py --compare-workers   # also 2 workers x 1 thread vs 1 x 2

Writes bench/results/load.json, bench/results/load.md and docs/img/load.png.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from _common import RATE_LIMIT_OFF, miss_text, rss_mb, throwaway_server
from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402
from voxclone.devserver import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR
PLOT = IMG_DIR / "load.png"
REQUEST_TIMEOUT_S = 300.0
BACKPRESSURE = {429, 503}


# ----------------------------------------------------------------- the server


@contextmanager
def running_server(env_overrides: dict[str, str], keep_rate_limit: bool) -> Iterator[ServerProcess]:
    env = {**env_overrides, **({} if keep_rate_limit else RATE_LIMIT_OFF)}
    with throwaway_server("voxclone-load-", env) as server:
        yield server


# ------------------------------------------------------------------ traffic


def miss_texts() -> Callable[[], str]:
    """A new short sentence per call, so every request misses every cache."""
    counter = itertools.count(1)
    return lambda: miss_text(next(counter))


HIT_TEXT = "The same sentence, served from the cache."


@dataclass
class LevelResult:
    traffic: str
    concurrency: int
    seconds: float
    requests: int = 0
    ok: int = 0
    throughput_rps: float = 0.0
    p50_s: float | None = None
    p95_s: float | None = None
    p99_s: float | None = None
    statuses: dict[str, int] = field(default_factory=dict)
    backpressure: int = 0  # explicit 429 / 503
    errors: int = 0  # anything else that is not a 200
    cache_headers: dict[str, int] = field(default_factory=dict)


async def run_level(
    url: str, traffic: str, concurrency: int, seconds: float, next_text: Callable[[], str]
) -> LevelResult:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    caches: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        started = time.perf_counter()
        stop_at = started + seconds

        async def one_client() -> None:
            while time.perf_counter() < stop_at:
                body = {"text": next_text(), "format": "wav"}
                t0 = time.perf_counter()
                try:
                    response = await client.post("/v1/tts", json=body)
                    await response.aread()
                    status = str(response.status_code)
                    caches[response.headers.get("x-cache", "-")] += 1
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                elapsed = time.perf_counter() - t0
                statuses[status] += 1
                if status == "200":
                    latencies.append(elapsed)
                elif status in {str(s) for s in BACKPRESSURE}:
                    await asyncio.sleep(0.2)  # a polite client backs off

        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        wall = time.perf_counter() - started

    result = LevelResult(traffic, concurrency, round(wall, 2))
    result.requests = sum(statuses.values())
    result.ok = statuses.get("200", 0)
    result.throughput_rps = round(result.ok / wall, 2)
    if latencies:
        p50, p95, p99 = np.percentile(np.array(latencies), [50, 95, 99])
        result.p50_s, result.p95_s, result.p99_s = (round(float(v), 4) for v in (p50, p95, p99))
    result.statuses = dict(statuses)
    result.backpressure = sum(statuses.get(str(s), 0) for s in BACKPRESSURE)
    result.errors = result.requests - result.ok - result.backpressure
    result.cache_headers = dict(caches)
    return result


def warm(url: str) -> None:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as client:
        response = client.post("/v1/tts", json={"text": HIT_TEXT, "format": "wav"})
        response.raise_for_status()


def measure(
    server: ServerProcess, levels: list[int], seconds: float, traffics: tuple[str, ...]
) -> list[LevelResult]:
    results: list[LevelResult] = []
    for traffic in traffics:
        if traffic == "hit":
            warm(server.url)
            next_text: Callable[[], str] = lambda: HIT_TEXT  # noqa: E731
        else:
            next_text = miss_texts()
        for concurrency in levels:
            res = asyncio.run(run_level(server.url, traffic, concurrency, seconds, next_text))
            print(
                f"{traffic:4s} c={concurrency:<3d} {res.throughput_rps:7.2f} req/s "
                f"p50={res.p50_s} p95={res.p95_s} p99={res.p99_s} "
                f"429/503={res.backpressure} errors={res.errors}",
                flush=True,
            )
            results.append(res)
    return results


# ------------------------------------------------------------------- reports


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.0f}"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Load test",
        "",
        f"{report['seconds_per_level']} s per level, `POST /v1/tts` (WAV), one server on "
        f"loopback with {report['server_env']}. Latencies in ms over successful requests.",
        "",
        "| traffic | clients | req/s | p50 | p95 | p99 | ok | 429/503 | other errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["levels"]:
        lines.append(
            f"| {r['traffic']} | {r['concurrency']} | {r['throughput_rps']:.2f} | "
            f"{_fmt(r['p50_s'])} | {_fmt(r['p95_s'])} | {_fmt(r['p99_s'])} | {r['ok']} | "
            f"{r['backpressure']} | {r['errors']} |"
        )
    rss = report["rss_mb"]
    lines += ["", f"Server RSS: {rss['before']:.0f} MB before, {rss['after']:.0f} MB after."]
    compare = report.get("workers_vs_threads")
    if compare:
        lines += [
            "",
            "## Workers × intra-op threads (cache-miss traffic)",
            "",
            "| workers | ONNX threads | clients | req/s | p50 | p95 |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for row in compare:
            r = row["result"]
            lines.append(
                f"| {row['workers']} | {row['threads']} | {r['concurrency']} | "
                f"{r['throughput_rps']:.2f} | {_fmt(r['p50_s'])} | {_fmt(r['p95_s'])} |"
            )
    lines += ["", f"Host: {report['host']}.", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for ax, traffic in zip(axes, ("miss", "hit"), strict=True):
        rows = [r for r in report["levels"] if r["traffic"] == traffic and r["p50_s"] is not None]
        xs = [r["concurrency"] for r in rows]
        for key, style in (("p50_s", "o-"), ("p95_s", "s--"), ("p99_s", "^:")):
            ax.plot(xs, [r[key] * 1000 for r in rows], style, label=key[:3])
        ax.set_title(f"cache {traffic}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs or [1])
        ax.set_xticklabels([str(x) for x in xs] or ["1"])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("latency (ms)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("voxclone POST /v1/tts latency vs concurrency")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------- main


def compare_workers(
    seconds: float, concurrency: int, keep_rate_limit: bool
) -> list[dict[str, Any]]:
    """Same miss traffic on 2 workers x 1 ONNX thread and 1 worker x 2 threads."""
    rows = []
    for workers, threads in ((2, 1), (1, 2)):
        env = {"VOXCLONE_WORKERS": str(workers), "VOXCLONE_ONNX_THREADS": str(threads)}
        with running_server(env, keep_rate_limit) as server:
            print(f"workers={workers} threads={threads}", flush=True)
            res = measure(server, [concurrency], seconds, ("miss",))[0]
        rows.append({"workers": workers, "threads": threads, "result": asdict(res)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each level")
    parser.add_argument("--quick", action="store_true", help="5 s per level")
    parser.add_argument("--levels", default="1,4,16", help="comma-separated client counts")
    parser.add_argument("--compare-workers", action="store_true")
    parser.add_argument("--keep-rate-limit", action="store_true", help="leave the limiter on")
    args = parser.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    levels = [int(x) for x in args.levels.split(",") if x.strip()]

    env = {
        k: v for k, v in os.environ.items() if k in {"VOXCLONE_WORKERS", "VOXCLONE_ONNX_THREADS"}
    }
    with running_server(env, args.keep_rate_limit) as server:
        rss_before = rss_mb(server.process)
        levels_out = measure(server, levels, seconds, ("miss", "hit"))
        rss_after = rss_mb(server.process)

    report: dict[str, Any] = {
        "seconds_per_level": seconds,
        "server_env": env or "default settings",
        "rate_limit": "on" if args.keep_rate_limit else "off",
        "levels": [asdict(r) for r in levels_out],
        "rss_mb": {"before": round(rss_before, 1), "after": round(rss_after, 1)},
        "host": f"{psutil.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
    }
    if args.compare_workers:
        report["workers_vs_threads"] = compare_workers(seconds, 4, args.keep_rate_limit)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "load.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "load.md").write_text(markdown(report))
    plot(report, PLOT)
    print(markdown(report))
    real_errors = sum(r.errors for r in levels_out)
    return 1 if real_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
