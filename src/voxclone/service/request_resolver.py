"""Resolving a speech request: its voice, language, SSML voices, lexicon, cache key.

What the speech service needs to know about a request before it renders,
for one engine (its frontend's languages, its capabilities), and the checks
that turn a bad request into a 4xx before any audio.
"""

from __future__ import annotations

from collections.abc import Callable

from voxclone.errors import InvalidInput, PayloadTooLarge
from voxclone.runtime.cache import cache_key
from voxclone.service.blends import is_blend_id
from voxclone.service.captions import WordTrack
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog
from voxclone.service.pricing import spoken_text
from voxclone.service.speech_request import SpeechRequest
from voxclone.service.speech_resolved import Resolution, ResolvedRequest
from voxclone.synth.audio.file_encode import check_rate, parse_format
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.lexicon import Pronunciation
from voxclone.synth.text.ssml import SsmlBreak, SsmlDocument, ssml_language


class RequestResolver:
    """Resolves requests for one engine."""

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
        # spoken form, on every route: service/pricing.py.
        self._max_text = max_text_chars
        self._detect = detect_language
        # An owner's pronunciation entries (runtime/lexicon_store.py), read per request.
        self._lexicon_source = lexicon

    def request(self, req: SpeechRequest | ResolvedRequest) -> ResolvedRequest:
        """``req`` to be resolved by this engine alone (a caller that skipped
        the router); a request the router built is returned as it is."""
        if isinstance(req, ResolvedRequest):
            return req
        return ResolvedRequest(req, lambda r: self.resolve(r, None))

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
