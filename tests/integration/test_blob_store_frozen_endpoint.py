"""A frozen S3 endpoint (a listening socket that never answers) costs timeout x attempts,
then a 503 (moved from tests/unit/test_blob_stores.py, issue 51).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from voxclone.runtime.blobs import (
    BlobStoreUnavailable,
)
from voxclone.runtime.blobs_s3 import S3BlobStore

pytestmark = pytest.mark.timed


@pytest.fixture()
def frozen_endpoint() -> Iterator[str]:
    """A port that accepts TCP connections and never answers (a hung S3)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_a_frozen_endpoint_costs_timeout_times_attempts_then_a_503(
    frozen_endpoint: str, s3_endpoint: Any
) -> None:
    store = S3BlobStore(
        "bucket-x",
        endpoint_url=frozen_endpoint,
        connect_timeout_s=0.3,
        read_timeout_s=0.3,
        max_attempts=2,
    )
    started = time.perf_counter()
    with pytest.raises(BlobStoreUnavailable) as caught:
        store.get("jobs/a.wav")
    elapsed = time.perf_counter() - started
    assert caught.value.status == 503 and "bucket-x" in caught.value.message
    # 2 tries x 0.3 s read timeout plus the standard retry backoff (< 1 s).
    assert elapsed < 3.0, elapsed


def test_a_frozen_endpoint_is_a_503_for_chunked_reads_too(frozen_endpoint: str) -> None:
    # The same mapping as get(): a download of a book's audio from a hung S3
    # is a 503 naming the bucket, never a hung request or a 500.
    store = S3BlobStore(
        "bucket-y",
        endpoint_url=frozen_endpoint,
        connect_timeout_s=0.3,
        read_timeout_s=0.3,
        max_attempts=1,
    )
    for call in (lambda: store.open_chunks("books/a.m4b", start=5), lambda: store.size("a.m4b")):
        with pytest.raises(BlobStoreUnavailable) as caught:
            call()
        assert caught.value.status == 503 and "bucket-y" in caught.value.message
