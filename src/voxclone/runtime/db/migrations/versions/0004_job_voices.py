"""Jobs record every voice they speak with; claims remember when each started.

Revision ID: 0004_job_voices (after 0003_lexicon)
Revises: 0003_lexicon
Create Date: 2026-12-08

``job_voices`` links a job to each stored voice it speaks with (its main voice,
the parts of a blend expression, every SSML ``<voice name>``): deleting a voice
finds its jobs there and revokes their audio (service/job_voices.py). No
foreign key to ``voices``: a link to a voice that is gone is exactly what the
revocation sweep looks for. ``jobs.started_at`` (Unix seconds of the latest
claim) lets the queue serve the tenant served longest ago first
(runtime/job_store/fairness.py).

Existing speech jobs are linked from their payload: ``v_…`` ids as written,
and names looked up among the owner's voices (case-folded, as the voice store
matches them). A name that was a built-in voice and also the name of one of
the owner's clones is linked to the clone: over-inclusive, so deleting that
clone also revokes the job's audio, never the reverse.
"""

from __future__ import annotations

import json
import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004_job_voices"
down_revision = "0003_lexicon"
branch_labels = None
depends_on = None

# What the SSML parser accepts as a voice switch, close enough for a backfill
# (over-inclusive at worst, see above).
_VOICE_TAG = re.compile(r"<\s*voice\b[^>]*?\bname\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.I)
_STORED_ID = re.compile(r"^v_[A-Za-z0-9_-]{1,64}$")


def upgrade() -> None:
    op.add_column("jobs", sa.Column("started_at", sa.Float))
    op.create_index("jobs_owner_started", "jobs", ["owner", "started_at"])
    op.create_table(
        "job_voices",
        sa.Column("job_id", sa.Text, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("voice_id", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("job_id", "voice_id"),
    )
    op.create_index("job_voices_voice", "job_voices", ["voice_id"])
    _link_existing_speech_jobs(op.get_bind())


def _expressions(payload: dict[str, Any]) -> list[str]:
    found = [payload["voice"]] if isinstance(payload.get("voice"), str) else []
    text = payload.get("text")
    if isinstance(text, str) and "<" in text:
        found += [a or b for a, b in _VOICE_TAG.findall(text)]
    return found


def _names(expression: str) -> list[str]:
    # "a*0.7 + b*0.3": each term's name; a plain voice is one term.
    return [term.split("*", 1)[0].strip() for term in expression.split("+") if term.strip()]


def _link_existing_speech_jobs(conn: sa.Connection) -> None:
    rows = conn.execute(
        sa.text(
            "SELECT id, owner, payload_json FROM jobs "
            "WHERE kind = 'speech' AND payload_json IS NOT NULL"
        )
    ).all()
    for job_id, owner, payload_json in rows:
        try:
            payload = json.loads(payload_json)
        except ValueError:
            continue
        if not isinstance(payload, dict):
            continue
        ids: list[str] = []
        for name in (n for e in _expressions(payload) for n in _names(e)):
            if _STORED_ID.match(name):
                voice_id: str | None = name
            else:
                voice_id = conn.execute(
                    sa.text("SELECT id FROM voices WHERE owner = :owner AND name_key = :key"),
                    {"owner": owner, "key": name.casefold()},
                ).scalar()
            if voice_id is not None and voice_id not in ids:
                ids.append(voice_id)
        if not ids:
            continue
        conn.execute(
            sa.text("UPDATE jobs SET voice_id = :voice WHERE id = :id AND voice_id IS NULL"),
            {"voice": ids[0], "id": job_id},
        )
        for voice_id in ids:
            conn.execute(
                sa.text("INSERT INTO job_voices (job_id, voice_id) VALUES (:job, :voice)"),
                {"job": job_id, "voice": voice_id},
            )


def downgrade() -> None:
    op.drop_index("job_voices_voice", table_name="job_voices")
    op.drop_table("job_voices")
    op.drop_index("jobs_owner_started", table_name="jobs")
    op.drop_column("jobs", "started_at")
