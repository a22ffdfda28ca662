"""Admission for speech: take a request's reservation of engine time, hold it, free it.

One place for the admit → run → release sequence every transport repeats
(whole file, stream, captions, OpenAI, Wyoming, speech jobs):

* :class:`SpeechAdmission` takes the reservation for one engine, priced by
  :class:`~voxclone.service.pricing.SpeechPricer` with what the request
  resolved to (its language, lexicon, SSML: :class:`ResolvedRequest`);
* :func:`released_at_end` and :func:`released_on_failure` hold what a
  transport or the service was given (an :class:`Admission`, or the
  :class:`AdmissionTerms` with a provisional reservation) while it runs, and
  free it as the kind of work requires. Releasing twice is harmless, so a
  reservation the service already took over or freed is freed again as a
  no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from voxclone.errors import InvalidInput
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.scheduler import Admission, Scheduler
from voxclone.service.pricing import LOOKAHEAD_CHUNKS, SpeechPrice, SpeechPricer, VoicePace
from voxclone.service.speech_request import Admit, SpeechRequest
from voxclone.service.speech_resolved import ResolvedRequest
from voxclone.synth.engine.base import EngineCapabilities


def _pace_of(r: ResolvedRequest) -> VoicePace:
    """The pace of each voice ``r`` speaks with (a clone keeps its reference's)."""

    def voice_pace(name: str | None) -> float:
        return (r.ssml_voices[name] if name else r.voice).speed

    return voice_pace


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


class SpeechAdmission:
    """Takes the reservations of one engine's speech requests."""

    def __init__(
        self,
        pricer: SpeechPricer,
        scheduler: Scheduler,
        capabilities: EngineCapabilities,
    ) -> None:
        self._pricer = pricer
        self._scheduler = scheduler
        self._caps = capabilities

    def price(self, r: ResolvedRequest) -> SpeechPrice:
        """What ``r`` costs to speak and how long it lasts (:meth:`SpeechPricer.price`)."""
        return self._pricer.price(r.request, r.language, r.lexicon, r.document, _pace_of(r))

    def estimate(self, r: ResolvedRequest) -> SpeechPrice:
        """``r``'s price, refused (413) when it is more than any request may
        cost (:meth:`SpeechPricer.charged`), or InvalidInput when it says
        nothing: what a speech job is checked and stored with when queued."""
        price = self._pricer.charged(self.price(r))
        if price.units <= 0:
            raise InvalidInput("the text contains nothing that can be spoken", field="text")
        return price

    def take(
        self, r: ResolvedRequest, admit: Admission | AdmissionTerms, *, stream: bool
    ) -> Admission:
        """The admission ``r`` renders under: ``admit`` when it was taken
        earlier, else one taken now on its terms (:meth:`SpeechPricer.take`)."""
        if isinstance(admit, Admission):
            return admit
        pace = _pace_of(r)
        req = r.request
        return self._pricer.take(
            req, r.language, r.lexicon, r.document, admit, stream=stream, voice_pace=pace
        )

    def precheck(
        self, req: SpeechRequest, terms: AdmissionTerms, *, stream: bool
    ) -> AdmissionTerms:
        """Cheap refusal on the event loop (:meth:`SpeechPricer.precheck`)."""
        return self._pricer.precheck(req, terms, stream=stream)

    def admit(
        self,
        r: ResolvedRequest,
        deadline: float,
        *,
        stream: bool,
        must_finish: bool | None = None,
        first_audio_s: float | None = None,
    ) -> Admission:
        """Reserve engine time for the validated ``req`` now. Raises
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
        units = self._pricer.charged(self.price(r)).units
        return self._scheduler.admit_window(
            float(units), float(LOOKAHEAD_CHUNKS * self._caps.max_tokens), tenant=r.request.owner
        )
