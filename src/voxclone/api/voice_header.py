"""The ``X-Voice`` response header: the voice that spoke.

A request may be answered by another voice than the one it named, or name
none: no voice speaks its language's default (``zf_xiaoxiao`` for Chinese),
OpenAI's names speak as built-ins (``alloy`` -> ``af_heart``), and a clone the
stock check replaced speaks as a built-in. The header names it (a built-in's
name, else the clone's ``v_...`` id: ids are ASCII, user names may not be),
on /v1/tts, OpenAI speech and the captioned route.
"""

from __future__ import annotations

from voxclone.service.speech_request import ResolvedRequest

VOICE_HEADER = "X-Voice"


def voice_header(req: ResolvedRequest) -> dict[str, str]:
    """``{"X-Voice": ...}`` for ``req``, read on the event loop with no I/O:
    the render resolved it (the router's route, its cache key names the
    voice) and this reads what was stored; a request nobody resolved is a
    programming error (RuntimeError), never a database read here."""
    name = req.voice.spoken_as
    # A header value is one line of Latin-1; built-in names and ids are ASCII.
    return {VOICE_HEADER: name.encode("ascii", "replace").decode("ascii")[:128]}
