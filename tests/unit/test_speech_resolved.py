"""ResolvedRequest: each part of a speech request resolved once (issue 39).

No engine and no database: the resolver is a counting function, so what is
checked is the object's own promise (resolve once, even from two threads;
the SSML document without resolving; the lexicon compiled once per language).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from voxclone.service.catalog import ResolvedVoice
from voxclone.service.speech_request import SpeechRequest
from voxclone.service.speech_resolved import Resolution, ResolvedRequest
from voxclone.synth.text.lexicon import Pronunciation

VOICE = ResolvedVoice("v", "v", 1, np.zeros((1, 256), np.float32), "en-us", True)


def _resolver(
    calls: list[int], entries: tuple[Pronunciation, ...] = (), delay_s: float = 0.0
) -> Callable[[ResolvedRequest], Resolution]:
    def resolve(r: ResolvedRequest) -> Resolution:
        calls.append(1)
        time.sleep(delay_s)  # long enough for a second thread to arrive meanwhile
        return Resolution("kokoro", VOICE, "en-us", {}, entries)

    return resolve


def test_resolution_runs_once_even_when_two_threads_ask_at_once() -> None:
    calls: list[int] = []
    r = ResolvedRequest(SpeechRequest(text="hello"), _resolver(calls, delay_s=0.05))
    seen: list[Resolution] = []
    threads = [threading.Thread(target=lambda: seen.append(r.resolve())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.voice is VOICE and r.language == "en-us" and r.engine == "kokoro"
    assert len(calls) == 1
    assert seen[0] is seen[1]


def test_the_ssml_document_and_its_warnings_need_no_resolution() -> None:
    calls: list[int] = []
    r = ResolvedRequest(
        SpeechRequest(text="<speak>Hi <foo>there</foo></speak>"),
        _resolver(calls),
        model_engine="kokoro",
    )
    assert r.document is not None and r.document is r.document
    assert r.warnings and r.model_engine == "kokoro"
    assert calls == []  # the event loop may read these: nothing was resolved
    plain = ResolvedRequest(SpeechRequest(text="Hi there"), _resolver(calls))
    assert plain.document is None and plain.warnings == ()


def test_the_lexicon_is_compiled_once_per_language_and_absent_without_entries() -> None:
    entries = (
        Pronunciation("Zorvex", "en", respelling="zor vex"),
        Pronunciation("Zorvex", "fr", respelling="zor vexe"),
    )
    r = ResolvedRequest(SpeechRequest(text="Zorvex"), _resolver([], entries))
    english = r.lexicon("en-us")
    assert english is not None and r.lexicon("en-us") is english
    assert r.lexicon("fr") is not None and r.lexicon("fr") is not english
    assert r.lexicon("it") is None  # no entry applies
    assert r.lexicon_fingerprint is not None
    bare = ResolvedRequest(SpeechRequest(text="Zorvex"), _resolver([]))
    assert bare.lexicon("en-us") is None and bare.lexicon_fingerprint is None
