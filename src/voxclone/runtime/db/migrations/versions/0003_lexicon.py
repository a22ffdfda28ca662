"""Pronunciation lexicon: one row per owner, language and word.

Revision ID: 0003_lexicon (after 0002_job_queue)
Revises: 0002_job_queue
Create Date: 2026-12-01

``word_key`` is the case-folded word (what requests match on); ``word`` keeps
the spelling the owner wrote. Exactly one of ``ipa`` and ``respelling`` is set
(the repository checks it; a CHECK constraint would differ per dialect).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_lexicon"
down_revision = "0002_job_queue"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lexicon_entries",
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("language", sa.Text, nullable=False),
        sa.Column("word_key", sa.Text, nullable=False),
        sa.Column("word", sa.Text, nullable=False),
        sa.Column("ipa", sa.Text),
        sa.Column("respelling", sa.Text),
        sa.Column("updated_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("owner", "language", "word_key"),
    )


def downgrade() -> None:
    op.drop_table("lexicon_entries")
