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
from voxclone.service.speech_request import SpeechRequest, ssml_document
from voxclone.synth.audio.encode import check_rate, parse_format
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.lexicon import Lexicon, Pronunciation, for_language
from voxclone.synth.text.ssml import SsmlBreak, SsmlDocument, check_output_s, ssml_language


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
        max_output_s: float,
        detect_language: Callable[[str, str], str] | None = None,
        lexicon: Callable[[str], list[Pronunciation]] | None = None,
    ) -> None:
        self._frontend = frontend
        self._catalog = catalog
        self._caps = capabilities
        self._default_voice = default_voice
        self._default_language = default_language
        self._max_text = max_text_chars
        # The longest audio one request may ask for, silence included
        # (Settings.max_output_s): SSML breaks cost no engine time but memory.
        self._max_output_s = max_output_s
        self._detect = detect_language
        # An owner's pronunciation entries (runtime/lexicon_store.py), read per request.
        self._lexicon_source = lexicon

    def validate(self, req: SpeechRequest) -> tuple[ResolvedVoice, str]:
        """The voice and language ``req`` speaks with, once its text, format,
        rate and SSML are checked (4xx when any is wrong)."""
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
        voice = self.voice(req)
        language = self.language(req, voice)
        if req.is_ssml:
            doc = self.document(req)
            self.ssml_voices(req, doc)  # unknown voices: 4xx now
            speed = req.controls.resolve().speed
            check_output_s(doc, limit_s=self._max_output_s, speed=speed)
        return voice, language

    def document(self, req: SpeechRequest) -> SsmlDocument:
        return ssml_document(req)

    def ssml_doc(self, req: SpeechRequest) -> SsmlDocument | None:
        """``req``'s SSML document, None for plain text."""
        return ssml_document(req) if req.is_ssml else None

    def ssml_voices(self, req: SpeechRequest, doc: SsmlDocument) -> dict[str, ResolvedVoice]:
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
        if req.voice_override.engine not in ("", engine):
            from voxclone.errors import VoiceModelMismatch

            raise VoiceModelMismatch(
                f"this voice was made for the {req.voice_override.engine} engine, not {engine}",
                field="voice",
                limit=req.voice_override.engine,
            )
        return req.voice_override

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

    def key(self, req: SpeechRequest, voice: ResolvedVoice, language: str, *, stream: bool) -> str:
        return cache_key(
            # The same voice name may exist in two engines.
            engine=self._caps.engine,
            model=self._caps.model_id,
            model_version=self._caps.model_version,
            voice=voice.id,
            voice_version=voice.version,
            text=" ".join(req.text.split()),
            language=language,
            controls=self.key_controls(req),
            format=req.format,
            sample_rate=req.sample_rate,
            stream=stream,
        )

    def pronunciations(self, req: SpeechRequest) -> list[Pronunciation]:
        if self._lexicon_source is None or req.owner is None:
            return []
        return self._lexicon_source(req.owner)

    def lexicons(self, req: SpeechRequest) -> Callable[[str], Lexicon | None]:
        """The caller's lexicon per language (read once for the request)."""
        entries = self.pronunciations(req)
        if not entries:
            return lambda _language: None
        compiled: dict[str, Lexicon] = {}

        def lexicon(language: str) -> Lexicon | None:
            if language not in compiled:
                compiled[language] = for_language(entries, language)
            return compiled[language] or None

        return lexicon

    def key_controls(self, req: SpeechRequest) -> dict[str, object]:
        parts = req.controls.cache_parts()
        entries = self.pronunciations(req)
        if entries:
            # A changed pronunciation is other audio.
            parts["lexicon"] = Lexicon(entries).fingerprint()
        if req.is_ssml:
            # The same markup read as plain text is other audio; a voice the
            # markup switches to is part of it (a new version, new audio).
            voices = self.ssml_voices(req, self.document(req))
            parts["ssml"] = [f"{v.id}@{v.version}" for v in voices.values()]
        return parts

    def speaks_only_with(self, req: SpeechRequest, voice: ResolvedVoice) -> bool:
        """Whether ``req`` speaks with ``voice`` alone: not a blend, and no
        <voice> switch to another voice or to a blend."""
        if is_blend_id(voice.id):
            return False
        if not req.is_ssml:
            return True
        return all(
            v.id == voice.id and not is_blend_id(v.id)
            for v in self.ssml_voices(req, self.document(req)).values()
        )

    def word_track(self, req: SpeechRequest, language: str) -> WordTrack:
        """What collects ``req``'s word times (400 when they cannot be had)."""
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
            self._frontend.normalizer(language),
        )

    def text_size(self, req: SpeechRequest) -> int:
        """Characters the planner will speak (for progress bars)."""
        language = self.language(req, self.voice(req))
        if req.is_ssml:
            doc = self.document(req)
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
