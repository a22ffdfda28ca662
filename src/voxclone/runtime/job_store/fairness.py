"""Which runnable job a worker claims next: fair between owners, not first-come.

First-come order let one tenant's backlog starve everyone else: three of
alice's 2,160-character jobs kept bob's 5-word job waiting more than a minute.
The claim now orders runnable jobs by

1. how many jobs their owner has running right now (live leases), fewest first:
   a tenant with nothing running goes ahead of one already being served;
2. when their owner was last served (the newest ``started_at`` of the owner's
   jobs; never served counts as longest ago): among equals, round-robin;
3. age (``created_at``, then id): an owner's own jobs stay first-come.

A worker also passes the owners it is already running a job for
(``exclude_owners``), so its next slot goes to another tenant while a long job
renders (service/jobs.py, ``JobWorker`` slots).

Both sort keys are correlated subqueries over the owner's rows, each an index
lookup (``jobs_owner_started``, ``jobs_owner_created``); that stays cheap while
the candidates are the queued jobs. PostgreSQL locks only the candidate row
(``FOR UPDATE OF jobs SKIP LOCKED``): the subqueries read, they do not lock.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, func, select, true

from voxclone.runtime.db import tables as t


def fair_order(now: float) -> list[Any]:
    """ORDER BY clauses for the claim query on ``jobs`` (see the module doc)."""
    jobs = t.jobs
    peer = jobs.alias("fair_peer")
    running = (
        select(func.count())
        .where(
            peer.c.owner == jobs.c.owner,
            peer.c.state == "running",
            peer.c.lease_expires_at >= now,
        )
        .scalar_subquery()
    )
    served = jobs.alias("fair_served")
    last_served = (
        select(func.coalesce(func.max(served.c.started_at), 0.0))
        .where(served.c.owner == jobs.c.owner)
        .scalar_subquery()
    )
    return [running, last_served, jobs.c.created_at, jobs.c.id]


def not_owned_by(owners: Collection[str]) -> ColumnElement[bool]:
    """Candidates of owners other than ``owners`` (always true when empty)."""
    if not owners:
        return true()
    return t.jobs.c.owner.not_in(tuple(sorted(owners)))
