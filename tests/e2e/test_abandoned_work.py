"""Abandoned and hopeless whole-file requests stop costing engine time.

A real server process (one engine worker, so the engine's call count says
exactly how much work ran) on loopback:

* a client that disconnects in the middle of a long whole-file request
  costs at most the one chunk that was already inside the engine; the rest
  of its text is never rendered (before: the whole text was);
* a request whose deadline the queued work already exceeds is refused at
  once with 503 + Retry-After, or 413 if it could not be done in time even
  alone (before: it queued and was served long after its deadline).

Engine calls are read from the server's own ``/metrics`` (the batch-size
histogram counts every engine call as it starts).
"""

from __future__ import annotations

import contextlib
import re
import socket
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from voxclone.devserver import ServerProcess, running_servers

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timed]

# 40 short sentences: each is one engine chunk, together tens of seconds of work.
LONG_TEXT = " ".join(f"Sentence {i} is about the harbor." for i in range(40))
REFUSAL_MEDIAN_S = 0.100
REFUSAL_MAX_S = 0.500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        "VOXCLONE_WORKERS": "1",
        "VOXCLONE_FAST_LANE_THREADS": "0",
        "VOXCLONE_RATE_LIMIT_PER_MINUTE": "0",
        "VOXCLONE_MEMORY_CACHE_MB": "0",  # every request reaches the engine
        "VOXCLONE_DISK_CACHE_MB": "0",
        "VOXCLONE_WARM_CLONING": "false",
        "VOXCLONE_REQUEST_DEADLINE_S": "600",
    }
    home: Path = tmp_path_factory.mktemp("abandoned")
    with running_servers([home], env) as (srv,):
        yield srv


def engine_calls(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    match = re.search(r"^voxclone_batch_size_count (\S+)$", text, re.MULTILINE)
    return int(float(match.group(1))) if match else 0


def _post_and_vanish(url: str, text: str, started_calls: int) -> None:
    """Send a whole-file request on a raw socket and close it once the engine works on it."""
    host, port = url.removeprefix("http://").split(":")
    body = ('{"text": "' + text + '"}').encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            f"POST /v1/tts HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        sock.sendall(head + body)
        deadline = time.monotonic() + 180
        while engine_calls(url) < started_calls + 2:  # at least one chunk done, more queued
            assert time.monotonic() < deadline, "the engine never started on the request"
            time.sleep(0.05)


def _wait_idle(server: ServerProcess, settle_s: float, limit_s: float) -> tuple[int, bool]:
    """(engine calls, went idle): idle = no new engine call and almost no CPU
    for ``settle_s``. A call count alone cannot tell a slow chunk on a loaded
    machine from an idle server."""
    proc = psutil.Process(server.process.pid)

    def cpu() -> float:
        times = proc.cpu_times()
        return float(times.user + times.system)

    last, used, since = engine_calls(server.url), cpu(), time.monotonic()
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        time.sleep(1.0)
        now, now_used = engine_calls(server.url), cpu()
        if now != last or now_used - used > 0.1:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle_s:
            return last, True
        used = now_used
    return last, False


def test_disconnected_whole_file_client_costs_at_most_one_more_chunk(
    server: ServerProcess,
) -> None:
    before, _ = _wait_idle(server, 3.0, 60)
    _post_and_vanish(server.url, LONG_TEXT, before)
    at_disconnect = engine_calls(server.url)
    after, idle = _wait_idle(server, 5.0, 180)
    # The server stops working: the chunk inside the engine when the client
    # left may finish, nothing after it (before: all 40 sentences rendered).
    assert idle, ("still rendering for a client that left", at_disconnect, after)
    assert after - at_disconnect <= 1, (before, at_disconnect, after)


def test_request_that_cannot_finish_by_its_deadline_is_refused_at_once(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        client.get("/healthz")
        with httpx.Client(base_url=server.url, timeout=600) as busy_client:
            import threading

            answers: list[httpx.Response] = []

            def occupy() -> None:
                # The test closes this client on purpose at the end.
                with contextlib.suppress(httpx.HTTPError):
                    # A stream: it only has to start by its deadline, so however
                    # slow the machine it is admitted and keeps the worker busy.
                    body = {"text": LONG_TEXT, "stream": True}
                    answers.append(busy_client.post("/v1/tts", json=body))

            busy = threading.Thread(target=occupy, daemon=True)
            start = engine_calls(server.url)
            busy.start()
            limit = time.monotonic() + 180
            while engine_calls(server.url) < start + 1:
                assert not answers, answers[0].text  # it must be rendering, not answered
                assert time.monotonic() < limit
                time.sleep(0.05)
            latencies = []
            for i in range(5):
                t0 = time.perf_counter()
                refused = client.post(
                    "/v1/tts",
                    json={"text": f"Probe {i}: a short sentence about the sea, please."},
                    headers={"X-Request-Deadline": "2"},
                )
                latencies.append(time.perf_counter() - t0)
                # 503 + Retry-After: the queued work makes it late. On a machine
                # so loaded that even this sentence alone could not be done in
                # 2 s, 413 (retrying would not help) is the honest answer.
                assert refused.status_code in (503, 413), refused.text
                if refused.status_code == 503:
                    assert refused.json()["error"]["code"] == "overloaded"
                    assert int(refused.headers["retry-after"]) >= 1
                else:
                    assert refused.json()["error"]["code"] == "payload_too_large"
            assert statistics.median(latencies) < REFUSAL_MEDIAN_S, latencies
            assert max(latencies) < REFUSAL_MAX_S, latencies
            busy_client.close()  # abandon the long render too


def test_deadline_header_must_be_a_positive_number(server: ServerProcess) -> None:
    for bad in ("soon", "-1", "0", "nan"):
        response = httpx.post(
            f"{server.url}/v1/tts",
            json={"text": "Hello."},
            headers={"X-Request-Deadline": bad},
            timeout=30,
        )
        assert response.status_code == 422, (bad, response.text)
        assert response.json()["error"]["field"] == "x-request-deadline"
