"""POST /v1/voices under a flood and with clients that leave (issue 45).

Before: 10 concurrent enrollments all rendered at once (2 answers after 147 s
and 162 s, 8 client time-outs, no 503) and 3 abandoned ones still stored
voices whose ids no client ever received. A real HTTP server (uvicorn on
loopback) around the real route and the real VoiceService on a real SQLite
store; the cloning models are tests/unit/report_fakes.py's stand-ins and the
reference loader (the first step of the audio work, inside the enrollment's
turn) takes a set time or holds until the test lets it go.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from voxclone.errors import Cancelled
from voxclone.service.voices.request import ConsentInput, EnrollRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import report_fakes  # noqa: E402  (tests/unit: the service on stand-in models)

pytestmark = pytest.mark.timed

FORM = {
    "name": "Ada",
    "consent": "true",
    "consent_statement": "I agree that my voice is cloned.",
}
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
WORK_S = 0.5  # one enrollment's audio work here
HOLD = b"HOLD"  # an upload starting so waits for the test's gate


class Loader:
    """The reference loader: WORK_S per upload, or until ``gate`` for HOLD ones."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, audio: bytes) -> Any:
        if audio.startswith(HOLD):
            self.entered.set()
            assert self.gate.wait(30)
        else:
            time.sleep(WORK_S)
        return report_fakes.harmonic_reference(audio)


@pytest.fixture()
def service(app_runtime: Any, tmp_path: Path) -> Iterator[tuple[Any, Loader]]:
    loader = Loader()
    svc = report_fakes.service(
        tmp_path / "voices.sqlite3",
        reference_loader=loader,
        policy=replace(report_fakes.NO_STOCK_CHECK, enroll_slots=1, enroll_queue=2),
    )
    app_runtime.replace(voices=svc)
    try:
        yield svc, loader
    finally:
        loader.gate.set()
        svc.close()


# One client for every request: building an httpx.Client builds an SSL
# context (~0.1 s, ~1 s with ten threads at once on 2 cores), which timed the
# client rather than the server.
HTTP = httpx.Client(limits=httpx.Limits(max_connections=20))


def _post(
    url: str, name: str, audio: bytes = b"RIFF-any", timeout: float = 30, **form: str
) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    r = HTTP.post(
        f"{url}/v1/voices",
        data={**FORM, "name": name, **form},
        files={"audio": ("ref.wav", audio, "audio/wav")},
        timeout=timeout,
    )
    return r, time.perf_counter() - started


def _until(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_ten_concurrent_enrollments_each_201_or_fast_503(
    live_server: Callable[..., Any], service: tuple[Any, Loader]
) -> None:
    svc, _ = service
    with live_server() as server:
        # The app's first request opens its stores (~1.4 s here), which the
        # flood would otherwise all wait for; this measures admission.
        assert HTTP.get(f"{server.url}/v1/voices", timeout=30).status_code == 200
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda i: _post(server.url, f"voice {i}"), range(10)))
    statuses = [r.status_code for r, _ in answers]
    assert set(statuses) <= {201, 503}, [r.text for r, _ in answers]
    refused = [(r, s) for r, s in answers if r.status_code == 503]
    enrolled = sorted(s for r, s in answers if r.status_code == 201)
    # One rendering and two waiting are admitted (more only if the requests
    # arrived spread over a whole enrollment); the rest are refused.
    assert refused and len(enrolled) >= 3
    for r, seconds in refused:
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["code"] == "overloaded"
        # Refused on the event loop before any audio work: 56-157 ms measured
        # here with the client threads in the same process, load average 9.5
        # on 2 cores; 548 ms once on a busier CI host (session 25), so a
        # refusal may also take as long as the quickest admitted enrollment,
        # which did audio work, took.
        assert seconds < max(0.5, enrolled[0]), (seconds, enrolled)
    # Each answered within 2 s of its turn: the i-th after about i enrollments.
    for i, seconds in enumerate(enrolled):
        assert seconds < (i + 1) * WORK_S + 2.0, enrolled
    # No orphan: exactly the voices whose ids the clients received.
    stored = {v.id for v in svc.list("local")}
    assert stored == {r.json()["id"] for r, _ in answers if r.status_code == 201}


def test_client_gone_stops_its_enrollment_and_stores_nothing(
    live_server: Callable[..., Any], service: tuple[Any, Loader]
) -> None:
    svc, loader = service
    with live_server() as server:
        with ThreadPoolExecutor(2) as pool:
            # The first renders (held at the gate), the second waits its turn;
            # both clients give up after 1 s, as the did after 180 s.
            running = pool.submit(_post, server.url, "running", HOLD + b"-a", 1.0)
            assert loader.entered.wait(10)
            queued = pool.submit(_post, server.url, "queued", HOLD + b"-b", 1.0)
            for gone in (running, queued):
                with pytest.raises(httpx.TimeoutException):
                    gone.result()
        # The waiting one gave up its place while the first still renders.
        assert _until(lambda: svc.enrollment_stats()["waiting"] == 0)
        assert svc.enrollment_stats()["running"] == 1
        loader.gate.set()  # the first one's audio work ends now
        assert _until(lambda: svc.enrollment_stats()["running"] == 0)
        assert svc.list("local") == []  # no voice whose id nobody received
        # The server goes on: the next enrollment is admitted and stored.
        r, _ = _post(server.url, "after")
        assert r.status_code == 201, r.text
        assert [v.id for v in svc.list("local")] == [r.json()["id"]]


def test_wait_false_returns_the_id_at_once_and_keeps_the_voice(
    live_server: Callable[..., Any], service: tuple[Any, Loader]
) -> None:
    svc, loader = service
    with live_server() as server, ThreadPoolExecutor(1) as pool:
        # A full enrollment holds the only slot; the draft does not wait for it.
        busy = pool.submit(_post, server.url, "busy", HOLD + b"-a", 30.0)
        assert loader.entered.wait(10)
        r, seconds = _post(server.url, "quick", wait="false", timeout=5.0)
        assert r.status_code == 201, r.text
        assert seconds < WORK_S + 1.0  # its own audio work only, not the slot's
        body = r.json()
        assert body["report_job"]["kind"] == "report"
        assert svc.get(body["id"], "local").name == "quick"  # kept: the client has its id
        loader.gate.set()
        assert busy.result()[0].status_code == 201


def test_client_gone_mid_render_stops_at_the_next_render(runtime: Any) -> None:
    """The real cloning stack: once the client is gone, the calibration and
    report renders are dropped by the scheduler (the enrollment no longer runs
    them all to their end while the next one waits)."""
    scheduler = runtime.scheduler
    asked: list[int] = []  # renders completed when the service asked (call 1, 2, ...)

    def gone() -> bool:
        # Asked after the upload is checked (1), before the renders (2), then
        # by the scheduler for each render: the client leaves as they start.
        asked.append(scheduler.stats().completed)
        return len(asked) >= 3

    consent = ConsentInput(given=True, statement="I agree to be cloned.", given_by="tester")
    req = EnrollRequest(REFERENCE.read_bytes(), "left mid-render", "owner-gone", consent)
    with pytest.raises(Cancelled):
        runtime.voices.start_enrollment(req, wait=True, cancelled=gone)
    # No render ran after the client left (one spare for a start-up
    # calibration call finishing meanwhile); before, every render of the
    # calibration, tone match and report did.
    assert scheduler.stats().completed - asked[1] <= 1, asked
    assert runtime.voices.list("owner-gone") == []
    assert runtime.voices.enrollment_stats()["running"] == 0
