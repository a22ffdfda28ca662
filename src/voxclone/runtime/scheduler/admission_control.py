"""Admission control: reserve engine time for a request, or refuse it at once.

Each admitted request holds an :class:`Admission` reserving its text's units
until it ends; :func:`voxclone.runtime.admission.estimate` turns the reserved
work plus a new request into when its first audio and its last chunk would be
ready, at the rate learned from finished calls. A request that would be late
is refused with 503 + Retry-After before compute is spent on it; a text too
long for its deadline even alone gets 413.
"""

from __future__ import annotations

import math

from voxclone.errors import Overloaded, PayloadTooLarge
from voxclone.runtime.admission import FirstAhead, estimate
from voxclone.runtime.scheduler.admitted import Admission, WindowAdmission
from voxclone.runtime.scheduler.fields import SchedulerFields
from voxclone.runtime.scheduler.work import PRIORITY_BACKGROUND

# After this long without a learned call, an idle scheduler re-measures: it
# admits a text up to REPROBE_MARGIN x what the old rate says fits.
RATE_STALE_S = 30.0
REPROBE_MARGIN = 4.0


class AdmissionControl(SchedulerFields):
    """The admission half of :class:`~voxclone.runtime.scheduler.core.Scheduler`."""

    def ensure_capacity(self) -> None:
        """Refuse at once when a new request could not be queued (cheap pre-check)."""
        if self._breaker.is_open:
            raise Overloaded("synthesis engine is failing; retry shortly", retry_after=5)
        if len(self._queue) >= self._queue_size:
            with self._cond:
                self._rejected += 1
            raise Overloaded(
                "server is at capacity; retry shortly",
                limit=self._queue_size,
                retry_after=self.retry_after_s(),
            )

    def retry_after_s(self) -> float:
        # Queued work drains at the learned rate; at least one second.
        with self._cond:
            backlog = self._backlog_locked()
        return float(max(1, math.ceil(backlog)))

    def _reserved_locked(self) -> float:
        return sum(a.remaining for a in self._admissions)

    def _live_reserved_locked(self, rate: float) -> float:
        """The admitted work a live request's chunks queue behind: live
        requests' and what the running calls have left; background (job)
        chunks still queued go after every live chunk."""
        now = self._clock()
        live = sum(a.remaining for a in self._admissions if a.priority != PRIORITY_BACKGROUND)
        running_background = sum(
            max(0.0, cost - (now - started) / rate)
            for started, cost, _first, background in self._running.values()
            if background
        )
        return live + running_background

    def _backlog_locked(self) -> float:
        """Estimated seconds until a new request's later chunks would start."""
        return self._reserved_locked() * self.rate.pessimistic / max(1, len(self._threads))

    def _first_ahead_locked(self, rate: float, among: list[Admission] | None = None) -> FirstAhead:
        """What a new first chunk waits for: what the running calls have left
        (at ``rate``) and the first chunks admitted before it (``among``: the
        admissions ahead of it; default all). A first chunk that is running
        counts as running (the oldest pending ones are the ones the workers
        took)."""
        now = self._clock()
        running = [
            max(0.0, cost - (now - started) / rate)
            for started, cost, _first, _background in self._running.values()
        ]
        first_running = sum(1 for _, _, first, _ in self._running.values() if first)
        admitted = self._admissions if among is None else among
        queued = [a.first_pending for a in admitted if a.first_pending > 0]
        return FirstAhead(running, queued[first_running:])

    def check_wait(self, deadline: float) -> None:
        """Raise Overloaded when the admitted work alone would keep a new
        request from starting by ``deadline`` (cheap: no lock on the engine)."""
        self.ensure_capacity()
        with self._cond:
            rate = self.rate.pessimistic
            wait = self._first_ahead_locked(rate).start(len(self._threads)) * rate
            allowed = deadline - self._clock()
            if wait > allowed:
                self._rejected += 1
                raise self._busy(
                    f"its first audio would start in about {wait:.1f} s", allowed, wait - allowed
                )

    def _busy(self, needed: str, allowed: float, late: float) -> Overloaded:
        # ``late`` is by how much the estimate misses the budget; the work
        # ahead drains by a second every second, so that is when the same
        # request would just fit.
        return Overloaded(
            f"server is busy: {needed}, more than the {max(0.0, allowed):.1f} s this "
            f"request's deadline allows; retry in {max(1, math.ceil(late))} s",
            retry_after=float(max(1, math.ceil(late))),
        )

    def admit(
        self,
        chars: float,
        deadline: float | None,
        *,
        must_finish: bool = True,
        first_audio_s: float | None = None,
        piece_chars: float | None = None,
        parallel: int = 2,
        first_piece_chars: float | None = None,
        tenant: str | None = None,
        replacing: Admission | None = None,
    ) -> Admission:
        """Reserve ``chars`` units of rendering for a request due by ``deadline``.

        Refuses at once (503 + Retry-After) only when, with the work already
        admitted, the estimate at the learned rate (:func:`estimate`) says the
        request would be late: not finished by ``deadline`` x the headroom
        (``must_finish``: whole files, streams whose client set a deadline),
        or its first audio later than ``first_audio_s`` x the headroom. Cheap:
        sums over the open admissions and running calls under a lock that
        workers hold only for bookkeeping; no I/O.

        ``piece_chars`` is the longest chunk the text becomes (default: all of
        it), ``first_piece_chars`` its first chunk (default: a whole piece),
        ``parallel`` how many of its chunks run at once (the look-ahead).
        Before any call was measured the rate is an optimistic prior, so a
        cold server refuses only what even a fast machine could not do. A
        text too long for its deadline even alone gets 413 (retrying would
        never help), judged with the fastest reading of the rate. Without a deadline
        only the queue bound applies; the reservation still counts in the
        backlog others see.

        ``replacing``: a provisional admission of the same request (taken by
        :meth:`precheck` on a lower bound) that this one replaces, judged
        without it; it is released either way.
        """
        try:
            self.ensure_capacity()
        except BaseException:
            if replacing is not None:
                replacing.release()
            raise
        workers = max(1, len(self._threads))
        piece = chars if piece_chars is None else min(chars, piece_chars)
        first = piece if first_piece_chars is None else min(piece, first_piece_chars)
        with self._cond:
            ahead: list[Admission] | None = None
            behind: list[Admission] = []
            if replacing is not None:
                replacing.remaining = replacing.first_pending = 0.0
                if replacing in self._admissions:
                    # The request keeps the place its provisional reservation
                    # took on arrival: requests that arrived after it are not
                    # ahead of its first chunk. (Eight sessions arriving at
                    # once each saw the seven others ahead, so an early one
                    # could be refused: test_concurrent_sessions_all_speak[8].)
                    order = list(self._admissions)
                    at = order.index(replacing)
                    ahead, behind = order[:at], order[at + 1 :]
                self._admissions.pop(replacing, None)
            if deadline is not None:
                allowed = deadline - self._clock()
                reserved = self._reserved_locked()
                if must_finish:
                    # A rate measured during a load spike would refuse the same
                    # text forever (nothing admitted, nothing re-measured): an
                    # idle scheduler whose last measurement is old (or that has
                    # none: the prior is a fast machine's) refuses only texts
                    # far too long and lets a borderline one re-measure.
                    stale = self._measured_at is None or (
                        self._clock() - self._measured_at > RATE_STALE_S
                    )
                    margin = REPROBE_MARGIN if reserved == 0 and stale else 1.0
                    self._refuse_too_long(chars, piece, allowed * margin, workers, parallel)
                late = (reserved > 0 or bool(self._running)) and self._lateness(
                    chars,
                    piece,
                    first,
                    allowed,
                    workers,
                    parallel,
                    must_finish,
                    first_audio_s,
                    ahead=ahead,
                )
                if late:
                    self._rejected += 1
                    raise late
            admission = Admission(
                self, chars, deadline, must_finish, first_chars=first, tenant=tenant
            )
            if ahead is None:
                self._admissions[admission] = None
            else:
                self._admissions = dict.fromkeys(
                    [*ahead, admission, *(a for a in behind if a in self._admissions)]
                )
        return admission

    def precheck(
        self,
        chars: float,
        deadline: float,
        *,
        must_finish: bool,
        first_audio_s: float | None,
        piece_chars: float,
        parallel: int = 2,
        first_piece_chars: float | None = None,
    ) -> Admission:
        """Raise Overloaded when a request of at least ``chars`` units would be
        late, as :meth:`admit` would; else reserve ``chars`` provisionally
        (cheap: for the event loop, before any thread; the caller passes a
        lower bound, and replaces the reservation once the request is priced:
        :meth:`admit` ``replacing=``), so a flood arriving at once sees itself."""
        self.ensure_capacity()
        workers = max(1, len(self._threads))
        small = min(chars, piece_chars)
        first = small if first_piece_chars is None else min(chars, first_piece_chars)
        with self._cond:
            if self._reserved_locked() > 0 or self._running:
                self._refuse_if_late_however_cut(
                    chars, small, first, deadline, workers, parallel, must_finish, first_audio_s
                )
            admission = Admission(self, chars, deadline, must_finish, first_chars=first)
            self._admissions[admission] = None
        return admission

    def _refuse_if_late_however_cut(
        self,
        chars: float,
        small: float,
        first: float,
        deadline: float,
        workers: int,
        parallel: int,
        must_finish: bool,
        first_audio_s: float | None,
    ) -> None:
        """Overloaded when a request of ``chars`` is late however its text is
        cut (lock held)."""
        allowed = deadline - self._clock()
        # Late only if late however the rest of the text is cut: in small
        # pieces (all but the first wait behind the admitted work, two at a
        # time) and as one chunk after the first.
        refusals = [
            self._lateness(
                chars,
                size,
                first,
                allowed,
                workers,
                parallel,
                must_finish,
                first_audio_s,
            )
            for size in (small, chars)
        ]
        late = [r for r in refusals if r is not None]
        if len(late) == len(refusals):
            self._rejected += 1
            raise min(late, key=lambda r: r.retry_after or 0.0)

    def _lateness(
        self,
        chars: float,
        piece: float,
        first: float,
        allowed: float,
        workers: int,
        parallel: int,
        must_finish: bool,
        first_audio_s: float | None,
        *,
        ahead: list[Admission] | None = None,
    ) -> Overloaded | None:
        """The refusal the estimate calls for, if any (lock held); ``ahead``:
        the admissions before this request (default: all open ones)."""
        rate = self.rate.pessimistic
        est = estimate(
            reserved_chars=self._live_reserved_locked(rate),
            chars=chars,
            piece_chars=piece,
            seconds_per_char=rate,
            workers=workers,
            parallel=parallel,
            first_ahead=self._first_ahead_locked(rate, ahead),
            first_piece_chars=first,
        )
        budget = allowed * self._headroom
        if must_finish and est.finish_s > budget:
            return self._busy(
                f"with the work already admitted it would be done in about {est.finish_s:.1f} s",
                budget,
                est.finish_s - budget,
            )
        first_budget = budget
        if first_audio_s is not None:
            first_budget = min(budget, first_audio_s * self._headroom)
        if est.first_audio_s > first_budget:
            return self._busy(
                f"with the work already admitted its first audio would come in about "
                f"{est.first_audio_s:.1f} s",
                first_budget,
                est.first_audio_s - first_budget,
            )
        return None

    def admit_window(self, chars: float, window: float, tenant: str | None = None) -> Admission:
        """Admit background work of ``chars`` that keeps at most ``window`` of them
        queued at once (:class:`WindowAdmission`); no deadline, never refused here
        (the queue bound still applies when its chunks are submitted)."""
        admission = WindowAdmission(self, chars, window, tenant)
        with self._cond:
            self._admissions[admission] = None
        return admission

    def _refuse_too_long(
        self, chars: float, piece: float, allowed: float, workers: int, parallel: int
    ) -> None:
        """413 when even alone the text could not be done in ``allowed`` seconds."""
        # A permanent refusal must be certain: judged as if every chunk ran
        # alone on all cores (the fast lane), the most optimistic reading of
        # the measured rate. Borderline texts are admitted on an idle server.
        alone = estimate(
            reserved_chars=0.0,
            chars=chars,
            piece_chars=piece,
            seconds_per_char=self.rate.mean / workers,
            workers=workers,
            parallel=parallel,
        )
        if alone.finish_s <= allowed:
            return
        self._rejected += 1
        per_char = alone.finish_s / max(1.0, chars)
        fits = int(max(0.0, allowed) / per_char)
        raise PayloadTooLarge(
            f"this text needs at least {alone.finish_s:.0f} s of synthesis, more than the "
            f"request deadline of {max(0.0, allowed):.0f} s; send at most about {fits} "
            "characters, or submit it as a speech job (POST /v1/jobs/speech)",
            field="text",
            limit=fits,
            value=int(chars),
        )
