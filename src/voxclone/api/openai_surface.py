"""Where ``POST /v1/audio/speech`` behaves as OpenAI's speech API does rather than as ours.

* ``input`` is at most :data:`OPENAI_MAX_INPUT_CHARS` characters, OpenAI's
  limit: a 20,000-character input was accepted and streamed for 596 s (489 s
  of audio, issue 46) where OpenAI refuses it at once. The refusal is a 400
  that points to ``/v1/tts`` and the jobs route, which take long texts.
* ``model``: OpenAI's dated snapshots (``tts-1-1106``,
  ``gpt-4o-mini-tts-2025-03-20``, …) stand for their family name; any other
  unknown name is refused as OpenAI refuses a model it does not serve: 404,
  ``code: "model_not_found"`` (ours also lists the names that work).
* ``voice``: a name or OpenAI's voice object ``{"id": "..."}`` (custom voices).
* Errors carry OpenAI's keys (``type``, ``param``) beside ours (``code``,
  ``message``, ``field``, ``limit``), so OpenAI's SDKs read them as theirs.
"""

from __future__ import annotations

import re
from typing import Any

from voxclone.errors import UnknownModel, VoxcloneError

# OpenAI's own limit on ``input`` (its API reference: "The maximum length is
# 4096 characters"); longer texts go to /v1/tts or a job.
OPENAI_MAX_INPUT_CHARS = 4096
# OpenAI's dated model snapshots -> the family name the router knows.
_SNAPSHOT = re.compile(r"^(tts-1-hd|tts-1|gpt-4o-mini-tts)-(\d{4}|\d{4}-\d{2}-\d{2})$")


class OpenAIError(VoxcloneError):
    """A refusal in OpenAI's error shape, ours' keys kept:
    ``{"error": {"message", "type", "param", "code", "field", "limit"}}``."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        field: str,
        limit: Any = None,
        value: Any = None,
    ) -> None:
        super().__init__(message, field=field, limit=limit, value=value)
        self.status = status
        self.code = code

    def to_body(self) -> dict[str, Any]:
        body = super().to_body()
        body["error"]["type"] = "invalid_request_error"
        body["error"]["param"] = self.field
        return body


def check_input_length(text: str) -> None:
    """400 for an ``input`` over OpenAI's limit, before any work (microseconds)."""
    if len(text) > OPENAI_MAX_INPUT_CHARS:
        raise OpenAIError(
            f"input is {len(text)} characters; the OpenAI-compatible speech API takes at "
            f"most {OPENAI_MAX_INPUT_CHARS} (as OpenAI's). Split the text, or send it to "
            "POST /v1/tts (streams long texts) or POST /v1/jobs/speech (a job for a "
            "chapter or a book)",
            status=400,
            code="string_above_max_length",
            field="input",
            limit=OPENAI_MAX_INPUT_CHARS,
            value=len(text),
        )


def model_name(model: str) -> str:
    """The name the router is asked for: a dated OpenAI snapshot as its family."""
    match = _SNAPSHOT.match(model)
    return match.group(1) if match else model


def model_not_found(exc: UnknownModel, model: str) -> OpenAIError:
    """An unknown model, refused as OpenAI refuses one (404 ``model_not_found``)."""
    return OpenAIError(
        f"the model '{model[:64]}' does not exist on this server; use one of "
        f"{', '.join(exc.limit or ())}",
        status=404,
        code="model_not_found",
        field="model",
        limit=exc.limit,
    )


def as_openai_error(exc: VoxcloneError) -> VoxcloneError:
    """``exc`` with OpenAI's ``type`` and ``param`` added (same status and code)."""
    if isinstance(exc, OpenAIError):
        return exc
    converted = OpenAIError(
        exc.message,
        status=exc.status,
        code=exc.code,
        field=exc.field or "",
        limit=exc.limit,
        value=exc.value,
    )
    converted.field = exc.field
    converted.retry_after = exc.retry_after
    return converted
