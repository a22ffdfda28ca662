"""Job state: background jobs (voice refinement, reports) and the durable
speech-job queue.

A job moves ``queued → running → succeeded | failed | cancelled``; terminal
states are final. Cancellation is cooperative: :meth:`JobStore.request_cancel`
cancels a queued job at once and flags a running one, and the worker checks
:meth:`JobStore.is_cancel_requested` between steps.

One module per job: ``records`` (the record, states, the :class:`JobStore`
protocol and :class:`JobQueue`, the protocol of the durable queue),
``transitions`` (how a record may change), ``memory`` (:class:`InMemoryJobStore`:
tests, throw-away servers), ``rows`` (a job as a ``jobs`` row), ``sql_store``
(:class:`SqlJobStore`, alias ``SqliteJobStore``: both protocols; survives
restarts, shares the voice library's database), ``queue`` (``SqlJobQueue``, the
SQL queue it builds on: enqueue, claim with a lease, renew, retry, release),
``fairness`` (which job a worker claims next), ``voice_links`` (the voices a
job speaks with, revoked when one is deleted) and ``events`` (:class:`JobEvents`:
asyncio code awaits a job's progress while the work runs in worker threads).
This package exports what the layers above use.
"""

from voxclone.runtime.job_store.events import JobEvents, JobSubscription
from voxclone.runtime.job_store.memory import InMemoryJobStore
from voxclone.runtime.job_store.records import (
    INTERRUPTED_MESSAGE,
    JOB_STATES,
    LIST_MAX_LIMIT,
    TERMINAL_STATES,
    JobQueue,
    JobRecord,
    JobState,
    JobStore,
    LeaseLost,
    new_job_id,
    queued_job,
)
from voxclone.runtime.job_store.sql_store import SqliteJobStore, SqlJobStore

__all__ = [
    "INTERRUPTED_MESSAGE",
    "JOB_STATES",
    "LIST_MAX_LIMIT",
    "TERMINAL_STATES",
    "InMemoryJobStore",
    "JobEvents",
    "JobQueue",
    "JobRecord",
    "JobState",
    "JobStore",
    "JobSubscription",
    "LeaseLost",
    "SqlJobStore",
    "SqliteJobStore",
    "new_job_id",
    "queued_job",
]
