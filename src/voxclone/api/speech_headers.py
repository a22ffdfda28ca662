"""The response headers of speech: ``X-SSML-Warnings`` and ``X-Voice``.

The native, OpenAI and captioned routes all send them, so they live here,
not in one route's module (routes_openai importing routes_tts made an import
cycle with the captioned routes).

:func:`ssml_headers` is the SSML check every speech route runs before it
reserves engine time: malformed markup is a 400, what the markup ignored is
named in ``X-SSML-Warnings``.

:func:`voice_header` names the voice that spoke (``X-Voice``). A request may
be answered by another voice than the one it named, or name none: no voice
speaks its language's default (``zf_xiaoxiao`` for Chinese), OpenAI's names
speak as built-ins (``alloy`` -> ``af_heart``), and a clone the stock check
replaced speaks as a built-in. The header names it (a built-in's name, else
the clone's ``v_...`` id: ids are ASCII, user names may not be), on /v1/tts,
OpenAI speech and the captioned route.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from voxclone.assembly import Runtime
from voxclone.errors import PayloadTooLarge
from voxclone.service.speech.request import ResolvedRequest, SpeechRequest

SSML_WARNINGS_HEADER = "X-SSML-Warnings"
VOICE_HEADER = "X-Voice"


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


def voice_header(req: ResolvedRequest) -> dict[str, str]:
    """``{"X-Voice": ...}`` for ``req``, read on the event loop with no I/O:
    the render resolved it (the router's route, its cache key names the
    voice) and this reads what was stored; a request nobody resolved is a
    programming error (RuntimeError), never a database read here."""
    name = req.voice.spoken_as
    # A header value is one line of Latin-1; built-in names and ids are ASCII.
    return {VOICE_HEADER: name.encode("ascii", "replace").decode("ascii")[:128]}
