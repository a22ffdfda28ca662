"""Time to first audio (TTFA) when streaming, as a distribution.

Requests are three-sentence paragraphs (each one different, caches off) sent
one after another, measured two ways:
  * ``service``: ``SpeechService.stream(SpeechRequest(..., format="pcm"))``
    in this process — time until the first non-empty bytes;
  * ``http``: ``POST /v1/audio/speech`` with ``response_format=pcm`` against
    the real app started with uvicorn on a free 127.0.0.1 port — time until
    the first body bytes arrive (headers excluded).
Each path also reports the median of each stage of the first audio (plan,
queue, engine, post, encode) from the service's own
``voxclone_first_audio_stage_seconds`` metric, read before and after each
request; over HTTP the rest of what the client waited is ``transport``.
Target (issue #20): p50 at or below 0.40 s, p90 at or below 0.50 s.

Both paths measure a server in its steady state: the service path builds its
runtime with the cloning models loaded, and the HTTP path waits until
``/readyz?capability=cloning`` answers 200 before its first request. A server
loads those models in the background once speech has been idle for 0.5 s, or
after 30 s at the latest; requests sent back to back from the moment speech
is ready (``--right-after-start``) therefore share the CPU with that load
from the 30th second on.

    python bench/ttfa.py [--quick] [--requests 20] [--no-http] [--right-after-start]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import bench_home  # noqa: E402

TARGET_S = 0.4  # issue #20: p50 <= 0.40 s (and p90 <= 0.50 s) on 2 cores

SUBJECTS = (
    "The old bridge",
    "A quiet library",
    "The night train",
    "Our new garden",
    "The harbour",
    "A mountain road",
    "The school choir",
    "An empty stadium",
    "The bakery",
    "A summer storm",
)
MIDDLES = (
    "was busier than anyone expected",
    "changed a little every single year",
    "looked different after the rain",
    "had a story nobody remembered",
)
ENDINGS = (
    "People still talk about it today.",
    "Nobody knows who started it.",
    "It will be there again tomorrow.",
    "That is how the town remembers it.",
)


def paragraphs(count: int) -> list[str]:
    """``count`` distinct three-sentence paragraphs (distinct so nothing is cached)."""
    out = []
    for i in range(count):
        subject = SUBJECTS[i % len(SUBJECTS)]
        middle = MIDDLES[(i // len(SUBJECTS)) % len(MIDDLES)]
        out.append(
            f"{subject} {middle}. Request number {i + 1} arrived on a Tuesday morning. "
            f"{ENDINGS[i % len(ENDINGS)]}"
        )
    return out


def summarize(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 4),
        "p90": round(pct(0.9), 4),
        "p99": round(pct(0.99), 4),
        "min": round(ordered[0], 4),
        "max": round(ordered[-1], 4),
        "mean": round(statistics.fmean(ordered), 4),
        "samples": [round(s, 4) for s in samples],
        "target_s": TARGET_S,
        "meets_target": statistics.median(ordered) <= TARGET_S,
    }


STAGE_METRIC = "voxclone_first_audio_stage_seconds"


def stage_sums(samples: Iterable[tuple[str, dict[str, str], float]]) -> dict[str, float]:
    """Per-stage totals of the first-audio stage histogram (``/metrics`` samples)."""
    return {
        labels["stage"]: value
        for name, labels, value in samples
        if name == STAGE_METRIC + "_sum" and "stage" in labels
    }


def stage_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """One request's stages: the growth of each stage's total across it."""
    return {stage: after[stage] - before.get(stage, 0.0) for stage in after}


def summarize_stages(per_request: list[dict[str, float]]) -> dict[str, float]:
    """Median seconds of each stage over the requests."""
    stages = per_request[0].keys() if per_request else ()
    return {s: round(statistics.median(r[s] for r in per_request), 4) for s in stages}


def service_ttfa(texts: list[str]) -> dict[str, Any]:
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings
    from voxclone.runtime.metrics import Metrics
    from voxclone.service.speech.service import SpeechRequest

    settings = Settings(home=bench_home("voxclone-ttfa-"), memory_cache_mb=0, disk_cache_mb=0)
    metrics = Metrics()
    runtime = build_runtime(settings, warmup=True, metrics=metrics)

    def sums() -> dict[str, float]:
        return stage_sums(
            (sample.name, sample.labels, sample.value)
            for family in metrics.registry.collect()
            for sample in family.samples
        )

    samples, stages = [], []
    try:
        for text in texts:
            before = sums()
            started = time.perf_counter()
            _, parts = runtime.speech.stream(SpeechRequest(text=text, format="pcm"))
            first: float | None = None
            for part in parts:  # drain so the next request starts on an idle engine
                if part and first is None:
                    first = time.perf_counter() - started
            if first is not None:
                samples.append(first)
                stages.append(stage_deltas(before, sums()))
    finally:
        runtime.close()
    return {**summarize(samples), "stages": summarize_stages(stages)}


def http_first_audio(client: Any, text: str) -> float | None:
    """Seconds until the first body bytes of a streamed PCM speech request
    (``client``: an httpx.Client on the server); the stream is read to its end."""
    body = {"model": "tts-1", "input": text, "voice": "clear_female", "response_format": "pcm"}
    started = time.perf_counter()
    first: float | None = None
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for piece in response.iter_raw():
            if piece and first is None:
                first = time.perf_counter() - started
    return first


def wait_cloning_ready(client: Any, timeout_s: float) -> float:
    """Seconds until the server's /readyz says its cloning models are loaded."""
    started = time.perf_counter()
    while client.get("/readyz", params={"capability": "cloning"}).status_code != 200:
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"cloning models not loaded after {timeout_s:.0f} s")
        time.sleep(0.25)
    return time.perf_counter() - started


def http_ttfa(
    texts: list[str], ready_timeout_s: float = 180.0, *, steady: bool = True
) -> dict[str, Any]:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from voxclone.devserver import running_server

    env = {"VOXCLONE_MEMORY_CACHE_MB": "0", "VOXCLONE_DISK_CACHE_MB": "0"}
    with (
        running_server(bench_home("voxclone-ttfa-"), env, timeout_s=ready_timeout_s) as server,
        httpx.Client(base_url=server.url, timeout=120.0) as client,
    ):

        def sums() -> dict[str, float]:
            families = text_string_to_metric_families(client.get("/metrics").text)
            return stage_sums(
                (sample.name, sample.labels, sample.value)
                for family in families
                for sample in family.samples
            )

        cloning_wait_s = wait_cloning_ready(client, ready_timeout_s) if steady else None
        samples, stages = [], []
        for text in texts:
            before = sums()
            first = http_first_audio(client, text)
            if first is not None:
                samples.append(first)
                request = stage_deltas(before, sums())
                # What the client waited for beyond the service's stages: the
                # HTTP layer, the socket and this client.
                request["transport"] = max(0.0, first - sum(request.values()))
                stages.append(request)
    return {
        **summarize(samples),
        "stages": summarize_stages(stages),
        "port": server.port,
        "waited_for_cloning_ready_s": cloning_wait_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="8 requests per path instead of 20")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP path")
    parser.add_argument(
        "--right-after-start",
        action="store_true",
        help="HTTP: start at speech-ready, not once the cloning models are loaded",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "ttfa.json")
    args = parser.parse_args()
    count = 8 if args.quick else args.requests
    texts = paragraphs(count)
    result: dict[str, Any] = {
        "command": "python " + " ".join(sys.argv),
        "requests": count,
        "target_s": TARGET_S,
        "service": service_ttfa(texts),
    }
    print(
        "service",
        json.dumps({k: v for k, v in result["service"].items() if k != "samples"}),
        flush=True,
    )
    if args.no_http:
        result["http"] = {"skipped": "--no-http"}
    elif not (ROOT / "src" / "voxclone" / "api" / "app.py").exists():
        result["http"] = {"skipped": "no HTTP app in this tree"}
    else:
        try:
            result["http"] = http_ttfa(texts, steady=not args.right_after_start)
        except Exception as exc:  # recorded in the page rather than losing the service numbers
            result["http"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(
            "http",
            json.dumps({k: v for k, v in result["http"].items() if k != "samples"}),
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
