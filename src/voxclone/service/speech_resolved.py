"""One speech request and what it resolves to, each part resolved once.

A transport builds a :class:`~voxclone.service.speech_request.SpeechRequest`
from its body (parsed once) and hands it to
:meth:`SpeechRouter.request <voxclone.service.router.SpeechRouter.request>`
at the edge; the :class:`ResolvedRequest` it gets back travels through the
router, the service and its steps (precheck, cache key, pricing, plan,
render), and each of them reads its parts from it instead of resolving them
again. Before this object, one ``/v1/tts`` request parsed its JSON twice,
picked its engine two or three times, read the caller's lexicon three times
and looked each SSML ``<voice>`` up four times (a database read each;
``tests/api/test_tts_request_reads.py`` counts them).

The parts resolve when first asked for, because the edge runs on the event
loop and may not read the database: the engine its ``model`` names and its
SSML document (pure) may be read there (the flood precheck, the SSML
warnings header); the voice, the engine that speaks it, the language, the
voices SSML switches to and the caller's pronunciations are resolved
together, with the request's 4xx checks, the first time a worker thread asks
for any of them (:class:`Resolution`), and kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from voxclone.service.catalog import ResolvedVoice
from voxclone.service.speech_request import SpeechRequest, ssml_document
from voxclone.synth.text.lexicon import Lexicon, Pronunciation, for_language
from voxclone.synth.text.ssml import SsmlDocument


@dataclass(frozen=True)
class Resolution:
    """What a request resolves to that needs the database (and its checks)."""

    engine: str  # the engine that speaks it
    voice: ResolvedVoice
    language: str
    ssml_voices: Mapping[str, ResolvedVoice]  # every <voice name> it switches to
    pronunciations: tuple[Pronunciation, ...]  # the caller's lexicon, every language


class ResolvedRequest:
    """A :class:`SpeechRequest` with its parts resolved once, when first needed.

    Thread-safe: the resolution runs once even if two threads ask at once.
    """

    def __init__(
        self,
        request: SpeechRequest,
        resolve: Callable[[ResolvedRequest], Resolution],
        *,
        model_engine: str | None = None,
    ) -> None:
        self.request = request
        # The engine ``request.model`` names (None when it names none): known
        # without the database, so the event loop's precheck may use it.
        self.model_engine = model_engine
        self._resolver = resolve
        self._lock = threading.Lock()
        self._resolution: Resolution | None = None
        self._lexicons: dict[str, Lexicon | None] = {}

    def __repr__(self) -> str:
        return f"ResolvedRequest({self.request!r})"

    @property
    def is_ssml(self) -> bool:
        return self.request.is_ssml

    @cached_property
    def document(self) -> SsmlDocument | None:
        """The request's SSML document (None for plain text); parsing is pure,
        so it may run before the rest resolves. Raises InvalidSsml (400)."""
        return ssml_document(self.request) if self.request.is_ssml else None

    @property
    def warnings(self) -> tuple[str, ...]:
        """What its markup asked for that is ignored (empty for plain text)."""
        doc = self.document
        return doc.warnings if doc is not None else ()

    # -- resolved in a worker thread (database reads), once ---------------------
    def resolve(self) -> Resolution:
        """Resolve (and check) the request the first time; later calls return
        the same resolution. Reads the database: call it from a worker thread."""
        with self._lock:
            if self._resolution is None:
                self._resolution = self._resolver(self)
            return self._resolution

    @property
    def engine(self) -> str:
        return self.resolve().engine

    @property
    def voice(self) -> ResolvedVoice:
        return self.resolve().voice

    @property
    def language(self) -> str:
        return self.resolve().language

    @property
    def ssml_voices(self) -> Mapping[str, ResolvedVoice]:
        return self.resolve().ssml_voices

    @property
    def pronunciations(self) -> tuple[Pronunciation, ...]:
        return self.resolve().pronunciations

    def lexicon(self, language: str) -> Lexicon | None:
        """The caller's entries for ``language``, compiled once per language."""
        entries = self.pronunciations
        if not entries:
            return None
        with self._lock:
            if language not in self._lexicons:
                self._lexicons[language] = for_language(list(entries), language) or None
            return self._lexicons[language]

    @cached_property
    def lexicon_fingerprint(self) -> str | None:
        """What the cache key holds of the lexicon (None without entries)."""
        entries = self.pronunciations
        return Lexicon(list(entries)).fingerprint() if entries else None


# What the speech surface takes: a request to resolve, or one resolved at the edge.
Speakable = SpeechRequest | ResolvedRequest
