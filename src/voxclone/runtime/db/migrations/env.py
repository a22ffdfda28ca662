"""Alembic environment: migrations run on the connection voxclone passes in.

Use ``voxclone db upgrade`` (or just start voxclone) rather than the
``alembic`` command: the connection arrives already inside the write-locked
transaction that :func:`voxclone.runtime.db.migrate.upgrade` opened.
"""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise SystemExit("run migrations with `voxclone db upgrade`, which supplies the connection")

context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
