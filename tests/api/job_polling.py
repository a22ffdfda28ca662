"""Polling a job over HTTP until it ends: one helper for the API tests that
submit jobs (six files each had their own copy)."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from fastapi.testclient import TestClient

ENDED = frozenset({"succeeded", "failed", "cancelled"})


def wait_for_job(
    client: TestClient,
    job_id: str,
    headers: dict[str, str] | None = None,
    *,
    states: Collection[str] = ENDED,
    timeout_s: float = 180.0,
) -> dict[str, Any]:
    """The job's JSON once its state is one of ``states`` (default: ended)."""
    deadline = time.monotonic() + timeout_s
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["state"] in states:
            return job
        # 5 polls a second: faster ones trip the rate limit of the apps that
        # keep it on (test_storage_outages answered 429 at 10 a second).
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} never reached {sorted(states)}: {job}")


def job_audio(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    """Submit a speech job with ``body``, wait for it to succeed, download its audio."""
    return job_download(client, body, headers).content


def job_download(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> Any:
    """:func:`job_audio`'s download itself, headers and all (the TestClient's
    response: httpx2's where starlette finds it installed, else httpx's)."""
    r = client.post("/v1/jobs/speech", json=body, headers=headers)
    assert r.status_code == 202, r.text
    job = wait_for_job(client, r.json()["id"], headers)
    assert job["state"] == "succeeded", job
    audio = client.get(job["audio_url"])
    assert audio.status_code == 200
    return audio
