"""Voice agents (issue 48): a simulated language model feeding the stream-input
WebSocket of a real ``voxclone serve`` on 127.0.0.1.

For each rate (15, 30, 60 tokens/s; a token is 4 characters) and each number
of concurrent sessions (1, 2, 4), every session sends a two-sentence answer a
token at a time and reads the audio back (pcm_24000). Measured per session:

* first audio after the first clause ends: from sending the token that
  completes the first clause (its punctuation and the space after it) to the
  first audio message; the server starts on the clause's first words (its
  head, service/realtime_text.py's HEAD_WORDS) before it ends, so this is
  also given from the token that completes them;
* underruns at real-time playback: a player starts with the first audio and
  plays at real time; a message that arrives after the audio before it has
  played out is an underrun, and the silence it caused is a stall;
* gaps between clauses: the stalls where a clause's audio begins (the
  first message after an ``alignment`` that ended a clause);
* cancel-to-silence (one session per rate, multi-stream-input): after the
  first audio of a long answer, ``close_context``; the time to its
  acknowledgement (no audio after it), and to an idle engine (the server's
  ``voxclone_engine_in_flight`` gauge back at 0, polled every 10 ms).

Beside it, the same answer through ``POST /v1/tts`` with ``stream`` (whole
text at once, the same number of concurrent clients): time to the first
audio bytes.

    python bench/realtime.py [--quick] [--rates 15 30 60] [--sessions 1 2 4]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import RATE_LIMIT_OFF, throwaway_server, write_result  # noqa: E402
from voxclone.service.realtime_text import HEAD_WORDS  # noqa: E402

SERVE = "import sys; from voxclone.api.cli import main; sys.exit(main(['serve']))"
VOICE = ["af_heart"]  # the server's default voice, read from /v1/info at the start
RATE_HZ = 24_000
CHARS_PER_TOKEN = 4
TOPICS = ("the weather", "your order", "the meeting", "the train", "the recipe", "the invoice")
LONG = " ".join(["This is a long answer that the user will interrupt before it ends."] * 6)


def answer(i: int) -> str:
    """A distinct agent answer (distinct so no cache answers it)."""
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"Sure, I checked {topic} for you, number {i}. "
        "It looks fine today, and nothing needs to change before tomorrow."
    )


def first_clause_end(text: str) -> int:
    """Index after the space that ends the first clause (a sentence end, or a
    clause mark once three words are in): first audio is timed from here. The
    server starts speaking the clause's first words before it ends
    (service/realtime_text.py's head): see :func:`head_end`."""
    for i, ch in enumerate(text[:-1]):
        if text[i + 1] != " ":
            continue
        if ch in ".!?" or (ch in ",;:" and len(text[:i].split()) >= 3):
            return i + 2
    return len(text)


def head_end(text: str, words: int = HEAD_WORDS) -> int:
    """Index after the whitespace that completes the first ``words`` words."""
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    return min(len(text), ends[words - 1] + 1) if len(ends) >= words else len(text)


def tokens(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def ws_url(base: str, *, multi: bool = False) -> str:
    path = "multi-stream-input" if multi else "stream-input"
    return f"{base.replace('http://', 'ws://')}/v1/text-to-speech/{VOICE[0]}/{path}?output_format=pcm_{RATE_HZ}"


def _connect(url: str) -> Any:
    from websockets.sync.client import connect

    return connect(url, open_timeout=30, max_size=None)


def one_session(base: str, text: str, tokens_per_s: float) -> dict[str, Any]:
    """Feed ``text`` at ``tokens_per_s``; the arrivals of its audio."""
    pieces = tokens(text)
    clause_at = first_clause_end(text)
    sent_at: list[float] = []
    arrivals: list[tuple[float, float, int]] = []  # (time, seconds of audio, words aligned)
    error: list[str] = []
    with _connect(ws_url(base)) as ws:
        ws.send(json.dumps({"text": " "}))

        def feed() -> None:
            start = time.perf_counter()
            for n, piece in enumerate(pieces):
                wait = start + n / tokens_per_s - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                ws.send(json.dumps({"text": piece, "try_trigger_generation": True}))
                sent_at.append(time.perf_counter())
            ws.send(json.dumps({"text": ""}))

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        from websockets.exceptions import ConnectionClosed

        try:
            for raw in ws:
                now = time.perf_counter()
                m = json.loads(raw)
                if "error" in m:
                    error.append(str(m.get("message")))
                    break
                if m.get("audio"):
                    seconds = len(base64.b64decode(m["audio"])) / 2 / RATE_HZ
                    chars = "".join((m.get("alignment") or {}).get("chars") or [])
                    arrivals.append((now, seconds, len(chars.split())))
                if m.get("isFinal"):
                    break
        except ConnectionClosed:
            pass
        feeder.join(timeout=60)

    def sent_with(char: int) -> float | None:
        """When the token holding character ``char - 1`` was sent."""
        return sent_at[min((char - 1) // CHARS_PER_TOKEN, len(sent_at) - 1)] if sent_at else None

    return {
        "arrivals": arrivals,
        "clause_sent": sent_with(clause_at),
        "head_sent": sent_with(head_end(text)),
        "error": error,
        "started": sent_with(1),
    }


def clause_starts(text: str) -> set[int]:
    """Word indices where the second and later clauses begin, cut as the
    server cuts ``text`` arriving token by token (service/realtime_text.py)."""
    from voxclone.service.realtime_text import ClauseBuffer

    buffer = ClauseBuffer()
    clauses = [c for token in tokens(text) for c in buffer.add(token)] + buffer.flush()
    starts, words = set(), 0
    for clause in clauses[:-1]:
        words += len(clause.split())
        starts.add(words)
    return starts


def playback(arrivals: list[tuple[float, float, int]], starts: set[int]) -> dict[str, Any]:
    """Underruns and stalls of a player that starts with the first audio;
    the stalls where a clause (a word index in ``starts``) begins are its gaps."""
    if not arrivals:
        return {"underruns": 0, "stall_s": 0.0, "clause_gaps_s": [], "audio_s": 0.0}
    clock = arrivals[0][0]  # when the buffered audio runs out
    underruns = 0
    stall = 0.0
    gaps: list[float] = []
    words = 0
    for n, (at, seconds, aligned) in enumerate(arrivals):
        late = max(0.0, at - clock) if n else 0.0
        if late > 0.0:
            underruns += 1
            stall += late
        if aligned and words in starts:
            gaps.append(late)
        words += aligned
        clock = max(clock, at) + seconds
    return {
        "underruns": underruns,
        "stall_s": stall,
        "clause_gaps_s": gaps,
        "audio_s": sum(s for _, s, _ in arrivals),
    }


def http_first_audio(base: str, text: str) -> float | str:
    """Seconds to the first audio bytes, or the refusal's status and message."""
    import urllib.error

    try:
        return _http_first_audio(base, text)
    except urllib.error.HTTPError as exc:
        return f"{exc.code}: {exc.read().decode(errors='replace')[:300]}"


def _http_first_audio(base: str, text: str) -> float:
    body = json.dumps({"text": text, "voice": VOICE[0], "stream": True, "format": "pcm"}).encode()
    request = urllib.request.Request(
        f"{base}/v1/tts", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        got = 0
        while chunk := response.read1(4096):
            got += len(chunk)
            if got >= 480:  # 10 ms of audio
                first = time.perf_counter() - started
                response.read()
                return first
    return float("nan")


def metric(base: str, name: str) -> float:
    """One unlabelled sample of the server's /metrics."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    return float("nan")


def audio_per_engine_second(base: str) -> float:
    """Seconds of audio per second a worker spent in the engine, over the run
    (``voxclone_audio_seconds_synthesized_total`` / ``voxclone_engine_busy_seconds_total``)."""
    audio = metric(base, "voxclone_audio_seconds_synthesized_total")
    busy = metric(base, "voxclone_engine_busy_seconds_total")
    return audio / busy if busy > 0 else float("nan")


def engine_in_flight(base: str) -> float:
    return metric(base, "voxclone_engine_in_flight")


def cancel_once(base: str) -> dict[str, float]:
    """close_context after the first audio of a long answer."""
    from websockets.exceptions import ConnectionClosed

    with _connect(ws_url(base, multi=True)) as ws:
        ws.send(json.dumps({"text": " ", "context_id": "a"}))
        ws.send(json.dumps({"text": LONG, "context_id": "a", "flush": True}))
        while not json.loads(ws.recv(timeout=300)).get("audio"):
            pass
        asked = time.perf_counter()
        ws.send(json.dumps({"context_id": "a", "close_context": True}))
        while not json.loads(ws.recv(timeout=60)).get("isFinal"):
            pass
        acked = time.perf_counter() - asked
        idle = None
        while time.perf_counter() - asked < 60:
            if engine_in_flight(base) == 0:
                idle = time.perf_counter() - asked
                break
            time.sleep(0.01)
        ws.send(json.dumps({"close_socket": True}))
        after_audio = 0
        try:
            for raw in ws:
                if json.loads(raw).get("audio"):
                    after_audio += 1
        except ConnectionClosed:
            pass
    return {"ack_s": acked, "engine_idle_s": idle if idle is not None else float("nan"),
            "audio_after_ack": after_audio}  # fmt: skip


def trace(got: dict[str, Any]) -> dict[str, Any]:
    """A session's timeline from its first token (seconds): when its first
    clause was complete, and each audio message's arrival, length and words."""
    zero = got["started"] or 0.0
    clause = got["clause_sent"]
    return {
        "clause_complete_s": None if clause is None else round(clause - zero, 3),
        "head_complete_s": round(got["head_sent"] - zero, 3),
        "arrivals": [(round(at - zero, 3), round(s, 3), w) for at, s, w in got["arrivals"]],
    }


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_config(
    base: str, rate: float, sessions: int, rounds: int, seq: list[int]
) -> dict[str, Any]:
    first: list[float] = []
    after_head: list[float] = []  # from the head's last word's completion
    underruns: list[int] = []
    stalls: list[float] = []
    gaps: list[float] = []
    errors: list[str] = []
    http: list[float] = []
    http_errors: list[str] = []
    aligned = 0
    traces: list[dict[str, Any]] = []
    for _ in range(rounds):
        texts = [answer(seq.pop()) for _ in range(sessions)]
        with ThreadPoolExecutor(sessions) as pool:
            results = list(pool.map(lambda t: one_session(base, t, rate), texts))
        for text, got in zip(texts, results, strict=True):
            errors += got["error"]
            if got["arrivals"] and got["clause_sent"] is not None:
                first.append(got["arrivals"][0][0] - got["clause_sent"])
                after_head.append(got["arrivals"][0][0] - got["head_sent"])
            play = playback(got["arrivals"], clause_starts(text))
            # Clause gaps need the alignment to count the text's words.
            aligned += sum(a for _, _, a in got["arrivals"]) == len(text.split())
            underruns.append(play["underruns"])
            stalls.append(play["stall_s"])
            gaps += play["clause_gaps_s"]
            traces.append(trace(got))
        texts = [answer(seq.pop()) for _ in range(sessions)]
        with ThreadPoolExecutor(sessions) as pool:
            for got_http in pool.map(lambda t: http_first_audio(base, t), texts):
                if isinstance(got_http, str):
                    http_errors.append(got_http)
                else:
                    http.append(got_http)
    return {
        "tokens_per_s": rate,
        "sessions": sessions,
        "samples": len(first),
        "first_audio_p50_s": pct(first, 0.5),
        "first_audio_p95_s": pct(first, 0.95),
        "first_audio_after_head_p50_s": pct(after_head, 0.5),
        "underruns_per_session": statistics.mean(underruns) if underruns else None,
        "sessions_with_underruns": sum(1 for u in underruns if u),
        "stall_s_per_session": statistics.mean(stalls) if stalls else None,
        "clause_gap_p50_s": pct(gaps, 0.5),
        "clause_gap_max_s": max(gaps) if gaps else None,
        "http_first_audio_p50_s": pct(http, 0.5),
        "http_first_audio_p95_s": pct(http, 0.95),
        "errors": errors,
        "http_errors": http_errors,
        "sessions_aligned_word_for_word": aligned,
        "traces": traces,
    }


def _fmt(value: Any, scale: float = 1000.0) -> str:
    return "–" if value is None else f"{value * scale:.0f}"


def _refused(config: dict[str, Any]) -> str:
    """HTTP streams refused with 503 (their first audio would miss its budget)."""
    n = len(config.get("http_errors") or [])
    return f" ({n} of {config['samples']} refused)" if n else ""


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Realtime sessions (bench/realtime.py), load before the run: {result['load_before']}",
        "",
        "| tokens/s | sessions | first audio after clause p50 / p95 (ms) | after the head p50 (ms) "
        "| underruns per session "
        "(sessions with any) | stall per session (ms) | clause gap p50 / max (ms) | "
        "HTTP stream first audio p50 / p95 (ms) |",
        "|---:|---:|---|---:|---|---:|---|---|",
    ]
    notes = [
        "",
        'First audio is timed from the token that completes the first clause ("Sure, I '
        f'checked the weather for you,"); the server starts on its first {HEAD_WORDS} words '
        'before (the head), so it can come first: "after the head" times it from the token '
        "that completes them. A player starts with the first audio at real time; an underrun is "
        f"a message that came after the audio before it had played out. Targets (issue 48): "
        f"p50 ≤ {TARGET_ONE_S * 1000:.0f} ms with 1 session and ≤ {TARGET_FOUR_S * 1000:.0f} "
        "ms with 4, 0 underruns at 30 tokens/s with 2 sessions, cancel to silence ≤ 100 ms.",
    ]
    for c in result["configs"]:
        lines.append(
            f"| {c['tokens_per_s']:g} | {c['sessions']} | {_fmt(c['first_audio_p50_s'])} / "
            f"{_fmt(c['first_audio_p95_s'])} | {_fmt(c.get('first_audio_after_head_p50_s'))} "
            f"| {c['underruns_per_session']:.1f} "
            f"({c['sessions_with_underruns']}/{c['samples']}) | {_fmt(c['stall_s_per_session'])} | "
            f"{_fmt(c['clause_gap_p50_s'])} / {_fmt(c['clause_gap_max_s'])} | "
            f"{_fmt(c['http_first_audio_p50_s'])} / {_fmt(c['http_first_audio_p95_s'])}"
            f"{_refused(c)} |"
        )
    lines += notes
    cancels = result["cancel"]
    if cancels:
        acks = [c["ack_s"] for c in cancels]
        idles = [c["engine_idle_s"] for c in cancels]
        lines += [
            "",
            f"Cancel (close_context after first audio, {len(cancels)} runs): acknowledged in "
            f"p50 {_fmt(pct(acks, 0.5))} ms (max {_fmt(max(acks))}), engine idle in p50 "
            f"{_fmt(pct(idles, 0.5))} ms (max {_fmt(max(idles))}), audio messages after the "
            f"acknowledgement: {sum(c['audio_after_ack'] for c in cancels)}.",
        ]
    rate = result.get("engine_seconds_per_unit", float("nan"))
    lines.append(
        f"Load after the run: {result['load_after']}; learned engine rate "
        f"{rate:.3f} s per unit (one worker)."
    )
    per_busy = result.get("audio_per_engine_s")
    if per_busy and per_busy == per_busy:
        workers = result.get("workers", 2)
        lines.append(
            f"A worker rendered {per_busy:.2f} s of audio per second in the engine over the "
            f"run, so {workers} workers busy at once render about {workers * per_busy:.1f} s "
            "of audio per second: the most sessions this host could keep playing in real "
            "time, before any text, DSP or encoding work."
        )
    return "\n".join(lines) + "\n"


# The targets (one idle session; four sessions), drawn on the plot.
TARGET_ONE_S = 0.30
TARGET_FOUR_S = 0.50


def plot(result: dict[str, Any], out: Path) -> Path | None:
    """First audio after the first clause (p50, p95 as a whisker) and
    underruns per session, by text rate and number of sessions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = result["configs"]
    rates = sorted({c["tokens_per_s"] for c in configs})
    sessions = sorted({c["sessions"] for c in configs})
    if not configs:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / len(sessions)
    for k, n in enumerate(sessions):
        rows = {c["tokens_per_s"]: c for c in configs if c["sessions"] == n}
        xs = [i + (k - (len(sessions) - 1) / 2) * width for i in range(len(rates))]
        p50 = [(rows[r]["first_audio_p50_s"] or 0) if r in rows else 0 for r in rates]
        p95 = [(rows[r]["first_audio_p95_s"] or 0) if r in rows else 0 for r in rates]
        err = [max(0.0, b - a) for a, b in zip(p50, p95, strict=True)]
        left.bar(xs, p50, width, yerr=[[0] * len(err), err], capsize=3, label=f"{n} session(s)")
        under = [(rows[r]["underruns_per_session"] or 0) if r in rows else 0 for r in rates]
        right.bar(xs, under, width, label=f"{n} session(s)")
    left.axhline(TARGET_ONE_S, color="k", ls="--", lw=0.8, label="target, 1 session")
    left.axhline(TARGET_FOUR_S, color="grey", ls=":", lw=0.8, label="target, 4 sessions")
    for ax, title in (
        (left, "first audio after the first clause (s), p50 / p95"),
        (right, "underruns per session at real-time playback"),
    ):
        ax.set_xticks(range(len(rates)), [f"{r:g} tokens/s" for r in rates])
        ax.set_title(title, fontsize=9)
    left.legend(fontsize=7)
    fig.suptitle(f"Voice-agent sessions, load before {result['load_before']}", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 tokens/s, 1 and 2 sessions")
    parser.add_argument("--rates", type=float, nargs="+", default=[15.0, 30.0, 60.0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=3, help="repeats of each configuration")
    parser.add_argument("--cancels", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        args.rates, args.sessions, args.rounds, args.cancels = [30.0], [1, 2], 1, 2
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    seq = list(range(10_000, 0, -1))
    with throwaway_server("voxclone-realtime-", RATE_LIMIT_OFF, launcher=SERVE) as server:
        base = server.url
        with urllib.request.urlopen(f"{base}/v1/info", timeout=30) as response:
            VOICE[0] = json.loads(response.read())["default_voice"]
        # One warm-up session: the first call's allocations are not the bench's.
        one_session(base, answer(0), 60.0)
        configs = [
            run_config(base, rate, sessions, args.rounds, seq)
            for rate in args.rates
            for sessions in args.sessions
        ]
        cancels = [cancel_once(base) for _ in range(args.cancels)]
        # What admission plans with (engine seconds per unit, one worker).
        learned_rate = metric(base, "voxclone_engine_seconds_per_unit")
        audio_per_busy_s = audio_per_engine_second(base)
    result = {
        "voice": VOICE[0],
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "configs": configs,
        "cancel": cancels,
        "engine_seconds_per_unit": learned_rate,
        "audio_per_engine_s": audio_per_busy_s,
        "workers": int(os.environ.get("VOXCLONE_WORKERS", "2")),
    }
    write_result(RESULTS_DIR / "realtime.json", result, markdown(result))
    plot(result, IMG_DIR / "realtime.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
