"""Many users: how many people can share one server before anyone is refused or late.

Starts a real server process (``voxclone.devserver``, 127.0.0.1, a throw-away
home, default settings except the per-client rate limiter, which would see
every simulated user as one address, and the deadline given here), then, for
each level of simulated users (1, 2, 4, 8, 16, 32):

* every user loops for ``--duration`` seconds: pick a text (a sentence of
  40-80 characters, or with ``--medium-share`` a paragraph of 200-400), send
  it, wait for the whole answer, think ``--think`` seconds (± ``--think-jitter``
  of it), repeat; users start at random moments within one think time;
* a request goes to the streaming route (``POST /v1/audio/speech``, OpenAI's,
  pcm, timed to its first audio bytes too) with ``--stream-share``, else to
  the whole-file route (``POST /v1/tts``, wav);
* the client gives up at the server's deadline plus ``--timeout-margin``;
* the server's engine counters (``/metrics``) are read before the level and
  once it has gone idle after it, so shared renders show up as fewer engine
  calls than requests.

Every text is new to the server (no two requests of a run share one), so
the audio cache never serves a level: the numbers are for distinct work, and
the run is repeatable (texts, routes and think times come from ``--seed``).

Before the levels, an identical burst: 2, 4 and 16 copies of one new sentence
at once, on each route, with their statuses and engine calls next to what one
such request costs alone.

``--tenants 2`` creates two API keys (and an admin key for ``/metrics``)
before the server starts and alternates users between them.

    python bench/users.py            # levels 1-32, 60 s each (~15 min on 2 cores)
    python bench/users.py --quick    # levels 1-8, 20 s each (~5 min)

Writes bench/results/users.json and bench/results/users.png; the page
(``render_page.py``) draws its table and plot from the JSON. The arithmetic
(outcomes, percentiles, capacity) is in ``users_report.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import sys
import time
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from _common import RATE_LIMIT_OFF, READY_TIMEOUT_S, bench_home
from out_paths import RESULTS_DIR  # noqa: E402
from users_report import Sample, find_capacity, markdown, plot, summarize_burst, summarize_level
from voxclone.devserver import ServerProcess, running_server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR / "users.json"
PLOT = RESULTS_DIR / "users.png"
FULL_LEVELS = (1, 2, 4, 8, 16, 32)
QUICK_LEVELS = (1, 2, 4, 8)
WHOLE_VOICE = "clear_female"  # what OpenAI's "alloy" maps to, so both routes speak alike
PCM_BYTES_PER_S = 24_000 * 2  # OpenAI's pcm: 24 kHz, 16-bit, mono
SHORT_CHARS = (40, 80)
MEDIUM_CHARS = (200, 400)

# -- texts -----------------------------------------------------------------------------
# Sentences are put together from three parts (16 x 16 x 12 of them), so a run
# never runs out of new ones and none of them is ever a cache hit.
_SUBJECTS = (
    "The morning train",
    "Our new neighbour",
    "The delivery van",
    "My sister",
    "The quarterly report",
    "The old lighthouse",
    "A small grey cat",
    "The weather service",
    "Our football team",
    "The city library",
    "The bakery on the corner",
    "The night shift",
    "Your parcel",
    "The museum guide",
    "The school choir",
    "The harbour ferry",
)
_PREDICATES = (
    "arrived twenty minutes late",
    "was moved to the second floor",
    "left a note by the front door",
    "sold out before lunch",
    "asked about the spare keys",
    "finished ahead of schedule",
    "will open again on Monday",
    "needs one more signature",
    "sang three songs in a row",
    "changed its timetable",
    "looked brighter than usual",
    "forgot the umbrella again",
    "stopped at every station",
    "waited patiently outside",
    "found the missing folder",
    "came back with good news",
)
_TAILS = (
    "this morning.",
    "after the storm.",
    "on the way home.",
    "before anyone noticed.",
    "for the third time this week.",
    "despite the heavy rain.",
    "just after sunset.",
    "as everyone expected.",
    "during the long weekend.",
    "while we were away.",
    "near the old bridge.",
    "without any fuss.",
)


class Texts:
    """New texts for one run: no text is handed out twice."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def _new(self, rng: random.Random, make: Any, bounds: tuple[int, int]) -> str:
        for _ in range(1000):
            text = make(rng)
            if bounds[0] <= len(text) <= bounds[1] and text not in self._seen:
                self._seen.add(text)
                return str(text)
        raise RuntimeError("ran out of new texts")

    @staticmethod
    def _sentence(rng: random.Random) -> str:
        return f"{rng.choice(_SUBJECTS)} {rng.choice(_PREDICATES)} {rng.choice(_TAILS)}"

    def short(self, rng: random.Random) -> str:
        """One sentence of 40-80 characters."""
        return self._new(rng, self._sentence, SHORT_CHARS)

    def medium(self, rng: random.Random) -> str:
        """Four to six sentences, 200-400 characters."""

        def paragraph(r: random.Random) -> str:
            return " ".join(self._sentence(r) for _ in range(r.randint(4, 6)))

        return self._new(rng, paragraph, MEDIUM_CHARS)

    def pick(self, rng: random.Random, medium_share: float) -> tuple[str, str]:
        if rng.random() < medium_share:
            return "medium", self.medium(rng)
        return "short", self.short(rng)


# -- answers and the server's counters ------------------------------------------------
def wav_seconds(data: bytes) -> float:
    """Length of a WAV file's audio (raises on a broken file)."""
    with wave.open(io.BytesIO(data)) as wav:
        return wav.getnframes() / float(wav.getframerate())


def pcm_seconds(nbytes: int) -> float:
    return nbytes / PCM_BYTES_PER_S


# Sample name in /metrics -> key in the result.
ENGINE_COUNTERS = {
    "voxclone_batch_size_count": "engine_calls",
    "voxclone_engine_items_total": "chunks",
    "voxclone_scheduler_rejected_total": "rejected_at_admission",
    "voxclone_cache_hits_total": "cache_hits",
    "voxclone_audio_seconds_synthesized_total": "audio_s_synthesized",
}


def read_counters(client: httpx.Client) -> dict[str, float]:
    """The engine counters now (summed over their labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    response = client.get("/metrics")
    response.raise_for_status()
    totals = {key: 0.0 for key in ENGINE_COUNTERS.values()}
    totals["queue_depth"] = 0.0
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in ENGINE_COUNTERS:
                totals[ENGINE_COUNTERS[sample.name]] += float(sample.value)
            elif sample.name == "voxclone_queue_depth":
                totals["queue_depth"] = float(sample.value)
    return totals


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in ENGINE_COUNTERS.values()}


def wait_idle(client: httpx.Client, settle_s: float = 3.0, limit_s: float = 300.0) -> dict:
    """The counters once nothing is queued and no engine call happened for ``settle_s``
    (work for clients that gave up still counts towards the level that sent it)."""
    last = read_counters(client)
    since = time.monotonic()
    end = since + limit_s
    while time.monotonic() < end:
        time.sleep(0.5)
        now = read_counters(client)
        busy = now["queue_depth"] > 0 or (now["engine_calls"], now["chunks"]) != (
            last["engine_calls"],
            last["chunks"],
        )
        if busy:
            since = time.monotonic()
        elif time.monotonic() - since >= settle_s:
            return now
        last = now
    return last


# -- one request -----------------------------------------------------------------------
def refusal_message(body: bytes) -> str | None:
    """The message of an error answer (``{"error": {"message": ...}}``)."""
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        return None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else None


async def send(
    client: httpx.AsyncClient,
    route: str,
    kind: str,
    text: str,
    timeout_s: float,
    headers: dict[str, str],
) -> Sample:
    """One request, timed from sending to its last byte; the client hangs up at ``timeout_s``."""
    started = time.perf_counter()
    first: list[float] = []
    try:
        async with asyncio.timeout(timeout_s):
            if route == "whole":
                body = {"text": text, "voice": WHOLE_VOICE, "format": "wav"}
                response = await client.post("/v1/tts", json=body, headers=headers)
                seconds = time.perf_counter() - started
                if response.status_code != 200:
                    return Sample(
                        route,
                        kind,
                        len(text),
                        response.status_code,
                        seconds,
                        reason=refusal_message(response.content),
                    )
                try:
                    audio = wav_seconds(response.content)
                except (wave.Error, EOFError):
                    return Sample(route, kind, len(text), 200, seconds, complete=False)
                return Sample(route, kind, len(text), 200, seconds, audio_s=audio)
            payload = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm"}
            async with client.stream(
                "POST", "/v1/audio/speech", json=payload, headers=headers
            ) as response:
                nbytes = 0
                refused = b""
                if response.status_code == 200:
                    async for chunk in response.aiter_raw():
                        if chunk and not first:
                            first.append(time.perf_counter() - started)
                        nbytes += len(chunk)
                else:
                    refused = await response.aread()
                seconds = time.perf_counter() - started
                status = response.status_code
            return Sample(
                route,
                kind,
                len(text),
                status,
                seconds,
                first_byte_s=first[0] if first else None,
                audio_s=pcm_seconds(nbytes),
                complete=status != 200 or nbytes > 0,
                reason=None if status == 200 else refusal_message(refused),
            )
    except (TimeoutError, httpx.TimeoutException):
        seconds = time.perf_counter() - started
        return Sample(
            route, kind, len(text), None, seconds, first[0] if first else None, timed_out=True
        )
    except httpx.HTTPError as exc:
        # Connection reset, or a body cut short (httpx checks Content-Length and
        # the chunked encoding's end).
        seconds = time.perf_counter() - started
        return Sample(
            route,
            kind,
            len(text),
            None,
            seconds,
            first[0] if first else None,
            reason=type(exc).__name__,
        )


# -- a level of users -------------------------------------------------------------------
@dataclass
class Plan:
    duration_s: float
    think_s: float
    think_jitter: float
    medium_share: float
    stream_share: float
    timeout_s: float
    max_requests: int
    seed: int
    tenant_headers: list[dict[str, str]] = field(default_factory=lambda: [{}])


async def run_users(url: str, users: int, plan: Plan, texts: Texts) -> tuple[list[Sample], float]:
    """``users`` closed-loop users for ``plan.duration_s``; their samples and the wall time."""
    samples: list[Sample] = []
    budget = [plan.max_requests]
    limits = httpx.Limits(max_connections=users + 4, max_keepalive_connections=users + 4)
    client_timeout = httpx.Timeout(plan.timeout_s + 5.0)  # the asyncio timeout ends it first
    async with httpx.AsyncClient(base_url=url, timeout=client_timeout, limits=limits) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        stop_at = started + plan.duration_s

        async def user(index: int) -> None:
            rng = random.Random(f"{plan.seed}:{users}:{index}")
            headers = plan.tenant_headers[index % len(plan.tenant_headers)]
            await asyncio.sleep(rng.uniform(0.0, plan.think_s))
            while loop.time() < stop_at and budget[0] > 0:
                budget[0] -= 1
                kind, text = texts.pick(rng, plan.medium_share)
                route = "stream" if rng.random() < plan.stream_share else "whole"
                samples.append(await send(client, route, kind, text, plan.timeout_s, headers))
                think = plan.think_s * rng.uniform(1 - plan.think_jitter, 1 + plan.think_jitter)
                if loop.time() + think >= stop_at:
                    break
                await asyncio.sleep(think)

        await asyncio.gather(*(user(i) for i in range(users)))
        wall = max(loop.time(), stop_at) - started
    return samples, wall


async def run_burst(
    url: str, route: str, size: int, text: str, timeout_s: float, headers: dict[str, str]
) -> list[Sample]:
    limits = httpx.Limits(max_connections=size + 2, max_keepalive_connections=size + 2)
    async with httpx.AsyncClient(
        base_url=url, timeout=httpx.Timeout(timeout_s + 5.0), limits=limits
    ) as client:
        return list(
            await asyncio.gather(
                *(send(client, route, "short", text, timeout_s, headers) for _ in range(size))
            )
        )


def identical_bursts(
    server: ServerProcess,
    metrics: httpx.Client,
    sizes: list[int],
    texts: Texts,
    plan: Plan,
) -> list[dict[str, Any]]:
    rng = random.Random(f"{plan.seed}:burst")
    headers = plan.tenant_headers[0]
    out = []
    for route in ("whole", "stream"):
        before = wait_idle(metrics)
        solo = asyncio.run(
            run_burst(server.url, route, 1, texts.short(rng), plan.timeout_s, headers)
        )
        after = wait_idle(metrics)
        solo_calls = counter_deltas(before, after)["engine_calls"]
        print(f"   {route} alone: {solo[0].outcome}, {solo_calls:g} engine calls", flush=True)
        for size in sizes:
            before = wait_idle(metrics)
            samples = asyncio.run(
                run_burst(server.url, route, size, texts.short(rng), plan.timeout_s, headers)
            )
            after = wait_idle(metrics)
            row = summarize_burst(
                route, size, samples, counter_deltas(before, after)["engine_calls"], solo_calls
            )
            print(f"   burst {json.dumps(row)}", flush=True)
            out.append(row)
    return out


# -- the server --------------------------------------------------------------------------
def create_keys(home: Path, tenants: int) -> tuple[list[dict[str, str]], dict[str, str]]:
    """One tts key per tenant and an admin key (for /metrics), made before the server starts."""
    from voxclone.runtime.keys import KeyStore

    store = KeyStore(home / "keys.sqlite3")
    try:
        tenant_headers = []
        for i in range(tenants):
            key, _ = store.create(f"bench-user-{i}", {"tts"}, owner=f"bench-tenant-{i}")
            tenant_headers.append({"Authorization": f"Bearer {key}"})
        admin, _ = store.create("bench-metrics", {"admin"})
    finally:
        store.close()
    return tenant_headers, {"Authorization": f"Bearer {admin}"}


@contextmanager
def bench_server(
    deadline_s: float, tenants: int
) -> Iterator[tuple[ServerProcess, list[dict[str, str]], dict[str, str]]]:
    """A ready server on a throw-away home; the users' headers (one per tenant) and
    the headers that read /metrics."""
    home = bench_home("voxclone-users-")
    tenant_headers: list[dict[str, str]] = [{}]
    admin: dict[str, str] = {}
    if tenants > 1:
        tenant_headers, admin = create_keys(home, tenants)
    env = {
        **RATE_LIMIT_OFF,
        "VOXCLONE_REQUEST_DEADLINE_S": f"{deadline_s:g}",
        "VOXCLONE_WARM_CLONING": "false",  # no cloning here: start sooner, less memory
    }
    try:
        with running_server(home, env, timeout_s=READY_TIMEOUT_S) as server:
            yield server, tenant_headers, admin
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- main ----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="levels 1-8, 20 s each")
    p.add_argument("--levels", type=int, nargs="+", default=None, help="users per level")
    p.add_argument("--duration", type=float, default=None, help="seconds per level (60; quick 20)")
    p.add_argument("--think", type=float, default=5.0, help="mean think time, seconds")
    p.add_argument("--think-jitter", type=float, default=0.5, help="think time ± this share")
    p.add_argument("--medium-share", type=float, default=0.25, help="share of 200-400 char texts")
    p.add_argument("--stream-share", type=float, default=0.5, help="share of streaming requests")
    p.add_argument("--deadline", type=float, default=30.0, help="the server's request deadline")
    p.add_argument("--timeout-margin", type=float, default=10.0, help="client waits this longer")
    p.add_argument("--max-requests", type=int, default=1000, help="per level, at most")
    p.add_argument("--bursts", type=int, nargs="*", default=[2, 4, 16], help="identical bursts")
    p.add_argument("--tenants", type=int, default=1, help="2: users alternate two API keys")
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--plot", type=Path, default=PLOT)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    levels = sorted(set(args.levels or (QUICK_LEVELS if args.quick else FULL_LEVELS)))
    duration = args.duration or (20.0 if args.quick else 60.0)
    timeout_s = args.deadline + args.timeout_margin
    config = {
        "levels": levels,
        "duration_s": duration,
        "think_s": args.think,
        "think_jitter": args.think_jitter,
        "medium_share": args.medium_share,
        "stream_share": args.stream_share,
        "deadline_s": args.deadline,
        "client_timeout_s": timeout_s,
        "max_requests": args.max_requests,
        "tenants": args.tenants,
        "seed": args.seed,
        "short_chars": f"{SHORT_CHARS[0]}-{SHORT_CHARS[1]}",
        "medium_chars": f"{MEDIUM_CHARS[0]}-{MEDIUM_CHARS[1]}",
    }
    import voxclone

    result: dict[str, Any] = {
        "command": " ".join(
            ["python", "bench/users.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "package": str(Path(voxclone.__file__).resolve().parent),
        "config": config,
    }
    texts = Texts()
    with bench_server(args.deadline, args.tenants) as (server, tenant_headers, admin):
        plan = Plan(
            duration,
            args.think,
            args.think_jitter,
            args.medium_share,
            args.stream_share,
            timeout_s,
            args.max_requests,
            args.seed,
            tenant_headers,
        )
        with httpx.Client(base_url=server.url, timeout=30.0, headers=admin) as metrics:
            print("== identical bursts", flush=True)
            result["bursts"] = identical_bursts(server, metrics, args.bursts, texts, plan)
            result["levels"] = []
            for users in levels:
                print(f"== {users} users", flush=True)
                before = wait_idle(metrics)
                samples, wall = asyncio.run(run_users(server.url, users, plan, texts))
                after = wait_idle(metrics)
                level = summarize_level(
                    users,
                    samples,
                    wall_s=wall,
                    deadline_s=args.deadline,
                    engine=counter_deltas(before, after),
                )
                # The machine is shared: the load says how far to trust the level.
                level["loadavg_1m"] = round(os.getloadavg()[0], 2)
                print("   " + json.dumps(level), flush=True)
                result["levels"].append(level)
    result["capacity"] = find_capacity(result["levels"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.plot)
    print(markdown(result))
    print("wrote", args.out, "and", args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
