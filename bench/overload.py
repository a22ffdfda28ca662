"""Overload: 40 concurrent clients with a 30 s deadline against one real server.

Every client sends one request at the same moment (a text no cache has
seen, a few sentences) and gives up after the deadline, closing its
connection. Each request ends as one of:

* ``completed``: the whole audio arrived within the deadline;
* ``refused_fast``: 503 (or 429, or 413 for a text that could not be done
  by its deadline even on an idle server) in under 100 ms;
* ``refused_slow``: refused, but only after 100 ms or more;
* ``timed_out``: the client gave up at the deadline;
* ``error``: anything else.

Wasted work is what the server rendered for nobody. The server's engine
call count (``voxclone_batch_size_count``, present in every version) is read
before the burst and again once the server has been idle for a few seconds;
every completed request needed ``chunks_per_request`` engine calls (measured
first, on an idle server), the rest were wasted. Engine calls are turned into
CPU-seconds with the server process's own CPU time over the episode.

The clients speak HTTP/1.1 over plain asyncio sockets, connected before the
burst; each request is timed from writing its bytes to reading its last.
A 40-connection httpx client on the same 2 cores spends ~0.5 s of its own
CPU getting 40 answers even from ``/healthz`` (measured: median 330 ms,
max 570 ms), which would be read as server latency.

A stream counts as completed only when the whole stream (the chunked
encoding's last chunk) arrived within the deadline; a stream cut short
(the server dropped its chunks at the deadline) is ``error``.

``--soak SECONDS`` runs the soak instead: ``--soak-clients`` clients (16)
each send ~25-word whole-file requests back to back with the same deadline,
honouring Retry-After on a refusal; it reports the outcomes, latency
percentiles and the server's RSS at start, middle and end into
bench/results/overload_soak.json.

Runs against whatever ``voxclone`` is importable, so the same script measures
an older checkout too::

    nice -n 10 python bench/overload.py --label after
    PYTHONPATH=/path/to/old/src nice -n 10 python bench/overload.py --label before

Results are merged by label into bench/results/overload.json; ``--plot``
draws docs/img/overload.png from that file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from _common import RATE_LIMIT_OFF, READY_TIMEOUT_S, bench_home, rss_mb
from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402
from voxclone.devserver import ServerProcess, running_server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR / "overload.json"
MARKDOWN = RESULTS_DIR / "overload.md"
SOAK_RESULTS = RESULTS_DIR / "overload_soak.json"
PLOT = IMG_DIR / "overload.png"
FAST_S = 0.100
OUTCOMES = ("completed", "refused_fast", "refused_slow", "timed_out", "error")

_NOUNS = ("river", "garden", "window", "lantern", "meadow", "harbor", "candle", "forest")


def request_text(n: int, sentences: int) -> str:
    """``sentences`` short sentences, different for every ``n`` (no cache hits)."""
    parts = []
    for i in range(sentences):
        a, b = _NOUNS[(n + i) % len(_NOUNS)], _NOUNS[(n * 3 + i * 5 + 1) % len(_NOUNS)]
        parts.append(f"Client {n} saw the {a} and the {b}.")
    return " ".join(parts)


def engine_calls(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    match = re.search(r"^voxclone_batch_size_count (\S+)$", text, re.MULTILINE)
    return int(float(match.group(1))) if match else 0


def cpu_seconds(server: ServerProcess) -> float:
    times = psutil.Process(server.process.pid).cpu_times()
    return float(times.user + times.system)


def wait_idle(server: ServerProcess, settle_s: float = 6.0, limit_s: float = 900.0) -> int:
    return _wait_idle(server, settle_s, limit_s)[0]


def _wait_idle(server: ServerProcess, settle_s: float, limit_s: float) -> tuple[int, bool]:
    """Engine calls once the server has stopped working: no new engine call and
    almost no CPU for ``settle_s`` (a call count alone cannot tell a slow chunk
    on a loaded machine from an idle server)."""
    url = server.url
    last, cpu, since = engine_calls(url), cpu_seconds(server), time.monotonic()
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        time.sleep(1.0)
        now, now_cpu = engine_calls(url), cpu_seconds(server)
        if now != last or now_cpu - cpu > 0.05:  # an idle server uses ~0.01 CPU-s/s
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle_s:
            return last, True
        cpu = now_cpu
    return last, False


@dataclass
class Outcome:
    kind: str
    seconds: float
    status: int | None
    detail: str | None = None


class RawResponse:
    """What came back on one connection: status, headers, body complete or not."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes, complete: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.complete = complete


async def _read_response(reader: asyncio.StreamReader) -> RawResponse:
    """Status line, headers, then the body up to the server's close (Connection: close)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("server closed the connection without an answer")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.read()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        complete = body.endswith(b"0\r\n\r\n")
    else:
        complete = len(body) == int(headers.get("content-length", len(body)))
    return RawResponse(status, headers, body, complete)


def _request_bytes(port: int, path: str, payload: dict[str, Any], deadline_s: float) -> bytes:
    body = json.dumps(payload).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"X-Request-Deadline: {deadline_s:g}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _one(
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    port: int,
    mode: str,
    text: str,
    deadline_s: float,
) -> Outcome:
    """One request on an open connection; the client hangs up at its deadline."""
    reader, writer = conn
    data = _request_bytes(port, "/v1/tts", {"text": text, "stream": mode == "stream"}, deadline_s)
    started = time.perf_counter()
    try:
        writer.write(data)
        response = await asyncio.wait_for(_read_response(reader), timeout=deadline_s)
    except TimeoutError:
        return Outcome("timed_out", time.perf_counter() - started, None)
    except (OSError, ValueError, IndexError) as exc:
        return Outcome("error", time.perf_counter() - started, None, repr(exc)[:200])
    finally:
        writer.close()
    seconds = time.perf_counter() - started
    if response.status == 200:
        if response.complete:
            return Outcome("completed", seconds, 200)
        return Outcome("error", seconds, 200, "audio cut short")
    if response.status in (413, 429, 503):  # 413: too long for its deadline even when idle
        kind = "refused_fast" if seconds < FAST_S else "refused_slow"
        retry = response.headers.get("retry-after")
        return Outcome(kind, seconds, response.status, retry)
    return Outcome("error", seconds, response.status, response.body[:200].decode("latin-1"))


@dataclass
class ModeResult:
    mode: str
    clients: int
    deadline_s: float
    sentences: int
    chunks_per_request: int
    counts: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)  # HTTP status (or "none") counts
    error_sample: str | None = None
    refusal_ms_max: float | None = None
    completed_s_max: float | None = None
    engine_calls: int = 0
    wasted_engine_calls: int = 0
    server_cpu_s: float = 0.0
    wasted_cpu_s: float = 0.0
    idle_after_s: float = 0.0  # from the burst until the server stopped working
    # False: still rendering when the measurement stopped (--settle-limit), so
    # the wasted figures are lower bounds.
    went_idle: bool = True


async def _burst(
    port: int, mode: str, clients: int, deadline_s: float, sentences: int, tag: int
) -> list[Outcome]:
    # Connect everyone first, so the burst measures the server, not TCP set-up.
    conns = await asyncio.gather(
        *(asyncio.open_connection("127.0.0.1", port) for _ in range(clients))
    )
    texts = [request_text(tag * 1000 + i, sentences) for i in range(clients)]
    return list(
        await asyncio.gather(
            *(_one(c, port, mode, t, deadline_s) for c, t in zip(conns, texts, strict=True))
        )
    )


def run_mode(
    server: ServerProcess,
    mode: str,
    clients: int,
    deadline_s: float,
    sentences: int,
    settle_limit_s: float = 900.0,
) -> ModeResult:
    url = server.url
    # Chunks one request needs, on the idle server (also warms the path).
    start = wait_idle(server, settle_s=3.0)
    port = server.port
    probe = asyncio.run(_burst(port, mode, 1, 600.0, sentences, tag=900 + len(mode)))
    assert probe[0].kind == "completed", probe
    per_request = wait_idle(server, settle_s=3.0) - start
    calls0, cpu0, t0 = engine_calls(url), cpu_seconds(server), time.monotonic()
    outcomes = asyncio.run(_burst(port, mode, clients, deadline_s, sentences, tag=len(mode)))
    calls1, went_idle = _wait_idle(server, 6.0, settle_limit_s)
    idle_after = time.monotonic() - t0 - (6.0 if went_idle else 0.0)
    cpu = cpu_seconds(server) - cpu0
    result = ModeResult(mode, clients, deadline_s, sentences, per_request)
    result.counts = {kind: sum(o.kind == kind for o in outcomes) for kind in OUTCOMES}
    for o in outcomes:
        key = str(o.status) if o.status is not None else "none"
        result.statuses[key] = result.statuses.get(key, 0) + 1
    result.error_sample = next((o.detail for o in outcomes if o.kind == "error"), None)
    refusals = [o.seconds for o in outcomes if o.kind.startswith("refused")]
    done = [o.seconds for o in outcomes if o.kind == "completed"]
    result.refusal_ms_max = round(max(refusals) * 1000, 1) if refusals else None
    result.completed_s_max = round(max(done), 2) if done else None
    result.engine_calls = calls1 - calls0
    needed = result.counts["completed"] * per_request
    result.wasted_engine_calls = max(0, result.engine_calls - needed)
    result.server_cpu_s = round(cpu, 1)
    share = result.wasted_engine_calls / result.engine_calls if result.engine_calls else 0.0
    result.wasted_cpu_s = round(cpu * share, 1)
    result.idle_after_s = round(max(0.0, idle_after), 1)
    result.went_idle = went_idle
    return result


SOAK_WORDS = 25


def soak_text(n: int) -> str:
    """About 25 words, different for every ``n`` (no cache hits)."""
    words = [f"Listener {n} walked past"]
    i = 0
    while sum(len(w.split()) for w in words) < SOAK_WORDS - 1:
        a, b = _NOUNS[(n + i) % len(_NOUNS)], _NOUNS[(n * 5 + i * 3 + 2) % len(_NOUNS)]
        words.append(f"the {a} near the {b},")
        i += 1
    return " ".join(words).rstrip(",") + "."


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def _soak_client(
    port: int, index: int, deadline_s: float, until: float, out: list[tuple[float, Outcome]]
) -> None:
    n = 0
    while time.monotonic() < until:
        conn = await asyncio.open_connection("127.0.0.1", port)
        outcome = await _one(conn, port, "whole", soak_text(index * 100_000 + n), deadline_s)
        out.append((time.monotonic(), outcome))
        n += 1
        if outcome.kind.startswith("refused"):
            # A polite client waits as long as the server asked (capped).
            try:
                retry = float(outcome.detail or 1)
            except ValueError:
                retry = 1.0
            await asyncio.sleep(min(max(retry, 0.5), 10.0))


async def _soak_traffic(
    server: ServerProcess, clients: int, deadline_s: float, seconds: float
) -> tuple[list[tuple[float, Outcome]], list[tuple[float, float]]]:
    out: list[tuple[float, Outcome]] = []
    rss: list[tuple[float, float]] = []
    t0 = time.monotonic()
    until = t0 + seconds

    async def sample() -> None:
        while time.monotonic() < until:
            rss.append((time.monotonic() - t0, rss_mb(server.process)))
            await asyncio.sleep(5.0)

    sampler = asyncio.ensure_future(sample())
    await asyncio.gather(
        *(_soak_client(server.port, i, deadline_s, until, out) for i in range(clients))
    )
    await sampler
    rss.append((time.monotonic() - t0, rss_mb(server.process)))
    return [(t - t0, o) for t, o in out], rss


def run_soak(server: ServerProcess, clients: int, deadline_s: float, seconds: float) -> dict:
    url = server.url
    start = wait_idle(server, settle_s=3.0)
    probe = asyncio.run(_soak_traffic(server, 1, 600.0, 0.1))[0]
    assert probe and probe[0][1].kind == "completed", probe
    per_request = wait_idle(server, settle_s=3.0) - start
    rss_idle = rss_mb(server.process)
    calls0, cpu0 = engine_calls(url), cpu_seconds(server)
    outcomes, rss = asyncio.run(_soak_traffic(server, clients, deadline_s, seconds))
    calls1, went_idle = _wait_idle(server, 6.0, 300.0)
    counts = {kind: sum(o.kind == kind for _, o in outcomes) for kind in OUTCOMES}
    statuses: dict[str, int] = {}
    for _, o in outcomes:
        key = str(o.status) if o.status is not None else "none"
        statuses[key] = statuses.get(key, 0) + 1
    done = [o.seconds for _, o in outcomes if o.kind == "completed"]
    refused = [o.seconds * 1000 for _, o in outcomes if o.kind.startswith("refused")]
    middle = min(rss, key=lambda p: abs(p[0] - seconds / 2))[1]
    calls = calls1 - calls0
    wasted = max(0, calls - counts["completed"] * per_request)
    return {
        "seconds": seconds,
        "clients": clients,
        "deadline_s": deadline_s,
        "words": SOAK_WORDS,
        "requests": len(outcomes),
        "counts": counts,
        "statuses": statuses,
        "error_sample": next((o.detail for _, o in outcomes if o.kind == "error"), None),
        "completed_p50_s": _round(_percentile(done, 50), 2),
        "completed_p95_s": _round(_percentile(done, 95), 2),
        "completed_max_s": _round(max(done) if done else None, 2),
        "refusal_p50_ms": _round(_percentile(refused, 50), 1),
        "refusal_p95_ms": _round(_percentile(refused, 95), 1),
        "refusal_max_ms": _round(max(refused) if refused else None, 1),
        "throughput_per_min": round(counts["completed"] / seconds * 60, 1),
        "rss_mb": {
            "idle": round(rss_idle, 1),
            "start": round(rss[0][1], 1),
            "middle": round(middle, 1),
            "end": round(rss[-1][1], 1),
            "peak": round(max(r for _, r in rss), 1),
        },
        "rss_samples": [[round(t, 1), round(r, 1)] for t, r in rss],
        "chunks_per_request": per_request,
        "engine_calls": calls,
        "wasted_engine_calls": wasted,
        "server_cpu_s": round(cpu_seconds(server) - cpu0, 1),
        "went_idle": went_idle,
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def soak_markdown(run: dict[str, Any]) -> str:
    c, r = run["counts"], run["rss_mb"]
    return "\n".join(
        [
            "| clients | seconds | deadline s | requests | completed | refused fast "
            "| refused slow | timed out | errors | completed p50 / p95 s "
            "| refusal p50 / p95 ms | RSS idle / start / middle / end / peak MB "
            "| wasted engine calls |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|",
            f"| {run['clients']} | {run['seconds']:g} | {run['deadline_s']:g} "
            f"| {run['requests']} | {c['completed']} | {c['refused_fast']} "
            f"| {c['refused_slow']} | {c['timed_out']} | {c['error']} "
            f"| {run['completed_p50_s']} / {run['completed_p95_s']} "
            f"| {run['refusal_p50_ms']} / {run['refusal_p95_ms']} "
            f"| {r['idle']} / {r['start']} / {r['middle']} / {r['end']} / {r['peak']} "
            f"| {run['wasted_engine_calls']} |",
        ]
    )


def merge(label: str, results: list[ModeResult], meta: Mapping[str, object]) -> dict[str, object]:
    data: dict[str, object] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[label] = {"meta": meta, "modes": [asdict(r) for r in results]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    return data


def write_markdown(data: dict[str, Any], path: Path) -> None:
    lines = [
        "One server on loopback (2 workers, caches and rate limit off); every client sends "
        "one request at once with `X-Request-Deadline` and gives up at the deadline. "
        "Refused fast = 503/429/413 in under 100 ms. Wasted = engine calls beyond what the "
        "completed requests needed, as a share of the server's CPU time over the episode.",
        "",
        "| code | mode | clients | deadline s | completed | refused fast | refused slow "
        "| timed out | errors | slowest refusal ms | slowest completion s "
        "| wasted engine calls | wasted CPU s | server CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, run in data.items():
        for m in run["modes"]:
            c = m["counts"]
            lines.append(
                f"| {label} | {m['mode']} | {m['clients']} | {m['deadline_s']:g} "
                f"| {c['completed']} | {c['refused_fast']} | {c['refused_slow']} "
                f"| {c['timed_out']} | {c['error']} | {m['refusal_ms_max']} "
                f"| {m['completed_s_max']} | {m['wasted_engine_calls']} "
                f"| {m['wasted_cpu_s']}{'' if m.get('went_idle', True) else ' (still busy)'} "
                f"| {m['server_cpu_s']} |"
            )
    lines.append("")
    for label, run in data.items():
        lines.append(f"- {label}: `{run['meta']['command']}` ({run['meta']['when']})")
    path.write_text("\n".join(lines) + "\n")


def plot(data: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [k for k in ("before", "after") if k in data] + [
        k for k in data if k not in ("before", "after")
    ]
    bars = []
    for label in labels:
        for mode in data[label]["modes"]:  # type: ignore[index]
            bars.append((f"{label}\n{mode['mode']}", mode))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    colors = {
        "completed": "#2a9d8f",
        "refused_fast": "#e9c46a",
        "refused_slow": "#f4a261",
        "timed_out": "#e76f51",
        "error": "#6d597a",
    }
    xs = range(len(bars))
    bottom = [0] * len(bars)
    for kind in OUTCOMES:
        values = [m["counts"].get(kind, 0) for _, m in bars]
        ax.bar(xs, values, bottom=bottom, label=kind, color=colors[kind])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(list(xs), [name for name, _ in bars], fontsize=8)
    ax.set_ylabel("requests")
    ax.set_title("40 clients, 30 s deadline: outcomes")
    ax.legend(fontsize=7)
    ax2.bar(xs, [m["wasted_cpu_s"] for _, m in bars], color="#e76f51")
    ax2.set_xticks(list(xs), [name for name, _ in bars], fontsize=8)
    ax2.set_ylabel("server CPU-seconds")
    ax2.set_title("work rendered for clients that had left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="key in overload.json (before/after)")
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--sentences", type=int, default=1)
    parser.add_argument("--modes", nargs="+", default=["whole", "stream"])
    parser.add_argument(
        "--settle-limit",
        type=float,
        default=900.0,
        help="stop waiting for the server to go idle after this many seconds",
    )
    parser.add_argument("--plot", action="store_true", help="only redraw the plot")
    parser.add_argument(
        "--soak", type=float, default=0.0, help="run the soak for this many seconds instead"
    )
    parser.add_argument("--soak-clients", type=int, default=16)
    args = parser.parse_args(argv)
    if args.plot:
        saved = json.loads(RESULTS.read_text())
        write_markdown(saved, MARKDOWN)
        plot(saved, PLOT)
        return 0
    import voxclone

    env = {
        **RATE_LIMIT_OFF,
        "VOXCLONE_MEMORY_CACHE_MB": "0",
        "VOXCLONE_DISK_CACHE_MB": "0",
        "VOXCLONE_WARM_CLONING": "false",
        # The clients ask for their deadline in a header; the server's cap is
        # higher so the calibration request (one client, idle server) fits.
        "VOXCLONE_REQUEST_DEADLINE_S": f"{max(args.deadline, 600):g}",
    }
    meta = {
        "package": str(Path(voxclone.__file__).resolve().parent),
        "command": " ".join(["python", "bench/overload.py", *(argv or sys.argv[1:])]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.soak > 0:
        with running_server(bench_home("soak-"), env, timeout_s=READY_TIMEOUT_S) as server:
            soak = run_soak(server, args.soak_clients, args.deadline, args.soak)
        soak["meta"] = meta
        print(json.dumps(soak), flush=True)
        saved = json.loads(SOAK_RESULTS.read_text()) if SOAK_RESULTS.exists() else {}
        saved[args.label] = soak
        SOAK_RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
        print(soak_markdown(soak))
        return 0
    results = []
    with running_server(bench_home("overload-"), env, timeout_s=READY_TIMEOUT_S) as server:
        for mode in args.modes:
            result = run_mode(
                server, mode, args.clients, args.deadline, args.sentences, args.settle_limit
            )
            print(json.dumps(asdict(result)), flush=True)
            results.append(result)
    data = merge(args.label, results, meta)
    write_markdown(data, MARKDOWN)
    plot(data, PLOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
