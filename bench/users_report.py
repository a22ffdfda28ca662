"""What the many-users benchmark (``bench/users.py``) derives from its requests.

Kept apart from the traffic driver so the arithmetic — outcome classes,
percentiles, the capacity rule — is tested on synthetic numbers
(tests/unit/test_bench_smoke.py), and so ``render_page.py`` can draw the
table and plot from ``bench/results/users.json`` without importing the driver.

Capacity is the most simulated users at which every request was served
(no 429 / 503 / 413, no client time-out, no other error) and the server kept
its promises at the p95: whole files done within its deadline, streams' first
audio within their first-audio budget (a stream is played as it arrives: its
total time is the audio's length, not a wait) — counted from the lowest level
up, so a level that passes by luck above a failing one does not raise it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Each finished request is exactly one of these.
OUTCOMES = ("served", "refused_503", "refused_429", "refused_413", "timed_out", "error")
REFUSALS = {503: "refused_503", 429: "refused_429", 413: "refused_413"}


@dataclass(frozen=True)
class Sample:
    """One request as the client saw it."""

    route: str  # "whole" (POST /v1/tts, wav) or "stream" (POST /v1/audio/speech, pcm)
    kind: str  # "short" or "medium" text
    chars: int
    status: int | None  # None: no HTTP answer (time-out or transport error)
    seconds: float  # from sending to the answer's last byte (or the give-up)
    first_byte_s: float | None = None  # streams: to the first audio bytes
    audio_s: float = 0.0  # seconds of audio in a served answer
    timed_out: bool = False
    complete: bool = True  # False: a 200 whose audio was cut short
    reason: str | None = None  # a refusal's message (what admission said was short)

    @property
    def outcome(self) -> str:
        if self.timed_out:
            return "timed_out"
        if self.status == 200:
            return "served" if self.complete else "error"
        if self.status in REFUSALS:
            return REFUSALS[self.status]
        return "error"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def refusal_reasons(rows: Iterable[Sample]) -> dict[str, int]:
    """How often each refusal message came, its numbers blanked so that
    refusals for the same reason count together."""
    return _count(
        _blank_numbers(s.reason) for s in rows if s.outcome.startswith("refused") and s.reason
    )


def error_reasons(rows: Iterable[Sample]) -> dict[str, int]:
    """How often each error came: its status (``no answer`` for a reset or a
    body cut short) and message, numbers blanked."""
    return _count(
        f"{_error_status(s.status)}: {_blank_numbers(s.reason or '')}"[:160]
        for s in rows
        if s.outcome == "error"
    )


def _error_status(status: int | None) -> str:
    return "200 cut short" if status == 200 else str(status or "no answer")


def _blank_numbers(message: str) -> str:
    """``message`` with its numbers as ``#`` (so one reason counts as one), cut to 160."""
    return re.sub(r"\d+(\.\d+)?", "#", message)[:160]


def _count(keys: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return counts


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def summarize_level(
    users: int,
    samples: Iterable[Sample],
    *,
    wall_s: float,
    deadline_s: float,
    engine: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One level's row: outcome counts, latency / first-audio percentiles,
    refusal speed, audio produced per wall second, and the server's engine
    counters over the level (``engine``: deltas read from ``/metrics``)."""
    rows = list(samples)
    counts = {name: 0 for name in OUTCOMES}
    for s in rows:
        counts[s.outcome] += 1
    served = [s for s in rows if s.outcome == "served"]
    latency = [s.seconds for s in served]
    first = [s.first_byte_s for s in served if s.route == "stream" and s.first_byte_s is not None]
    refused_ms = [s.seconds * 1000 for s in rows if s.outcome.startswith("refused")]
    audio = sum(s.audio_s for s in served)
    per_route = {}
    for route in sorted({s.route for s in rows}):
        mine = [s.seconds for s in served if s.route == route]
        per_route[route] = {
            "sent": sum(s.route == route for s in rows),
            "served": len(mine),
            "p50_s": _r(percentile(mine, 50), 3),
            "p95_s": _r(percentile(mine, 95), 3),
        }
    p95 = percentile(latency, 95)
    failed = len(rows) - counts["served"]
    row: dict[str, Any] = {
        "users": users,
        "wall_s": round(wall_s, 2),
        "sent": len(rows),
        "counts": counts,
        "short": sum(s.kind == "short" for s in rows),
        "medium": sum(s.kind == "medium" for s in rows),
        "p50_s": _r(percentile(latency, 50), 3),
        "p95_s": _r(p95, 3),
        "max_s": _r(max(latency) if latency else None, 3),
        "ttfa_p50_s": _r(percentile(first, 50), 3),
        "ttfa_p95_s": _r(percentile(first, 95), 3),
        "refusal_p95_ms": _r(percentile(refused_ms, 95), 1),
        "refusal_max_ms": _r(max(refused_ms) if refused_ms else None, 1),
        "refusal_reasons": refusal_reasons(rows),
        "error_reasons": error_reasons(rows),
        "audio_s": round(audio, 2),
        "audio_s_per_s": round(audio / wall_s, 3) if wall_s > 0 else None,
        "requests_per_min": round(len(rows) / wall_s * 60, 1) if wall_s > 0 else None,
        "routes": per_route,
        "engine": dict(engine or {}),
    }
    row["within_capacity"] = bool(rows) and failed == 0 and meets_promises(row, deadline_s)
    return row


# What the server promises a stream: its first audio within this (the
# default VOXCLONE_STREAM_FIRST_AUDIO_S); after that the client plays as the
# audio arrives, so a long stream's total time is not a latency.
STREAM_FIRST_AUDIO_S = 10.0


def meets_promises(
    level: dict[str, Any], deadline_s: float, first_audio_s: float = STREAM_FIRST_AUDIO_S
) -> bool:
    """Whole files done by the deadline (p95) and streams' first audio within
    its budget (p95); a route the level did not use passes."""
    whole = level["routes"].get("whole", {}).get("p95_s")
    first = level.get("ttfa_p95_s")
    return (whole is None or whole <= deadline_s) and (first is None or first <= first_audio_s)


def find_capacity(levels: Sequence[dict[str, Any]]) -> int | None:
    """The most users of the unbroken run of passing levels from the lowest up
    (``within_capacity``); None when even the lowest level fails."""
    capacity = None
    for level in sorted(levels, key=lambda lv: int(lv["users"])):
        if not level["within_capacity"]:
            break
        capacity = int(level["users"])
    return capacity


def summarize_burst(
    route: str, size: int, samples: Sequence[Sample], engine_calls: float, solo_engine_calls: float
) -> dict[str, Any]:
    """``size`` identical requests sent at once: their statuses and how many
    engine calls they cost, next to what one such request costs alone."""
    statuses: dict[str, int] = {}
    for s in samples:
        key = "timeout" if s.timed_out else str(s.status)
        statuses[key] = statuses.get(key, 0) + 1
    served = [s.seconds for s in samples if s.outcome == "served"]
    return {
        "route": route,
        "size": size,
        "statuses": dict(sorted(statuses.items())),
        "served": len(served),
        "slowest_s": _r(max(served) if served else None, 3),
        "engine_calls": engine_calls,
        "solo_engine_calls": solo_engine_calls,
    }


# -- presentation --------------------------------------------------------------------------
def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):.0%}"


LEVEL_HEADER = (
    "| users | sent | served | 503 | 429 | 413 | timed out | errors | p50 s | p95 s "
    "| TTFA p50 / p95 s | refusal p95 ms | audio s/s | engine calls | chunks | within |"
)


def level_rows(result: dict[str, Any]) -> list[str]:
    rows = [LEVEL_HEADER, "|" + "---:|" * 15 + "---|"]
    for lv in result.get("levels", []):
        c, e = lv["counts"], lv.get("engine", {})
        rows.append(
            f"| {lv['users']} | {lv['sent']} | {c['served']} | {c['refused_503']} "
            f"| {c['refused_429']} | {c['refused_413']} | {c['timed_out']} | {c['error']} "
            f"| {_f(lv['p50_s'])} | {_f(lv['p95_s'])} "
            f"| {_f(lv['ttfa_p50_s'])} / {_f(lv['ttfa_p95_s'])} | {_f(lv['refusal_p95_ms'], 1)} "
            f"| {_f(lv['audio_s_per_s'])} | {_f(e.get('engine_calls'), 0)} "
            f"| {_f(e.get('chunks'), 0)} | {'yes' if lv['within_capacity'] else 'no'} |"
        )
    return rows


def burst_rows(result: dict[str, Any]) -> list[str]:
    bursts = result.get("bursts", [])
    if not bursts:
        return []
    rows = [
        "| route | identical requests | statuses | slowest served s | engine calls | one alone |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for b in bursts:
        statuses = ", ".join(f"{n} × {k}" for k, n in b["statuses"].items())
        rows.append(
            f"| {b['route']} | {b['size']} | {statuses} | {_f(b['slowest_s'])} "
            f"| {_f(b['engine_calls'], 0)} | {_f(b['solo_engine_calls'], 0)} |"
        )
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The table(s) and the capacity sentence, without a heading."""
    cfg = result.get("config", {})
    capacity = result.get("capacity")
    lines = [
        f"Closed-loop users against one server process on loopback (deadline "
        f"{_f(cfg.get('deadline_s'), 0)} s, client gives up at "
        f"{_f(cfg.get('client_timeout_s'), 0)} s): each sends a text "
        f"({_pct(cfg.get('medium_share'))} of them {cfg.get('medium_chars', '200-400')} chars, "
        f"the rest {cfg.get('short_chars', '40-80')}), waits for the whole answer, thinks "
        f"{_f(cfg.get('think_s'), 1)} s ± {_pct(cfg.get('think_jitter'))} and repeats, for "
        f"{_f(cfg.get('duration_s'), 0)} s per level; "
        f"{_pct(cfg.get('stream_share'))} of requests stream (`POST /v1/audio/speech`, pcm; "
        "TTFA = first audio bytes), the rest are whole files (`POST /v1/tts`, wav). "
        "Latency is to the answer's last byte of served requests; audio s/s is the audio "
        "served per wall second of the level; engine calls and chunks are the server's "
        "`voxclone_batch_size_count` and `voxclone_engine_items_total` over the level.",
        "",
        *level_rows(result),
        "",
        (
            f"**Capacity: {capacity} user{'' if capacity == 1 else 's'}** (the most users "
            "with every request served, whole files' p95 within the deadline and streams' "
            "first audio p95 within its 10 s budget, every lower level too)."
            if capacity is not None
            else "**Capacity: below the lowest level measured** (it refused, timed out "
            "or missed the deadline)."
        ),
    ]
    loads = [
        (lv["users"], lv["loadavg_1m"])
        for lv in result.get("levels", [])
        if lv.get("loadavg_1m") is not None
    ]
    if loads:
        lines += [
            "",
            "The machine's 1-minute load average at the end of each level (users: load): "
            + ", ".join(f"{u}: {load:.1f}" for u, load in loads)
            + ".",
        ]
    bursts = burst_rows(result)
    if bursts:
        lines += [
            "",
            "Identical burst: that many copies of one new sentence sent at once "
            '(engine calls over the burst; "one alone" = one such request on the idle '
            "server, so equal numbers mean the copies shared one render).",
            "",
            *bursts,
        ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path | None:
    """Latency p50 / p95 against users (deadline marked), and each level's outcomes."""
    levels = sorted(result.get("levels", []), key=lambda lv: int(lv["users"]))
    if not levels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    users = [int(lv["users"]) for lv in levels]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    lines = (("p50_s", "o-", "p50"), ("p95_s", "s--", "p95"), ("ttfa_p95_s", "^:", "TTFA p95"))
    for key, style, label in lines:
        points = [(u, lv[key]) for u, lv in zip(users, levels, strict=True) if lv[key] is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label)
    deadline = result.get("config", {}).get("deadline_s")
    if deadline:
        ax.axhline(float(deadline), color="red", linestyle="--", linewidth=1, label="deadline")
    ax.set_xscale("log", base=2)
    ax.set_xticks(users, [str(u) for u in users])
    ax.set_xlabel("simulated users")
    ax.set_ylabel("seconds")
    ax.set_title("Latency of served requests")
    ax.legend(fontsize=7)
    colors = {
        "served": "#2a9d8f",
        "refused_503": "#e9c46a",
        "refused_429": "#f4a261",
        "refused_413": "#bc6c25",
        "timed_out": "#e76f51",
        "error": "#6d597a",
    }
    xs = list(range(len(levels)))
    bottom = [0] * len(levels)
    for name in OUTCOMES:
        values = [lv["counts"][name] for lv in levels]
        if any(values):
            ax2.bar(xs, values, bottom=bottom, label=name, color=colors[name])
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax2.set_xticks(xs, [str(u) for u in users])
    ax2.set_xlabel("simulated users")
    ax2.set_ylabel("requests")
    ax2.set_title("Outcomes per level")
    ax2.legend(fontsize=7)
    capacity = result.get("capacity")
    if capacity is not None:
        fig.suptitle(f"capacity: {capacity} user{'' if capacity == 1 else 's'}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
