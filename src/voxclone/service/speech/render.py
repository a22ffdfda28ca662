"""The chunk pipeline: planned chunks → the scheduler → post-processing → joined audio.

It never holds the whole text's audio: a few chunks are kept in flight on
the scheduler so every worker stays busy, and each finished piece is
post-processed and joined before the next one is awaited.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Literal

import numpy as np

from voxclone.errors import Cancelled
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.scheduler import (
    PRIORITY_FIRST_CHUNK,
    PRIORITY_NORMAL,
    Admission,
    Scheduler,
    WorkTiming,
)
from voxclone.service.captions import WordTrack
from voxclone.service.catalog import ResolvedVoice
from voxclone.service.speech.plan import PlannedChunk, at_voice_pace, units
from voxclone.service.speech.pricing import LOOKAHEAD_CHUNKS
from voxclone.service.speech.render_stats import FirstAudioStages, RenderStats
from voxclone.synth.audio.effects import true_peak_limit
from voxclone.synth.audio.join import PieceJoiner
from voxclone.synth.audio.post import PEAK_CEILING_DBFS, apply_controls
from voxclone.synth.audio.watermark import StreamMarker, stream_marker
from voxclone.synth.controls import ResolvedControls
from voxclone.synth.engine.base import EngineCapabilities, SynthItem

# A stream's first piece is marked and sent in two parts, this long a head
# first: first audio waits only for the head's mark. Marking the whole first
# piece (1.03 s of Kokoro's audio, p50) took 9.6 ms CPU / 29.7 ms wall at
# load 12 on 2 cores (bench/watermark.py); the mark joins without a seam
# whatever the cut (StreamMarker).
FIRST_HEAD_S = 0.2

# How a render's audio leaves the engine (ChunkRenderer.pieces).
PieceMode = Literal["whole", "frames", "head"]
# With "head", a stream's first chunk leaves in two pieces, and its second
# when it is this many times longer (units): a head brings the first audio
# ~0.2 s sooner and a split costs ~24 frames more render (head_piece.py), so a
# long second chunk ("The night train | was busier than anyone expected.",
# 2.3x) came whole 0.25-0.5 s after the first had played, while splitting a
# short one ("It was raining | again today.") only delayed the third
# (studies/head_piece.py).
SECOND_HEAD_RATIO = 1.5


def _marked(
    marker: StreamMarker | None, out: np.ndarray, *, head: int, rate: int
) -> Iterator[np.ndarray]:
    """``out`` marked, as one part, or as a head and the rest when ``head``
    is shorter than it (the rest is marked only after the head is taken)."""
    if not out.size:
        return
    if marker is None:
        yield out
    elif 0 < head < out.size:
        yield _within_ceiling(marker.push(out[:head]), rate)
        yield _within_ceiling(marker.push(out[head:]), rate)
    else:
        yield _within_ceiling(marker.push(out), rate)


def _within_ceiling(part: np.ndarray, rate: int) -> np.ndarray:
    # The mark is added after post-processing's -1 dBTP limiter and lifted
    # preset peaks to -0.39 dBTP (angry; test_controls_effects): limit again.
    # A part already under the ceiling returns at the first check (no scipy).
    return true_peak_limit(part, rate, ceiling_dbfs=PEAK_CEILING_DBFS)


class ChunkRenderer:
    """Renders one engine's planned chunks (its scheduler and capabilities)."""

    def __init__(
        self,
        scheduler: Scheduler,
        capabilities: EngineCapabilities,
        metrics: Metrics | None = None,
        *,
        watermark: bool = False,
    ) -> None:
        self._scheduler = scheduler
        self._caps = capabilities
        self._metrics = metrics
        # Every route's audio comes out of render(): marked here, chunk by
        # chunk, it is marked on all of them (synth/audio/watermark.py).
        self._watermark = watermark
        self._first_head = int(FIRST_HEAD_S * capabilities.sample_rate)

    @property
    def _rate(self) -> int:
        return self._caps.sample_rate

    def pieces(
        self,
        voice: ResolvedVoice,
        controls: ResolvedControls,
        *,
        fast_start: bool,
        words: WordTrack | None,
        ssml: bool,
    ) -> PieceMode:
        """How the engine's audio goes out: ``"frames"`` as a frame engine makes
        it, ``"head"`` with a chunk engine's first chunk in two pieces (its
        head leaves first), or each chunk ``"whole"``."""
        # Only when nothing needs the whole chunk: a stream (whole files gain
        # nothing) whose voice has no tone filter and whose controls need no
        # DSP (tempo and pitch work on whole chunks). Only the true-peak
        # limiter runs per piece.
        piecewise = (
            fast_start
            and words is None  # word times need whole chunks
            and voice.tone is None
            and not at_voice_pace(controls, voice).needs_dsp
            and not ssml  # voices and controls may change per chunk
        )
        if not piecewise:
            return "whole"
        if self._caps.streaming == "frame":
            return "frames"
        return "head" if self._caps.head_piece else "whole"

    def render(
        self,
        plan: Iterator[PlannedChunk],
        admission: Admission,
        *,
        fast_start: bool,
        started: float,
        stats: RenderStats,
        cancelled: Callable[[], bool] | None = None,
        progress: Callable[[int], None] | None = None,
        words: WordTrack | None = None,
        pieces: PieceMode = "whole",
        marked: bool = True,
    ) -> Iterator[np.ndarray]:
        """Yield post-processed, joined float32 audio at the engine rate; the
        admission is released when the render ends, however it ends. With
        ``words``, the words spoken so far are in ``words.words`` (output
        time) before the audio that contains them is yielded. ``marked``
        False: this request's key is waived (the server's policy still rules
        when it is True)."""
        joiner = PieceJoiner(self._rate)
        first_timing = WorkTiming()
        # None when the weights are missing or broken: speech goes out unmarked.
        marker = stream_marker(self._rate) if self._watermark and marked else None

        def first_audio_out() -> None:
            now = time.perf_counter()
            stats.first_audio_s = now - started
            stats.first_audio_stages = FirstAudioStages.of(started, first_timing, now)

        for planned, audio, chunk_done in self._scheduled(
            plan, fast_start, cancelled, admission, pieces=pieces, words=words, timing=first_timing
        ):
            chunk = planned.chunk
            engine_len = audio.size
            if planned.lead_s > 0 and stats.first_audio_s is None:
                lead = np.zeros(int(round(planned.lead_s * self._rate)), np.float32)
                stats.audio_seconds += lead.size / self._rate
                first_audio_out()
                yield lead
            if planned.voice.tone is not None:
                # Before the controls: pitch and energy act on the voice as cloned.
                audio = planned.voice.tone.apply(audio, self._rate)
            # Always: besides the controls' DSP it holds the true-peak ceiling.
            audio = apply_controls(audio, self._rate, planned.controls)
            if not chunk_done:
                out = joiner.feed_partial(audio)
            else:
                out = joiner.feed(audio, planned.pause_s)
                if words is not None:
                    words.chunk_done(chunk, engine_len, audio.size, joiner)
                stats.chunks += 1
                if progress is not None:
                    progress(len(chunk.text))
            # Not with word times: a word goes out with the audio that ends it.
            split = fast_start and words is None and stats.first_audio_s is None
            head = self._first_head if split else 0
            for part in _marked(marker, out, head=head, rate=self._rate):
                stats.audio_seconds += part.size / self._rate
                if stats.first_audio_s is None:
                    first_audio_out()
                yield part
        tail = joiner.finish()
        if words is not None:
            words.finish()
        if tail.size:
            if marker is not None:
                tail = _within_ceiling(marker.push(tail), self._rate)
            stats.audio_seconds += tail.size / self._rate
            yield tail
        stats.compute_seconds = time.perf_counter() - started
        if self._metrics is not None:
            self._metrics.observe_render(stats.audio_seconds, stats.compute_seconds)

    def _scheduled(
        self,
        plan: Iterator[PlannedChunk],
        fast_start: bool,
        cancelled: Callable[[], bool] | None,
        admission: Admission,
        *,
        pieces: PieceMode = "whole",
        words: WordTrack | None = None,
        timing: WorkTiming | None = None,
    ) -> Iterator[tuple[PlannedChunk, np.ndarray, bool]]:
        """Yield (planned chunk, audio, chunk done): the audio of each chunk in
        order, in one piece, or in the engine's pieces as they are made (every
        chunk with ``"frames"``, the first with ``"head"``; then a last empty
        piece marks the chunk's end). ``timing`` is filled in for the first chunk."""
        pending: deque[tuple[PlannedChunk, Future[np.ndarray], queue.SimpleQueue[Any] | None]] = (
            deque()
        )
        abandoned = threading.Event()
        first_cost: list[float] = []  # the first chunk's units, once planned

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
            cost = float(units(chunk))
            if first:
                first_cost.append(cost)
            streamed = pieces == "frames" or (
                pieces == "head"
                and (first or (chunk.index == 1 and cost > SECOND_HEAD_RATIO * sum(first_cost)))
            )
            parts: queue.SimpleQueue[Any] | None = queue.SimpleQueue() if streamed else None
            future = self._scheduler.submit(
                item,
                priority=priority,
                cancelled=gone,
                admitted=not first,
                deadline=due,
                cost=cost,
                on_piece=None if parts is None else parts.put,
                timing=timing if first else None,
                tenant=admission.tenant,
                listener=admission.listener,
            )
            if parts is not None:
                # Every piece is queued before the future resolves: this ends them.
                future.add_done_callback(functools.partial(_end_of_pieces, parts))
            pending.append((planned, future, parts))
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
                planned, future, parts = pending[0]
                if parts is not None:
                    yield from _pieces_until_done(planned, parts, gone)
                pending.popleft()
                audio = future.result()
                admission.consume(units(planned.chunk))
                while len(pending) < LOOKAHEAD_CHUNKS and submit_next():
                    pass
                yield planned, (_NO_AUDIO if parts is not None else audio), True
        finally:
            # Generator closed early (client went away) or failed: drop queued work.
            abandoned.set()
            admission.release()
            for _, future, _ in pending:
                future.cancel()


_CHUNK_END = object()
_NO_AUDIO = np.zeros(0, dtype=np.float32)


def _end_of_pieces(pieces: queue.SimpleQueue[Any], _future: Future[np.ndarray]) -> None:
    pieces.put(_CHUNK_END)


def _pieces_until_done(
    chunk: PlannedChunk, pieces: queue.SimpleQueue[Any], gone: Callable[[], bool]
) -> Iterator[tuple[PlannedChunk, np.ndarray, bool]]:
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
