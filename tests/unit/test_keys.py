from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxclone.errors import InvalidInput, NotFound
from voxclone.runtime.keys import KeyStore


@pytest.fixture()
def store(database_url: str) -> Iterator[KeyStore]:
    keys = KeyStore(database_url)
    yield keys
    keys.close()


def test_create_returns_plaintext_once_and_authenticates(store: KeyStore) -> None:
    plaintext, record = store.create("ci bot", {"tts"})
    assert re.fullmatch(r"vox_[A-Za-z0-9_-]{32}", plaintext)
    assert record.prefix == plaintext[:8]
    assert record.owner == record.id  # each key is its own tenant by default
    assert record.active and record.scopes == {"tts"}
    found = store.authenticate(plaintext)
    assert found == record
    assert store.authenticate(plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")) is None
    assert store.authenticate("") is None
    assert store.authenticate("not-a-key") is None


def test_plaintext_is_never_stored(tmp_path: Path) -> None:
    db = tmp_path / "keys.sqlite3"
    store = KeyStore(db)
    keys = [store.create(f"k{i}", {"tts"})[0] for i in range(3)]
    store.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("keys.sqlite3"))
    assert blob  # the database (and any WAL) really has content
    for key in keys:
        assert key.encode() not in blob
        assert key[4:].encode() not in blob  # nor the secret part alone
    # and a fresh store over the same file still authenticates the keys
    assert KeyStore(db).authenticate(keys[0]) is not None


def test_revoked_key_fails(store: KeyStore) -> None:
    plaintext, record = store.create("laptop", {"tts", "voices:read"})
    other, _ = store.create("server", {"tts"})
    assert store.count_active() == 2
    revoked = store.revoke(record.id)
    assert revoked.revoked_at is not None and not revoked.active
    assert store.authenticate(plaintext) is None
    assert store.authenticate(other) is not None
    assert store.count_active() == 1
    assert store.revoke(record.id).revoked_at == revoked.revoked_at  # idempotent
    assert record.id not in {r.id for r in store.list(include_revoked=False)}
    assert record.id in {r.id for r in store.list()}
    with pytest.raises(NotFound):
        store.revoke("key_missing")


def test_scopes_and_admin_implies_all(store: KeyStore) -> None:
    _, reader = store.create("reader", {"voices:read"})
    _, admin = store.create("root", {"admin"}, owner="acme")
    assert reader.allows("voices:read")
    assert not reader.allows("voices:write") and not reader.allows("tts")
    assert all(admin.allows(s) for s in ("tts", "voices:read", "voices:write", "admin"))
    assert admin.owner == "acme"
    with pytest.raises(InvalidInput) as excinfo:
        store.create("bad", {"tts", "root"})
    assert excinfo.value.field == "scopes"
    with pytest.raises(InvalidInput):
        store.create("empty", set())
    with pytest.raises(InvalidInput):
        store.create("   ", {"tts"})


def test_keys_are_unique_and_store_is_thread_safe(store: KeyStore) -> None:
    created: list[str] = []
    lock = threading.Lock()

    def make() -> None:
        for _ in range(5):
            key, _ = store.create("t", {"tts"})
            assert store.authenticate(key) is not None
            with lock:
                created.append(key)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(set(created)) == 20 and store.count_active() == 20
