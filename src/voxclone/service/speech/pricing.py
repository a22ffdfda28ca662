"""What a speech request costs, and admitting it on that price.

:class:`SpeechPricer` is the speech service's admission side: it prices a
request in *spoken units* (the characters of its text as it will be spoken:
after SSML ``<sub>``/``<phoneme>``, the caller's lexicon and number
expansion, an inline phoneme counted as its IPA; the unit the scheduler
learns its rate in) and the length of its audio (service/speech/output_length.py),
refuses a spoken form that outgrows its text or audio longer than
``max_output_s`` (413, before any render, on every route), and
turns :class:`~voxclone.runtime.admission.AdmissionTerms` into a scheduler
admission, priced with what the request resolved to (its language, lexicon,
SSML, each voice's pace: :class:`ResolvedRequest`). Its
:meth:`SpeechPricer.precheck` is the cheap event-loop half: a lower bound of
the price, reserved provisionally so a flood arriving at once sees itself,
replaced by the real price once the service has checked the cache and the
renders in flight (coalesce first, admit second).

One place for the admit → run → release sequence every transport repeats
(whole file, stream, captions, OpenAI, Wyoming, speech jobs):
:func:`released_at_end` and :func:`released_on_failure` hold what a
transport or the service was given (an :class:`Admission`, or the
:class:`AdmissionTerms` with a provisional reservation) while it runs, and
free it as the kind of work requires. Releasing twice is harmless, so a
reservation the service already took over or freed is freed again as a
no-op.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from voxclone.errors import InvalidInput, PayloadTooLarge, VoxcloneError
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.scheduler import PRIORITY_NORMAL, Admission, Scheduler
from voxclone.service.speech.output_length import check_output_s, pace, speech_seconds
from voxclone.service.speech.request import Admit, ResolvedRequest, SpeechRequest, spoken_text
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.text.frontend import STREAM_FIRST_CHUNK_TOKENS, Spoken, TextFrontend
from voxclone.synth.text.lexicon import Lexicon
from voxclone.synth.text.ssml import SsmlBreak, SsmlDocument, ssml_language

LOOKAHEAD_CHUNKS = 2  # chunks queued ahead of the one being post-processed
# How much longer than its raw text a request's spoken form may be (after
# SSML <sub>/<phoneme>, lexicon and number expansion): what it is charged for
# must stay near what it sent. Ordinary text grows by a few per cent (digits
# read as words about 5-7x, but they are a small share of real text).
MAX_EXPANSION = 4
# The event-loop precheck prices a request at this share of its raw text: a
# lower bound of its spoken units. Measured over 210 texts (the many-users
# bench's sentences and paragraphs, README prose, numbers, runs of
# punctuation): spoken units / characters min 0.82, 5th percentile 0.94,
# median 1.00 (numbers read as words go up to 3.2x). At 0.5, 18 of 40 flood
# requests passed it and were refused in a thread after up to 184 ms.
PRECHECK_SHARE = 0.75
# Plain texts up to this long are normalized for the precheck instead (their
# units then differ from the real price only by the lexicon and the voice's
# language, hence the margin): with raw shares alone, 14 of 40 flood requests
# whose digits read as longer words passed it and were refused in a thread
# after up to 233 ms.
PRECHECK_NORMALIZE_CHARS = 2000
PRECHECK_MARGIN = 0.9
# Names a stream's listener (Admission.listener); unique within the process.
_STREAM_IDS = itertools.count(1)
# A text's first sentence, as the precheck sees it (the planner's split is
# finer; this is only for a lower bound of the first chunk).
_FIRST_SENTENCE = re.compile(r"[^.!?\n]*[.!?\n]")


@dataclass(frozen=True)
class SpeechPrice(Spoken):
    """What a request costs (:class:`Spoken`) and about how long its audio lasts."""

    output_s: float = 0.0


# The pace of the voice a part is spoken with (None: the request's own
# voice, else a <voice name>): a clone may keep its reference's pace.
VoicePace = Callable[[str | None], float]


def _pace_of(r: ResolvedRequest) -> VoicePace:
    """The pace of each voice ``r`` speaks with (a clone keeps its reference's)."""

    def voice_pace(name: str | None) -> float:
        return (r.ssml_voices[name] if name else r.voice).speed

    return voice_pace


def _with_lexicon(text: str, lexicon: Lexicon | None) -> int:
    """Characters of ``text`` with ``lexicon``'s words replaced (no normalization)."""
    if lexicon is None:
        return len(text)
    return len(lexicon.apply(text, lambda _word, ipa: f" {ipa} "))


def speech_request_key(req: SpeechRequest, *, stream: bool) -> str:
    """Identical requests (same caller, text, voice name, controls, format)
    have the same key; a request with an inline reference clip has its own."""
    if req.voice_override is not None:
        return f"override:{id(req)}"
    fields = (
        req.owner, req.text, req.voice, req.language, req.controls, req.format,
        req.sample_rate, req.model, req.ssml, stream,
    )  # fmt: skip
    return hashlib.sha256(repr(fields).encode("utf-8", "surrogatepass")).hexdigest()


def release(admission: Admit) -> None:
    """Free ``admission`` (nothing when there is none)."""
    if admission is not None:
        admission.release()


@contextmanager
def released_at_end(admission: Admit) -> Iterator[None]:
    """For work that ends with the block (a whole file, captions in one
    response, a speech job): free ``admission`` when the block ends, however
    it ends."""
    try:
        yield
    finally:
        release(admission)


@contextmanager
def released_on_failure(admission: Admit) -> Iterator[None]:
    """For a stream the block opens: free ``admission`` if the block fails;
    once the stream is open its render owns the reservation and frees it
    when it ends (or is dropped)."""
    try:
        yield
    except BaseException:
        release(admission)
        raise


class SpeechPricer:
    """Prices one engine's requests and admits them on its scheduler."""

    def __init__(
        self,
        frontend: TextFrontend,
        scheduler: Scheduler,
        capabilities: EngineCapabilities,
        *,
        max_text_chars: int,
        default_language: str,
        max_output_s: float = 4 * 3600.0,
    ) -> None:
        self._frontend = frontend
        self._scheduler = scheduler
        self._caps = capabilities
        self._max_text = max_text_chars
        self._default_language = default_language
        # The longest audio one request may make, silence included (Settings.max_output_s).
        self._max_output_s = max_output_s

    def price(self, r: ResolvedRequest) -> SpeechPrice:
        """What ``r`` costs to speak and how long it lasts (:meth:`_price`,
        with what it resolved to)."""
        return self._price(r.request, r.language, r.lexicon, r.document, _pace_of(r))

    def estimate(self, r: ResolvedRequest) -> SpeechPrice:
        """``r``'s price, refused (413) when it is more than any request may
        cost (:meth:`charged`), or InvalidInput when it says nothing: what a
        speech job is checked and stored with when queued."""
        price = self.charged(self.price(r))
        if price.units <= 0:
            raise InvalidInput("the text contains nothing that can be spoken", field="text")
        return price

    def _price(
        self,
        req: SpeechRequest,
        language: str,
        lexicons: Callable[[str], Lexicon | None],
        doc: SsmlDocument | None,
        voice_pace: VoicePace,
    ) -> SpeechPrice:
        """What ``req`` costs to speak, with its first and longest chunk
        (:meth:`TextFrontend.spoken_size`; ``doc``: its SSML, parsed) and
        about how long its audio lasts (each part's units at its pace, plus
        the breaks). Raw characters undercharged a 1-character <sub> with a
        1,500-character alias 1,500x, and pricing a paragraph as one chunk made
        every request behind it look late. Cheap (no phonemes): ~1 ms per 100
        characters."""
        speed = req.controls.resolve().speed
        # Normalizing what a lexicon expands a text to is the slow part (~3 ms
        # per 100 characters): issue #45's 6,000-character job of a word with
        # a 200-character respelling took 8-9 s to price, then 413. A lower
        # bound of its length, from the text with the lexicon applied and not
        # normalized, refuses it first.
        check_output_s(
            self._lower_bound_s(req, language, lexicons, doc, voice_pace, speed),
            self._max_output_s,
            at_least=True,
        )
        if doc is None:
            size = self._frontend.spoken_size(req.text, language, lexicon=lexicons(language))
            seconds = speech_seconds(size.units, pace(speed, 1.0, voice_pace(None)))
            return SpeechPrice(size.units, size.first_chunk, size.longest_chunk, seconds)
        languages = self._frontend.languages
        if doc.language and not req.language:
            language = ssml_language(doc.language, languages)
        parts = []
        seconds = 0.0
        for item in doc.items:
            if isinstance(item, SsmlBreak):
                seconds += item.seconds  # breaks are not scaled by speed
                continue
            lang = ssml_language(item.language, languages) if item.language else language
            part = self._frontend.spoken_size(item.text, lang, lexicon=lexicons(lang))
            parts.append(part)
            at = pace(speed, item.prosody.rate, voice_pace(item.voice))
            seconds += speech_seconds(part.units, at)
        spoken = [p for p in parts if p.units > 0] or [Spoken(0, 0, 0)]
        return SpeechPrice(
            sum(p.units for p in spoken),
            spoken[0].first_chunk,
            max(p.longest_chunk for p in spoken),
            seconds,
        )

    def _lower_bound_s(
        self,
        req: SpeechRequest,
        language: str,
        lexicons: Callable[[str], Lexicon | None],
        doc: SsmlDocument | None,
        voice_pace: VoicePace,
        speed: float,
    ) -> float:
        """Seconds ``req``'s audio lasts at least: PRECHECK_SHARE of its
        characters once the caller's lexicon is applied (an IPA entry counted
        as its IPA, as the price counts it), at each part's pace, plus its
        breaks. Normalization only grows a text but for punctuation and
        symbols (spoken units / characters: min 0.82 over 210 texts)."""
        if doc is None:
            units = PRECHECK_SHARE * _with_lexicon(req.text, lexicons(language))
            return speech_seconds(int(units), pace(speed, 1.0, voice_pace(None)))
        if doc.language and not req.language:
            language = ssml_language(doc.language, self._frontend.languages)
        seconds = 0.0
        for item in doc.items:
            if isinstance(item, SsmlBreak):
                seconds += item.seconds
                continue
            lang = (
                ssml_language(item.language, self._frontend.languages)
                if item.language
                else language
            )
            units = PRECHECK_SHARE * _with_lexicon(item.text, lexicons(lang))
            at = pace(speed, item.prosody.rate, voice_pace(item.voice))
            seconds += speech_seconds(int(units), at)
        return seconds

    def charged(self, price: SpeechPrice) -> SpeechPrice:
        """``price``, refused with 413 when its spoken form outgrows what a text
        may expand to, or its audio would last longer than ``max_output_s``."""
        limit = MAX_EXPANSION * self._max_text
        if price.units > limit:
            raise PayloadTooLarge(
                f"the text's spoken form (after SSML, lexicon and number expansion) is "
                f"{price.units} characters, more than the {limit} a request may expand to",
                field="text",
                limit=limit,
                value=price.units,
            )
        check_output_s(price.output_s, self._max_output_s)
        return price

    def take(
        self, r: ResolvedRequest, admit: Admission | AdmissionTerms, *, stream: bool
    ) -> Admission:
        """The admission ``r`` renders under: ``admit`` when it was taken
        earlier, else one taken now on its terms, priced by :meth:`price`
        (it replaces the terms' provisional one). A chunk holds at most the
        engine's token budget (about a unit a token); up to the look-ahead of
        them render at once; a stream's first chunk is cut short for its
        first audio."""
        if isinstance(admit, Admission):
            return admit
        terms = admit
        try:
            spoken = self.charged(self.price(r))
        except BaseException:
            terms.release()
            raise
        first = STREAM_FIRST_CHUNK_TOKENS if stream else spoken.first_chunk
        provisional = terms.provisional
        admission = self._scheduler.admit(
            float(spoken.units),
            terms.deadline,
            must_finish=terms.must_finish,
            first_audio_s=terms.first_audio_s if stream else None,
            piece_chars=float(max(1, spoken.longest_chunk)),
            parallel=LOOKAHEAD_CHUNKS,
            first_piece_chars=float(max(1, min(first, spoken.first_chunk or first))),
            tenant=r.request.owner,
            replacing=provisional if isinstance(provisional, Admission) else None,
        )
        if not terms.queue_first:
            admission.priority = PRIORITY_NORMAL
        admission.listener = terms.listener
        if terms.listener is None and stream:
            # One client's ears (several, when identical streams share the
            # render), done when the stream ends: alone on the server, its
            # later chunks take every core in turn, as a voice agent's do.
            # On one thread the rest of the first sentence outlasted the
            # first chunk's audio: 0.20 s of silence after the first audio
            # (p50 of 16 streams; studies/first_chunk.py, idle 2 cores).
            admission.listener = f"stream-{next(_STREAM_IDS)}"
            admission.returns = False
        return admission

    def admit(
        self,
        r: ResolvedRequest,
        deadline: float,
        *,
        stream: bool,
        must_finish: bool | None = None,
        first_audio_s: float | None = None,
    ) -> Admission:
        """Reserve engine time for the validated ``r`` now. Raises
        Overloaded (503) when the work already admitted would make it late,
        PayloadTooLarge (413) when it could not be done by ``deadline`` even
        alone.

        A whole file must finish by ``deadline``. A stream must deliver its
        first audio within ``first_audio_s`` (and by ``deadline``), and must
        also finish by ``deadline`` when ``must_finish``."""
        finish = (not stream) if must_finish is None else (must_finish or not stream)
        terms = AdmissionTerms(deadline, finish, first_audio_s if stream else None)
        return self.take(r, terms, stream=stream)

    def background(self, r: ResolvedRequest) -> Admission:
        """An admission for a speech job, priced like a live request: it counts
        in the backlog live requests see only as much as it keeps on the engine
        at once (the look-ahead), not its whole (possibly book-long) text."""
        units = self.charged(self.price(r)).units
        return self._scheduler.admit_window(
            float(units), float(LOOKAHEAD_CHUNKS * self._caps.max_tokens), tenant=r.request.owner
        )

    def precheck(
        self, req: SpeechRequest, terms: AdmissionTerms, *, stream: bool
    ) -> AdmissionTerms:
        """Overloaded (503) when ``req`` would be late even at a lower bound
        of its price (:meth:`_lower_bound`); else the terms with that lower
        bound reserved provisionally. No voice lookup, no I/O, for the event
        loop (:meth:`SpeechRouter.precheck`)."""
        if terms.deadline is None or len(req.text) > self._max_text:
            return terms  # a text over the limit gets its 413 from validation
        units, first = self._lower_bound(req)
        if stream:
            first = float(STREAM_FIRST_CHUNK_TOKENS)  # a stream's is cut short
        provisional = self._scheduler.precheck(
            units,
            terms.deadline,
            must_finish=terms.must_finish,
            first_audio_s=terms.first_audio_s if stream else None,
            # The smallest chunks it could become: a lower bound of its time.
            piece_chars=float(min(units, STREAM_FIRST_CHUNK_TOKENS)),
            parallel=LOOKAHEAD_CHUNKS,
            first_piece_chars=first,
        )
        return replace(terms, provisional=provisional)

    def _lower_bound(self, req: SpeechRequest) -> tuple[float, float]:
        """(units, first chunk's units) that ``req`` costs at least. A short
        plain text is normalized as it will be (~1 ms per 100 characters, on
        the event loop: bounded by PRECHECK_NORMALIZE_CHARS), without the
        caller's lexicon (a database read) or its voice's language; anything
        else is priced at PRECHECK_SHARE of its raw characters."""
        spoken = spoken_text(req)
        if not req.is_ssml and len(spoken) <= PRECHECK_NORMALIZE_CHARS:
            language = (req.language or self._default_language).lower()
            language = "en-us" if language == "en" else language
            try:
                size = self._frontend.spoken_size(spoken, language)
            except VoxcloneError:
                pass  # the request's own error comes from validation, in a thread
            else:
                return PRECHECK_MARGIN * size.units, PRECHECK_MARGIN * size.first_chunk
        sentence = _FIRST_SENTENCE.match(spoken)
        head = len(sentence.group(0)) if sentence else len(spoken)
        first = min(PRECHECK_SHARE * head, float(self._caps.max_tokens))
        return PRECHECK_SHARE * len(spoken), first
