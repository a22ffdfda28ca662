"""ResolvedRequest: each part of a speech request resolved once (issues 39, 51).

No engine and no database: the catalog and the engine's resolver are counting
stand-ins, so what is checked is the promise of the request and the router
that resolves it (resolve once, even from two threads; the request holds no
function of the router's and refuses to be read unresolved; the SSML
document without resolving; the lexicon compiled once per language).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from voxclone.service.catalog import ResolvedVoice
from voxclone.service.speech.request import Resolution, ResolvedRequest, SpeechRequest
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.speech.service import SpeechService
from voxclone.synth.text.lexicon import Pronunciation

VOICE = ResolvedVoice("v", "v", 1, np.zeros((1, 256), np.float32), "en-us", True, engine="kokoro")


@dataclass
class CountingCatalog:
    """The voice lookups a resolution makes (each a database read in a server)."""

    delay_s: float = 0.0
    lookups: list[str] = field(default_factory=list)

    def resolve(self, name: str, owner: str | None, engine: str | None = None) -> ResolvedVoice:
        self.lookups.append(name)
        time.sleep(self.delay_s)  # long enough for a second thread to arrive meanwhile
        return VOICE


@dataclass
class CountingResolver:
    """An engine's RequestResolver: what it was asked to resolve, with which voice."""

    entries: tuple[Pronunciation, ...] = ()
    calls: list[ResolvedVoice | None] = field(default_factory=list)

    def resolve(self, r: ResolvedRequest, voice: ResolvedVoice | None) -> Resolution:
        self.calls.append(voice)
        return Resolution("kokoro", voice or VOICE, "en-us", {}, self.entries)


def _router(catalog: CountingCatalog, resolver: CountingResolver) -> SpeechRouter:
    service = cast(SpeechService, SimpleNamespace(resolver=resolver))
    return SpeechRouter({"kokoro": service}, catalog=cast(Any, catalog))


def _resolved(entries: tuple[Pronunciation, ...] = ()) -> ResolvedRequest:
    r = ResolvedRequest(SpeechRequest(text="Zorvex"))
    r.resolution = Resolution("kokoro", VOICE, "en-us", {}, entries)
    return r


def test_the_router_resolves_once_even_when_two_threads_ask_at_once() -> None:
    catalog, resolver = CountingCatalog(delay_s=0.05), CountingResolver()
    router = _router(catalog, resolver)
    r = router.request(SpeechRequest(text="hello", voice="v"))
    seen: list[ResolvedRequest] = []
    threads = [threading.Thread(target=lambda: seen.append(router.resolve(r))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [r, r]
    assert r.voice is VOICE and r.language == "en-us" and r.engine == "kokoro"
    assert catalog.lookups == ["v"] and resolver.calls == [VOICE]
    service, routed = router.route(r)  # routed again: nothing resolved again
    assert routed is r and service.resolver is resolver
    assert catalog.lookups == ["v"] and len(resolver.calls) == 1


def test_a_request_holds_no_function_and_refuses_to_be_read_unresolved() -> None:
    router = _router(CountingCatalog(), CountingResolver())
    r = router.request(SpeechRequest(text="hello", voice="v"))
    assert not any(callable(v) for v in vars(r).values())  # nothing to call back
    for read in (
        lambda: r.voice,
        lambda: r.engine,
        lambda: r.language,
        lambda: r.ssml_voices,
        lambda: r.lexicon("en-us"),
    ):
        with pytest.raises(RuntimeError, match="not resolved"):
            read()
    assert r.resolution is None  # reading it resolved nothing


def test_a_voice_the_caller_looked_up_is_used_not_looked_up_again() -> None:
    catalog, resolver = CountingCatalog(), CountingResolver()
    router = _router(catalog, resolver)
    looked_up = ResolvedVoice("af_heart", "af_heart", 1, None, "en-us", True, engine="kokoro")
    r = router.resolve(router.request(SpeechRequest(text="hi", voice="alloy"), voice=looked_up))
    assert r.voice is looked_up and catalog.lookups == [] and resolver.calls == [looked_up]
    with pytest.raises(ValueError):
        router.request(SpeechRequest(text="hi"), voice=looked_up)


def test_the_ssml_document_and_its_warnings_need_no_resolution() -> None:
    catalog, resolver = CountingCatalog(), CountingResolver()
    router = _router(catalog, resolver)
    r = router.request(SpeechRequest(text="<speak>Hi <foo>there</foo></speak>", model="kokoro"))
    assert r.document is not None and r.document is r.document
    assert r.warnings and r.model_engine == "kokoro"
    assert router.ssml_warnings(r) == r.warnings
    # The event loop may read these: nothing was resolved.
    assert r.resolution is None and catalog.lookups == [] and resolver.calls == []
    plain = ResolvedRequest(SpeechRequest(text="Hi there"))
    assert plain.document is None and plain.warnings == ()


def test_the_lexicon_is_compiled_once_per_language_and_absent_without_entries() -> None:
    entries = (
        Pronunciation("Zorvex", "en", respelling="zor vex"),
        Pronunciation("Zorvex", "fr", respelling="zor vexe"),
    )
    r = _resolved(entries)
    english = r.lexicon("en-us")
    assert english is not None and r.lexicon("en-us") is english
    assert r.lexicon("fr") is not None and r.lexicon("fr") is not english
    assert r.lexicon("it") is None  # no entry applies
    assert r.lexicon_fingerprint is not None
    bare = _resolved()
    assert bare.lexicon("en-us") is None and bare.lexicon_fingerprint is None
