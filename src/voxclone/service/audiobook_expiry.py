"""An audiobook's row goes when its chapters have: the job retention's rule for books.

A book is a parent row in the jobs table that never ends by itself (no
worker claims it) and one speech job per chapter (service/audiobooks.py).
The chapters expire like any speech job, ``job_retention_s`` after they end
(``SpeechJobs.sweep_expired``), taking their audio, their words and the
assembled M4B with them (``purge_with``). The row would stay listed forever,
pointing at nothing, so the same sweep, with the same cutoff, then deletes a
book whose chapters' jobs are all gone and whose row has not changed (a
submit, a re-render) within the retention either: its blob folder
``audiobooks/<book>/`` first, then the row, so a blob store down leaves the
row for the next sweep to try again. A book with a chapter still there (one
re-rendered lately) stays, its missing chapters shown as such, until that
chapter expires too. ``Audiobooks.get`` applies the same rule to the book
asked for, so the answer does not wait for the next sweep.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime, timedelta

from voxclone.errors import NotFound
from voxclone.runtime.blobs import BlobStore
from voxclone.runtime.job_store import JobQueue, JobRecord

log = logging.getLogger(__name__)

AUDIOBOOK_KIND = "audiobook"
BOOK_BLOB_PREFIX = "audiobooks/"
# Book rows checked per sweep (a sweep a minute): after the first sweep the
# old rows left are books whose chapters still live, few at any time.
SWEEP_BATCH = 1_000


def retention_cutoff(retention_s: float, now: datetime | None = None) -> str | None:
    """The ISO time before which an ended job has expired (None: kept forever)."""
    if retention_s <= 0:
        return None
    return ((now or datetime.now(UTC)) - timedelta(seconds=retention_s)).isoformat()


def chapter_job_ids(book: JobRecord) -> list[str]:
    return [str(link["job_id"]) for link in (book.result or {}).get("chapters", [])]


def chapters_gone(store: JobQueue, book: JobRecord) -> bool:
    """Whether none of ``book``'s chapter jobs is left."""
    for job_id in chapter_job_ids(book):
        try:
            store.get(job_id, None)
        except NotFound:
            continue
        return False
    return True


def is_expired(store: JobQueue, book: JobRecord, cutoff_iso: str | None) -> bool:
    return (
        cutoff_iso is not None
        and book.kind == AUDIOBOOK_KIND
        and book.updated_at < cutoff_iso
        and chapters_gone(store, book)
    )


def remove_book(store: JobQueue, blobs: BlobStore, book_id: str) -> None:
    """The book's assembled files, then its row (already gone: nothing to do)."""
    blobs.delete_prefix(f"{BOOK_BLOB_PREFIX}{book_id}/")
    with contextlib.suppress(NotFound):  # another replica's sweep was first
        store.delete(book_id, None)


def expire_books(store: JobQueue, blobs: BlobStore, cutoff_iso: str | None) -> int:
    """Delete the books expired at ``cutoff_iso``; how many."""
    if cutoff_iso is None:
        return 0
    removed = 0
    for book in store.changed_before(cutoff_iso, kinds=(AUDIOBOOK_KIND,), limit=SWEEP_BATCH):
        if is_expired(store, book, cutoff_iso):
            remove_book(store, blobs, book.id)
            removed += 1
    if removed:
        log.info("expired %d audiobooks whose chapters had expired", removed)
    return removed
