"""The SSML check every speech route runs before it reserves engine time.

Its own module because the native, OpenAI and captioned routes all use it
(routes_openai importing routes_tts made an import cycle with the captioned
routes).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from voxclone.assembly import Runtime
from voxclone.errors import PayloadTooLarge
from voxclone.service.speech_request import ResolvedRequest, SpeechRequest

SSML_WARNINGS_HEADER = "X-SSML-Warnings"


async def ssml_headers(runtime: Runtime, req: SpeechRequest | ResolvedRequest) -> dict[str, str]:
    """Check an SSML request's markup (malformed: 400 before any engine time is
    reserved) and name what it ignored in a header; nothing for plain text."""
    r = runtime.speech.request(req)  # parsed once: the service reads the same document
    if not r.is_ssml:
        return {}
    # The length limit first: a document over it was parsed in full (16.8 MB
    # ones raised RSS 1.5 -> 2.0 GB, for good) before the 413 it was bound to
    # get; the body guard stops bodies past ~12 bytes a character, not this.
    limit = runtime.settings.max_text_chars
    if len(r.request.text) > limit:
        raise PayloadTooLarge(
            f"text is longer than {limit} characters",
            field="text",
            limit=limit,
            value=len(r.request.text),
        )
    warnings = await run_in_threadpool(runtime.speech.ssml_warnings, r)
    if not warnings:
        return {}
    # Header values are Latin-1 and one line: the warnings quote user markup.
    text = "; ".join(warnings).encode("ascii", "replace").decode("ascii")
    return {SSML_WARNINGS_HEADER: "".join(ch if ch.isprintable() else " " for ch in text)}
