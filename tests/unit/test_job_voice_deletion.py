"""Deleting a voice revokes its speech jobs: finished, running and finishing ones.

The probe (issue 37): a finished job's audio still downloaded after its voice was
deleted (200, 76 KB), and a job running at delete time finished and served
2.3 MB. Here the voice library, the job queue (one shared database, SQLite and
PostgreSQL), the voice catalog, the SSML parser, the voice service's delete and
the blob store are real; the renderer stands in for the engine so that each
interleaving (delete before, during and after the render stores its audio) can
be produced exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import STYLE_SHAPE, catalog_engine, silent_builtins, voice_record

from voxclone.errors import Cancelled
from voxclone.runtime.blobs import BlobStoreUnavailable, LocalBlobStore
from voxclone.runtime.db import open_database
from voxclone.runtime.job_store import JobEvents, JobRecord, SqlJobStore
from voxclone.runtime.voice_store import SqlVoiceStore, VoiceRecord
from voxclone.service.catalog import VoiceCatalog
from voxclone.service.job_voices import VOICE_DELETED
from voxclone.service.jobs import SpeechJobConfig, SpeechJobs, blob_key
from voxclone.service.speech.service import SpeechRequest
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores

AUDIO = b"RIFF" + b"\x01" * 76_000  # the probe's finished job: 76 KB


class _GatedRenderer:
    """The router's surface a speech job uses, with the real catalog; the
    render itself waits at a gate (like a long text on the engine) until the
    test opens it or the job is told to stop."""

    def __init__(self, catalog: VoiceCatalog) -> None:
        self.catalog = catalog
        self.started = threading.Event()
        self.gate = threading.Event()
        self.stopped = threading.Event()

    def estimate(self, req: SpeechRequest) -> Any:
        self.catalog.resolve(req.voice or "clear_female", req.owner)  # 404 for a missing voice
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
        self.started.set()
        while not self.gate.wait(0.01):
            if cancelled():
                self.stopped.set()
                raise Cancelled("request cancelled")
        progress(len(req.text))
        out.write(AUDIO)
        return "audio/wav"


class World(SimpleNamespace):
    store: SqlVoiceStore
    queue: SqlJobStore
    jobs: SpeechJobs
    voices: VoiceService
    renderer: _GatedRenderer
    alice: VoiceRecord


def _jobs(queue: SqlJobStore, renderer: _GatedRenderer, blobs: Any, lease_s: float) -> SpeechJobs:
    return SpeechJobs(
        queue=queue,
        speech=renderer,  # type: ignore[arg-type]
        blobs=blobs,
        events=JobEvents(),
        # A 30 s lease renews every 2 s: the render ends long before its
        # heartbeat could notice anything (the write-then-verify interleaving).
        config=SpeechJobConfig(lease_s=lease_s, max_attempts=1),
        worker_id="w",
    )


@pytest.fixture()
def world(database_url: str, tmp_path: Path) -> Iterator[World]:
    db = open_database(database_url)
    store = SqlVoiceStore(db, style_shapes={"kokoro": STYLE_SHAPE})
    queue = SqlJobStore(db, recover_on_open=False)
    builtins = silent_builtins("clear_female", "clear_male")
    renderer = _GatedRenderer(VoiceCatalog({"kokoro": catalog_engine(builtins)}, store))
    jobs = _jobs(queue, renderer, LocalBlobStore(tmp_path / "blobs"), lease_s=0.3)
    voices = VoiceService(  # deleting never clones: no cloning kit
        VoiceStores(voices=store, jobs=queue, job_events=JobEvents()),
        CloningKit(),
        VoiceHooks(on_voice_changed=lambda voice_id: None, revoke_jobs=jobs.revoke_voices),
    )
    alice = store.create(voice_record("Alice", "alice"))
    try:
        yield World(
            store=store, queue=queue, jobs=jobs, voices=voices, renderer=renderer, alice=alice
        )
    finally:
        voices.close()
        db.close()


def _submit(world: World, voice: str | None, text: str = "Hello there.") -> JobRecord:
    job, created = world.jobs.submit(SpeechRequest(text=text, voice=voice, owner="alice"))
    assert created
    return job


def _run_in_thread(jobs: SpeechJobs) -> tuple[threading.Thread, list[JobRecord | None]]:
    out: list[JobRecord | None] = []
    thread = threading.Thread(target=lambda: out.append(jobs.run_one()))
    thread.start()
    return thread, out


def _assert_revoked(world: World, job: JobRecord) -> None:
    now = world.queue.get(job.id, "alice")
    assert now.state == "failed", now
    assert now.error is not None and now.error["code"] == VOICE_DELETED
    assert now.result is None  # the purge was paid: nothing owed, no audio key
    assert not world.jobs.blobs.exists(blob_key(job))
    assert not world.jobs.serves(blob_key(job))


def test_a_finished_jobs_audio_is_deleted_with_its_voice(world: World) -> None:
    job = _submit(world, world.alice.id)
    world.renderer.gate.set()
    done = world.jobs.run_one()
    assert done is not None and done.state == "succeeded"
    assert world.jobs.blobs.get(blob_key(job)) == AUDIO
    assert world.jobs.serves(blob_key(job))
    assert world.queue.voices_of(job.id) == {world.alice.id}

    world.voices.delete(world.alice.id, "alice")

    _assert_revoked(world, job)


def test_a_job_running_at_delete_time_stops_and_stores_nothing(world: World) -> None:
    job = _submit(world, "Alice", text="A long text. " * 160)  # by name: 2,080 characters
    thread, out = _run_in_thread(world.jobs)
    assert world.renderer.started.wait(10)

    world.voices.delete(world.alice.id, "alice")

    # The heartbeat (every 0.1 s here) finds the lease gone and the render stops.
    stopped = world.renderer.stopped.wait(5)
    world.renderer.gate.set()  # (on old code: let it finish, then the checks fail)
    thread.join(10)
    assert stopped and out == [None]
    _assert_revoked(world, job)


def test_a_render_that_finishes_after_the_delete_keeps_no_audio(
    world: World, tmp_path: Path
) -> None:
    # A 30 s lease: the heartbeat sleeps 2 s, so the render ends and stores its
    # audio before anything told the worker about the delete.
    jobs = _jobs(world.queue, world.renderer, world.jobs.blobs, lease_s=30)
    job = _submit(world, world.alice.id)
    thread, out = _run_in_thread(jobs)
    assert world.renderer.started.wait(10)

    world.voices.delete(world.alice.id, "alice")
    world.renderer.gate.set()
    thread.join(10)

    assert out == [None]  # its job was revoked under it: it wrote no result
    _assert_revoked(world, job)


def test_a_voice_deleted_behind_the_jobs_back_is_caught_after_storing(world: World) -> None:
    # The command line (voxclone voices delete) deletes through the store alone:
    # nobody revokes the job, so the worker's check after storing must.
    jobs = _jobs(world.queue, world.renderer, world.jobs.blobs, lease_s=30)
    job = _submit(world, world.alice.id)
    thread, out = _run_in_thread(jobs)
    assert world.renderer.started.wait(10)

    world.store.delete_with_derived(world.alice.id, "alice")
    world.renderer.gate.set()
    thread.join(10)

    assert out[0] is not None and out[0].state == "failed"
    _assert_revoked(world, job)


class _ResolvingRenderer(_GatedRenderer):
    """Resolves its voice once the gate opens, as each chunk of a real render does."""

    def synthesize_into(self, req: SpeechRequest, out: Any, **kwargs: Any) -> str:
        self.started.set()
        self.gate.wait(10)
        self.catalog.resolve(req.voice or "clear_female", req.owner)
        return super().synthesize_into(req, out, **kwargs)


def test_a_render_that_finds_its_voice_gone_says_voice_deleted(world: World) -> None:
    # The voice's row goes first and its jobs are revoked after: a render that
    # resolves the voice in between fails with a 404 before any revocation.
    renderer = _ResolvingRenderer(world.renderer.catalog)
    jobs = _jobs(world.queue, renderer, world.jobs.blobs, lease_s=30)
    job = _submit(world, "Alice")
    thread, out = _run_in_thread(jobs)
    assert renderer.started.wait(10)

    world.store.delete_with_derived(world.alice.id, "alice")
    renderer.gate.set()
    thread.join(10)

    assert out[0] is not None and out[0].state == "failed"
    assert out[0].error is not None and out[0].error["code"] == VOICE_DELETED  # was not_found
    world.jobs.revoke_voices([world.alice.id])  # the delete's revocation, late
    _assert_revoked(world, job)


def test_the_worker_sweep_revokes_jobs_whose_voice_went_another_way(world: World) -> None:
    job = _submit(world, world.alice.id)
    world.renderer.gate.set()
    assert world.jobs.run_one() is not None
    world.store.delete_with_derived(world.alice.id, "alice")
    # Before the sweep, the signed link already serves nothing.
    assert world.jobs.blobs.exists(blob_key(job)) and not world.jobs.serves(blob_key(job))

    assert world.jobs.revoke_voices(None) == 1

    _assert_revoked(world, job)
    assert world.jobs.revoke_voices(None) == 0  # settled: nothing owed twice


def test_every_voice_of_an_ssml_or_blend_job_is_recorded(world: World) -> None:
    bob = world.store.create(voice_record("Bob", "alice", seed=1))
    ssml = _submit(
        world,
        "clear_male",
        text='<speak>Hi. <voice name="bob">Hello.</voice> <voice name="clear_female">Yo.</voice>'
        "</speak>",
    )
    blend = _submit(world, "Alice(2) + clear_female(1)")
    builtin = _submit(world, "clear_female")
    assert world.queue.voices_of(ssml.id) == {bob.id}
    assert world.queue.voices_of(blend.id) == {world.alice.id}
    assert world.queue.voices_of(builtin.id) == set()
    assert world.queue.get(blend.id, "alice").voice_id == world.alice.id

    world.voices.delete(bob.id, "alice")

    revoked = world.queue.get(ssml.id, "alice")
    assert revoked.state == "failed" and (revoked.error or {})["code"] == VOICE_DELETED
    assert world.queue.get(blend.id, "alice").state == "queued"
    world.voices.delete(world.alice.id, "alice")
    assert world.queue.get(blend.id, "alice").state == "failed"
    assert world.queue.get(builtin.id, "alice").state == "queued"


class _FlakyBlobs(LocalBlobStore):
    """A blob store that cannot be reached for its first ``failures`` deletes."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures

    def delete_prefix(self, prefix: str) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise BlobStoreUnavailable("blob store unreachable")
        return super().delete_prefix(prefix)


def test_a_purge_the_blob_store_refused_stays_owed_until_paid(world: World, tmp_path: Path) -> None:
    blobs = _FlakyBlobs(tmp_path / "flaky", failures=0)
    jobs = _jobs(world.queue, world.renderer, blobs, lease_s=0.3)
    job, _ = jobs.submit(SpeechRequest(text="Hello.", voice=world.alice.id, owner="alice"))
    world.renderer.gate.set()
    assert jobs.run_one() is not None
    blobs.failures = 1
    world.store.delete_with_derived(world.alice.id, "alice")

    assert jobs.revoke_voices([world.alice.id]) == 0  # refused: still owed
    owed = world.queue.get(job.id, "alice")
    assert owed.state == "failed" and owed.result == {"purge_pending": True}
    assert blobs.exists(blob_key(job)) and not jobs.serves(blob_key(job))

    assert jobs.revoke_voices(None) == 1  # the worker's next sweep
    assert not blobs.exists(blob_key(job))
    assert world.queue.get(job.id, "alice").result is None


def test_a_revoked_job_can_still_be_deleted_and_its_links_go_with_it(world: World) -> None:
    job = _submit(world, world.alice.id)
    world.voices.delete(world.alice.id, "alice")
    assert world.queue.get(job.id, "alice").state == "failed"
    time.sleep(0.01)
    world.jobs.delete(job.id, "alice")
    assert world.queue.voices_of(job.id) == set()


def test_other_durable_jobs_of_the_voice_go_with_it_as_before(world: World) -> None:
    # A queue job of another kind (a durable report job) is still deleted with
    # its voice; only speech jobs are kept, revoked, for their owner to see.
    other, _ = world.queue.enqueue(
        kind="report", owner="alice", payload={"voice": world.alice.id}, voice_id=world.alice.id
    )
    speech = _submit(world, world.alice.id)
    world.voices.delete(world.alice.id, "alice")
    assert [j.id for j in world.queue.list("alice")] == [speech.id]
    assert world.queue.get(speech.id, "alice").state == "failed"
    assert other.id not in {j.id for j in world.queue.list(None)}
