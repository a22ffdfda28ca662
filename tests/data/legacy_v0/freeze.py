"""Write the pre-Alembic databases of tests/data/pre_alembic with these stores, once.

    python tests/data/legacy_v0/freeze.py

The files it writes are what the last version before Alembic left on disk; the
tests open them with today's stores. The arrays repeat one random row, so the
gzipped files stay a few kilobytes (git and the checkout would otherwise hold
megabytes of random floats the test only compares by hash).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR = Path(__file__).resolve().parents[1]
OUT = DATA_DIR / "pre_alembic"
STYLE_SHAPE = (510, 1, 256)
SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": STYLE_SHAPE, "fakeprompt": None}

sys.path.insert(0, str(DATA_DIR))
from legacy_v0 import inline_log, job_store, keys, voice_store  # noqa: E402


def record(name: str, seed: int, **extra: Any) -> Any:
    rng = np.random.default_rng(seed)
    made = voice_store.VoiceRecord(
        id="",
        name=name,
        language="en-us",
        owner=str(extra.pop("owner", "owner-a")),
        created_at="",
        updated_at="",
        version=0,
        consent=voice_store.ConsentRecord("ab" * 32, "owner-a", "2025-01-02T03:04:05Z", "10.0.0.1"),
        embedding=rng.standard_normal(256).astype(np.float32),
        style=np.tile(rng.standard_normal(256).astype(np.float32), (510, 1, 1)),
        quality={"similarity": 0.5 + seed / 100},
        source="instant",
    )
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def sha(array: np.ndarray | None) -> str | None:
    return None if array is None else hashlib.sha256(array.tobytes()).hexdigest()


def voice_json(voice: Any) -> dict[str, Any]:
    """Every field of a voice as the old store returned it; arrays by hash."""
    out: dict[str, Any] = {}
    for key, value in vars(voice).items():
        if isinstance(value, np.ndarray):
            out[key] = {"sha256": sha(value)}
        elif isinstance(value, bytes):
            out[key] = {"base64": base64.b64encode(value).decode()}
        elif key == "consent":
            out[key] = dict(vars(value))
        else:
            out[key] = value
    return out


def freeze(path: Path, name: str) -> None:
    with path.open("rb") as src, gzip.GzipFile(OUT / f"{name}.gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)


def library(work: Path) -> dict[str, Any]:
    db_file, key_file = work / "voxclone.sqlite3", work / "keys.sqlite3"
    voices = voice_store.SqliteVoiceStore(db_file, style_shapes=SHAPES)
    tone = np.linspace(-3, 3, voice_store.DEFAULT_TONE_SHAPE[0]).astype(np.float32)
    written = [
        voices.create(record("Plain", 1)),
        voices.create(
            record(
                "With audio",
                2,
                reference_audio=b"RIFF-old-wav",
                tone_db=tone,
                reference_spectrum=tone * 2,
            )
        ),
        voices.create(record("Other owner", 3, owner="owner-b")),
        voices.create(
            record(
                "Prompted",
                4,
                style=None,
                prompt=b"\x00opaque\xff",
                engine="fakeprompt",
                model_id="fake-1",
                model_version="abc",
            )
        ),
    ]
    written[0] = voices.update_style(
        written[0].id, "owner-a", style=written[1].style, quality={"s": 1}, source="refined"
    )
    gone = voices.create(record("Deleted", 5))
    voices.delete(gone.id, "owner-a")  # leaves a purge owed
    voices.close()

    jobs = job_store.SqliteJobStore(db_file)
    running = jobs.create(kind="refine", owner="owner-a", voice_id=written[0].id)
    jobs.update(running.id, state="running", progress=40.0)
    done = jobs.create(kind="refine", owner="owner-b", voice_id=written[2].id)
    jobs.update(done.id, state="running")
    done = jobs.update(done.id, state="succeeded", result={"similarity": 0.8})
    jobs.close()

    log = inline_log.InlineVoiceLog(db_file)
    consent = voice_store.ConsentRecord("cd" * 32, "owner-a", "2025-02-03T04:05:06Z")
    log.record("iv_1", "owner-a", consent, expires_at=time.time() + 60)
    log.record("iv_2", "owner-a", consent, expires_at=time.time() - 60)
    log.mark_purged("iv_2")
    log.close()

    key_store = keys.KeyStore(key_file)
    plain_active, active = key_store.create("ci", {"tts", "voices:read"}, owner="team-a")
    plain_revoked, revoked = key_store.create("old", {"admin"})
    key_store.revoke(revoked.id)
    key_store.close()

    conn = sqlite3.connect(db_file)
    versions = dict(conn.execute("SELECT component, version FROM schema_version"))
    conn.close()
    freeze(db_file, "library.sqlite3")
    freeze(key_file, "keys.sqlite3")
    return {
        "schema_version": versions,
        "voices": [voice_json(v) for v in written],
        "deleted_voice": gone.id,
        "running_job": running.id,
        "succeeded_job": dict(vars(done)),
        "keys": {
            "active": {"plaintext": plain_active, "id": active.id, "owner": active.owner},
            "revoked": {"plaintext": plain_revoked, "id": revoked.id},
        },
    }


def voices_at_schema(work: Path, schema: int) -> dict[str, Any]:
    """A library as voxclone wrote it at voice schema ``schema`` (1 or 2), with one voice."""
    db_path = work / f"schema{schema}.sqlite3"
    db = voice_store.SqliteDatabase(db_path)
    voice_store.apply_migrations(db, "voices", voice_store._VOICE_MIGRATIONS[:schema])
    db.close()
    old = record("Old", 0)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO voices (id, owner, name, name_key, language, created_at, updated_at,"
        " version, source, quality_json) VALUES ('v_old', 'owner-a', 'Old', 'old', 'en-us',"
        " '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z', 1, 'instant', '{}')"
    )
    c = old.consent
    conn.execute(
        "INSERT INTO voice_consents VALUES ('v_old', ?, ?, ?, ?)",
        (c.statement_sha256, c.given_by, c.given_at, c.client_address),
    )
    for kind in ("embedding", "style"):
        array = getattr(old, kind)
        conn.execute(
            "INSERT INTO voice_arrays VALUES ('v_old', ?, ?, ?)",
            (kind, json.dumps(list(array.shape)), array.astype("<f4").tobytes()),
        )
    conn.commit()
    conn.close()
    freeze(db_path, f"voices_schema{schema}.sqlite3")
    return {"id": "v_old", "style": {"sha256": sha(old.style)}}


def audio_in_row(work: Path) -> dict[str, Any]:
    """One voice whose reference recording is kept in the row."""
    db_path = work / "audio_in_row.sqlite3"
    voices = voice_store.SqliteVoiceStore(db_path, style_shapes=SHAPES)
    old = voices.create(record("Old", 7, reference_audio=b"RIFF-legacy-v0"))
    voices.close()
    freeze(db_path, "audio_in_row.sqlite3")
    return {"id": old.id}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        expected = {
            "library": library(work),
            "voices_schema1": voices_at_schema(work, 1),
            "voices_schema2": voices_at_schema(work, 2),
            "audio_in_row": audio_in_row(work),
        }
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
