"""SpeechService: request → cache → plan → schedule → post-process → encode/stream.

The same object serves HTTP, the CLI and Ray Serve replicas. It never holds
the whole text's audio: chunks are planned lazily, a few are kept in flight
on the scheduler so both workers stay busy, and each finished piece is
post-processed, joined and encoded before the next one is awaited.
"""

from __future__ import annotations

import functools
import logging
import queue
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, PayloadTooLarge
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.cache import TieredCache, cache_key
from voxclone.runtime.cache_guard import put_while_current
from voxclone.runtime.scheduler import (
    PRIORITY_FIRST_CHUNK,
    PRIORITY_NORMAL,
    Admission,
    Scheduler,
    WorkTiming,
)
from voxclone.runtime.singleflight import SingleFlight
from voxclone.runtime.stream_share import SharedStream, StreamShares
from voxclone.service.blends import is_blend_id
from voxclone.service.captions import WordTrack
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog
from voxclone.service.pricing import (
    LOOKAHEAD_CHUNKS,
    SpeechPricer,
    spoken_text,
)
from voxclone.synth.audio.encode import check_rate, content_type, encode, parse_format
from voxclone.synth.audio.join import PieceJoiner
from voxclone.synth.audio.post import apply_controls
from voxclone.synth.audio.stream_encode import open_stream_encoder
from voxclone.synth.controls import (
    ENERGY_RANGE,
    PITCH_RANGE,
    SPEED_RANGE,
    ResolvedControls,
    SpeechControls,
)
from voxclone.synth.engine.base import EngineCapabilities, SynthItem
from voxclone.synth.text.frontend import (
    Chunk,
    Spoken,
    TextFrontend,
)
from voxclone.synth.text.lexicon import Lexicon, Pronunciation, for_language
from voxclone.synth.text.ssml import (
    SsmlBreak,
    SsmlDocument,
    as_document,
    check_output_s,
    looks_like_ssml,
    parse_ssml,
    ssml_language,
)
from voxclone.synth.text.wordtimes import WordTime

log = logging.getLogger(__name__)

# What the start-up calibration call speaks: one ordinary sentence (~60
# characters, one chunk), long enough that per-call overhead does not swamp it.
CALIBRATION_TEXT = "The calibration sentence measures how fast this machine speaks."
# Either an admission taken earlier, or the terms to take one on.
Admit = Admission | AdmissionTerms | None
# A streamed FLAC header cannot carry the final frame count, which many
# readers need in a downloaded file: whole FLAC files are encoded in one go.
WHOLE_FILE_FORMATS = frozenset({"flac"})


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
    # service/router.py); None = the voice's own engine, else the default.
    model: str | None = None
    # An already-resolved voice (e.g. an inline reference clip cloned for this
    # request only); takes precedence over ``voice``.
    voice_override: ResolvedVoice | None = None
    # True: the text is SSML (wrapped in <speak> when it is a fragment);
    # False: plain text even if it starts with <speak>; None: SSML when it does.
    ssml: bool | None = None

    @property
    def is_ssml(self) -> bool:
        return self.ssml is True or (self.ssml is None and looks_like_ssml(self.text))


@dataclass(frozen=True)
class _Planned:
    """One chunk as it will be spoken: its voice and controls (SSML can change
    both mid-text), the silence after it and, for the first, before it."""

    chunk: Chunk
    voice: ResolvedVoice
    controls: ResolvedControls
    pause_s: float
    lead_s: float = 0.0


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


@dataclass
class FirstAudioStages:
    """Where a stream's time to first audio went, in seconds (issue #20):
    ``plan`` (text to the first chunk handed to the scheduler: validation of
    the chunk, G2P), ``queue`` (waiting for a worker), ``engine`` (the model
    call; for a frame engine, until its first piece), ``post`` (tone,
    controls, joining), ``encode`` (the output format's first bytes). What a
    client sees on top is the transport (HTTP, the socket)."""

    plan: float = 0.0
    queue: float = 0.0
    engine: float = 0.0
    post: float = 0.0
    encode: float = 0.0

    STAGES: ClassVar[tuple[str, ...]] = ("plan", "queue", "engine", "post", "encode")

    def as_dict(self) -> dict[str, float]:
        return {stage: getattr(self, stage) for stage in self.STAGES}

    @classmethod
    def of(cls, started: float, timing: WorkTiming, now: float) -> FirstAudioStages:
        """Stages up to ``now`` (the first audio leaving the pipeline) of a
        render that began at ``started`` and whose first chunk is ``timing``."""
        engine_start = timing.started if timing.started is not None else timing.submitted
        engine_end = timing.finished if timing.finished is not None else now
        return cls(
            plan=max(0.0, timing.submitted - started),
            queue=max(0.0, engine_start - timing.submitted),
            engine=max(0.0, engine_end - engine_start),
            post=max(0.0, now - engine_end),
        )


@dataclass
class RenderStats:
    """Filled in while a request renders; read by metrics and benchmarks."""

    audio_seconds: float = 0.0
    compute_seconds: float = 0.0
    first_audio_s: float | None = None
    chunks: int = 0
    first_audio_stages: FirstAudioStages | None = None


@dataclass(frozen=True)
class ServiceHooks:
    on_first_audio: Callable[[float], None] | None = None
    on_rendered: Callable[[RenderStats], None] | None = None
    # A stream's first audio bytes are out of the encoder: where the time went.
    on_first_audio_stages: Callable[[FirstAudioStages], None] | None = None


class SpeechService:
    """Speech with one engine (its frontend, scheduler and capabilities)."""

    def __init__(
        self,
        *,
        frontend: TextFrontend,
        catalog: VoiceCatalog,
        scheduler: Scheduler,
        capabilities: EngineCapabilities,
        cache: TieredCache | None = None,
        default_voice: str = "clear_female",
        default_language: str = "en-us",
        max_text_chars: int = 100_000,
        detect_language: Callable[[str, str], str] | None = None,
        hooks: ServiceHooks | None = None,
        lexicon: Callable[[str], list[Pronunciation]] | None = None,
        max_output_s: float = 4 * 3600.0,
    ) -> None:
        self._frontend = frontend
        # The longest audio one request may ask for, silence included
        # (Settings.max_output_s): SSML breaks cost no engine time but memory.
        self._max_output_s = max_output_s
        self._catalog = catalog
        self._scheduler = scheduler
        self._caps = capabilities
        self._cache = cache
        self._default_voice = default_voice
        self._default_language = default_language
        self._max_text = max_text_chars
        self._detect = detect_language
        self._hooks = hooks or ServiceHooks()
        # An owner's pronunciation entries (runtime/lexicon_store.py), read per request.
        self._lexicon_source = lexicon
        self._flights = SingleFlight()
        self._streams = StreamShares()
        self._pricer = SpeechPricer(
            frontend,
            scheduler,
            capabilities,
            max_text_chars=max_text_chars,
            default_language=default_language,
        )

    @property
    def sample_rate(self) -> int:
        return self._caps.sample_rate

    @property
    def catalog(self) -> VoiceCatalog:
        return self._catalog

    @property
    def capabilities(self) -> EngineCapabilities:
        return self._caps

    @property
    def languages(self) -> tuple[str, ...]:
        return self._frontend.languages

    # -- validation & keys ----------------------------------------------------
    def _validate(self, req: SpeechRequest) -> tuple[ResolvedVoice, str]:
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
        voice = self._voice_for(req)
        language = self._language_for(req, voice)
        if req.is_ssml:
            doc = self._document(req)
            self._ssml_voices(req, doc)  # unknown voices: 4xx now
            speed = req.controls.resolve().speed
            check_output_s(doc, limit_s=self._max_output_s, speed=speed)
        return voice, language

    def _document(self, req: SpeechRequest) -> SsmlDocument:
        return _parsed(as_document(req.text))

    def ssml_warnings(self, req: SpeechRequest) -> tuple[str, ...]:
        """What an SSML request's markup asked for that was ignored (empty for
        plain text); raises InvalidSsml (400) when the markup is malformed."""
        return ssml_warnings(req)

    def _ssml_voices(self, req: SpeechRequest, doc: SsmlDocument) -> dict[str, ResolvedVoice]:
        """Every voice a <voice name> switches to, resolved for the caller."""
        return {
            name: self._catalog.resolve(name, req.owner, self._caps.engine)
            for name in sorted(doc.voices)
        }

    def _voice_for(self, req: SpeechRequest) -> ResolvedVoice:
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
        return self._language_for(req, None)

    def _language_for(self, req: SpeechRequest, voice: ResolvedVoice | None) -> str:
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

    def _key(self, req: SpeechRequest, voice: ResolvedVoice, language: str, *, stream: bool) -> str:
        return cache_key(
            # The same voice name may exist in two engines.
            engine=self._caps.engine,
            model=self._caps.model_id,
            model_version=self._caps.model_version,
            voice=voice.id,
            voice_version=voice.version,
            text=" ".join(req.text.split()),
            language=language,
            controls=self._key_controls(req),
            format=req.format,
            sample_rate=req.sample_rate,
            stream=stream,
        )

    def _pronunciations(self, req: SpeechRequest) -> list[Pronunciation]:
        if self._lexicon_source is None or req.owner is None:
            return []
        return self._lexicon_source(req.owner)

    def _lexicons(self, req: SpeechRequest) -> Callable[[str], Lexicon | None]:
        """The caller's lexicon per language (read once for the request)."""
        entries = self._pronunciations(req)
        if not entries:
            return lambda _language: None
        compiled: dict[str, Lexicon] = {}

        def lexicon(language: str) -> Lexicon | None:
            if language not in compiled:
                compiled[language] = for_language(entries, language)
            return compiled[language] or None

        return lexicon

    def _key_controls(self, req: SpeechRequest) -> dict[str, object]:
        parts = req.controls.cache_parts()
        entries = self._pronunciations(req)
        if entries:
            # A changed pronunciation is other audio.
            parts["lexicon"] = Lexicon(entries).fingerprint()
        if req.is_ssml:
            # The same markup read as plain text is other audio; a voice the
            # markup switches to is part of it (a new version, new audio).
            voices = self._ssml_voices(req, self._document(req))
            parts["ssml"] = [f"{v.id}@{v.version}" for v in voices.values()]
        return parts

    def _cacheable(self, req: SpeechRequest, voice: ResolvedVoice) -> bool:
        """A file that speaks with voices other than ``voice`` is not kept: the
        cache purges by voice id, and a deleted voice must leave nothing behind.
        A blend speaks with several voices, so it is never kept either."""
        if self._cache is None or is_blend_id(voice.id):
            return False
        if not req.is_ssml:
            return True
        return all(
            v.id == voice.id and not is_blend_id(v.id)
            for v in self._ssml_voices(req, self._document(req)).values()
        )

    # -- whole-file synthesis --------------------------------------------------
    def synthesize(
        self,
        req: SpeechRequest,
        *,
        progress: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
    ) -> SpeechResult:
        """Whole file. ``progress`` receives the characters of text done per chunk.

        ``cancelled`` turns true when the caller no longer wants the result
        (its client disconnected): the render stops at the next chunk, unless
        an identical request still waits for the same shared render.
        ``deadline`` (``time.monotonic()`` clock) is when the file must be
        done; its chunks still queued at the deadline are dropped.
        ``admission``: the terms to admit the request on (:class:`AdmissionTerms`),
        or one taken earlier with :meth:`admit`. Coalesce first, admit second:
        a cache hit and a request identical to a render in flight are never
        refused; only a request that needs a render of its own is priced and
        admitted, and refused (503) when the work ahead would make it late.
        """
        voice, language = self._validate(req)
        ctype = content_type(req.format)
        key = self._key(req, voice, language, stream=False)
        cache = self._cache if self._cacheable(req, voice) else None
        if cache is not None:
            hit = cache.get_entry(key)
            if hit is not None:
                _release(admission)
                return SpeechResult(hit[0].data, ctype, hit[1])
        terms = admission if admission is not None else AdmissionTerms(deadline)

        def render(abandoned: Callable[[], bool]) -> bytes:
            # A request that missed the cache just before an identical render
            # stored its result must not synthesize again.
            if cache is not None:
                late_hit = cache.get_entry(key)
                if late_hit is not None:
                    return late_hit[0].data
            # Only the leader of the shared render is admitted.
            taken = self._take(req, voice, language, terms, stream=False)
            data = self._render_file(req, voice, language, progress, abandoned, deadline, taken)
            if cache is not None:
                # Not kept when the voice was deleted or changed meanwhile.
                put_while_current(
                    cache,
                    key,
                    data,
                    voice_id=voice.id,
                    version=voice.version,
                    content_type=ctype,
                    still_current=self._catalog.is_current,
                )
            return data

        # Identical concurrent requests share one synthesis, which stops only
        # when all of them have gone.
        try:
            audio = self._flights.do_cancellable(key, render, cancelled)
        finally:
            _release(admission)  # a follower needed none (releasing twice is harmless)
        return SpeechResult(audio, ctype, "miss")

    def _render_file(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        progress: Callable[[int], None] | None,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admission | None = None,
    ) -> bytes:
        fmt = parse_format(req.format).value
        options: dict[str, Any] = {
            "fast_start": False,
            "progress": progress,
            "cancelled": cancelled,
            "deadline": deadline,
            "admission": admission,
        }
        if fmt in WHOLE_FILE_FORMATS:
            pieces = list(self.render_pieces(req, voice, language, **options))
            audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
            return encode(audio, self.sample_rate, fmt, out_rate=req.sample_rate)
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            header = b""
            for index, part in enumerate(self._encoded(req, voice, language, **options)):
                if index == 0:
                    header = part
                spool.write(part)
            spool.seek(0)
            data = spool.read()
        if fmt == "wav":
            data = _close_wav_sizes(data, len(header))
        return data

    # -- word timestamps ----------------------------------------------------------
    def _word_track(self, req: SpeechRequest, language: str) -> WordTrack:
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
            self.sample_rate,
            self._frontend.token_ids,
            self._frontend.normalizer(language),
        )

    def synthesize_captioned(
        self,
        req: SpeechRequest,
        *,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
    ) -> CaptionedResult:
        """The whole file and its word timestamps (not cached: the cache keeps audio only)."""
        voice, language = self._validate(req)
        try:
            track = self._word_track(req, language)
            taken = self._take(
                req, voice, language, admission or AdmissionTerms(deadline), stream=False
            )
        except BaseException:
            _release(admission)
            raise
        pieces = list(
            self.render_pieces(
                req,
                voice,
                language,
                fast_start=False,
                cancelled=cancelled,
                deadline=deadline,
                admission=taken,
                words=track,
            )
        )
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        data = encode(
            audio, self.sample_rate, parse_format(req.format).value, out_rate=req.sample_rate
        )
        return CaptionedResult(
            data, content_type(req.format), tuple(track.words), audio.size / self.sample_rate
        )

    def stream_captioned(
        self,
        req: SpeechRequest,
        *,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
    ) -> tuple[str, Iterator[tuple[bytes, list[WordTime]]]]:
        """Validate now, then (content type, iterator of (encoded audio, the
        words whose speech has been sent by the end of that audio))."""
        voice, language = self._validate(req)
        try:
            track = self._word_track(req, language)
            terms = admission or AdmissionTerms(deadline, must_finish=False)
            taken = self._take(req, voice, language, terms, stream=True)
        except BaseException:
            _release(admission)
            raise
        parts = self._captioned_parts(req, voice, language, track, cancelled, taken)
        weakref.finalize(parts, taken.release)
        return content_type(req.format), parts

    def _captioned_parts(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        track: WordTrack,
        cancelled: Callable[[], bool] | None,
        admission: Admission,
    ) -> Iterator[tuple[bytes, list[WordTime]]]:
        encoder = open_stream_encoder(req.format, self.sample_rate, out_rate=req.sample_rate)
        sent = 0
        try:
            header = encoder.header()
            pieces = self.render_pieces(
                req,
                voice,
                language,
                fast_start=True,
                cancelled=cancelled,
                admission=admission,
                words=track,
            )
            for audio in pieces:
                data = header + encoder.feed(audio)
                header = b""
                fresh, sent = track.words[sent:], len(track.words)
                if data or fresh:
                    yield data, fresh
            final = encoder.finish()
            fresh = track.words[sent:]
            if final or fresh:
                yield final, fresh
        finally:
            encoder.close()

    # -- streaming ------------------------------------------------------------
    def stream(
        self,
        req: SpeechRequest,
        *,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
    ) -> tuple[str, Iterator[bytes]]:
        """Validate now (so errors become 4xx), then return (content type, byte iterator).

        Coalesce first, admit second: a cache hit answers at once, and a
        request identical to a stream in flight follows that render (every
        part from the start, then live) instead of queueing its own; neither
        is refused. Otherwise the request is priced and admitted on
        ``admission`` (:class:`AdmissionTerms`; default: it must start by
        ``deadline``), here, so a refusal is a 503 and not a stream that ends
        early. Once audio flows, the client sets the pace and a disconnect
        (``cancelled``) stops the render once every listener of it has gone.
        """
        voice, language = self._validate(req)
        ctype = content_type(req.format)
        key = self._key(req, voice, language, stream=True)
        if self._cacheable(req, voice):
            assert self._cache is not None
            hit = self._cache.get_entry(key)
            if hit is not None:
                _release(admission)
                return ctype, iter([hit[0].data])
        follower = self._streams.follow(key, cancelled)
        if follower is not None:
            _release(admission)
            return ctype, follower
        terms = admission if admission is not None else AdmissionTerms(deadline, must_finish=False)
        taken = self._take(req, voice, language, terms, stream=True)

        def render(shared: SharedStream) -> Iterator[bytes]:
            chunks = self._stream_and_cache(
                req, voice, language, key, ctype, shared.abandoned, taken
            )
            # A generator closed before its first step never runs its
            # ``finally``: free the reservation when it is dropped, run or not.
            weakref.finalize(chunks, taken.release)
            return chunks

        try:
            reader, led = self._streams.lead(key, render, cancelled)
        except BaseException:
            taken.release()
            raise
        if not led:
            taken.release()  # an identical stream started meanwhile: following it
        return ctype, reader

    def _stream_and_cache(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        key: str,
        ctype: str,
        cancelled: Callable[[], bool] | None,
        admission: Admission,
    ) -> Iterator[bytes]:
        kept: list[bytes] | None = [] if self._cacheable(req, voice) else None
        parts = self._encoded(
            req, voice, language, fast_start=True, cancelled=cancelled, admission=admission
        )
        for part in parts:
            if kept is not None:
                kept.append(part)
            yield part
        if kept is not None and self._cache is not None:
            # Not kept when the voice was deleted or changed meanwhile.
            put_while_current(
                self._cache,
                key,
                b"".join(kept),
                voice_id=voice.id,
                version=voice.version,
                content_type=ctype,
                still_current=self._catalog.is_current,
            )

    # -- the pipeline -----------------------------------------------------------
    def render_pieces(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        *,
        fast_start: bool,
        cancelled: Callable[[], bool] | None = None,
        stats: RenderStats | None = None,
        progress: Callable[[int], None] | None = None,
        deadline: float | None = None,
        admission: Admission | None = None,
        words: WordTrack | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield post-processed, joined float32 audio at the engine rate.

        Without an ``admission`` (taken by :meth:`stream` before it returns)
        one is taken here, due by ``deadline`` when one is given. With
        ``words``, the words spoken so far are in ``words.words`` (output
        time) before the audio that contains them is yielded.
        """
        controls = replace(
            req.controls.resolve(), native_speed="speed" in self._caps.native_controls
        )
        joiner = PieceJoiner(self.sample_rate)
        stats = stats if stats is not None else RenderStats()
        started = time.perf_counter()
        if admission is None:
            admission = self._take(req, voice, language, AdmissionTerms(deadline), stream=False)
        # A frame engine's pieces go out as the model makes them when nothing
        # needs the whole chunk: a stream (whole files gain nothing) whose
        # voice has no tone filter and whose controls need no DSP (tempo and
        # pitch work on whole chunks). Only the true-peak limiter runs per frame.
        frames = (
            fast_start
            and words is None  # word times need whole chunks
            and self._caps.streaming == "frame"
            and voice.tone is None
            and not _at_voice_pace(controls, voice).needs_dsp
            and not req.is_ssml  # voices and controls may change per chunk
        )
        try:
            plan = self._plan(req, voice, language, controls, fast_start)
        except BaseException:
            admission.release()
            raise
        first_timing = WorkTiming()

        def first_audio_out() -> None:
            now = time.perf_counter()
            stats.first_audio_s = now - started
            stats.first_audio_stages = FirstAudioStages.of(started, first_timing, now)
            if self._hooks.on_first_audio is not None:
                self._hooks.on_first_audio(stats.first_audio_s)

        for planned, audio, chunk_done in self._synthesized(
            plan, fast_start, cancelled, admission, frames=frames, words=words, timing=first_timing
        ):
            chunk = planned.chunk
            engine_len = audio.size
            if planned.lead_s > 0 and stats.first_audio_s is None:
                lead = np.zeros(int(round(planned.lead_s * self.sample_rate)), np.float32)
                stats.audio_seconds += lead.size / self.sample_rate
                first_audio_out()
                yield lead
            if planned.voice.tone is not None:
                # Before the controls: pitch and energy act on the voice as cloned.
                audio = planned.voice.tone.apply(audio, self.sample_rate)
            # Always: besides the controls' DSP it holds the true-peak ceiling.
            audio = apply_controls(audio, self.sample_rate, planned.controls)
            if not chunk_done:
                out = joiner.feed_partial(audio)
            else:
                out = joiner.feed(audio, planned.pause_s)
                if words is not None:
                    words.chunk_done(chunk, engine_len, audio.size, joiner)
                stats.chunks += 1
                if progress is not None:
                    progress(len(chunk.text))
            if out.size:
                stats.audio_seconds += out.size / self.sample_rate
                if stats.first_audio_s is None:
                    first_audio_out()
                yield out
        tail = joiner.finish()
        if words is not None:
            words.finish()
        if tail.size:
            stats.audio_seconds += tail.size / self.sample_rate
            yield tail
        stats.compute_seconds = time.perf_counter() - started
        if self._hooks.on_rendered is not None:
            self._hooks.on_rendered(stats)

    def _plan(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        controls: ResolvedControls,
        fast_start: bool,
    ) -> Iterator[_Planned]:
        """The chunks to speak, with their voice, controls and pauses. Text is
        planned now (errors surface before any audio); phonemes lazily."""
        lexicons = self._lexicons(req)
        if not req.is_ssml:
            chunks = self._frontend.plan(
                req.text, language, fast_start=fast_start, lexicon=lexicons(language)
            )
            # Pauses scale with the speed too, so the whole file (not only the
            # speech) is 1/speed as long; the last pause is the file's tail.
            paced = _at_voice_pace(controls, voice)
            return (
                _Planned(c, voice, paced, c.pause_after_s * paced.pause / paced.speed)
                for c in chunks
            )
        return self._ssml_plan(req, voice, language, controls, fast_start, lexicons)

    def _ssml_plan(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        controls: ResolvedControls,
        fast_start: bool,
        lexicons: Callable[[str], Lexicon | None],
    ) -> Iterator[_Planned]:
        doc = self._document(req)
        voices = self._ssml_voices(req, doc)
        if doc.language and not req.language:
            language = ssml_language(doc.language, self.languages)
        parts: list[tuple[Iterator[Chunk], ResolvedVoice, ResolvedControls] | float] = []
        spoken = False
        for item in doc.items:
            if isinstance(item, SsmlBreak):
                parts.append(item.seconds)
                continue
            lang = ssml_language(item.language, self.languages) if item.language else language
            p = item.prosody
            seg_controls = replace(
                controls,
                speed=_clamp(controls.speed * p.rate, SPEED_RANGE),
                pitch=_clamp(controls.pitch + p.pitch, PITCH_RANGE),
                energy=_clamp(controls.energy * p.volume, ENERGY_RANGE),
            )
            try:
                chunks = self._frontend.plan(
                    item.text, lang, fast_start=fast_start and not spoken, lexicon=lexicons(lang)
                )
            except InvalidInput as exc:
                if exc.field == "text":  # a segment of punctuation only: nothing to say
                    continue
                raise
            seg_voice = voices[item.voice] if item.voice else voice
            parts.append((chunks, seg_voice, _at_voice_pace(seg_controls, seg_voice)))
            spoken = True
        if not spoken:
            raise InvalidInput("the SSML contains nothing that can be spoken", field="text")
        return _join_ssml_parts(parts)

    def _synthesized(
        self,
        plan: Iterator[_Planned],
        fast_start: bool,
        cancelled: Callable[[], bool] | None,
        admission: Admission,
        *,
        frames: bool = False,
        words: WordTrack | None = None,
        timing: WorkTiming | None = None,
    ) -> Iterator[tuple[_Planned, np.ndarray, bool]]:
        """Yield (planned chunk, audio, chunk done): the audio of each chunk in
        order, in one piece, or with ``frames`` in the engine's pieces as they
        are made (then a last empty piece marks the chunk's end). ``timing``
        is filled in for the first chunk."""
        pending: deque[tuple[_Planned, Future[np.ndarray], queue.SimpleQueue[Any] | None]] = deque()
        abandoned = threading.Event()

        def gone() -> bool:
            return abandoned.is_set() or (cancelled is not None and cancelled())

        def submit_next() -> bool:
            planned = next(plan, None)
            if planned is None:
                return False
            chunk, voice = planned.chunk, planned.voice
            first = chunk.index == 0
            priority = PRIORITY_FIRST_CHUNK if first else PRIORITY_NORMAL
            if admission.priority is not None:
                priority = admission.priority  # background work (speech jobs)
            item = SynthItem(
                chunk.token_ids,
                voice.style,
                planned.controls.engine_speed,
                prompt=voice.prompt,
                timing=None if words is None else words.slot(chunk.index),
            )
            # A whole file is due by its deadline; a stream only has to start by it.
            due = admission.deadline if (first or admission.must_finish) else None
            pieces: queue.SimpleQueue[Any] | None = queue.SimpleQueue() if frames else None
            future = self._scheduler.submit(
                item,
                priority=priority,
                cancelled=gone,
                admitted=not first,
                deadline=due,
                cost=float(_units(chunk)),
                on_piece=None if pieces is None else pieces.put,
                timing=timing if first else None,
                tenant=admission.tenant,
            )
            if pieces is not None:
                # Every piece is queued before the future resolves: this ends them.
                future.add_done_callback(functools.partial(_end_of_pieces, pieces))
            pending.append((planned, future, pieces))
            return True

        # A stream's first chunk goes alone, so on an idle server it can take the
        # scheduler's all-cores fast lane; the lookahead fills up behind it.
        initial = 1 if fast_start else LOOKAHEAD_CHUNKS
        try:
            while len(pending) < initial and submit_next():
                pass
            while pending:
                if gone():
                    raise Cancelled("request cancelled")
                planned, future, pieces = pending[0]
                if pieces is not None:
                    yield from _pieces_until_done(planned, pieces, gone)
                pending.popleft()
                audio = future.result()
                admission.consume(_units(planned.chunk))
                while len(pending) < LOOKAHEAD_CHUNKS and submit_next():
                    pass
                yield planned, (_NO_AUDIO if pieces is not None else audio), True
        finally:
            # Generator closed early (client went away) or failed: drop queued work.
            abandoned.set()
            admission.release()
            for _, future, _ in pending:
                future.cancel()

    def _encoded(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        *,
        fast_start: bool,
        cancelled: Callable[[], bool] | None = None,
        progress: Callable[[int], None] | None = None,
        deadline: float | None = None,
        admission: Admission | None = None,
    ) -> Iterator[bytes]:
        encoder = open_stream_encoder(req.format, self.sample_rate, out_rate=req.sample_rate)
        stats = RenderStats()
        try:
            yield encoder.header()
            pieces = self.render_pieces(
                req,
                voice,
                language,
                fast_start=fast_start,
                cancelled=cancelled,
                progress=progress,
                deadline=deadline,
                admission=admission,
                stats=stats,
            )
            # Streams only: a whole file's client waits for the whole file.
            staged = not fast_start
            for audio in pieces:
                fed = time.perf_counter()
                data = encoder.feed(audio)
                if data:
                    if not staged and stats.first_audio_stages is not None:
                        staged = True
                        stats.first_audio_stages.encode = time.perf_counter() - fed
                        if self._hooks.on_first_audio_stages is not None:
                            self._hooks.on_first_audio_stages(stats.first_audio_stages)
                    yield data
            final = encoder.finish()
            if final:
                yield final
        finally:
            encoder.close()

    def price(self, req: SpeechRequest, voice: ResolvedVoice, language: str) -> Spoken:
        """What ``req`` costs to speak (:meth:`SpeechPricer.price`)."""
        return self._pricer.price(req, language, self._lexicons(req), self._ssml_doc(req))

    def _ssml_doc(self, req: SpeechRequest) -> SsmlDocument | None:
        return self._document(req) if req.is_ssml else None

    def _take(
        self,
        req: SpeechRequest,
        voice: ResolvedVoice,
        language: str,
        admit: Admission | AdmissionTerms,
        *,
        stream: bool,
    ) -> Admission:
        """The admission ``req`` renders under (:meth:`SpeechPricer.take`)."""
        if isinstance(admit, Admission):
            return admit
        return self._pricer.take(
            req, language, self._lexicons(req), self._ssml_doc(req), admit, stream=stream
        )

    def precheck(
        self, req: SpeechRequest, terms: AdmissionTerms, *, stream: bool
    ) -> AdmissionTerms:
        """Cheap refusal on the event loop (:meth:`SpeechPricer.precheck`)."""
        return self._pricer.precheck(req, terms, stream=stream)

    def admit(
        self,
        req: SpeechRequest,
        deadline: float,
        *,
        stream: bool,
        must_finish: bool | None = None,
        first_audio_s: float | None = None,
    ) -> Admission:
        """Reserve engine time for ``req`` now (it validates and prices the
        request: voice lookup and text preparation, so call it from a worker
        thread). Raises Overloaded (503) when the work already admitted would
        make it late, PayloadTooLarge (413) when it could not be done by
        ``deadline`` even alone. The caller releases it at the end (releasing
        twice is harmless); a cache hit or a shared render releases it unused.
        Transports that can wait should pass :class:`AdmissionTerms` to
        :meth:`synthesize` / :meth:`stream` instead, which coalesce first.

        A whole file must finish by ``deadline``. A stream must deliver its
        first audio within ``first_audio_s`` (and by ``deadline``), and must
        also finish by ``deadline`` when ``must_finish``."""
        voice, language = self._validate(req)
        finish = (not stream) if must_finish is None else (must_finish or not stream)
        terms = AdmissionTerms(deadline, finish, first_audio_s if stream else None)
        return self._take(req, voice, language, terms, stream=stream)

    def admit_background(self, req: SpeechRequest) -> Admission:
        """An admission for a speech job, priced like a live request: it counts
        in the backlog live requests see only as much as it keeps on the engine
        at once (the look-ahead), not its whole (possibly book-long) text."""
        voice, language = self._validate(req)
        spoken = self._pricer.price(req, language, self._lexicons(req), self._ssml_doc(req))
        units = self._pricer.charged(spoken).units
        return self._scheduler.admit_window(
            float(units), float(LOOKAHEAD_CHUNKS * self._caps.max_tokens), tenant=req.owner
        )

    def calibrate(self) -> float:
        """Measure the engine's rate with one real call at background priority
        (the server runs it once after start-up, so admission plans with this
        machine's speed from the first burst on); returns its seconds."""
        voice = self._catalog.resolve(self._default_voice, None, self._caps.engine)
        chunk = next(iter(self._frontend.plan(CALIBRATION_TEXT, self._default_language)))
        item = SynthItem(chunk.token_ids, voice.style, 1.0, prompt=voice.prompt)
        return self._scheduler.calibrate(item, float(_units(chunk)))

    def plan(
        self, req: SpeechRequest, *, fast_start: bool = False
    ) -> tuple[ResolvedVoice, Iterator[Chunk]]:
        """The voice ``req`` resolves to and the chunks its text becomes (what
        the engine will be asked for): for benchmarks and tools."""
        voice, language = self._validate(req)
        controls = req.controls.resolve()
        planned = self._plan(req, voice, language, controls, fast_start)
        return voice, (p.chunk for p in planned)

    def render_audio(self, req: SpeechRequest) -> np.ndarray:
        """Whole utterance as float32 at the engine rate (CLI, tests, benchmarks)."""
        voice, language = self._validate(req)
        pieces = list(self.render_pieces(req, voice, language, fast_start=False))
        return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)

    def text_size(self, req: SpeechRequest) -> int:
        """Characters the planner will speak (for progress bars)."""
        language = self._language_for(req, self._voice_for(req))
        if req.is_ssml:
            doc = self._document(req)
            return sum(
                len(s)
                for item in doc.items
                if not isinstance(item, SsmlBreak)
                for s in self._frontend.prepare(
                    item.text,
                    ssml_language(item.language, self.languages) if item.language else language,
                )
            )
        return sum(len(s) for s in self._frontend.prepare(req.text, language))

    def invalidate_voice(self, voice_id: str) -> None:
        """Drop ``voice_id``'s audio from every tier; raises if a tier is unreachable."""
        if self._cache is not None:
            self._cache.invalidate_voice(voice_id)


_CHUNK_END = object()
_NO_AUDIO = np.zeros(0, dtype=np.float32)


def _end_of_pieces(pieces: queue.SimpleQueue[Any], _future: Future[np.ndarray]) -> None:
    pieces.put(_CHUNK_END)


def ssml_warnings(req: SpeechRequest) -> tuple[str, ...]:
    """Check ``req``'s SSML without an engine (InvalidSsml when malformed); what
    its markup asked for that is ignored. Empty for plain text."""
    return _parsed(as_document(req.text)).warnings if req.is_ssml else ()


@functools.lru_cache(maxsize=16)
def _parsed(document: str) -> SsmlDocument:
    # One request asks for its document several times (validation, cache key,
    # plan, warnings header); parsing is pure, so the last few are kept.
    return parse_ssml(document)




def _release(admission: Admit) -> None:
    if admission is not None:
        admission.release()


def _units(chunk: Chunk) -> int:
    """What a chunk costs (its spoken units; chunks built by hand may lack them)."""
    return chunk.units or len(chunk.text)


def _at_voice_pace(controls: ResolvedControls, voice: ResolvedVoice) -> ResolvedControls:
    """``controls`` relative to the voice's own pace (a clone's follows its reference)."""
    if voice.speed == 1.0:
        return controls
    return replace(controls, speed=_clamp(controls.speed * voice.speed, SPEED_RANGE))


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _join_ssml_parts(
    parts: list[tuple[Iterator[Chunk], ResolvedVoice, ResolvedControls] | float],
) -> Iterator[_Planned]:
    """Chunks of every SSML segment in order, numbered anew; a <break> becomes
    the exact silence after the chunk before it (before the first: a lead)."""
    index = 0
    held: _Planned | None = None
    lead = 0.0
    for part in parts:
        if isinstance(part, float):
            if held is None:
                lead += part
            else:
                # An explicit break replaces the punctuation pause; it is not
                # scaled by speed or emotion (the markup asked for this length).
                held = replace(held, pause_s=part)
            continue
        chunks, voice, controls = part
        for chunk in chunks:
            if held is not None:
                yield held
            pause = chunk.pause_after_s * controls.pause / controls.speed
            held = _Planned(replace(chunk, index=index), voice, controls, pause, lead)
            lead = 0.0
            index += 1
    if held is not None:
        yield held


def _pieces_until_done(
    chunk: _Planned, pieces: queue.SimpleQueue[Any], gone: Callable[[], bool]
) -> Iterator[tuple[_Planned, np.ndarray, bool]]:
    """A frame engine's pieces of ``chunk`` as the worker hands them over."""
    while True:
        try:
            piece = pieces.get(timeout=0.1)
        except queue.Empty:
            if gone():
                raise Cancelled("request cancelled") from None
            continue
        if piece is _CHUNK_END:
            return
        yield chunk, piece, False


def _close_wav_sizes(data: bytes, header_len: int) -> bytes:
    """Replace the open-ended sizes a streaming WAV header carries with real ones."""
    buf = bytearray(data)
    data_at = buf.find(b"data", 12, max(header_len, 12) + 8)
    if buf[:4] != b"RIFF" or data_at < 0:
        return bytes(buf)
    buf[4:8] = (len(buf) - 8).to_bytes(4, "little")
    buf[data_at + 4 : data_at + 8] = (len(buf) - data_at - 8).to_bytes(4, "little")
    return bytes(buf)
