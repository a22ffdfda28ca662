"""``voxclone db``: the database schema, by hand.

Every voxclone process migrates its database when it opens it, so the
embedded default needs none of this. With a shared PostgreSQL database
(``VOXCLONE_DATABASE_URL``) an operator runs ``voxclone db upgrade`` once,
before rolling out a new version, so replicas never start on a schema
mid-migration; ``voxclone db current`` shows where a database stands.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from voxclone.config import Settings
from voxclone.runtime.db import current_revision, head_revision, open_database, upgrade


def add_db_parser(sub: Any) -> None:
    db = sub.add_parser("db", help="migrate or inspect the database schema")
    dsub = db.add_subparsers(dest="db_command", required=True)
    dsub.add_parser("upgrade", help="migrate the database(s) to this version's schema")
    dsub.add_parser("current", help="show each database's schema revision")


def _targets(settings: Settings) -> list[str | Path]:
    # Embedded default: the library file and the key file; a URL holds both.
    return list(dict.fromkeys([settings.database_target, settings.key_database_target]))


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
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
