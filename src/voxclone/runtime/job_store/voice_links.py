"""The voices a job speaks with (table ``job_voices``, migration 0004_job_voices).

A speech job may speak with several stored voices: its main voice, the parts of
a blend expression (``v_a*0.7+v_b*0.3``) and every SSML ``<voice name>``. One
row per (job, voice) lets deleting any of them find the job, and a link to a
voice that no longer exists is how the revocation sweep finds jobs whose voice
was deleted without the job being told (a crash mid-delete, ``voxclone voices
delete`` on the command line). Built-in voices are never linked.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, exists, insert, select, update

from voxclone.runtime.db import tables as t
from voxclone.runtime.voice_store import utc_now_iso

_L = t.job_voices.c
_J = t.jobs.c
# A revoked job's result while its audio may still exist somewhere: the one
# kind of failed job that has a result (a worker sets one only on success).
PURGE_PENDING = {"purge_pending": True}


def link(conn: Connection, job_id: str, voice_ids: Collection[str]) -> None:
    """Record that ``job_id`` speaks with ``voice_ids`` (links already there stay)."""
    if not voice_ids:
        return
    have = set(conn.execute(select(_L.voice_id).where(_L.job_id == job_id)).scalars())
    new = [v for v in dict.fromkeys(voice_ids) if v not in have]
    if new:
        conn.execute(insert(t.job_voices), [{"job_id": job_id, "voice_id": v} for v in new])


def linked(conn: Connection, job_id: str) -> set[str]:
    return set(conn.execute(select(_L.voice_id).where(_L.job_id == job_id)).scalars())


def _voice_exists(voice_id: ColumnElement[str]) -> ColumnElement[bool]:
    return exists().where(t.voices.c.id == voice_id)


def missing(conn: Connection, job_id: str) -> set[str]:
    """The voices ``job_id`` speaks with that are no longer in the library."""
    query = select(_L.voice_id).where(_L.job_id == job_id, ~_voice_exists(_L.voice_id))
    return set(conn.execute(query).scalars())


def speaks_with(voice_ids: Collection[str] | None) -> ColumnElement[bool]:
    """Jobs linked to one of ``voice_ids``; with None, to any voice that is gone."""
    links = select(_L.job_id)
    if voice_ids is None:
        links = links.where(~_voice_exists(_L.voice_id))
    else:
        links = links.where(_L.voice_id.in_(tuple(sorted(set(voice_ids)))))
    return t.jobs.c.id.in_(links)


def revoke(
    conn: Connection,
    voice_ids: Collection[str] | None,
    *,
    kinds: Sequence[str],
    error: dict[str, Any],
) -> list[str]:
    """Fail the queue jobs of ``kinds`` that speak with one of ``voice_ids``
    (None: with any voice that is gone) and owe their audio a purge.

    Queued, running and succeeded jobs become ``failed`` with ``error``, no
    lease (a running job's worker finds out at its next renew or write and
    stores nothing) and :data:`PURGE_PENDING` as result. Returns the ids of
    every such job whose purge is owed, including ones revoked before and not
    settled by :func:`purged` (the blob store was unreachable). A worker that
    marks its job succeeded in the same moment is serialised against this
    UPDATE by the row lock: it either finishes first and is revoked here, or
    finds the job failed and deletes what it stored.
    """
    mine = and_(_J.kind.in_(tuple(kinds)), _J.payload_json.is_not(None), speaks_with(voice_ids))
    conn.execute(
        update(t.jobs)
        .where(mine, _J.state.in_(("queued", "running", "succeeded")))
        .values(
            state="failed",
            message=str(error.get("message", "revoked")),
            error_json=json.dumps(error),
            result_json=json.dumps(PURGE_PENDING),
            claimed_by=None,
            lease_expires_at=None,
            updated_at=utc_now_iso(),
        )
    )
    owed = and_(_J.state == "failed", _J.result_json.is_not(None))
    query = select(_J.id).where(mine, owed).order_by(_J.created_at, _J.id)
    return list(conn.execute(query).scalars())


def purged(conn: Connection, job_id: str) -> None:
    """A revoked job's audio is gone: it owes no purge any more."""
    conn.execute(
        update(t.jobs).where(_J.id == job_id, _J.state == "failed").values(result_json=None)
    )
