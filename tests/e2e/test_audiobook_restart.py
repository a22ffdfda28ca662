"""A book survives the death of the server process rendering it, and the
server that takes over renders only the chapters that were missing.

Server A (a real process) renders a three-chapter book chapter by chapter;
once the first chapter is stored and the second is being rendered, A is killed
with SIGKILL (no shutdown code runs). Server B, started on the same home (same
SQLite database and blob directory), takes the second chapter over once A's
lease runs out, renders the third, and assembles the book: the first chapter
is not rendered again (one attempt, the same stored audio) and the M4B read
back has the three chapter marks. tests/api/test_audiobooks.py checks the same
at service level, where "the process dies" is a store closed by hand.
"""

from __future__ import annotations

import hashlib
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import av
import httpx
import pytest
from tests.e2e.restart_settings import READY_TIMEOUT_S
from tests.e2e.restart_settings import RESTART_ENV as ENV

from voxclone.devserver import start_server, wait_ready
from voxclone.runtime.blobs import LocalBlobStore
from voxclone.runtime.job_store import SqlJobStore

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.slow]

CHAPTER = "This chapter has two sentences to speak. The second one keeps the worker busy."
BOOK = "".join(f"Chapter {n}\n{CHAPTER}\n\n" for n in (1, 2, 3))


def _book(client: httpx.Client, url: str, book_id: str) -> dict[str, Any]:
    r = client.get(f"{url}/v1/audiobooks/{book_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _chapter_audio_digest(home: Path, job_id: str) -> tuple[int, str]:
    """The chapter job's attempts and a digest of its stored audio."""
    with SqlJobStore(home / "voxclone.sqlite3", recover_on_open=False) as store:
        job = store.get(job_id, None)
    assert job.result is not None, job
    audio = LocalBlobStore(home / "blobs").get(str(job.result["blob_key"]))
    return job.attempts, hashlib.sha256(audio).hexdigest()


def test_a_book_survives_kill_9_and_only_missing_chapters_are_rendered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ExitStack() as stack, httpx.Client(timeout=60) as client:
        first = start_server(home, ENV, stack)
        wait_ready(first.url, READY_TIMEOUT_S, process=first.process)
        r = client.post(f"{first.url}/v1/audiobooks", json={"text": BOOK, "voice": "clear_female"})
        assert r.status_code == 202, r.text
        book_id = r.json()["id"]

        # Wait until chapter 1 is stored and chapter 2 is being rendered.
        deadline = time.monotonic() + 240
        while True:
            book = _book(client, first.url, book_id)
            states = [c["state"] for c in book["chapters"]]
            if states[0] == "succeeded" and states[1] == "running":
                break
            assert book["state"] in ("queued", "running"), book
            assert states[1] != "succeeded", f"chapter 2 ended before the kill: {book}"
            assert time.monotonic() < deadline, f"the book never got going: {book}"
            time.sleep(0.05)
        ids = [c["job_id"] for c in book["chapters"]]
        first.process.kill()
        first.process.wait(timeout=10)
        attempts_before, audio_before = _chapter_audio_digest(home, ids[0])

        second = start_server(home, ENV, stack)
        wait_ready(second.url, READY_TIMEOUT_S, process=second.process)
        deadline = time.monotonic() + 300
        while True:
            book = _book(client, second.url, book_id)
            if book["state"] in ("succeeded", "failed"):
                break
            assert time.monotonic() < deadline, f"book not finished on B: {book}"
            time.sleep(0.3)
        assert book["state"] == "succeeded", book

        # Chapter 1 was not rendered again; chapter 2 was taken over after
        # A's lease ran out (its second attempt); chapter 3 was B's alone.
        assert (attempts_before, audio_before) == _chapter_audio_digest(home, ids[0])
        assert attempts_before == 1
        with SqlJobStore(home / "voxclone.sqlite3", recover_on_open=False) as store:
            assert store.get(ids[1], None).attempts == 2
            assert store.get(ids[2], None).attempts == 1

        audio = client.get(f"{second.url}/v1/audiobooks/{book_id}/audio")
        assert audio.status_code == 200, audio.text
        path = tmp_path / "book.m4b"
        path.write_bytes(audio.content)
        with av.open(str(path)) as f:
            titles = [m["metadata"]["title"] for m in f.chapters()]
        assert titles == ["Chapter 1", "Chapter 2", "Chapter 3"]
