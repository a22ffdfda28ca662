"""Typed errors. Each error class maps once to an HTTP status and a JSON body.

Lower layers raise these; the API layer turns them into
``{"error": {"code", "message", "field"?, "limit"?}}`` without ever adding
paths or stack traces. The CLI prints ``message`` on one line.
"""

from __future__ import annotations

import math
from typing import Any


class VoxcloneError(Exception):
    """Base class: an error that is safe to show to a client."""

    status: int = 500
    code: str = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        limit: Any = None,
        value: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.limit = limit
        self.value = value
        self.retry_after = retry_after

    def to_body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": json_safe(self.message)}
        if self.field is not None:
            err["field"] = json_safe(self.field)
        if self.limit is not None:
            err["limit"] = json_safe(self.limit)
        if self.value is not None:
            err["value"] = json_safe(self.value)
        return {"error": err}


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as text and strings as valid UTF-8.

    The value that was refused is echoed back; when it is NaN, an infinity or
    text with a lone surrogate, JSON cannot carry it as it is.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


class BadRequest(VoxcloneError):
    """The request itself is malformed: a header sent twice, a body unsafe to parse."""

    status = 400
    code = "bad_request"


class InvalidInput(VoxcloneError):
    """The request is well-formed but a value is outside what is allowed."""

    status = 422
    code = "invalid_input"


class PayloadTooLarge(VoxcloneError):
    status = 413
    code = "payload_too_large"


class UnsupportedMedia(VoxcloneError):
    """Audio that cannot be decoded, a format we do not produce, or a request
    body of a Content-Type the route does not read (``limit`` lists those it does)."""

    status = 415
    code = "unsupported_media"


class AudioQualityError(InvalidInput):
    """Reference audio decoded fine but is unusable (silent, too short, clipped, noisy)."""

    code = "audio_quality"


class UnsupportedLanguage(InvalidInput):
    code = "unsupported_language"


class InvalidSsml(InvalidInput):
    """SSML that is not well-formed, or asks for what the subset refuses (a DTD,
    an over-long break); ``limit`` carries the line and column when known."""

    status = 400
    code = "invalid_ssml"


class UnknownModel(InvalidInput):
    """A ``model`` this server does not serve; ``limit`` lists the ones it does."""

    status = 400
    code = "invalid_model"


class VoiceModelMismatch(VoxcloneError):
    """A voice made for one engine (or model) asked to speak with another."""

    status = 409
    code = "voice_model_mismatch"


class NotFound(VoxcloneError):
    status = 404
    code = "not_found"


class Conflict(VoxcloneError):
    status = 409
    code = "conflict"


class VoiceChanged(Conflict):
    """A write conditioned on a voice's version found a newer version."""

    code = "voice_changed"


class Unauthorized(VoxcloneError):
    status = 401
    code = "unauthorized"


class Forbidden(VoxcloneError):
    status = 403
    code = "forbidden"


class RateLimited(VoxcloneError):
    status = 429
    code = "rate_limited"


class Overloaded(VoxcloneError):
    """Queue full or circuit open: the client should retry later."""

    status = 503
    code = "overloaded"


class NotReady(VoxcloneError):
    status = 503
    code = "not_ready"


class DatabaseUnavailable(VoxcloneError):
    """The database cannot be reached (a PostgreSQL restart, a dropped
    connection, SQLite locked past its busy timeout): nothing was changed, and
    the same request works once it is back."""

    status = 503
    code = "database_unavailable"


class InsufficientStorage(VoxcloneError):
    """The disk (or PostgreSQL's) is full: the write was not made, and the same
    request works once space is freed (RFC 4918's 507 Insufficient Storage)."""

    status = 507
    code = "insufficient_storage"


class DeadlineExceeded(VoxcloneError):
    status = 504
    code = "deadline_exceeded"


class ModelAssetError(VoxcloneError):
    """Shipped model files are missing or corrupted (operator problem, not client)."""

    status = 500
    code = "model_asset_error"


class Cancelled(VoxcloneError):
    """The work was cancelled (client went away, job cancelled)."""

    status = 499
    code = "cancelled"
