"""SpeechService: request → cache → plan → schedule → post-process → encode/stream.

The same object serves HTTP, the CLI and Ray Serve replicas. This module
holds the use cases (a whole file, a stream, captions, admission); the steps
live beside it in this package: ``request.py`` (the request and result values,
the request as it travels and its resolver: voice, language, lexicon, cache
key), ``plan.py`` (text and SSML to chunks), ``render.py`` (chunks through the
scheduler to joined audio), ``encode.py`` (bytes), ``pricing.py`` (what a
request costs, its admission), ``render_stats.py``.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import IO

import numpy as np

from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.cache import TieredCache
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.scheduler import Admission, Scheduler
from voxclone.runtime.shared_render import SharedStream, SingleFlight, StreamShares
from voxclone.service.c2pa_manifest import ManifestStamper, OutputFacts, voice_reference
from voxclone.service.captions import WordTrack
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog
from voxclone.service.speech.encode import (
    Render,
    encode_captioned,
    encode_file_into,
    encode_stream,
    spooled,
)
from voxclone.service.speech.output_length import held_to
from voxclone.service.speech.plan import PlannedChunk, plan_ssml, plan_text, units
from voxclone.service.speech.pricing import (
    LOOKAHEAD_CHUNKS,
    SpeechPrice,
    SpeechPricer,
    release,
    released_at_end,
    released_on_failure,
)
from voxclone.service.speech.render import ChunkRenderer
from voxclone.service.speech.render_stats import FirstAudioStages, RenderStats
from voxclone.service.speech.request import (
    Admit,
    CaptionedResult,
    RequestResolver,
    ResolvedRequest,
    Speakable,
    SpeechRequest,
    SpeechResult,
    ssml_warnings,
)
from voxclone.synth.audio.file_encode import content_type, encode, parse_format
from voxclone.synth.audio.watermark import WATERMARK_ID
from voxclone.synth.controls import ResolvedControls
from voxclone.synth.engine.base import EngineCapabilities, SynthItem
from voxclone.synth.text.frontend import Chunk, TextFrontend
from voxclone.synth.text.lexicon import Pronunciation
from voxclone.synth.text.ssml import ssml_language
from voxclone.synth.text.wordtimes import WordTime

# Names other modules have imported from here since before the split.
__all__ = [
    "CALIBRATION_TEXT",
    "LOOKAHEAD_CHUNKS",
    "Admit",
    "CaptionedResult",
    "FirstAudioStages",
    "RenderStats",
    "SpeechRequest",
    "SpeechResult",
    "SpeechService",
    "ssml_warnings",
]

log = logging.getLogger(__name__)

# What the start-up calibration call speaks: one ordinary sentence (~60
# characters, one chunk), long enough that per-call overhead does not swamp it.
CALIBRATION_TEXT = "The calibration sentence measures how fast this machine speaks."


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
        metrics: Metrics | None = None,
        lexicon: Callable[[str], list[Pronunciation]] | None = None,
        max_output_s: float = 4 * 3600.0,
        watermark: bool = False,
        stamper: ManifestStamper | None = None,
    ) -> None:
        self._frontend = frontend
        self._stamper = stamper
        self._catalog = catalog
        self._scheduler = scheduler
        self._caps = capabilities
        self._cache = cache
        self._default_voice = default_voice
        self._default_language = default_language
        self._metrics = metrics
        self._flights = SingleFlight()
        self._streams = StreamShares()
        self.resolver = RequestResolver(
            frontend=frontend,
            catalog=catalog,
            capabilities=capabilities,
            default_voice=default_voice,
            default_language=default_language,
            max_text_chars=max_text_chars,
            detect_language=detect_language,
            lexicon=lexicon,
            watermark=WATERMARK_ID if watermark else None,
            # Whether files are signed, not by which key: replicas sharing a
            # Redis cache each make their own key at first start, and keyed by
            # it they stopped sharing audio (tests/e2e/test_cluster_limits.py).
            # A cached file keeps the manifest of the replica that made it;
            # give every replica one key (VOXCLONE_SIGNING_CERT/KEY) to sign alike.
            manifest="c2pa" if stamper is not None else None,
        )
        self._pricer = SpeechPricer(
            frontend,
            scheduler,
            capabilities,
            max_text_chars=max_text_chars,
            default_language=default_language,
            max_output_s=max_output_s,
        )
        self._renderer = ChunkRenderer(scheduler, capabilities, metrics, watermark=watermark)

    @property
    def sample_rate(self) -> int:
        return self._caps.sample_rate

    @property
    def pricer(self) -> SpeechPricer:
        """What this engine's requests cost, and their admission on its
        scheduler (the router's event-loop precheck calls it directly)."""
        return self._pricer

    @property
    def catalog(self) -> VoiceCatalog:
        return self._catalog

    @property
    def capabilities(self) -> EngineCapabilities:
        return self._caps

    @property
    def languages(self) -> tuple[str, ...]:
        return self._frontend.languages

    def check_ipa(self, word: str, ipa: str, language: str) -> None:
        """UnspeakablePhonemes when this engine's vocabulary has no sound of
        ``ipa`` in ``language`` (service/lexicon_check.py)."""
        self._frontend.check_ipa(word, ipa, language)

    # -- the request, resolved once (service/speech/request.py) ------------------
    # ``resolver`` (a RequestResolver): this engine's checks and resolution of
    # a request; the router resolves the requests it routes with it.

    def request(self, req: Speakable) -> ResolvedRequest:
        """``req`` as it travels (a :class:`ResolvedRequest` is used as it is),
        nothing resolved: what needs no database (its SSML document)."""
        return req if isinstance(req, ResolvedRequest) else ResolvedRequest(req)

    def resolve(self, req: Speakable) -> ResolvedRequest:
        """``req`` resolved and checked for this engine (4xx when it is wrong),
        once: a request the router resolved (:meth:`SpeechRouter.resolve`) is
        used as it is; any other is resolved here, under its lock, with the
        voice it names (else this engine's default). Reads the database: call
        it from a worker thread."""
        r = self.request(req)
        if r.resolution is None:
            with r.lock:
                if r.resolution is None:
                    r.resolution = self.resolver.resolve(r, r.looked_up)
        return r

    def ssml_warnings(self, req: Speakable) -> tuple[str, ...]:
        """What an SSML request's markup asked for that was ignored (empty for
        plain text); raises InvalidSsml (400) when the markup is malformed."""
        return self.request(req).warnings

    def language_of(self, req: SpeechRequest) -> str:
        """The language ``req`` is spoken in: its own, else detected from the
        text, else the default (the router picks a default voice by it)."""
        return self.resolver.language_of(req)

    def _cacheable(self, r: ResolvedRequest) -> bool:
        """A file that speaks with voices other than its own is not kept: the
        cache purges by voice id, and a deleted voice must leave nothing behind.
        A blend speaks with several voices, so it is never kept either."""
        return self._cache is not None and self.resolver.speaks_only_with(r)

    # -- whole-file synthesis --------------------------------------------------
    def synthesize(
        self,
        req: Speakable,
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
        r = self.resolve(req)  # resolved (and checked) first: a bad request is a 4xx
        voice = r.voice
        ctype = content_type(r.request.format)
        key = self.resolver.key(r, stream=False)
        cache = self._cache if self._cacheable(r) else None
        if cache is not None:
            hit = cache.get_entry(key)
            if hit is not None:
                release(admission)
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
            taken = self._pricer.take(r, terms, stream=False)
            data = self._render_file(r, progress, abandoned, deadline, taken)
            if cache is not None:
                self._keep(cache, key, data, voice, ctype)
            return data

        # Identical concurrent requests share one synthesis, which stops only
        # when all of them have gone.
        # A follower needed no admission (releasing twice is harmless).
        with released_at_end(admission):
            audio = self._flights.do_cancellable(key, render, cancelled)
        return SpeechResult(audio, ctype, "miss")

    def _render_file(
        self,
        r: ResolvedRequest,
        progress: Callable[[int], None] | None,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admission | None = None,
    ) -> bytes:
        def render(stats: RenderStats) -> Iterator[np.ndarray]:
            return self.render_pieces(
                r,
                fast_start=False,
                cancelled=cancelled,
                stats=stats,
                progress=progress,
                deadline=deadline,
                admission=admission,
            )

        with spooled() as spool:
            self._encode_into(r, render, spool)
            spool.seek(0)
            return spool.read()

    def _encode_into(self, r: ResolvedRequest, render: Render, out: IO[bytes]) -> None:
        """``r``'s whole file written into ``out`` (seekable), with its tags and
        signed manifest where this server signs its format: encoded whole
        first, then stamped (streams carry no manifest)."""
        req = r.request
        fmt = parse_format(req.format).value
        stamper = self._stamper
        if stamper is None or not stamper.stamps(fmt):
            encode_file_into(req.format, self.sample_rate, req.sample_rate, render, out)
            return
        facts = OutputFacts(
            model=self._caps.model_id,
            voice_ref=voice_reference(r.voice.id, r.voice.version, stamper.credential),
        )
        with spooled() as plain:
            encode_file_into(req.format, self.sample_rate, req.sample_rate, render, plain)
            stamper.stamp_into(plain, out, fmt, facts)

    # -- word timestamps ----------------------------------------------------------
    def word_track(self, req: Speakable) -> WordTrack:
        """What collects ``req``'s word times while :meth:`render_pieces`
        renders it (400 when they cannot be had: SSML, an engine without
        them); a dialogue times each turn with one (service/dialogue.py)."""
        return self.resolver.word_track(self.resolve(req))

    def synthesize_captioned(
        self,
        req: Speakable,
        *,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
    ) -> CaptionedResult:
        """The whole file and its word timestamps (not cached: the cache keeps audio only)."""
        r = self.resolve(req)  # resolved (and checked) before the admission is held
        with released_on_failure(admission):
            track = self.resolver.word_track(r)
            terms = admission or AdmissionTerms(deadline)
            taken = self._pricer.take(r, terms, stream=False)
        pieces = list(
            self.render_pieces(
                r,
                fast_start=False,
                cancelled=cancelled,
                deadline=deadline,
                admission=taken,
                words=track,
            )
        )
        audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        req = r.request
        data = encode(
            audio, self.sample_rate, parse_format(req.format).value, out_rate=req.sample_rate
        )
        return CaptionedResult(
            data, content_type(req.format), tuple(track.words), audio.size / self.sample_rate
        )

    def stream_captioned(
        self,
        req: Speakable,
        *,
        cancelled: Callable[[], bool] | None = None,
        deadline: float | None = None,
        admission: Admit = None,
        fast_start: bool = True,
    ) -> tuple[str, Iterator[tuple[bytes, list[WordTime]]]]:
        """Validate now, then (content type, iterator of (encoded audio, the
        words whose speech has been sent by the end of that audio)).
        ``fast_start``: the first chunk cut short for first audio (False when
        the listener still has audio to play: whole sentences, fewer seams)."""
        r = self.resolve(req)  # resolved (and checked) before the admission is held
        with released_on_failure(admission):
            track = self.resolver.word_track(r)
            terms = admission or AdmissionTerms(deadline, must_finish=False)
            taken = self._pricer.take(r, terms, stream=True)
        pieces = self.render_pieces(
            r,
            fast_start=fast_start,
            cancelled=cancelled,
            admission=taken,
            words=track,
        )
        fmt, rate = r.request.format, r.request.sample_rate
        parts = encode_captioned(fmt, self.sample_rate, rate, pieces, track)
        weakref.finalize(parts, taken.release)
        return content_type(fmt), parts

    # -- streaming ------------------------------------------------------------
    def stream(
        self,
        req: Speakable,
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
        r = self.resolve(req)  # resolved (and checked) first: a bad request is a 4xx
        ctype = content_type(r.request.format)
        key = self.resolver.key(r, stream=True)
        if self._cacheable(r):
            assert self._cache is not None
            hit = self._cache.get_entry(key)
            if hit is not None:
                release(admission)
                return ctype, iter([hit[0].data])
        follower = self._streams.follow(key, cancelled)
        if follower is not None:
            release(admission)
            return ctype, follower
        terms = admission if admission is not None else AdmissionTerms(deadline, must_finish=False)
        taken = self._pricer.take(r, terms, stream=True)

        def render(shared: SharedStream) -> Iterator[bytes]:
            chunks = self._stream_and_cache(r, key, ctype, shared.abandoned, taken)
            # A generator closed before its first step never runs its
            # ``finally``: free the reservation when it is dropped, run or not.
            weakref.finalize(chunks, taken.release)
            return chunks

        with released_on_failure(taken):
            reader, led = self._streams.lead(key, render, cancelled)
        if not led:
            release(taken)  # an identical stream started meanwhile: following it
        return ctype, reader

    def _stream_and_cache(
        self,
        r: ResolvedRequest,
        key: str,
        ctype: str,
        cancelled: Callable[[], bool] | None,
        admission: Admission,
    ) -> Iterator[bytes]:
        voice = r.voice
        kept: list[bytes] | None = [] if self._cacheable(r) else None
        parts = self._encoded(r, fast_start=True, cancelled=cancelled, admission=admission)
        for part in parts:
            if kept is not None:
                kept.append(part)
            yield part
        if kept is not None and self._cache is not None:
            self._keep(self._cache, key, b"".join(kept), voice, ctype)

    def _keep(
        self, cache: TieredCache, key: str, data: bytes, voice: ResolvedVoice, ctype: str
    ) -> bool:
        """Store ``data`` under ``key`` in every tier, keep it only while
        ``voice`` exists at its version; True when it was kept. The only way a
        render stores its audio: a voice is biometric data, and deleting it
        purges every clip made with it from every tier (service/purge.py); a
        render still running then must not write its clip back afterwards.

        Why nothing survives, whatever the order. Deleting a voice (or changing
        its version) is two steps: (D1) its library row goes (committed), then
        (D2) every tier drops every entry indexed under the voice id (journaled,
        retried until it succeeds). A render here is three: (R1) the write to
        every tier, indexed under the voice id, (R2) a store read of the voice's
        version (:meth:`VoiceCatalog.is_current`), (R3) when it is gone or
        changed, the delete of ``key`` from every tier. If R2 comes before D1,
        then R1 < R2 < D1 < D2: the write is complete and indexed before the
        purge starts, so the purge removes it. If R2 comes after D1, R2 sees the
        row gone (or the new version) and R3 removes it. A read that fails
        counts as gone: a lost cache entry costs one render, a kept one a
        user's deleted voice.

        R3 against an unreachable Redis only logs (the tier's ``delete``); the
        entry is still indexed under the voice, and the orphan sweep removes it
        once Redis answers (the voice's id is in runtime/cache_guard.py's
        ``DeletedVoices``). An old version's clip left that way is never served
        (the key holds the version) and expires with the Redis TTL.
        """
        cache.put(key, data, voice_id=voice.id, content_type=ctype)
        try:
            current = self._catalog.is_current(voice.id, voice.version)
        except Exception:
            log.warning(
                "voice check after a cache write failed; not keeping the audio", exc_info=True
            )
            current = False
        if current:
            return True
        cache.delete(key, voice.id)
        log.info("audio of a voice deleted or changed during its render was not kept")
        return False

    # -- the pipeline -----------------------------------------------------------
    def render_pieces(
        self,
        req: Speakable,
        *,
        fast_start: bool,
        cancelled: Callable[[], bool] | None = None,
        stats: RenderStats | None = None,
        progress: Callable[[int], None] | None = None,
        deadline: float | None = None,
        admission: Admission | None = None,
        words: WordTrack | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield post-processed, joined float32 audio at the engine rate
        (:meth:`ChunkRenderer.render`).

        Without an ``admission`` (taken by :meth:`stream` before it returns)
        one is taken here, due by ``deadline`` when one is given. With
        ``words``, the words spoken so far are in ``words.words`` (output
        time) before the audio that contains them is yielded.
        """
        r = self.resolve(req)
        controls = replace(
            r.request.controls.resolve(), native_speed="speed" in self._caps.native_controls
        )
        stats = stats if stats is not None else RenderStats()
        started = time.perf_counter()
        if admission is None:
            admission = self._pricer.take(r, AdmissionTerms(deadline), stream=False)
        pieces = self._renderer.pieces(
            r.voice, controls, fast_start=fast_start, words=words, ssml=r.is_ssml
        )
        with released_on_failure(admission):
            plan = self._plan(r, controls, fast_start)
        yield from self._renderer.render(
            plan,
            admission,
            fast_start=fast_start,
            started=started,
            stats=stats,
            cancelled=cancelled,
            progress=progress,
            words=words,
            pieces=pieces,
            marked=not r.request.unmarked,
        )

    def _plan(
        self, r: ResolvedRequest, controls: ResolvedControls, fast_start: bool
    ) -> Iterator[PlannedChunk]:
        """The chunks to speak, with their voice, controls and pauses. Text is
        planned now (errors surface before any audio); phonemes lazily."""
        language, doc = r.language, r.document
        if doc is None:
            return plan_text(
                self._frontend,
                r.request.text,
                r.voice,
                language,
                controls,
                fast_start=fast_start,
                lexicon=r.lexicon(language),
            )
        if doc.language and not r.request.language:
            language = ssml_language(doc.language, self.languages)
        return plan_ssml(
            self._frontend,
            doc,
            r.ssml_voices,
            r.voice,
            language,
            controls,
            fast_start=fast_start,
            lexicons=r.lexicon,
        )

    def _encoded(
        self,
        r: ResolvedRequest,
        *,
        fast_start: bool,
        cancelled: Callable[[], bool] | None = None,
        admission: Admission | None = None,
    ) -> Iterator[bytes]:
        def render(stats: RenderStats) -> Iterator[np.ndarray]:
            return self.render_pieces(
                r,
                fast_start=fast_start,
                cancelled=cancelled,
                stats=stats,
                admission=admission,
            )

        return encode_stream(
            r.request.format,
            self.sample_rate,
            r.request.sample_rate,
            render,
            stream=fast_start,
            metrics=self._metrics,
        )

    # -- admission (service/speech/pricing.py) ----------------------------------------
    def admit(
        self,
        req: Speakable,
        deadline: float,
        *,
        stream: bool,
        must_finish: bool | None = None,
        first_audio_s: float | None = None,
    ) -> Admission:
        """Reserve engine time for ``req`` now (:meth:`SpeechPricer.admit`;
        it validates and prices the request: voice lookup and text preparation,
        so call it from a worker thread). The caller releases it at the end
        (releasing twice is harmless); a cache hit or a shared render releases
        it unused. Transports that can wait should pass :class:`AdmissionTerms`
        to :meth:`synthesize` / :meth:`stream` instead, which coalesce first."""
        r = self.resolve(req)  # resolved (and checked) before it is priced
        return self._pricer.admit(
            r,
            deadline,
            stream=stream,
            must_finish=must_finish,
            first_audio_s=first_audio_s,
        )

    def estimate(self, req: Speakable) -> SpeechPrice:
        """What ``req`` costs and about how long its audio lasts, refused
        (413) over the limits before anything renders: what a speech job is
        checked and stored with when queued (:meth:`SpeechPricer.estimate`)."""
        r = self.resolve(req)  # resolved (and checked) before it is priced
        return self._pricer.estimate(r)

    def synthesize_into(
        self,
        req: Speakable,
        out: IO[bytes],
        *,
        admission: Admission,
        max_output_s: float,
        progress: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> str:
        """A speech job's render: the whole file written into ``out`` as it is
        made (never held whole in memory; a cache hit is copied), stopped with
        OutputOverEstimate once it passes ``max_output_s``. Returns its
        content type."""
        r = self.resolve(req)  # resolved (and checked) before rendering
        fmt = r.request.format
        cache = self._cache if self._cacheable(r) else None
        hit = cache.get_entry(self.resolver.key(r, stream=False)) if cache is not None else None
        if hit is not None:
            release(admission)
            out.write(hit[0].data)
            return content_type(fmt)

        def render(stats: RenderStats) -> Iterator[np.ndarray]:
            pieces = self.render_pieces(
                r,
                fast_start=False,
                cancelled=cancelled,
                stats=stats,
                progress=progress,
                admission=admission,
            )
            return held_to(pieces, self.sample_rate, max_output_s)

        self._encode_into(r, render, out)
        return content_type(fmt)

    def admit_background(self, req: Speakable) -> Admission:
        """A speech job's admission (:meth:`SpeechPricer.background`)."""
        return self._pricer.background(self.resolve(req))

    def calibrate(self) -> float:
        """Measure the engine's rate with one real call at background priority
        (the server runs it once after start-up, so admission plans with this
        machine's speed from the first burst on); returns its seconds."""
        voice = self._catalog.resolve(self._default_voice, None, self._caps.engine)
        chunk = next(iter(self._frontend.plan(CALIBRATION_TEXT, self._default_language)))
        item = SynthItem(chunk.token_ids, voice.style, 1.0, prompt=voice.prompt)
        return self._scheduler.calibrate(item, float(units(chunk)))

    def plan(
        self, req: Speakable, *, fast_start: bool = False
    ) -> tuple[ResolvedVoice, Iterator[Chunk]]:
        """The voice ``req`` resolves to and the chunks its text becomes (what
        the engine will be asked for): for benchmarks and tools."""
        r = self.resolve(req)  # resolved (and checked) first
        voice = r.voice
        planned = self._plan(r, r.request.controls.resolve(), fast_start)
        return voice, (p.chunk for p in planned)

    def render_audio(self, req: Speakable) -> np.ndarray:
        """Whole utterance as float32 at the engine rate (CLI, tests, benchmarks)."""
        r = self.resolve(req)  # resolved (and checked) before rendering
        pieces = list(self.render_pieces(r, fast_start=False))
        return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)

    def text_size(self, req: Speakable) -> int:
        """Characters the planner will speak (for progress bars)."""
        return self.resolver.text_size(self.resolve(req))

    def invalidate_voice(self, voice_id: str) -> None:
        """Drop ``voice_id``'s audio from every tier; raises if a tier is unreachable."""
        self.purge_voice_audio(voice_id)

    def listener_gone(self, listener: str) -> None:
        """A voice agent's socket has closed (:meth:`Scheduler.listener_gone`)."""
        self._scheduler.listener_gone(listener)

    def purge_voice_audio(self, voice_id: str) -> int:
        """:meth:`invalidate_voice`, returning how many entries went (a deletion
        receipt's count)."""
        if self._cache is None:
            return 0
        return sum(self._cache.invalidate_voice(voice_id).values())
