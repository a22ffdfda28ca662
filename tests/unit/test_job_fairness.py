"""Fairness between tenants in the speech-job queue (SQLite and PostgreSQL).

The probe (issue 37): bob's 5-word job waited more than 60 s behind three of
alice's 2,160-character jobs, because the claim took the oldest job whoever
owned it and a process rendered one job at a time. The queue here is the real
SqlJobStore; the renderer stands in for the engine (a fixed time per chunk) so
that the order and the waits are exact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.errors import Cancelled
from voxclone.runtime.blobs import LocalBlobStore
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.service.jobs import JobWorker, SpeechJobConfig, SpeechJobs
from voxclone.service.speech.service import SpeechRequest

KIND = ("speech",)
CHUNK_S = 0.2  # engine time of one chunk
CHUNK_CHARS = 400


@pytest.fixture()
def queue(database_url: str) -> Iterator[SqlJobStore]:
    store = SqlJobStore(database_url, recover_on_open=False)
    yield store
    store.close()


def _enqueue(queue: SqlJobStore, owner: str, text: str = "Hello.") -> str:
    job, _ = queue.enqueue(kind="speech", owner=owner, payload={"text": text, "format": "wav"})
    return job.id


def _finish(queue: SqlJobStore, job_id: str, worker: str) -> None:
    queue.update_claimed(job_id, worker, state="succeeded")


def test_the_next_claim_goes_to_the_tenant_with_nothing_running(queue: SqlJobStore) -> None:
    alice = [_enqueue(queue, "alice") for _ in range(3)]
    bob = _enqueue(queue, "bob")  # queued last
    first = queue.claim("w1", kinds=KIND, lease_s=30)
    assert first is not None and first.id == alice[0]
    # Alice has a job running, bob none: bob's job is next, not alice's second.
    second = queue.claim("w2", kinds=KIND, lease_s=30)
    assert second is not None and second.id == bob
    third = queue.claim("w3", kinds=KIND, lease_s=30)
    assert third is not None and third.id == alice[1]


def test_tenants_take_turns_when_one_job_runs_at_a_time(queue: SqlJobStore) -> None:
    alice = [_enqueue(queue, "alice") for _ in range(3)]
    bob = [_enqueue(queue, "bob") for _ in range(2)]
    order = []
    now = time.time()
    while (job := queue.claim("w", kinds=KIND, lease_s=30, now=now)) is not None:
        order.append(job.id)
        _finish(queue, job.id, "w")
        now += 1.0  # each claim a moment later than the last
    # Round-robin, each tenant's own jobs first-come.
    assert order == [alice[0], bob[0], alice[1], bob[1], alice[2]]


def test_a_tenant_served_long_ago_goes_before_one_served_just_now(queue: SqlJobStore) -> None:
    carol = _enqueue(queue, "carol")
    job = queue.claim("w", kinds=KIND, lease_s=30)
    assert job is not None and job.id == carol and job.started_at is not None
    _finish(queue, carol, "w")
    alice = [_enqueue(queue, "alice") for _ in range(2)]
    carol2 = _enqueue(queue, "carol")
    got = queue.claim("w", kinds=KIND, lease_s=30)
    assert got is not None and got.id == alice[0]  # never served: first
    _finish(queue, alice[0], "w")
    got = queue.claim("w", kinds=KIND, lease_s=30)
    assert got is not None and got.id == carol2  # carol was served before alice


def test_a_worker_can_skip_owners_it_is_already_serving(queue: SqlJobStore) -> None:
    _enqueue(queue, "alice")
    _enqueue(queue, "alice")
    assert queue.claim("w", kinds=KIND, lease_s=30, exclude_owners={"alice"}) is None
    bob = _enqueue(queue, "bob")
    got = queue.claim("w", kinds=KIND, lease_s=30, exclude_owners={"alice"})
    assert got is not None and got.id == bob


class _ChunkedRenderer:
    """Renders ``CHUNK_S`` per ``CHUNK_CHARS`` of text, chunk by chunk, and
    notes when each job started and ended (the router surface a job uses)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.lock = threading.Lock()

    def estimate(self, req: SpeechRequest) -> Any:
        return SimpleNamespace(units=len(req.text), output_s=1.0)

    def text_size(self, req: SpeechRequest) -> int:
        return len(req.text)

    def admit_background(self, req: SpeechRequest) -> Any:
        return SimpleNamespace(release=lambda: None)

    def synthesize_into(
        self,
        req: SpeechRequest,
        out: Any,
        *,
        progress: Any,
        cancelled: Any,
        admission: Any,
        max_output_s: float,
    ) -> str:
        with self.lock:
            self.started[req.text] = time.monotonic()
        for start in range(0, len(req.text), CHUNK_CHARS):
            if cancelled():
                raise Cancelled("request cancelled")
            time.sleep(CHUNK_S)
            progress(min(CHUNK_CHARS, len(req.text) - start))
        with self.lock:
            self.ended[req.text] = time.monotonic()
        out.write(b"RIFF")
        return "audio/wav"


def test_a_short_job_of_another_tenant_is_not_starved_by_a_backlog(
    queue: SqlJobStore, tmp_path: Path
) -> None:
    renderer = _ChunkedRenderer()
    jobs = SpeechJobs(
        queue=queue,
        speech=renderer,  # type: ignore[arg-type]
        blobs=LocalBlobStore(tmp_path / "blobs"),
        events=JobEvents(),
        config=SpeechJobConfig(lease_s=5),
        worker_id="w",
    )
    # The probe's backlog: three of alice's 2,160-character jobs (6 chunks,
    # 1.2 s each here), then bob's five words.
    long_texts = [f"{i} " + "x" * 2_158 for i in range(3)]
    for text in long_texts:
        jobs.submit(SpeechRequest(text=text, owner="alice"))
    worker = JobWorker(jobs, poll_s=0.02, slots=2)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while long_texts[0] not in renderer.started and time.monotonic() < deadline:
            time.sleep(0.01)
        short = "Five words for bob, please."
        submitted = time.monotonic()
        jobs.submit(SpeechRequest(text=short, owner="bob"))
        deadline = time.monotonic() + 30
        while len(renderer.ended) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        worker.stop()
    assert len(renderer.ended) == 4, renderer.ended
    # Bob's job started while alice's first was still rendering: it waited
    # about one poll, less than one chunk, not for alice's backlog (one slot,
    # first come: 3.6 s, all three of her jobs).
    waited = renderer.started[short] - submitted
    assert waited < CHUNK_S * 2, waited
    assert renderer.ended[short] < renderer.ended[long_texts[0]]
    assert renderer.ended[short] < renderer.ended[long_texts[1]]
    # One slot per owner: alice's jobs still ran one after another.
    assert renderer.started[long_texts[1]] >= renderer.ended[long_texts[0]]
    assert renderer.started[long_texts[2]] >= renderer.ended[long_texts[1]]


def test_a_single_slot_worker_still_takes_turns(queue: SqlJobStore, tmp_path: Path) -> None:
    renderer = _ChunkedRenderer()
    jobs = SpeechJobs(
        queue=queue,
        speech=renderer,  # type: ignore[arg-type]
        blobs=LocalBlobStore(tmp_path / "blobs"),
        events=JobEvents(),
        config=SpeechJobConfig(lease_s=5),
        worker_id="w",
    )
    long_texts = [f"{i} " + "x" * 798 for i in range(3)]
    for text in long_texts:
        jobs.submit(SpeechRequest(text=text, owner="alice"))
    short = "Five words for bob, please."
    jobs.submit(SpeechRequest(text=short, owner="bob"))
    for _ in range(4):
        assert jobs.run_one() is not None
    # Alice's first was served, so bob's goes next: before alice's second.
    assert renderer.ended[short] < renderer.started[long_texts[1]]
