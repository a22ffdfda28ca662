"""`voxclone db copy`: a home's SQLite databases move into PostgreSQL intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import voice_record
from test_voice_store import SHAPES

from voxclone.api.cli import main
from voxclone.runtime.db import open_database
from voxclone.runtime.db.copy import copy_rows
from voxclone.runtime.inline_log import InlineVoiceLog
from voxclone.runtime.keys import KeyStore
from voxclone.runtime.voice_store import SqlVoiceStore

pytestmark = pytest.mark.postgres


def _fill_home(home: Path) -> tuple[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    with SqlVoiceStore(home / "voxclone.sqlite3", style_shapes=SHAPES) as store:
        voice = store.create(voice_record("Alice", reference_audio=b"RIFF-reference"))
        store.create(voice_record("Bob", owner="owner-b", seed=1))
        log = InlineVoiceLog(store.database)
        log.record("inline-1", "owner-a", voice.consent, expires_at=1.0)
        log.record("inline-2", "owner-a", voice.consent, expires_at=2.0)
    keys = KeyStore(home / "keys.sqlite3")
    plaintext, _ = keys.create("ops", {"tts"}, owner="owner-a")
    keys.close()
    return voice.id, plaintext


def test_copy_moves_voices_keys_and_logs_into_postgres(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    home = tmp_path / "home"
    voice_id, key = _fill_home(home)
    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    monkeypatch.delenv("VOXCLONE_DATABASE_URL", raising=False)

    assert main(["db", "copy", "--to", postgres_url]) == 0
    out = capsys.readouterr().out
    assert "voices: 2 rows" in out and "api_keys: 1 rows" in out, out

    with SqlVoiceStore(postgres_url, style_shapes=SHAPES) as copied:
        record = copied.get(voice_id, owner="owner-a")
        original = voice_record("Alice")
        assert record.name == "Alice" and record.consent == original.consent
        assert record.style is not None
        assert np.array_equal(record.style, original.style)  # arrays byte for byte
        assert record.reference_audio == b"RIFF-reference"
        assert {v.name for v in copied.list(None)} == {"Alice", "Bob"}
        log = InlineVoiceLog(copied.database)
        # Copied ids keep the sequence behind them: a new use gets a fresh id.
        log.record("inline-3", "owner-a", record.consent, expires_at=3.0)
        assert sorted(u.voice_id for u in log.uses()) == ["inline-1", "inline-2", "inline-3"]
    keys = KeyStore(postgres_url)
    try:
        assert keys.authenticate(key) is not None  # the hashed key still works
    finally:
        keys.close()

    # A second copy would merge libraries: refused, and nothing changes.
    assert main(["db", "copy", "--to", postgres_url]) == 1
    assert "already holds rows" in capsys.readouterr().out


def test_a_failed_copy_leaves_the_target_empty(tmp_path: Path, postgres_url: str) -> None:
    home = tmp_path / "home"
    _fill_home(home)
    sources = [open_database(home / "voxclone.sqlite3"), open_database(home / "keys.sqlite3")]
    # The same key file twice: its api_keys row collides on the primary key
    # after the voices were already written in the same transaction.
    sources.append(open_database(home / "keys.sqlite3"))
    target = open_database(postgres_url)
    try:
        with pytest.raises(Exception):  # noqa: B017 - the driver's IntegrityError
            copy_rows(sources, target)
        with SqlVoiceStore(target, style_shapes=SHAPES) as store:
            assert store.list(None) == []
    finally:
        for db in (*sources, target):
            db.close()
