"""A speech job survives the death of the server process rendering it.

Server A (a real process) takes a long job; once it has rendered part of it,
A is killed with SIGKILL (no shutdown code runs). The job is then still
"running" in the database under A's lease: not failed, not lost. Server B,
started on the same home (same SQLite database and blob directory), waits for
the lease to expire, claims the job as its second attempt and finishes it; the
audio downloads through the job's signed URL. Short leases come from settings.
"""

from __future__ import annotations

import io
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile as sf
from tests.e2e.restart_settings import READY_TIMEOUT_S
from tests.e2e.restart_settings import RESTART_ENV as ENV

from voxclone.devserver import start_server, wait_ready
from voxclone.runtime.job_store import SqlJobStore

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.slow]

LONG_TEXT = " ".join(
    [
        "The first sentence starts the job.",
        "A second sentence gives the worker more to do.",
        "The third one keeps it busy for a while longer.",
        "By the fourth, the server may well have been stopped.",
    ]
)


def _job(client: httpx.Client, url: str, job_id: str) -> dict[str, Any]:
    r = client.get(f"{url}/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_job_survives_kill_9_of_its_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ExitStack() as stack, httpx.Client(timeout=60) as client:
        first = start_server(home, ENV, stack)
        wait_ready(first.url, READY_TIMEOUT_S, process=first.process)
        r = client.post(f"{first.url}/v1/jobs/speech", json={"text": LONG_TEXT})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]

        # Wait until A has rendered part of the job, then kill it outright.
        deadline = time.monotonic() + 240
        while True:
            job = _job(client, first.url, job_id)
            if job["state"] == "running" and 0 < job["progress"] < 100:
                break
            assert job["state"] in ("queued", "running"), job
            assert time.monotonic() < deadline, f"job never made progress: {job}"
            time.sleep(0.1)
        first.process.kill()
        first.process.wait(timeout=10)

        # Nothing ran on A's way out: the job is still A's, running, first attempt.
        with SqlJobStore(home / "voxclone.sqlite3", recover_on_open=False) as store:
            left = store.get(job_id, None)
        assert (left.state, left.attempts) == ("running", 1)
        assert left.claimed_by is not None

        second = start_server(home, ENV, stack)
        wait_ready(second.url, READY_TIMEOUT_S, process=second.process)
        deadline = time.monotonic() + 300
        while True:
            job = _job(client, second.url, job_id)
            if job["state"] in ("succeeded", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, f"job not finished on B: {job}"
            time.sleep(0.3)
        assert job["state"] == "succeeded", job
        assert job["attempts"] == 2
        audio = client.get(job["audio_url"])
        assert audio.status_code == 200
        samples, rate = sf.read(io.BytesIO(audio.content))
        # ~190 characters of English: all four sentences, not just the last part.
        assert len(samples) / rate > 8.0
