"""Voice agents (issue 48): a simulated language model feeding the stream-input
WebSocket of a real ``voxclone serve`` on 127.0.0.1.

For each rate (15, 30, 60 tokens/s; a token is 4 characters) and each number
of concurrent sessions (1, 2, 4), every session sends a two-sentence answer a
token at a time and reads the audio back (pcm_24000). Measured per session:

* first audio after the first clause ends: from sending the token that
  completes the first clause (its punctuation and the space after it: the
  server cuts there) to the first audio message;
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
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import RATE_LIMIT_OFF, throwaway_server, write_result  # noqa: E402

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
    """Index after the space that ends the first clause, as the server cuts it
    (service/realtime_text.py: a sentence end, or a clause mark once three
    words are in)."""
    for i, ch in enumerate(text[:-1]):
        if text[i + 1] != " ":
            continue
        if ch in ".!?" or (ch in ",;:" and len(text[:i].split()) >= 3):
            return i + 2
    return len(text)


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
    clause_token = (clause_at - 1) // CHARS_PER_TOKEN
    clause_sent = sent_at[min(clause_token, len(sent_at) - 1)] if sent_at else None
    return {"arrivals": arrivals, "clause_sent": clause_sent, "error": error}


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


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_config(
    base: str, rate: float, sessions: int, rounds: int, seq: list[int]
) -> dict[str, Any]:
    first: list[float] = []
    underruns: list[int] = []
    stalls: list[float] = []
    gaps: list[float] = []
    errors: list[str] = []
    http: list[float] = []
    http_errors: list[str] = []
    aligned = 0
    for _ in range(rounds):
        texts = [answer(seq.pop()) for _ in range(sessions)]
        with ThreadPoolExecutor(sessions) as pool:
            results = list(pool.map(lambda t: one_session(base, t, rate), texts))
        for text, got in zip(texts, results, strict=True):
            errors += got["error"]
            if got["arrivals"] and got["clause_sent"] is not None:
                first.append(got["arrivals"][0][0] - got["clause_sent"])
            play = playback(got["arrivals"], clause_starts(text))
            # Clause gaps need the alignment to count the text's words.
            aligned += sum(a for _, _, a in got["arrivals"]) == len(text.split())
            underruns.append(play["underruns"])
            stalls.append(play["stall_s"])
            gaps += play["clause_gaps_s"]
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
        "| tokens/s | sessions | first audio after clause p50 / p95 (ms) | underruns per session "
        "(sessions with any) | stall per session (ms) | clause gap p50 / max (ms) | "
        "HTTP stream first audio p50 / p95 (ms) |",
        "|---:|---:|---|---|---:|---|---|",
    ]
    for c in result["configs"]:
        lines.append(
            f"| {c['tokens_per_s']:g} | {c['sessions']} | {_fmt(c['first_audio_p50_s'])} / "
            f"{_fmt(c['first_audio_p95_s'])} | {c['underruns_per_session']:.1f} "
            f"({c['sessions_with_underruns']}/{c['samples']}) | {_fmt(c['stall_s_per_session'])} | "
            f"{_fmt(c['clause_gap_p50_s'])} / {_fmt(c['clause_gap_max_s'])} | "
            f"{_fmt(c['http_first_audio_p50_s'])} / {_fmt(c['http_first_audio_p95_s'])}"
            f"{_refused(c)} |"
        )
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
    lines.append(
        f"Load after the run: {result['load_after']}; learned engine rate "
        f"{result.get('engine_seconds_per_unit', float('nan')):.3f} s per unit (one worker)."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 tokens/s, 1 and 2 sessions")
    parser.add_argument("--rates", type=float, nargs="+", default=[15.0, 30.0, 60.0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2, help="repeats of each configuration")
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
    result = {
        "voice": VOICE[0],
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "configs": configs,
        "cancel": cancels,
        "engine_seconds_per_unit": learned_rate,
    }
    write_result(RESULTS_DIR / "realtime.json", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
