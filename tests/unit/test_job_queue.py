"""The durable job queue on the jobs table (SQLite and PostgreSQL): claims, leases,
retries with backoff, idempotent creation, and the speech-job worker's retry path."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.errors import Conflict, Overloaded
from voxclone.runtime.blobs import LocalBlobStore
from voxclone.runtime.job_store import JobEvents, LeaseLost, SqlJobStore
from voxclone.service.jobs import SPEECH_JOB_KIND, SpeechJobConfig, SpeechJobs

KIND = ("speech",)
PAYLOAD = {"text": "Hello there.", "format": "wav"}


@pytest.fixture()
def queue(database_url: str) -> Iterator[SqlJobStore]:
    store = SqlJobStore(database_url, recover_on_open=False)
    yield store
    store.close()


def _enqueue(queue: SqlJobStore, owner: str = "alice", **kw: Any) -> str:
    job, created = queue.enqueue(kind="speech", owner=owner, payload=dict(PAYLOAD), **kw)
    assert created
    return job.id


def test_a_job_is_claimed_by_one_worker_only(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue)
    claimed = queue.claim("a", kinds=KIND, lease_s=30)
    assert claimed is not None and claimed.id == job_id
    assert (claimed.state, claimed.claimed_by, claimed.attempts) == ("running", "a", 1)
    assert claimed.lease_expires_at is not None and claimed.lease_expires_at > time.time() + 20
    assert queue.claim("b", kinds=KIND, lease_s=30) is None
    assert queue.claim("b", kinds=("refine",), lease_s=30) is None


def test_concurrent_workers_claim_each_job_exactly_once(queue: SqlJobStore) -> None:
    ids = {_enqueue(queue) for _ in range(12)}
    got: list[str] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        while (job := queue.claim(name, kinds=KIND, lease_s=30)) is not None:
            with lock:
                got.append(job.id)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == sorted(ids)


def test_an_expired_lease_hands_the_job_to_another_worker(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue, max_attempts=3)
    first = queue.claim("dead", kinds=KIND, lease_s=5)
    assert first is not None
    # While the lease holds, nobody else gets the job.
    assert queue.claim("b", kinds=KIND, lease_s=5) is None
    later = time.time() + 10
    second = queue.claim("b", kinds=KIND, lease_s=5, now=later)
    assert second is not None and second.id == job_id
    assert (second.claimed_by, second.attempts) == ("b", 2)
    assert "worker was lost" in second.message
    # The old holder finds out and may write nothing.
    assert not queue.renew(job_id, "dead", 5)
    with pytest.raises(LeaseLost):
        queue.update_claimed(job_id, "dead", progress=50)
    assert queue.renew(job_id, "b", 5)
    done = queue.update_claimed(job_id, "b", state="succeeded", result={"ok": True})
    assert done.state == "succeeded" and done.claimed_by is None and done.progress == 100


def test_a_job_whose_tries_are_spent_fails_clearly(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue, max_attempts=1)
    assert queue.claim("dead", kinds=KIND, lease_s=1) is not None
    assert queue.claim("b", kinds=KIND, lease_s=1, now=time.time() + 5) is None
    job = queue.get(job_id, "alice")
    assert job.state == "failed"
    assert job.error is not None and job.error["code"] == "worker_lost"
    assert "1 attempt" in job.message


def test_cancel_of_an_abandoned_job_ends_it_cancelled(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue, max_attempts=3)
    assert queue.claim("dead", kinds=KIND, lease_s=1) is not None
    assert queue.request_cancel(job_id, "alice").state == "running"  # flagged only
    assert queue.claim("b", kinds=KIND, lease_s=1, now=time.time() + 5) is None
    assert queue.get(job_id, "alice").state == "cancelled"


def test_retry_waits_for_its_backoff(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue, max_attempts=3)
    assert queue.claim("a", kinds=KIND, lease_s=30) is not None
    queued = queue.retry_later(job_id, "a", delay_s=60, error={"code": "x", "message": "boom"})
    assert queued.state == "queued" and queued.claimed_by is None and queued.error is not None
    assert queue.claim("a", kinds=KIND, lease_s=30) is None  # not before the backoff
    again = queue.claim("a", kinds=KIND, lease_s=30, now=time.time() + 61)
    assert again is not None and again.attempts == 2


def test_release_gives_the_attempt_back(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue, max_attempts=1)
    assert queue.claim("a", kinds=KIND, lease_s=30) is not None
    released = queue.release(job_id, "a")
    assert (released.state, released.attempts) == ("queued", 0)
    again = queue.claim("b", kinds=KIND, lease_s=30)
    assert again is not None and again.attempts == 1


def test_idempotency_key_returns_the_same_job_per_owner(queue: SqlJobStore) -> None:
    first, created = queue.enqueue(
        kind="speech", owner="alice", payload=dict(PAYLOAD), idempotency_key="k1"
    )
    again, created_again = queue.enqueue(
        kind="speech", owner="alice", payload=dict(PAYLOAD), idempotency_key="k1"
    )
    assert created and not created_again and again.id == first.id
    other, created_other = queue.enqueue(
        kind="speech", owner="bob", payload=dict(PAYLOAD), idempotency_key="k1"
    )
    assert created_other and other.id != first.id
    with pytest.raises(Conflict):
        queue.enqueue(kind="speech", owner="alice", payload={"text": "else"}, idempotency_key="k1")


def test_restart_recovery_leaves_queue_jobs_to_their_leases(database_url: str) -> None:
    with SqlJobStore(database_url, recover_on_open=False) as store:
        queued = _enqueue(store)
        running = _enqueue(store)
        store.claim("dead", kinds=KIND, lease_s=30)  # the older one: `queued`
        legacy = store.create(kind="refine", owner="alice")
    with SqlJobStore(database_url) as reopened:  # recovers on open
        assert reopened.get(legacy.id, None).state == "failed"
        assert reopened.get(queued, None).state == "running"
        assert reopened.get(running, None).state == "queued"


def test_delete_and_retention_listing(queue: SqlJobStore) -> None:
    job_id = _enqueue(queue)
    assert queue.claim("a", kinds=KIND, lease_s=30) is not None
    queue.update_claimed(job_id, "a", state="succeeded")
    assert [j.id for j in queue.finished_before("9999", kinds=KIND)] == [job_id]
    assert queue.finished_before("0000", kinds=KIND) == []
    # Rows that never end (an audiobook's) are listed by when they last changed.
    waiting = _enqueue(queue)
    assert [j.id for j in queue.changed_before("9999", kinds=KIND)] == [job_id, waiting]
    assert queue.changed_before("9999", kinds=("other",)) == []
    assert queue.changed_before("0000", kinds=KIND) == []
    assert queue.delete(job_id, "alice").id == job_id
    assert not queue.renew(job_id, "a", 30)


class _NoAdmission:
    def release(self) -> None:
        pass


class _FlakySpeech:
    """Stands in for the engine's router only to inject render failures (an
    engine fault cannot be produced on demand); everything else is real."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def estimate(self, req: Any) -> Any:
        return SimpleNamespace(units=len(req.text), output_s=1.0)

    def text_size(self, req: Any) -> int:
        return len(req.text)

    def admit_background(self, req: Any) -> Any:
        return _NoAdmission()

    def synthesize_into(
        self,
        req: Any,
        out: Any,
        *,
        progress: Any,
        cancelled: Any,
        admission: Any,
        max_output_s: float,
    ) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise Overloaded("engine queue full")
        progress(len(req.text))
        out.write(b"RIFF-not-really")
        return "audio/wav"


class _SilentSpeech(_FlakySpeech):
    def synthesize_into(
        self,
        req: Any,
        out: Any,
        *,
        progress: Any,
        cancelled: Any,
        admission: Any,
        max_output_s: float,
    ) -> str:
        out.write(b"RIFF-stale")
        return "audio/wav"


def _speech_jobs(queue: SqlJobStore, tmp_path: Path, speech: _FlakySpeech) -> SpeechJobs:
    return SpeechJobs(
        queue=queue,
        speech=speech,  # type: ignore[arg-type]
        blobs=LocalBlobStore(tmp_path / "blobs"),
        events=JobEvents(),
        config=SpeechJobConfig(lease_s=5, max_attempts=2, retry_base_s=0.01),
        worker_id="w",
    )


def test_worker_retries_with_backoff_then_succeeds(queue: SqlJobStore, tmp_path: Path) -> None:
    from voxclone.service.speech.service import SpeechRequest

    jobs = _speech_jobs(queue, tmp_path, _FlakySpeech(failures=1))
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    first = jobs.run_one()
    assert first is not None and first.state == "queued" and "retrying" in first.message
    assert first.error is not None and first.error["code"] == "overloaded"
    time.sleep(0.05)
    done = jobs.run_one()
    assert done is not None and done.state == "succeeded" and done.attempts == 2
    assert jobs.blobs.get(f"jobs/{job.id}.wav") == b"RIFF-not-really"
    jobs.delete(job.id, "alice")
    assert not jobs.blobs.exists(f"jobs/{job.id}.wav")


def test_worker_fails_the_job_after_max_attempts(queue: SqlJobStore, tmp_path: Path) -> None:
    from voxclone.service.speech.service import SpeechRequest

    jobs = _speech_jobs(queue, tmp_path, _FlakySpeech(failures=5))
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    assert jobs.run_one() is not None
    time.sleep(0.05)
    final = jobs.run_one()
    assert final is not None and final.state == "failed"
    assert "after 2 attempts" in final.message
    assert queue.get(job.id, "alice").kind == SPEECH_JOB_KIND


class _SlowSpeech(_FlakySpeech):
    """Renders until told to stop (cancelled() turns true), like a long text."""

    def __init__(self) -> None:
        super().__init__(failures=0)
        self.started = threading.Event()

    def synthesize_into(
        self,
        req: Any,
        out: Any,
        *,
        progress: Any,
        cancelled: Any,
        admission: Any,
        max_output_s: float,
    ) -> str:
        from voxclone.errors import Cancelled

        self.started.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if cancelled():
                raise Cancelled("request cancelled")
            time.sleep(0.01)
        raise AssertionError("the render was never stopped")


def _slow_jobs(queue: SqlJobStore, tmp_path: Path) -> tuple[SpeechJobs, _SlowSpeech]:
    speech = _SlowSpeech()
    jobs = SpeechJobs(
        queue=queue,
        speech=speech,  # type: ignore[arg-type]
        blobs=LocalBlobStore(tmp_path / "blobs"),
        events=JobEvents(),
        # Heartbeat every 0.1 s: it renews the lease and reads the cancel flag.
        config=SpeechJobConfig(lease_s=0.3, max_attempts=2),
        worker_id="w",
    )
    return jobs, speech


def _in_thread(jobs: SpeechJobs) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(jobs.run_one()))
    thread.start()
    return thread, out


def test_cancel_through_the_database_stops_a_running_render(
    queue: SqlJobStore, tmp_path: Path
) -> None:
    from voxclone.service.speech.service import SpeechRequest

    jobs, speech = _slow_jobs(queue, tmp_path)
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    thread, out = _in_thread(jobs)
    assert speech.started.wait(10)
    time.sleep(0.5)  # longer than the lease: the heartbeat keeps it
    assert queue.get(job.id, None).claimed_by == "w"
    queue.request_cancel(job.id, "alice")  # as another replica would
    thread.join(10)
    assert out[0] is not None and out[0].state == "cancelled"


def test_deleting_a_running_job_stops_its_worker(queue: SqlJobStore, tmp_path: Path) -> None:
    from voxclone.service.speech.service import SpeechRequest

    jobs, speech = _slow_jobs(queue, tmp_path)
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    thread, out = _in_thread(jobs)
    assert speech.started.wait(10)
    jobs.delete(job.id, "alice")
    thread.join(10)
    assert out == [None]  # lost its lease: writes nothing
    assert not jobs.blobs.exists(f"jobs/{job.id}.wav")


def test_a_clean_shutdown_hands_the_job_back_without_spending_a_try(
    queue: SqlJobStore, tmp_path: Path
) -> None:
    from voxclone.service.jobs import JobWorker
    from voxclone.service.speech.service import SpeechRequest

    jobs, speech = _slow_jobs(queue, tmp_path)
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    worker = JobWorker(jobs, poll_s=0.05)
    worker.start()
    assert speech.started.wait(10)
    worker.stop()
    back = queue.get(job.id, None)
    assert (back.state, back.attempts, back.claimed_by) == ("queued", 0, None)


def test_retention_sweep_deletes_ended_jobs_and_their_audio(
    queue: SqlJobStore, tmp_path: Path
) -> None:
    from datetime import UTC, datetime, timedelta

    from voxclone.service.speech.service import SpeechRequest

    jobs = _speech_jobs(queue, tmp_path, _FlakySpeech(failures=0))
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    waiting, _ = jobs.submit(SpeechRequest(text="Later.", owner="alice"))
    done = jobs.run_one()
    assert done is not None and done.id == job.id and done.state == "succeeded"
    key = f"jobs/{job.id}.wav"
    assert jobs.blobs.exists(key)
    assert jobs.sweep_expired() == 0  # within the retention (7 days)
    later = datetime.now(UTC) + timedelta(days=8)
    assert jobs.sweep_expired(now=later) == 1
    assert not jobs.blobs.exists(key)
    assert [j.id for j in queue.list("alice")] == [waiting.id]  # unfinished jobs stay


def test_a_stalled_worker_that_lost_its_job_keeps_the_new_holders_audio(
    queue: SqlJobStore, tmp_path: Path
) -> None:
    from voxclone.service.speech.service import SpeechRequest

    jobs = _speech_jobs(queue, tmp_path, _FlakySpeech(failures=0))
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    stalled = queue.claim("stalled", kinds=KIND, lease_s=5)
    assert stalled is not None
    # The stalled worker's lease ran out; this worker took over and finished.
    taken = queue.claim("w", kinds=KIND, lease_s=5, now=time.time() + 10)
    assert taken is not None
    assert jobs._run(taken) is not None
    # The stalled worker wakes up on its last chunk (no progress write between
    # that could tell it), stores the same key, then finds it lost the job.
    other = SpeechJobs(
        queue=queue,
        speech=_SilentSpeech(failures=0),  # type: ignore[arg-type]
        blobs=jobs.blobs,
        events=JobEvents(),
        config=jobs.config,
        worker_id="stalled",
    )
    assert other._run(stalled) is None
    assert jobs.blobs.exists(f"jobs/{job.id}.wav")
    assert queue.get(job.id, "alice").state == "succeeded"


def test_job_audio_on_s3_is_handed_out_as_a_presigned_url(tmp_path: Path, s3_endpoint: Any) -> None:
    import urllib.request

    from voxclone.runtime.blobs_s3 import S3BlobStore
    from voxclone.service.speech.service import SpeechRequest

    store = SqlJobStore(tmp_path / "jobs.sqlite3")
    jobs = SpeechJobs(
        queue=store,
        speech=_FlakySpeech(failures=0),  # type: ignore[arg-type]
        blobs=S3BlobStore(s3_endpoint.create_bucket(), endpoint_url=s3_endpoint.url),
        events=JobEvents(),
        worker_id="w",
    )
    job, _ = jobs.submit(SpeechRequest(text="Hello.", owner="alice"))
    done = jobs.run_one()
    assert done is not None and done.state == "succeeded"
    key = done.result["blob_key"] if done.result else ""
    url = jobs.blobs.presigned_url(key, expires_s=60)
    assert url is not None and url.startswith(s3_endpoint.url)
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == b"RIFF-not-really"
    jobs.delete(job.id, "alice")
    assert not jobs.blobs.exists(key)
    store.close()
