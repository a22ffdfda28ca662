"""Durable job queue: payload, attempts, leases, backoff, idempotency keys.

Revision ID: 0002_job_queue
Revises: 0001
Create Date: 2026-12-01

Jobs become a queue any voxclone process can work from (runtime/job_store/):
a job carries what to do (``payload_json``), how often it was tried
(``attempts`` of ``max_attempts``), which worker holds it until when
(``claimed_by``, ``lease_expires_at``), when it may run again after a failure
(``run_after``), and the client's ``Idempotency-Key`` (unique per owner; NULLs
are distinct in both dialects, so jobs without a key never collide). Times are
Unix seconds: leases are compared with arithmetic, not sorted as text.
Existing jobs keep their rows; they have no payload, so the queue never picks
them up.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_job_queue"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (nullable, or a constant default) works in both dialects
    # without rebuilding the table.
    op.add_column("jobs", sa.Column("payload_json", sa.Text))
    op.add_column(
        "jobs", sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.add_column(
        "jobs", sa.Column("max_attempts", sa.Integer, nullable=False, server_default=sa.text("1"))
    )
    op.add_column("jobs", sa.Column("claimed_by", sa.Text))
    op.add_column("jobs", sa.Column("lease_expires_at", sa.Float))
    op.add_column("jobs", sa.Column("run_after", sa.Float))
    op.add_column("jobs", sa.Column("idempotency_key", sa.Text))
    op.create_index("jobs_owner_idempotency", "jobs", ["owner", "idempotency_key"], unique=True)
    op.create_index("jobs_queue", "jobs", ["state", "run_after"])
