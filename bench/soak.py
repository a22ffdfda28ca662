"""Soak test: does a real voxclone server's memory settle under a mixed workload?

Starts the server as a subprocess on a free 127.0.0.1 port with a throwaway
VOXCLONE_HOME (rate limiting effectively off), clones one voice, then runs a
bounded mix for ``--seconds``:

* cache misses (a new short sentence each), cache hits (a few repeated texts),
  streaming requests, speech in the cloned voice;
* malformed requests: invalid JSON, text over the length limit, random bytes
  as a reference clip, an unknown route.

The server's RSS (with children) is sampled every 5 s. Writes
bench/results/soak.json, bench/results/soak.md and docs/img/soak_rss.png.

``--variant`` runs the server with one suspected source of growth switched
off, without touching product code (the change is made in the launch
snippet / environment of the subprocess only):

* ``no-ort-arena``: ONNX Runtime sessions without the CPU memory arena and
  memory-pattern planning (variable-length inputs make both grow);
* ``malloc-arena-2``: ``MALLOC_ARENA_MAX=2`` (glibc keeps per-thread arenas);
* ``no-memory-cache``: the in-memory audio cache off (256 MB budget otherwise);
* ``no-ort-arena-fixed-mmap``: no arena, and glibc's mmap threshold fixed
  at 128 KiB (``MALLOC_MMAP_THRESHOLD_``) so freed tensors go back to the OS;
* ``ort-arena-shrink``: arena kept, but each run asks ONNX Runtime to shrink
  it afterwards (run option ``memory.enable_memory_arena_shrinkage``).

``--compare`` runs the baseline and every variant and tabulates them.

    python bench/soak.py --quick              # 60 s, baseline
    python bench/soak.py --quick --compare    # 60 s per variant
    python bench/soak.py --seconds 120 --variant baseline no-ort-arena
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np

from _common import RATE_LIMIT_OFF, miss_text, rss_mb, throwaway_server
from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402
from voxclone.devserver import APP_LAUNCHER, ServerProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR
PLOT = IMG_DIR / "soak_rss.png"
REFERENCE_WAV = ROOT / "tests" / "data" / "librispeech_1088-129236-0000.wav"
SAMPLE_EVERY_S = 5.0
CLIENTS = 2  # the machine has 2 cores; more clients only queue
MAX_TEXT_CHARS = 2_000  # small limit so the "huge text" request is cheap to send
WARMUP_FRACTION = 0.25

VARIANTS: dict[str, dict[str, str]] = {
    "baseline": {},
    "no-ort-arena": {"SOAK_DISABLE_ORT_ARENA": "1"},
    "malloc-arena-2": {"MALLOC_ARENA_MAX": "2"},
    "no-memory-cache": {"VOXCLONE_MEMORY_CACHE_MB": "0"},
    # Without the arena every tensor is a plain malloc; glibc's *dynamic* mmap
    # threshold then moves large tensors onto the heap, where freed blocks are
    # rarely returned. A fixed threshold keeps them in mmap (returned on free).
    "no-ort-arena-fixed-mmap": {
        "SOAK_DISABLE_ORT_ARENA": "1",
        "MALLOC_MMAP_THRESHOLD_": "131072",
    },
    "ort-arena-shrink": {"SOAK_ORT_ARENA_SHRINK": "1"},
}

# Run in the server before the app is built: with SOAK_DISABLE_ORT_ARENA
# every onnxruntime.SessionOptions made afterwards has the arena and memory
# patterns switched off (the engine creates its options through the module);
# with SOAK_ORT_ARENA_SHRINK every run hands unused arena memory back at its end.
_ORT_PATCHES = """
import os
if os.environ.get("SOAK_DISABLE_ORT_ARENA") == "1":
    import onnxruntime as ort
    _Base = ort.SessionOptions
    class _NoArenaOptions(_Base):
        def __init__(self):
            super().__init__()
            self.enable_cpu_mem_arena = False
            self.enable_mem_pattern = False
    ort.SessionOptions = _NoArenaOptions
if os.environ.get("SOAK_ORT_ARENA_SHRINK") == "1":
    import onnxruntime as ort
    _Session = ort.InferenceSession
    class _ShrinkingSession(_Session):
        def run(self, output_names, input_feed, run_options=None):
            if run_options is None:
                run_options = ort.RunOptions()
                run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            return super().run(output_names, input_feed, run_options)
    ort.InferenceSession = _ShrinkingSession
"""
_SERVE = _ORT_PATCHES + APP_LAUNCHER

HIT_TEXTS = (
    "The same sentence, served from the cache.",
    "A second familiar line for the cache.",
    "Hello again, this was said before.",
)


# ----------------------------------------------------------------- the server


@contextmanager
def running_server(extra_env: dict[str, str]) -> Iterator[ServerProcess]:
    env = {**RATE_LIMIT_OFF, "VOXCLONE_MAX_TEXT_CHARS": str(MAX_TEXT_CHARS), **extra_env}
    with throwaway_server("voxclone-soak-", env, launcher=_SERVE) as server:
        yield server


# ------------------------------------------------------------------ traffic


@dataclass
class Tally:
    by_kind_status: Counter[str] = field(default_factory=Counter)
    completed: int = 0
    transport_errors: int = 0

    def record(self, kind: str, status: int) -> None:
        self.by_kind_status[f"{kind}:{status}"] += 1
        self.completed += 1


async def _clone_voice(client: httpx.AsyncClient, tally: Tally) -> str | None:
    files = {"audio": (REFERENCE_WAV.name, REFERENCE_WAV.read_bytes(), "audio/wav")}
    data = {
        "name": "soak-voice",
        "consent": "true",
        "consent_statement": "I agree that my voice may be cloned for this benchmark.",
    }
    response = await client.post("/v1/voices", files=files, data=data)
    tally.record("clone", response.status_code)
    return str(response.json()["id"]) if response.status_code == 201 else None


async def _one_request(client: httpx.AsyncClient, kind: str, n: int, voice_id: str | None) -> int:
    if kind == "miss":
        r = await client.post("/v1/tts", json={"text": miss_text(n)})
    elif kind == "hit":
        r = await client.post("/v1/tts", json={"text": HIT_TEXTS[n % len(HIT_TEXTS)]})
    elif kind == "cloned":
        body = {"text": miss_text(n), "voice": voice_id} if voice_id else {"text": "x."}
        r = await client.post("/v1/tts", json=body)
    elif kind == "stream":
        stream_body = {"text": miss_text(n) + " And more.", "stream": True}
        async with client.stream("POST", "/v1/tts", json=stream_body) as streamed:
            async for _ in streamed.aiter_bytes():
                pass
            return streamed.status_code
    elif kind == "bad_json":
        headers = {"content-type": "application/json"}
        r = await client.post("/v1/tts", content=b'{"text": "unterminated', headers=headers)
    elif kind == "huge_text":
        r = await client.post("/v1/tts", json={"text": "word " * (MAX_TEXT_CHARS // 4)})
    elif kind == "random_audio":
        noise = random.randbytes(64 * 1024)
        files = {"reference": ("clip.wav", noise, "audio/wav")}
        r = await client.post("/v1/tts", data={"text": "Hello there."}, files=files)
    elif kind == "wrong_route":
        r = await client.post("/v1/speak-please", json={"text": "hi"})
    else:
        raise ValueError(kind)
    return r.status_code


# Mostly real speech; about one request in five is malformed.
MIX = (
    ["miss"] * 5
    + ["hit"] * 5
    + ["stream"] * 2
    + ["cloned"] * 2
    + ["bad_json", "huge_text", "random_audio", "wrong_route"]
)


@dataclass
class Sample:
    t_s: float
    rss_mb: float
    completed: int


async def _drive(server: ServerProcess, seconds: float) -> tuple[Tally, list[Sample]]:
    tally = Tally()
    samples: list[Sample] = []
    counter = itertools.count(1)
    started = time.monotonic()
    deadline = started + seconds
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
        # First sample before anything ran: the ready server's own footprint.
        samples.append(Sample(0.0, rss_mb(server.process), 0))
        voice_id = await _clone_voice(client, tally)

        async def worker(seed: int) -> None:
            kinds = random.Random(seed)
            while time.monotonic() < deadline:
                kind = kinds.choice(MIX)
                try:
                    status = await _one_request(client, kind, next(counter), voice_id)
                except httpx.HTTPError:
                    tally.transport_errors += 1
                    continue
                tally.record(kind, status)

        async def sampler() -> None:
            while True:
                samples.append(
                    Sample(time.monotonic() - started, rss_mb(server.process), tally.completed)
                )
                if time.monotonic() >= deadline:
                    return
                await asyncio.sleep(SAMPLE_EVERY_S)

        await asyncio.gather(sampler(), *(worker(i) for i in range(CLIENTS)))
    samples.append(Sample(time.monotonic() - started, rss_mb(server.process), tally.completed))
    return tally, samples


# ------------------------------------------------------------------ results


def growth_per_100_requests(samples: list[Sample], seconds: float) -> float | None:
    """Least-squares slope of RSS against completed requests, after warm-up, x100."""
    warm = [s for s in samples if s.t_s >= seconds * WARMUP_FRACTION]
    if len(warm) < 3 or warm[-1].completed == warm[0].completed:
        return None
    x = np.array([s.completed for s in warm], dtype=float)
    y = np.array([s.rss_mb for s in warm], dtype=float)
    slope = float(np.polyfit(x, y, 1)[0])
    return round(slope * 100, 2)


def summarize(
    variant: str, seconds: float, tally: Tally, samples: list[Sample]
) -> dict[str, object]:
    statuses: Counter[str] = Counter()
    for key, count in tally.by_kind_status.items():
        statuses[key.split(":")[1]] += count
    rss = [s.rss_mb for s in samples]
    return {
        "variant": variant,
        "env": VARIANTS[variant],
        "seconds": seconds,
        "requests": tally.completed,
        "transport_errors": tally.transport_errors,
        "rss_start_mb": round(rss[0], 1),
        "rss_peak_mb": round(max(rss), 1),
        "rss_end_mb": round(rss[-1], 1),
        "growth_mb_per_100_requests_after_warmup": growth_per_100_requests(samples, seconds),
        "requests_by_status": dict(sorted(statuses.items())),
        "requests_by_kind_status": dict(sorted(tally.by_kind_status.items())),
        "samples": [asdict(s) for s in samples],
    }


def write_markdown(runs: list[dict[str, object]], path: Path) -> None:
    lines = [
        "# Soak test",
        "",
        f"Mixed workload, {CLIENTS} concurrent clients, RSS sampled every {SAMPLE_EVERY_S:g} s; "
        f"growth is the slope of RSS over completed requests after the first "
        f"{WARMUP_FRACTION:.0%} of the run. Generated by `bench/soak.py`.",
        "",
        "| variant | seconds | requests | RSS start MB | peak MB | end MB "
        "| growth MB / 100 req | by status |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        statuses = ", ".join(f"{k}: {v}" for k, v in run["requests_by_status"].items())  # type: ignore[attr-defined]
        lines.append(
            f"| {run['variant']} | {run['seconds']:g} | {run['requests']} | {run['rss_start_mb']} "
            f"| {run['rss_peak_mb']} | {run['rss_end_mb']} "
            f"| {run['growth_mb_per_100_requests_after_warmup']} | {statuses} |"
        )
    path.write_text("\n".join(lines) + "\n")


def plot(runs: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        samples = run["samples"]
        ax.plot(
            [s["completed"] for s in samples],  # type: ignore[attr-defined]
            [s["rss_mb"] for s in samples],  # type: ignore[attr-defined]
            marker=".",
            label=str(run["variant"]),
        )
    ax.set_xlabel("requests completed")
    ax.set_ylabel("server RSS (MB)")
    ax.set_title("voxclone soak: RSS under a mixed workload")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_variant(variant: str, seconds: float) -> dict[str, object]:
    with running_server(VARIANTS[variant]) as server:
        tally, samples = asyncio.run(_drive(server, seconds))
    result = summarize(variant, seconds, tally, samples)
    print(
        f"{variant}: {result['requests']} requests, RSS {result['rss_start_mb']} -> "
        f"{result['rss_end_mb']} MB (peak {result['rss_peak_mb']}), "
        f"growth {result['growth_mb_per_100_requests_after_warmup']} MB/100 req, "
        f"{result['requests_by_status']}",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true", help="60 s per run")
    parser.add_argument("--variant", choices=sorted(VARIANTS), nargs="+", default=["baseline"])
    parser.add_argument("--compare", action="store_true", help="baseline and every variant")
    args = parser.parse_args(argv)
    seconds = 60.0 if args.quick else args.seconds
    variants = list(VARIANTS) if args.compare else list(args.variant)
    runs = [run_variant(v, seconds) for v in variants]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    write_markdown(runs, RESULTS / "soak.md")
    plot(runs, PLOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
