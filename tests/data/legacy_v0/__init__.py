"""The stores exactly as voxclone shipped them before the Alembic migrations.

Copied unchanged from ``src/voxclone/runtime`` at the last commit that used
hand-kept SQL migrations (a ``schema_version`` table), except that imports of
each other point here. Tests use them to write real old-format databases and
check that the new database layer upgrades them without losing a row
(tests/unit/test_db_migrations.py). Never edit them to match new code.
"""
