"""The S3-compatible blob store (AWS S3, MinIO, Ceph RGW, ...), via boto3.

Imported only when ``VOXCLONE_S3_BUCKET`` is set (``bootstrap.build_blob_store``),
so a server without S3 never loads boto3.

Credentials are not voxclone settings: boto3 takes them from its standard chain
(``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, then
``AWS_PROFILE`` and ``~/.aws/credentials``, then a container or instance role).

Every call has a connect and a read timeout and a bounded number of retries: a
frozen S3 endpoint costs a request a few seconds and then a 503
(:class:`BlobStoreUnavailable`), never a hung worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import IO, Any

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from voxclone.runtime.blobs import (
    COPY_PART_BYTES,
    READ_PART_BYTES,
    BlobChunks,
    BlobNotFound,
    BlobStoreUnavailable,
    check_key,
    check_span,
)

# S3 deletes at most this many keys per DeleteObjects call, and lists at most
# this many per ListObjectsV2 page.
DELETE_BATCH = 1000
LIST_PAGE = 1000
# SigV4 presigned URLs cannot live longer than seven days.
MAX_PRESIGN_S = 7 * 24 * 3600
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})


# One boto3 session per process: it holds the parsed service models, so a second
# client costs ~25 ms instead of ~250 ms. Sessions are not thread-safe, clients are.
_session: boto3.session.Session | None = None
_session_lock = threading.Lock()


def _client(**kwargs: Any) -> Any:
    global _session
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client("s3", **kwargs)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class S3BlobStore:
    """Blobs as objects in one bucket, optionally under a key prefix.

    The prefix lets several deployments (or a deployment and other data) share a
    bucket: ``voices/v_1/reference`` is stored as ``<prefix>/voices/v_1/reference``.
    """

    name = "s3"

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 blob store needs a bucket")
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        cleaned = prefix.strip("/")
        self.prefix = f"{check_key(cleaned)}/" if cleaned else ""
        config = Config(
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            # "standard" retries throttling and 5xx with backoff; total_max_attempts
            # counts the first try too, so a dead endpoint fails after a few seconds.
            retries={"total_max_attempts": max(1, max_attempts), "mode": "standard"},
            signature_version="s3v4",
            # MinIO and most self-hosted endpoints want path-style URLs
            # (http://host:9000/bucket/key); AWS itself picks what suits.
            s3={"addressing_style": "path" if endpoint_url else "auto"},
        )
        self._client: Any = _client(endpoint_url=endpoint_url, region_name=region, config=config)

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _where(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where} at {self.endpoint_url}" if self.endpoint_url else where

    def _unavailable(self, exc: Exception, doing: str) -> BlobStoreUnavailable:
        detail = _code(exc) if isinstance(exc, ClientError) else type(exc).__name__
        return BlobStoreUnavailable(
            f"blob store {doing} failed ({detail}): {self._where()}", retry_after=5.0
        )

    # -- BlobStore ------------------------------------------------------------

    def put(self, key: str, data: bytes, *, content_type: str) -> None:
        # A PUT is atomic in S3: readers see the old object or the new one.
        target = self._key(key)
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=target, Body=data, ContentType=content_type
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._unavailable(exc, "write") from None

    def put_file(self, key: str, source: IO[bytes], *, content_type: str) -> None:
        # A multipart upload in COPY_PART_BYTES parts past one part (S3 wants
        # parts of at least 5 MiB), read from ``source`` one part at a time:
        # a job's hours of audio never sit in memory. The object appears when
        # the upload completes; a failed one is aborted (s3transfer does).
        target = self._key(key)
        transfer = TransferConfig(
            multipart_threshold=COPY_PART_BYTES,
            multipart_chunksize=COPY_PART_BYTES,
            use_threads=False,
        )
        try:
            self._client.upload_fileobj(
                source,
                self.bucket,
                target,
                ExtraArgs={"ContentType": content_type},
                Config=transfer,
            )
        except (ClientError, BotoCoreError, S3UploadFailedError) as exc:
            raise self._unavailable(exc, "write") from None

    def get(self, key: str) -> bytes:
        # The whole object through the chunked read: one place maps S3's errors.
        reader = self.open_chunks(key)
        try:
            return b"".join(reader)
        finally:
            reader.close()

    def open_chunks(self, key: str, *, start: int = 0, end: int | None = None) -> BlobChunks:
        # One GET (with a Range header for a span): its headers give the
        # object's size, its body is read a part at a time as the caller
        # iterates, so a book's hundreds of MB never sit in memory.
        check_span(start, end)
        target = self._key(key)
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": target}
        if start or end is not None:
            args["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            response = self._client.get_object(**args)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                raise BlobNotFound(key) from None
            if _code(exc) == "InvalidRange":
                raise ValueError(f"blob span starts at {start}, past its end") from None
            raise self._unavailable(exc, "read") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc, "read") from None
        body = response["Body"]
        length = int(response["ContentLength"])
        # "bytes 0-99/1234" when a Range was asked for, else the length is the size.
        ranged = str(response.get("ContentRange") or "")
        if "Range" in args and "/" not in ranged:
            body.close()  # an endpoint that ignored the Range: these are not the bytes asked
            raise BlobStoreUnavailable(f"blob store ignored a byte range: {self._where()}")
        size = int(ranged.rsplit("/", 1)[1]) if "/" in ranged else length

        def chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(READ_PART_BYTES)
            except BotoCoreError as exc:  # the connection broke mid-body
                raise self._unavailable(exc, "read") from None

        return BlobChunks(
            size=size, start=start, end=start + length, chunks=chunks(), close=body.close
        )

    def size(self, key: str) -> int:
        target = self._key(key)
        try:
            return int(self._client.head_object(Bucket=self.bucket, Key=target)["ContentLength"])
        except ClientError as exc:
            if _code(exc) in _MISSING:
                raise BlobNotFound(key) from None
            raise self._unavailable(exc, "lookup") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc, "lookup") from None

    def exists(self, key: str) -> bool:
        target = self._key(key)
        try:
            self._client.head_object(Bucket=self.bucket, Key=target)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return False
            raise self._unavailable(exc, "lookup") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc, "lookup") from None
        return True

    def _keys_under(self, prefix: str) -> Iterator[str]:
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": LIST_PAGE}
        )
        for page in pages:
            for item in page.get("Contents", ()):
                yield str(item["Key"])

    def delete_prefix(self, prefix: str) -> int:
        # Same meaning as the local store: a plain string prefix, so callers pass
        # "voices/<id>/" (with the slash) to delete one voice's blobs only.
        check_key(prefix.rstrip("/"))
        removed = 0
        batch: list[dict[str, str]] = []
        try:
            for key in self._keys_under(self.prefix + prefix):
                batch.append({"Key": key})
                if len(batch) == DELETE_BATCH:
                    removed += self._delete_batch(batch)
                    batch = []
            if batch:
                removed += self._delete_batch(batch)
        except (ClientError, BotoCoreError) as exc:
            raise self._unavailable(exc, "delete") from None
        return removed

    def _delete_batch(self, batch: list[dict[str, str]]) -> int:
        response = self._client.delete_objects(
            Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
        )
        errors = response.get("Errors") or []
        if errors:
            # A partial failure must not be reported as done: the purge is retried.
            first = errors[0]
            raise BlobStoreUnavailable(
                f"blob store delete failed for {len(errors)} of {len(batch)} objects "
                f"({first.get('Code', '?')}): {self._where()}",
                retry_after=5.0,
            )
        return len(batch)

    def presigned_url(self, key: str, *, expires_s: int) -> str | None:
        if not 1 <= expires_s <= MAX_PRESIGN_S:
            raise ValueError(f"expires_s must be between 1 and {MAX_PRESIGN_S}")
        # Signed locally (no request to S3): the URL carries its own expiry.
        url = self._client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self._key(key)},
            ExpiresIn=int(expires_s),
            HttpMethod="GET",
        )
        return str(url)

    def check(self) -> None:
        """One HEAD of the bucket: it exists and these credentials may use it."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except NoCredentialsError:
            raise BlobStoreUnavailable(
                "no AWS credentials for the S3 blob store: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or give the pod a role)"
            ) from None
        except ClientError as exc:
            code = _code(exc)
            if code in {"404", "NoSuchBucket", "NotFound"}:
                raise BlobStoreUnavailable(
                    f"the S3 bucket {self.bucket!r} does not exist ({self._where()}); "
                    "create it or fix VOXCLONE_S3_BUCKET"
                ) from None
            if code in {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
                raise BlobStoreUnavailable(
                    f"the S3 credentials may not use bucket {self.bucket!r} ({code}, "
                    f"{self._where()}): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
                ) from None
            raise self._unavailable(exc, "check") from None
        except BotoCoreError as exc:
            raise BlobStoreUnavailable(
                f"cannot reach the S3 blob store ({type(exc).__name__}): {self._where()}; "
                "check VOXCLONE_S3_ENDPOINT_URL and the network"
            ) from None
