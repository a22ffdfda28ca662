"""Outages of storage answer 503/507 and flip readiness, never 500 (issue 45).

Real components: a PostgreSQL cluster of the test's own, stopped and started
again by it (``pg_ctl stop -m fast``, as a restart does); a small tmpfs home
filled by the test until writes fail with ENOSPC. Each test builds a runtime
of its own whose stores are on the failing component.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.api.job_polling import wait_for_job

from voxclone.api.app import create_app
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.runtime.keys import SCOPES, KeyStore

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
ENROLL_FORM = {
    "name": "Ada",
    "consent": "true",
    "consent_statement": "I agree that my voice is cloned.",
}
WORD = {"word": "voxclone", "language": "en-us", "respelling": "vox clone"}


def _settings(runtime: Runtime, home: Path, **fields: Any) -> Settings:
    """Settings on ``home`` whose models are the session runtime's (never
    assembled again, never on the small disk)."""
    return Settings(
        home=home, models_dir=runtime.settings.models_dir, allowed_hosts=["testserver"], **fields
    )


@contextlib.contextmanager
def _runtime_on(settings: Settings) -> Iterator[Runtime]:
    """A runtime of its own on ``settings``: its stores on the failing component."""
    built = build_runtime(settings, warmup=False, warm_cloning=False)
    try:
        yield built
    finally:
        built.close()


def _client(settings: Settings, runtime: Runtime) -> TestClient:
    # raise_server_exceptions=False: whatever escapes reaches the test as the 500 a
    # client would get, not as an exception.
    return TestClient(create_app(settings, runtime=runtime), raise_server_exceptions=False)


def _assert_outage(response: Any, status: int, code: str, what: str) -> None:
    assert response.status_code == status, (what, response.status_code, response.text)
    assert response.json()["error"]["code"] == code, (what, response.text)
    if status == 503:
        assert int(response.headers["Retry-After"]) >= 1, what


# =============================================================================
# PostgreSQL stopped and started again
# =============================================================================


@pytest.mark.postgres
def test_a_postgres_restart_answers_503_everywhere_and_recovers_with_nothing_lost(
    runtime: Runtime, private_postgres: Any, store_style_voice: Any, tmp_path: Path
) -> None:
    pg = private_postgres
    url = pg.url(pg.create_database())
    on_pg = _settings(runtime, tmp_path / "rt", database_url=url)
    # The key-less app keeps its keys in its own SQLite file, so during the outage
    # each route reaches its own database call; the keyed app authenticates
    # against PostgreSQL first (the key store shares the database URL).
    keyless = _settings(runtime, tmp_path / "app")
    with _runtime_on(on_pg) as rt:
        voice = store_style_voice(rt, "Stored", "local")
        with KeyStore(url) as keys:
            key, _ = keys.create("ops", SCOPES, owner="tenant")
        auth = {"Authorization": f"Bearer {key}"}
        with _client(keyless, rt) as plain, _client(on_pg, rt) as keyed:
            assert plain.post("/v1/lexicon", json=WORD).status_code == 201
            job = plain.post("/v1/jobs/speech", json={"text": "Before.", "voice": voice.id})
            assert job.status_code == 202, job.text
            assert wait_for_job(plain, job.json()["id"])["state"] == "succeeded"
            assert plain.get("/readyz").status_code == 200
            assert keyed.get("/v1/voices", headers=auth).status_code == 200

            pg.stop("fast")
            try:
                requests = {
                    "readyz": lambda: plain.get("/readyz"),
                    "voices list": lambda: plain.get("/v1/voices"),
                    "voice get": lambda: plain.get(f"/v1/voices/{voice.id}"),
                    "voice rename": lambda: plain.patch(
                        f"/v1/voices/{voice.id}", json={"name": "Renamed"}
                    ),
                    "voice delete": lambda: plain.delete(f"/v1/voices/{voice.id}"),
                    "tts stored voice": lambda: plain.post(
                        "/v1/tts", json={"text": "Hello.", "voice": voice.id, "format": "wav"}
                    ),
                    "openai speech stored voice": lambda: plain.post(
                        "/v1/audio/speech",
                        json={"model": "tts-1", "input": "Hello.", "voice": voice.id},
                    ),
                    "openai voices": lambda: plain.get("/v1/audio/voices"),
                    "job submit": lambda: plain.post("/v1/jobs/speech", json={"text": "During."}),
                    "job get": lambda: plain.get(f"/v1/jobs/{job.json()['id']}"),
                    "lexicon list": lambda: plain.get("/v1/lexicon"),
                    "lexicon add": lambda: plain.post(
                        "/v1/lexicon", json={**WORD, "word": "outage"}
                    ),
                    "lexicon delete": lambda: plain.delete("/v1/lexicon/en-us/voxclone"),
                    "keyed voices list": lambda: keyed.get("/v1/voices", headers=auth),
                    "keyed lexicon add": lambda: keyed.post("/v1/lexicon", json=WORD, headers=auth),
                }
                for what, send in requests.items():
                    answer = send()
                    code = "not_ready" if what == "readyz" else "database_unavailable"
                    _assert_outage(answer, 503, code, what)
                ready = plain.get("/readyz").json()
                assert ready["error"]["field"] == "database"
                assert ready["detail"]["database"] == "unreachable"
            finally:
                pg.start()

            # Back: the same requests work and nothing was lost.
            listed = plain.get("/v1/voices")
            assert listed.status_code == 200, listed.text
            assert [v["id"] for v in listed.json()["voices"]] == [voice.id]
            assert plain.get("/v1/lexicon").json()["entries"][0]["word"] == "voxclone"
            spoken = plain.post(
                "/v1/tts", json={"text": "Hello again.", "voice": voice.id, "format": "wav"}
            )
            assert spoken.status_code == 200, spoken.text
            again = plain.post("/v1/jobs/speech", json={"text": "After.", "voice": voice.id})
            assert again.status_code == 202, again.text
            assert wait_for_job(plain, again.json()["id"])["state"] == "succeeded"
            assert keyed.get("/v1/voices", headers=auth).status_code == 200
            assert plain.get("/readyz").json()["detail"]["database"] == "ok"


# =============================================================================
# The disk under the home fills up
# =============================================================================


@contextlib.contextmanager
def _small_tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    where.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(directory: Path) -> Path:
    """Write a file until the file system refuses another byte (ENOSPC)."""
    filler = directory / "filler"
    with open(filler, "wb") as out:
        chunk = b"\0" * (1 << 16)
        try:
            while True:
                out.write(chunk)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        # Whatever the last partial chunk left: down to the last block.
        with contextlib.suppress(OSError):
            while True:
                os.write(out.fileno(), b"\0" * 512)
    return filler


def test_a_full_disk_answers_507_on_writes_and_not_ready_and_recovers(
    runtime: Runtime, store_style_voice: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with _small_tmpfs(home, 16) as home:
        # An upload of at most 2 MB: ready needs 2 + 4 MB free (routes_admin).
        settings = _settings(runtime, home, max_upload_mb=2.0)
        with _runtime_on(settings) as rt, _client(settings, rt) as client:
            voice = store_style_voice(rt, "Kept", "local")
            assert client.post("/v1/lexicon", json=WORD).status_code == 201
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["detail"]["storage"] == "ok"

            filler = _fill(home)
            try:
                writes = {
                    "enroll": lambda: client.post(
                        "/v1/voices",
                        data=ENROLL_FORM,
                        files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
                    ),
                    "lexicon add": lambda: client.post(
                        "/v1/lexicon", json={**WORD, "word": "diskfull"}
                    ),
                    "job submit": lambda: client.post(
                        "/v1/jobs/speech", json={"text": "On a full disk.", "voice": voice.id}
                    ),
                    "voice delete": lambda: client.delete(f"/v1/voices/{voice.id}"),
                }
                for what, send in writes.items():
                    _assert_outage(send(), 507, "insufficient_storage", what)
                not_ready = client.get("/readyz")
                _assert_outage(not_ready, 503, "not_ready", "readyz")
                assert not_ready.json()["error"]["field"] == "storage"
                assert not_ready.json()["detail"]["storage"] == "full"
                # Reads still serve: the stored voice speaks.
                spoken = client.post(
                    "/v1/tts", json={"text": "Still here.", "voice": voice.id, "format": "wav"}
                )
                assert spoken.status_code == 200, spoken.text
            finally:
                filler.unlink()

            # Space freed: nothing was lost, nothing half-written, and the writes work.
            assert client.get("/readyz").status_code == 200
            listed = client.get("/v1/voices").json()["voices"]
            assert [v["id"] for v in listed] == [voice.id]
            assert [e["word"] for e in client.get("/v1/lexicon").json()["entries"]] == ["voxclone"]
            assert client.post("/v1/lexicon", json={**WORD, "word": "freed"}).status_code == 201
            job = client.post("/v1/jobs/speech", json={"text": "Freed.", "voice": voice.id})
            assert job.status_code == 202, job.text
            assert wait_for_job(client, job.json()["id"])["state"] == "succeeded"
            assert client.delete(f"/v1/voices/{voice.id}").status_code == 200
            assert client.get("/v1/voices").json()["voices"] == []
