"""Job stores (SQL on SQLite and PostgreSQL, in-memory) and JobEvents."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxclone.errors import Conflict, NotFound
from voxclone.runtime.db import head_revision
from voxclone.runtime.job_store import (
    INTERRUPTED_MESSAGE,
    InMemoryJobStore,
    JobEvents,
    JobQueue,
    JobRecord,
    JobStore,
    SqliteJobStore,
    SqlJobStore,
)
from voxclone.runtime.voice_store import SqliteVoiceStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    s: JobStore
    if request.param == "memory":
        s = InMemoryJobStore()
    elif request.param == "sqlite":
        s = SqlJobStore(tmp_path / "jobs.sqlite3")
    else:
        s = SqlJobStore(request.getfixturevalue("postgres_url"))
    yield s
    s.close()


def test_satisfies_protocol(store: JobStore) -> None:
    assert isinstance(store, JobStore)


def test_only_the_sql_store_is_the_durable_queue(tmp_path: Path) -> None:
    with SqlJobStore(tmp_path / "jobs.sqlite3") as sql:
        assert isinstance(sql, JobQueue)
    # In-process jobs only: nothing claims them with a lease.
    assert not isinstance(InMemoryJobStore(), JobQueue)


def test_lifecycle_to_success(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice", voice_id="v_abc")
    assert job.id.startswith("j_") and job.state == "queued" and job.progress == 0.0
    store.update(job.id, state="running", message="searching")
    running = store.update(job.id, progress=42.5)
    assert running.state == "running" and running.progress == 42.5
    assert running.message == "searching"
    done = store.update(job.id, state="succeeded", result={"similarity": 0.61, "version": 2})
    assert done.progress == 100.0 and done.done
    fetched = store.get(job.id, "alice")
    assert fetched == done
    assert fetched.result == {"similarity": 0.61, "version": 2}
    # Terminal states are final.
    with pytest.raises(Conflict):
        store.update(job.id, state="running")


def test_failure_carries_error(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice")
    store.update(job.id, state="running")
    failed = store.update(job.id, state="failed", error={"code": "audio_quality", "message": "x"})
    assert store.get(job.id, None).error == {"code": "audio_quality", "message": "x"}
    assert failed.state == "failed" and failed.result is None


def test_progress_is_clamped_and_fields_are_checked(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice")
    assert store.update(job.id, state="running", progress=100.0000001).progress == 100.0
    assert store.update(job.id, progress=-3).progress == 0.0
    with pytest.raises(ValueError):
        store.update(job.id, owner="mallory")
    with pytest.raises(Conflict):
        store.update(job.id, state="queued")


def test_tenancy(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice")
    with pytest.raises(NotFound):
        store.get(job.id, "bob")
    with pytest.raises(NotFound):
        store.request_cancel(job.id, "bob")
    assert store.list("bob") == []
    assert not store.is_cancel_requested(job.id)
    assert [j.id for j in store.list("alice")] == [job.id]


def test_cancel_queued_job_ends_it_at_once(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice")
    cancelled = store.request_cancel(job.id, "alice")
    assert cancelled.state == "cancelled" and store.is_cancel_requested(job.id)
    with pytest.raises(Conflict):
        store.update(job.id, state="running")  # a worker that picks it up later must stop


def test_cancel_running_job_is_cooperative(store: JobStore) -> None:
    job = store.create(kind="refine", owner="alice")
    store.update(job.id, state="running", progress=10)
    flagged = store.request_cancel(job.id, "alice")
    assert flagged.state == "running" and flagged.cancel_requested
    assert store.is_cancel_requested(job.id)
    # The worker sees the flag and ends the job itself.
    final = store.update(job.id, state="cancelled", message="cancelled by user")
    assert final.state == "cancelled" and final.progress == 10
    # Cancelling a finished job is harmless.
    assert store.request_cancel(job.id, "alice") == final


def test_list_newest_first_and_delete_for_voice(store: JobStore) -> None:
    first = store.create(kind="refine", owner="alice", voice_id="v_1")
    second = store.create(kind="refine", owner="alice", voice_id="v_2")
    third = store.create(kind="refine", owner="alice", voice_id="v_1")
    assert [j.id for j in store.list("alice")] == [third.id, second.id, first.id]
    assert [j.id for j in store.list("alice", limit=1)] == [third.id]
    assert store.delete_for_voice("v_1") == 2
    assert [j.id for j in store.list(None)] == [second.id]
    with pytest.raises(NotFound):
        store.get(first.id, None)


def test_restart_fails_interrupted_jobs(database_url: str) -> None:
    path = database_url
    with SqlJobStore(path) as before:
        running = before.create(kind="refine", owner="alice")
        before.update(running.id, state="running", progress=30)
        queued = before.create(kind="refine", owner="alice")
        done = before.create(kind="refine", owner="alice")
        before.update(done.id, state="running")
        finished = before.update(done.id, state="succeeded", result={"ok": True})
    # Simulated crash: a new process opens the same database.
    with SqlJobStore(path) as after:
        for job_id in (running.id, queued.id):
            job = after.get(job_id, "alice")
            assert job.state == "failed"
            assert job.message == INTERRUPTED_MESSAGE
            assert job.error is not None and job.error["code"] == "interrupted"
        assert after.get(running.id, None).progress == 30
        assert after.get(done.id, None) == finished
        assert after.recover_interrupted() == 0


def test_recovery_can_be_deferred(database_url: str) -> None:
    with SqlJobStore(database_url) as first:
        job = first.create(kind="refine", owner="alice")
        first.update(job.id, state="running")
        with SqlJobStore(database_url, recover_on_open=False) as second:
            assert second.get(job.id, None).state == "running"
            assert second.recover_interrupted() == 1
        assert first.get(job.id, None).state == "failed"


def test_shares_a_file_with_the_voice_store(tmp_path: Path) -> None:
    path = tmp_path / "voxclone.sqlite3"
    voices = SqliteVoiceStore(path, style_shapes={"kokoro": (510, 1, 256)})
    jobs = SqliteJobStore(path)
    job = jobs.create(kind="refine", owner="alice")
    assert voices.count() == 0 and jobs.get(job.id, None).state == "queued"
    voices.close()
    jobs.close()
    conn = sqlite3.connect(path)
    # One schema history for every table: one Alembic version row, at the head.
    versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    conn.close()
    assert versions == [(head_revision(),)]


def test_concurrent_updates_from_threads(database_url: str) -> None:
    with SqlJobStore(database_url) as s:
        jobs = [s.create(kind="refine", owner="alice") for _ in range(8)]
        errors: list[BaseException] = []

        def work(job: JobRecord) -> None:
            try:
                s.update(job.id, state="running")
                for p in range(0, 101, 25):
                    s.update(job.id, progress=p)
                s.update(job.id, state="succeeded")
            except BaseException as exc:  # re-raised below via the assert
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(j,)) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert errors == []
        assert {j.state for j in s.list("alice")} == {"succeeded"}


def test_cancel_racing_the_worker_is_never_lost(database_url: str) -> None:
    """A cancel flag set while a worker writes progress survives the worker's update."""
    with SqlJobStore(database_url) as s:
        for _ in range(5):
            job = s.create(kind="refine", owner="alice")
            s.update(job.id, state="running")
            barrier = threading.Barrier(2)

            def progress(job_id: str = job.id, b: threading.Barrier = barrier) -> None:
                b.wait()
                for p in range(10):
                    s.update(job_id, progress=p)

            worker = threading.Thread(target=progress)
            worker.start()
            barrier.wait()
            s.request_cancel(job.id, "alice")
            worker.join(timeout=30)
            assert s.is_cancel_requested(job.id)


# --------------------------------------------------------------------------
# JobEvents
# --------------------------------------------------------------------------


def test_events_reach_two_subscribers_from_a_worker_thread() -> None:
    store = InMemoryJobStore()
    events = JobEvents()
    job = store.create(kind="refine", owner="alice")

    def worker() -> None:
        events.publish(store.update(job.id, state="running"))
        for p in (25, 50, 75):
            events.publish(store.update(job.id, progress=p))
        events.publish(store.update(job.id, state="succeeded", result={"v": 2}))

    async def collect(sub_ready: asyncio.Event, subs: list) -> list[tuple[str, float]]:
        async with events.subscribe(job.id) as sub:
            subs.append(sub)
            if len(subs) == 2:
                sub_ready.set()
            return [(j.state, j.progress) async for j in sub]

    async def main() -> tuple[list, list]:
        ready = asyncio.Event()
        subs: list = []
        tasks = [asyncio.create_task(collect(ready, subs)) for _ in range(2)]
        await asyncio.wait_for(ready.wait(), 5)
        thread = threading.Thread(target=worker)
        thread.start()
        results = await asyncio.wait_for(asyncio.gather(*tasks), 5)
        thread.join()
        return results[0], results[1]

    first, second = asyncio.run(main())
    expected = [
        ("running", 0.0),
        ("running", 25.0),
        ("running", 50.0),
        ("running", 75.0),
        ("succeeded", 100.0),
    ]
    assert first == expected and second == expected
    assert events.subscriber_count(job.id) == 0  # both unsubscribed on exit


def test_events_are_per_job_and_initial_state_is_delivered() -> None:
    events = JobEvents()
    store = InMemoryJobStore()
    mine = store.create(kind="refine", owner="alice")
    other = store.create(kind="refine", owner="alice")

    async def main() -> None:
        sub = events.subscribe(mine.id, initial=mine)
        assert (await sub.next(1)).state == "queued"
        events.publish(store.update(other.id, state="running"))  # someone else's job
        with pytest.raises(TimeoutError):
            await sub.next(0.05)
        events.publish(store.update(mine.id, state="running"))  # same-loop publish
        assert (await sub.next(1)).state == "running"
        sub.close()
        events.publish(store.update(mine.id, progress=5))  # nobody listening: no error

    asyncio.run(main())


def test_slow_subscriber_keeps_newest_updates() -> None:
    events = JobEvents(max_queue=3)
    store = InMemoryJobStore()
    job = store.create(kind="refine", owner="alice")
    store.update(job.id, state="running")

    async def main() -> list[float]:
        sub = events.subscribe(job.id)
        for p in range(10):
            events.publish(store.update(job.id, progress=p * 10))
        events.publish(store.update(job.id, state="succeeded"))
        return [j.progress async for j in sub]

    assert asyncio.run(main()) == [80.0, 90.0, 100.0]


def test_publish_after_loop_closed_drops_subscriber() -> None:
    events = JobEvents()
    store = InMemoryJobStore()
    job = store.create(kind="refine", owner="alice")

    async def subscribe_only() -> None:
        events.subscribe(job.id)

    asyncio.run(subscribe_only())  # loop closes with the subscription still registered
    assert events.subscriber_count(job.id) == 1
    events.publish(store.update(job.id, state="running"))
    assert events.subscriber_count(job.id) == 0
