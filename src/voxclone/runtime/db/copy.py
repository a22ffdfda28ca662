"""Move a database's rows to another database of the same schema (SQLite → PostgreSQL).

The path from one machine to a cluster: the embedded default keeps voices, jobs
and the lexicon in ``voxclone.sqlite3`` and API keys in ``keys.sqlite3``; a
cluster keeps all of them in one PostgreSQL database. Both sides are migrated
to this version's schema first (one schema history, so the tables match column
for column), then every table is copied in foreign-key order inside **one**
transaction on the target: a copy that fails half-way leaves the target as it
was. A target that already holds rows is refused rather than merged — merging
two voice libraries is a decision, not a side effect.

Blobs (reference audio kept in the local blob store, job audio) are files, not
rows: docs/deploy.md says how to move them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Table, func, insert, inspect, select, text

from voxclone.errors import Conflict
from voxclone.runtime.db.engine import Database
from voxclone.runtime.db.migrate import upgrade
from voxclone.runtime.db.tables import metadata

# Rows per INSERT: bounded memory for large voice libraries (a voice row with its
# arrays is ~0.5 MB), few round trips for small ones.
BATCH_ROWS = 200


@dataclass
class CopyReport:
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows copied

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _tables() -> list[Table]:
    return list(metadata.sorted_tables)  # parents before children


def _occupied(conn: Connection, tables: Sequence[Table]) -> list[str]:
    return [t.name for t in tables if conn.execute(select(func.count()).select_from(t)).scalar()]


def _reset_sequences(conn: Connection, tables: Sequence[Table]) -> None:
    # Rows keep their ids; PostgreSQL's sequences must then start after them or
    # the next insert would collide with a copied id.
    for table in tables:
        for column in table.primary_key.columns:
            if column.autoincrement is True:
                conn.execute(
                    text(
                        "SELECT setval(pg_get_serial_sequence(:table, :column), "
                        f"COALESCE((SELECT MAX({column.name}) FROM {table.name}), 0) + 1, false)"
                    ),
                    {"table": table.name, "column": column.name},
                )


def copy_rows(sources: Sequence[Database], target: Database) -> CopyReport:
    """Copy every row of ``sources`` into the empty ``target`` (same schema)."""
    for db in (*sources, target):
        upgrade(db)
    tables = _tables()
    report = CopyReport()
    with target.write() as out:
        busy = _occupied(out, tables)
        if busy:
            raise Conflict(
                f"the target database already holds rows (tables: {', '.join(busy)}); "
                "copy into an empty database"
            )
        for table in tables:
            copied = 0
            for source in sources:
                with source.read() as conn:
                    if table.name not in inspect(conn).get_table_names():
                        continue
                    result = conn.execute(select(table)).mappings()
                    while batch := result.fetchmany(BATCH_ROWS):
                        out.execute(insert(table), [dict(row) for row in batch])
                        copied += len(batch)
            if copied:
                report.rows[table.name] = copied
        if not target.is_sqlite:
            _reset_sequences(out, tables)
    return report
