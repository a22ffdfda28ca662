"""Several openers of one fresh SQLite file migrate it once (30 rounds of four
threads: about 1 s of CPU, more than a test in tests/unit may take)."""

from __future__ import annotations

import threading
from pathlib import Path

from voxclone.runtime.db import Database, current_revision, head_revision, sqlite_url, upgrade


def test_two_processes_opening_a_fresh_file_migrate_it_once(tmp_path: Path) -> None:
    # Thirty fresh files, four openers each: switching a new file to WAL raced
    # ("database is locked" at once, no busy wait) in about 1 of 10 rounds.
    for round_ in range(30):
        url = sqlite_url(tmp_path / f"fresh-{round_}.sqlite3")
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def opener(url: str = url, errors: list[BaseException] = errors, barrier=barrier) -> None:
            db = Database(url)
            try:
                barrier.wait()
                upgrade(db)
            except BaseException as exc:
                errors.append(exc)
            finally:
                db.close()

        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [], round_
    db = Database(url)
    assert current_revision(db) == head_revision()
    db.close()
