"""``voxclone db``: the database schema, by hand.

Every voxclone process migrates its database when it opens it, so the
embedded default needs none of this. With a shared PostgreSQL database
(``VOXCLONE_DATABASE_URL``) an operator runs ``voxclone db upgrade`` once,
before rolling out a new version, so replicas never start on a schema
mid-migration; ``voxclone db current`` shows where a database stands.
``voxclone db copy --to URL`` moves this home's embedded databases (voices,
jobs, lexicon, API keys) into an empty PostgreSQL database: the step from
one machine to a cluster (docs/deploy.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voxclone.config import Settings
from voxclone.errors import VoxcloneError


def add_db_parser(sub: Any) -> None:
    db = sub.add_parser("db", help="migrate or inspect the database schema")
    dsub = db.add_subparsers(dest="db_command", required=True)
    dsub.add_parser("upgrade", help="migrate the database(s) to this version's schema")
    dsub.add_parser("current", help="show each database's schema revision")
    copy = dsub.add_parser(
        "copy",
        help="copy this home's SQLite databases into an empty database (e.g. PostgreSQL)",
    )
    copy.add_argument("--to", required=True, metavar="URL", help="target database URL")


def _targets(settings: Settings) -> list[str | Path]:
    # Embedded default: the library file and the key file; a URL holds both.
    return list(dict.fromkeys([settings.database_target, settings.key_database_target]))


def _copy(settings: Settings, target_url: str) -> int:
    if settings.database_url:
        print(
            "voxclone db copy: VOXCLONE_DATABASE_URL is set; copy reads the embedded SQLite files"
        )
        return 2
    from voxclone.runtime.db import open_database
    from voxclone.runtime.db.copy import copy_rows

    sources = [settings.db_path, settings.key_database_target]
    missing = [str(p) for p in sources if not Path(p).exists()]
    if missing:
        print(f"voxclone db copy: no database at {', '.join(missing)}")
        return 2
    opened = [open_database(p) for p in sources]
    target = open_database(target_url)
    try:
        report = copy_rows(opened, target)
    except VoxcloneError as exc:
        print(f"voxclone db copy: {exc.message}")
        return 1
    finally:
        for db in (*opened, target):
            db.close()
    for table, rows in report.rows.items():
        print(f"{table}: {rows} rows")
    print(f"copied {report.total} rows into {target.describe()}")
    return 0


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: SQLAlchemy and Alembic cost ~0.4 s (python -X importtime), and
    # every CLI command builds this parser, `voxclone say` included.
    from voxclone.runtime.db import current_revision, head_revision, open_database, upgrade

    if args.db_command == "copy":
        return _copy(settings, args.to)
    for target in _targets(settings):
        db = open_database(target)
        try:
            if args.db_command == "upgrade":
                revision = upgrade(db)
            else:
                revision = current_revision(db) or "none (empty or pre-Alembic)"
            print(f"{db.describe()}: {revision} (this version: {head_revision()})")
        finally:
            db.close()
    return 0
