"""One speech request: what a transport asks for, what it resolves to, and
the resolver that checks it.

Values first (no engine, no I/O): the API routes, the CLI, Wyoming and speech
jobs build a :class:`SpeechRequest`; the service answers a
:class:`SpeechResult` (whole file) or a :class:`CaptionedResult` (with word
times).

A transport hands its request to
:meth:`SpeechRouter.request <voxclone.service.speech.router.SpeechRouter.request>`
at the edge; the :class:`ResolvedRequest` it gets back travels through the
router, the service and its steps (precheck, cache key, pricing, plan,
render), and each of them reads its parts from it instead of resolving them
again. Before this object, one ``/v1/tts`` request parsed its JSON twice,
picked its engine two or three times, read the caller's lexicon three times
and looked each SSML ``<voice>`` up four times (a database read each;
``tests/api/test_tts_request_reads.py`` counts them).

What needs the database is resolved later, because the edge runs on the
event loop and may not read it: the engine its ``model`` names and its SSML
document (pure) may be read there (the flood precheck, the SSML warnings
header). The voice, the engine that speaks it, the language, the voices SSML
switches to and the caller's pronunciations are resolved together, with the
request's 4xx checks, once, in the worker thread that routes it:
:meth:`SpeechRouter.resolve <voxclone.service.speech.router.SpeechRouter.resolve>`
picks the voice and its engine, then that engine's :class:`RequestResolver`
checks the rest, and the :class:`Resolution` is stored on the request (under
its lock: once, even when two threads ask). The request holds no function of
anyone's: read before it is resolved, its resolved parts raise RuntimeError.
A :class:`~voxclone.service.speech.service.SpeechService` called without the router
resolves a request with its own engine the same way
(:meth:`SpeechService.resolve <voxclone.service.speech.service.SpeechService.resolve>`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from voxclone.errors import InvalidInput, PayloadTooLarge
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.cache import cache_key
from voxclone.runtime.scheduler import Admission
from voxclone.service.blends import is_blend_id
from voxclone.service.captions import WordTrack
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog
from voxclone.synth.audio.file_encode import check_rate, parse_format
from voxclone.synth.controls import SpeechControls
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.lexicon import Lexicon, Pronunciation, for_language
from voxclone.synth.text.ssml import (
    SsmlBreak,
    SsmlDocument,
    as_document,
    looks_like_ssml,
    parse_ssml,
    ssml_language,
)
from voxclone.synth.text.wordtimes import WordTime

# Either an admission taken earlier, or the terms to take one on.
Admit = Admission | AdmissionTerms | None


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    voice: str | None = None
    language: str | None = None
    controls: SpeechControls = field(default_factory=SpeechControls)
    format: str = "wav"
    sample_rate: int = 24_000
    owner: str | None = None
    # Which engine speaks: a registry name, a model id or an alias (see
    # service/speech/router.py); None = the voice's own engine, else the default.
    model: str | None = None
    # An already-resolved voice (e.g. an inline reference clip cloned for this
    # request only); takes precedence over ``voice``.
    voice_override: ResolvedVoice | None = None
    # True: the text is SSML (wrapped in <speak> when it is a fragment);
    # False: plain text even if it starts with <speak>; None: SSML when it does.
    ssml: bool | None = None
    # Served without the watermark: the caller's key is waived by the
    # operator's per-key policy (api/auth.py Principal.unmarked). Other audio
    # than the marked render: it has its own cache entry and in-flight render.
    unmarked: bool = False

    @property
    def is_ssml(self) -> bool:
        return self.ssml is True or (self.ssml is None and looks_like_ssml(self.text))


@dataclass(frozen=True)
class SpeechResult:
    audio: bytes
    content_type: str
    cache: str  # "miss" or the tier that answered
    duration_s: float | None = None


@dataclass(frozen=True)
class CaptionedResult:
    """Audio with the times of its words (seconds in that audio, original text's words)."""

    audio: bytes
    content_type: str
    words: tuple[WordTime, ...]
    duration_s: float


def ssml_warnings(req: SpeechRequest) -> tuple[str, ...]:
    """Check ``req``'s SSML without an engine (InvalidSsml when malformed); what
    its markup asked for that is ignored. Empty for plain text."""
    return ssml_document(req).warnings if req.is_ssml else ()


@functools.lru_cache(maxsize=16)
def _parsed(document: str) -> SsmlDocument:
    # One request asks for its document several times (validation, cache key,
    # plan, warnings header); parsing is pure, so the last few are kept.
    return parse_ssml(document)


def ssml_document(req: SpeechRequest) -> SsmlDocument:
    """``req``'s text as an SSML document (a fragment wrapped in <speak>)."""
    return _parsed(as_document(req.text))


_TAG = re.compile(r"<[^<>]*>")


def spoken_text(req: SpeechRequest) -> str:
    """The text without its SSML markup (cheap: for the event loop)."""
    return _TAG.sub(" ", req.text) if req.is_ssml else req.text


@dataclass(frozen=True)
class Resolution:
    """What a request resolves to that needs the database (and its checks)."""

    engine: str  # the engine that speaks it
    voice: ResolvedVoice
    language: str
    ssml_voices: Mapping[str, ResolvedVoice]  # every <voice name> it switches to
    pronunciations: tuple[Pronunciation, ...]  # the caller's lexicon, every language


class ResolvedRequest:
    """A :class:`SpeechRequest` as it travels, with its parts resolved once.

    Whoever resolves it (:meth:`SpeechRouter.resolve
    <voxclone.service.speech.router.SpeechRouter.resolve>`, or
    :meth:`SpeechService.resolve <voxclone.service.speech.service.SpeechService.resolve>`
    for a service called without the router) takes :attr:`lock` and stores
    the :class:`Resolution` in :attr:`resolution` unless it is there already:
    once, even if two threads ask at once. Its resolved parts read what was
    stored; read before, they raise RuntimeError.
    """

    def __init__(
        self,
        request: SpeechRequest,
        *,
        model_engine: str | None = None,
        looked_up: ResolvedVoice | None = None,
    ) -> None:
        self.request = request
        # The engine ``request.model`` names (None when it names none): known
        # without the database, so the event loop's precheck may use it.
        self.model_engine = model_engine
        # The voice ``request.voice`` names, when the caller had to look it up
        # already (the OpenAI routes): used as it is, not looked up again.
        self.looked_up = looked_up
        # Held while it resolves; ``resolution`` is set once, under it.
        self.lock = threading.Lock()
        self.resolution: Resolution | None = None
        self._lexicon_lock = threading.Lock()
        self._lexicons: dict[str, Lexicon | None] = {}

    def __repr__(self) -> str:
        return f"ResolvedRequest({self.request!r})"

    @property
    def is_ssml(self) -> bool:
        return self.request.is_ssml

    @functools.cached_property
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
    @property
    def resolved(self) -> Resolution:
        """What the request resolved to; RuntimeError when nobody resolved it
        yet (a programming error: resolve it through the router first)."""
        resolution = self.resolution
        if resolution is None:
            raise RuntimeError(
                f"{self!r} is not resolved: resolve it with SpeechRouter.resolve "
                "(or SpeechService.resolve) in a worker thread before reading its parts"
            )
        return resolution

    @property
    def engine(self) -> str:
        return self.resolved.engine

    @property
    def voice(self) -> ResolvedVoice:
        return self.resolved.voice

    @property
    def language(self) -> str:
        return self.resolved.language

    @property
    def ssml_voices(self) -> Mapping[str, ResolvedVoice]:
        return self.resolved.ssml_voices

    @property
    def pronunciations(self) -> tuple[Pronunciation, ...]:
        return self.resolved.pronunciations

    def lexicon(self, language: str) -> Lexicon | None:
        """The caller's entries for ``language``, compiled once per language."""
        entries = self.pronunciations
        if not entries:
            return None
        with self._lexicon_lock:
            if language not in self._lexicons:
                self._lexicons[language] = for_language(list(entries), language) or None
            return self._lexicons[language]

    @functools.cached_property
    def lexicon_fingerprint(self) -> str | None:
        """What the cache key holds of the lexicon (None without entries)."""
        entries = self.pronunciations
        return Lexicon(list(entries)).fingerprint() if entries else None


# What the speech surface takes: a plain request, or one the router built at the edge.
Speakable = SpeechRequest | ResolvedRequest


class RequestResolver:
    """Resolves requests for one engine: what its speech service needs to know
    about a request before it renders (its voice, language, SSML voices,
    lexicon, cache key, for the engine's frontend and capabilities), and the
    checks that turn a bad request into a 4xx before any audio."""

    def __init__(
        self,
        *,
        frontend: TextFrontend,
        catalog: VoiceCatalog,
        capabilities: EngineCapabilities,
        default_voice: str,
        default_language: str,
        max_text_chars: int,
        detect_language: Callable[[str, str], str] | None = None,
        lexicon: Callable[[str], list[Pronunciation]] | None = None,
        watermark: str | None = None,
        manifest: str | None = None,
    ) -> None:
        self._frontend = frontend
        # Marked and unmarked audio are different files: a cached one made
        # under the other policy must not be served. So are files signed with
        # or not signed (``manifest``: "c2pa" when whole files are signed).
        self._watermark = watermark
        self._manifest = manifest
        self._catalog = catalog
        self._caps = capabilities
        self._default_voice = default_voice
        self._default_language = default_language
        # The length of its audio (Settings.max_output_s) is priced with its
        # spoken form, on every route: service/speech/pricing.py.
        self._max_text = max_text_chars
        self._detect = detect_language
        # An owner's pronunciation entries (runtime/lexicon_store.py), read per request.
        self._lexicon_source = lexicon

    def resolve(self, r: ResolvedRequest, voice: ResolvedVoice | None) -> Resolution:
        """What ``r`` speaks with (``voice``: the one the router picked, else
        the one it names or the default), once its text, format, rate and SSML
        are checked (4xx when any is wrong); the caller's lexicon is read here,
        once for the request."""
        req = r.request
        if not isinstance(req.text, str) or not req.text.strip():
            raise InvalidInput("text must not be empty", field="text")
        if len(req.text) > self._max_text:
            raise PayloadTooLarge(
                f"text is longer than {self._max_text} characters",
                field="text",
                limit=self._max_text,
                value=len(req.text),
            )
        parse_format(req.format)
        check_rate(req.sample_rate)
        voice = self.voice(req) if voice is None else self._checked(voice)
        language = self.language(req, voice)
        ssml_voices: dict[str, ResolvedVoice] = {}
        doc = r.document
        if doc is not None:
            ssml_voices = self._ssml_voices(req, doc)  # unknown voices: 4xx now
        return Resolution(
            self._caps.engine, voice, language, ssml_voices, tuple(self._pronunciations(req))
        )

    def _ssml_voices(self, req: SpeechRequest, doc: SsmlDocument) -> dict[str, ResolvedVoice]:
        """Every voice a <voice name> switches to, resolved for the caller."""
        return {
            name: self._catalog.resolve(name, req.owner, self._caps.engine)
            for name in sorted(doc.voices)
        }

    def voice(self, req: SpeechRequest) -> ResolvedVoice:
        """The voice ``req`` names (or the default), resolved for its owner."""
        engine = self._caps.engine
        if req.voice_override is None:
            return self._catalog.resolve(req.voice or self._default_voice, req.owner, engine)
        return self._checked(req.voice_override)

    def _checked(self, voice: ResolvedVoice) -> ResolvedVoice:
        """``voice``, refused when another engine made it."""
        engine = self._caps.engine
        if voice.engine not in ("", engine):
            from voxclone.errors import VoiceModelMismatch

            raise VoiceModelMismatch(
                f"this voice was made for the {voice.engine} engine, not {engine}",
                field="voice",
                limit=voice.engine,
            )
        return voice

    def language_of(self, req: SpeechRequest) -> str:
        """The language ``req`` is spoken in: its own, else detected from the
        text, else the default (the router picks a default voice by it)."""
        return self.language(req, None)

    def language(self, req: SpeechRequest, voice: ResolvedVoice | None) -> str:
        if req.language:
            language = req.language.lower()
            if language == "en":
                language = "en-us"
            if language not in self._frontend.languages:
                from voxclone.errors import UnsupportedLanguage

                raise UnsupportedLanguage(
                    f"language '{req.language[:16]}' is not supported",
                    field="language",
                    limit=sorted(self._frontend.languages),
                )
            return language
        if self._detect is not None:
            # Short or ambiguous text keeps the voice's language (else the
            # default): "Mister Nguyen is here." is not French (langdetect.py).
            prefer = (voice.language if voice is not None else None) or self._default_language
            return self._detect(spoken_text(req), prefer)
        return self._default_language

    def key(self, r: ResolvedRequest, *, stream: bool) -> str:
        req = r.request
        return cache_key(
            # The same voice name may exist in two engines.
            engine=self._caps.engine,
            model=self._caps.model_id,
            model_version=self._caps.model_version,
            voice=r.voice.id,
            voice_version=r.voice.version,
            text=" ".join(req.text.split()),
            language=r.language,
            controls=self.key_controls(r),
            format=req.format,
            sample_rate=req.sample_rate,
            stream=stream,
        )

    def _pronunciations(self, req: SpeechRequest) -> list[Pronunciation]:
        if self._lexicon_source is None or req.owner is None:
            return []
        return self._lexicon_source(req.owner)

    def key_controls(self, r: ResolvedRequest) -> dict[str, object]:
        parts = r.request.controls.cache_parts()
        if self._watermark is not None:
            parts["watermark"] = None if r.request.unmarked else self._watermark
        if self._manifest is not None:
            parts["manifest"] = self._manifest
        if r.lexicon_fingerprint is not None:
            # A changed pronunciation is other audio.
            parts["lexicon"] = r.lexicon_fingerprint
        if r.is_ssml:
            # The same markup read as plain text is other audio; a voice the
            # markup switches to is part of it (a new version, new audio).
            parts["ssml"] = [f"{v.id}@{v.version}" for v in r.ssml_voices.values()]
        return parts

    def speaks_only_with(self, r: ResolvedRequest) -> bool:
        """Whether ``r`` speaks with its voice alone: not a blend, and no
        <voice> switch to another voice or to a blend."""
        voice = r.voice
        if is_blend_id(voice.id):
            return False
        return all(v.id == voice.id and not is_blend_id(v.id) for v in r.ssml_voices.values())

    def word_track(self, r: ResolvedRequest) -> WordTrack:
        """What collects ``r``'s word times (400 when they cannot be had)."""
        req = r.request
        if not self._caps.word_timestamps:
            raise InvalidInput(
                f"the {self._caps.engine} engine cannot time words; use a Kokoro voice",
                field="timestamps",
            )
        if req.is_ssml:
            # Words are mapped back to the request's text; markup is not words,
            # and <voice>/<break> change the time base per chunk.
            raise InvalidInput(
                "word timestamps are not available for SSML input", field="timestamps"
            )
        return WordTrack(
            req.text,
            self._caps.sample_rate,
            self._frontend.token_ids,
            self._frontend.normalizer(r.language),
        )

    def text_size(self, r: ResolvedRequest) -> int:
        """Characters the planner will speak (for progress bars)."""
        req, language, doc = r.request, r.language, r.document
        if doc is not None:
            return sum(
                len(s)
                for item in doc.items
                if not isinstance(item, SsmlBreak)
                for s in self._frontend.prepare(
                    item.text,
                    ssml_language(item.language, self._frontend.languages)
                    if item.language
                    else language,
                )
            )
        return sum(len(s) for s in self._frontend.prepare(req.text, language))
