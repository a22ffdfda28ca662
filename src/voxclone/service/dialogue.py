"""Dialogue: several voices taking turns in one audio (``POST /v1/audio/dialogue``,
dialogue jobs, ``voxclone dialogue``).

A dialogue is a list of turns (voice, text, speed, emotion, pause). Each turn
is a plain-text :class:`SpeechRequest` resolved and checked by the
:class:`SpeechRouter` as ``/v1/tts`` resolves one (built-in voices, clones,
saved blends, blend expressions, each with the caller's owner), so a bad turn
is a 4xx naming it (``turns[3].voice``). The whole dialogue is priced before
anything renders: the sum of its turns' estimated audio plus its gaps, 413
over ``max_output_s``.

Rendering goes turn by turn through the speech service's chunk pipeline. A
turn is rendered whole (its loudness is measured on all of it), its edge
silence trimmed (the joiner's −50 dBFS rule, synth/audio/join.py), leveled to
one loudness target (synth/audio/loudness.py: BS.1770 gated loudness, then a
−1 dBTP limiter), and placed after its gap. So the silence between two turns
is exactly the gap, and voices of different loudness sound alike.

The default gap is 250 ms: in conversation, turn transitions cluster at
0-200 ms (Stivers et al. 2009, PNAS 106(26), ten languages: mode 0-200 ms,
mean about 208 ms; English about 236 ms). A synthesized dialogue has no
overlaps to balance the short gaps, and 250 ms reads as a quick, natural
reply, not as speakers interrupting. ``pause_ms`` on a turn replaces the gap
before it (and puts silence before the first turn).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, PayloadTooLarge, VoxcloneError
from voxclone.runtime.scheduler import Admission
from voxclone.service.job_voices import spoken_voice_ids
from voxclone.service.speech.encode import encode_file, encode_file_into, encode_stream
from voxclone.service.speech.output_length import held_to
from voxclone.service.speech.render_stats import RenderStats
from voxclone.service.speech.request import ResolvedRequest, SpeechRequest
from voxclone.synth.audio.file_encode import content_type
from voxclone.synth.audio.join import audible_bounds
from voxclone.synth.audio.loudness import level_to
from voxclone.synth.audio.resample import resample
from voxclone.synth.controls import SpeechControls

if TYPE_CHECKING:
    from voxclone.service.speech.router import SpeechRouter
    from voxclone.service.speech.service import SpeechService

# Gap between turns when a turn sets no pause_ms (see the module docstring).
DEFAULT_GAP_MS = 250
# The longest pause a turn may ask for (the same bound as an SSML <break>).
MAX_PAUSE_MS = 10_000
# Turns in one dialogue: each is admitted and resolved on its own, and a
# podcast-length script of short lines stays well under it.
MAX_TURNS = 500
# A turn's characters: a turn is held whole in memory to measure its
# loudness (5,000 characters speak ~5.5 min: ~32 MB of float32 at 24 kHz).
MAX_TURN_CHARS = 5_000
# Error fields that belong to one turn (others, like format, to the dialogue).
_TURN_FIELDS = frozenset(
    {"voice", "text", "speed", "emotion", "intensity", "model", "language", "timestamps"}
)


@dataclass(frozen=True)
class Turn:
    voice: str
    text: str
    speed: float | None = None
    emotion: str = "neutral"
    pause_ms: int | None = None  # silence before this turn (None: the default gap)
    speaker: str | None = None  # its label in captions (None: the voice)

    @property
    def label(self) -> str:
        return self.speaker or self.voice


@dataclass(frozen=True)
class Dialogue:
    turns: tuple[Turn, ...]
    owner: str | None = None
    format: str = "wav"
    sample_rate: int = 24_000
    model: str | None = None
    language: str | None = None
    unmarked: bool = False  # the caller's key is waived (SpeechRequest.unmarked)

    def request(self, i: int) -> SpeechRequest:
        t = self.turns[i]
        return SpeechRequest(
            text=t.text,
            voice=t.voice,
            language=self.language,
            controls=SpeechControls(speed=t.speed, emotion=t.emotion),
            format=self.format,
            sample_rate=self.sample_rate,
            owner=self.owner,
            model=self.model,
            ssml=False,  # a turn is plain text: its words are timed and labelled
            unmarked=self.unmarked,
        )

    def gap_s(self, i: int) -> float:
        pause = self.turns[i].pause_ms
        if pause is None:
            pause = 0 if i == 0 else DEFAULT_GAP_MS
        return pause / 1000.0

    def to_payload(self) -> dict[str, Any]:
        """What a job stores to render the dialogue again (JSON)."""
        return {
            "format": self.format,
            "sample_rate": self.sample_rate,
            "model": self.model,
            "language": self.language,
            UNMARKED_FIELD: self.unmarked,
            DIALOGUE_FIELD: [
                {
                    "voice": t.voice,
                    "text": t.text,
                    "speed": t.speed,
                    "emotion": t.emotion,
                    "pause_ms": t.pause_ms,
                    "speaker": t.speaker,
                }
                for t in self.turns
            ],
        }

    @classmethod
    def of_payload(cls, payload: dict[str, Any], owner: str | None) -> Dialogue:
        return cls(
            turns=tuple(Turn(**t) for t in payload[DIALOGUE_FIELD]),
            owner=owner,
            format=payload.get("format", "wav"),
            sample_rate=int(payload.get("sample_rate", 24_000)),
            model=payload.get("model"),
            language=payload.get("language"),
            unmarked=bool(payload.get(UNMARKED_FIELD, False)),
        )


# The key of a job payload that makes it a dialogue (service/jobs.py).
DIALOGUE_FIELD = "turns"
# A job payload's per-key waiver of the watermark (SpeechRequest.unmarked):
# the job renders later, in a worker that no longer knows the caller's key.
UNMARKED_FIELD = "unmarked"


def is_dialogue(payload: dict[str, Any] | None) -> bool:
    return isinstance(payload, dict) and isinstance(payload.get(DIALOGUE_FIELD), list)


@dataclass(frozen=True)
class SpeakerWord:
    """A word of the dialogue, in output seconds, with who says it."""

    speaker: str
    turn: int
    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class PreparedTurn:
    service: SpeechService
    request: ResolvedRequest
    output_s: float  # its estimated audio


@dataclass(frozen=True)
class PreparedDialogue:
    """A dialogue resolved, checked and priced (nothing rendered yet)."""

    dialogue: Dialogue
    turns: tuple[PreparedTurn, ...]
    output_s: float  # the turns' estimates plus the gaps

    @property
    def rate(self) -> int:
        """The rate it renders at: its first turn's engine's (others are resampled)."""
        return self.turns[0].service.sample_rate

    @property
    def content_type(self) -> str:
        return content_type(self.dialogue.format)


@dataclass(frozen=True)
class DialogueResult:
    audio: bytes
    content_type: str
    words: tuple[SpeakerWord, ...]
    duration_s: float


def in_turn(i: int, exc: VoxcloneError) -> VoxcloneError:
    """``exc`` as the error of turn ``i`` (its field ``turns[i].voice``, its
    message starting with the turn); dialogue-wide fields stay as they are."""
    if exc.field is not None and exc.field not in _TURN_FIELDS:
        return exc
    out = copy.copy(exc)
    out.field = f"turns[{i}].{exc.field}" if exc.field else f"turns[{i}]"
    out.message = f"turn {i}: {exc.message}"
    out.args = (out.message,)
    return out


class Dialogues:
    """Prices, admits and renders dialogues over the speech router."""

    def __init__(self, speech: SpeechRouter, *, max_output_s: float, max_text_chars: int) -> None:
        self._speech = speech
        self._max_output_s = max_output_s
        self._max_text_chars = max_text_chars

    # -- checks and price ---------------------------------------------------------
    def check_shape(self, dialogue: Dialogue) -> None:
        """The 4xx a dialogue gets without looking anything up."""
        turns = dialogue.turns
        if not turns:
            raise InvalidInput("a dialogue needs at least one turn", field="turns", limit=1)
        if len(turns) > MAX_TURNS:
            raise InvalidInput(
                f"a dialogue has at most {MAX_TURNS} turns, this one {len(turns)}",
                field="turns",
                limit=MAX_TURNS,
                value=len(turns),
            )
        total = 0
        for i, t in enumerate(turns):
            if not t.voice or not t.voice.strip():
                raise InvalidInput(f"turn {i} names no voice", field=f"turns[{i}].voice")
            if not t.text.strip():
                raise InvalidInput(f"turn {i} has no text", field=f"turns[{i}].text")
            if len(t.text) > MAX_TURN_CHARS:
                raise PayloadTooLarge(
                    f"turn {i} has {len(t.text)} characters, more than {MAX_TURN_CHARS}; "
                    "split it into several turns",
                    field=f"turns[{i}].text",
                    limit=MAX_TURN_CHARS,
                    value=len(t.text),
                )
            if t.pause_ms is not None and not 0 <= t.pause_ms <= MAX_PAUSE_MS:
                raise InvalidInput(
                    f"turn {i}: pause_ms must be 0 to {MAX_PAUSE_MS}",
                    field=f"turns[{i}].pause_ms",
                    limit=MAX_PAUSE_MS,
                    value=t.pause_ms,
                )
            total += len(t.text)
        if total > self._max_text_chars:
            raise PayloadTooLarge(
                f"the dialogue has {total} characters, more than {self._max_text_chars}",
                field="turns",
                limit=self._max_text_chars,
                value=total,
            )

    def prepare(self, dialogue: Dialogue) -> PreparedDialogue:
        """Resolve and price every turn (voice lookups: call from a worker
        thread). A bad turn is its 4xx naming it; the dialogue's audio (its
        turns' estimates plus its gaps) over ``max_output_s`` is a 413
        before any render."""
        self.check_shape(dialogue)
        prepared = []
        seconds = 0.0
        for i in range(len(dialogue.turns)):
            try:
                service, r = self._speech.route(dialogue.request(i))
                price = service.estimate(r)
            except VoxcloneError as exc:
                raise in_turn(i, exc) from None
            prepared.append(PreparedTurn(service, r, price.output_s))
            seconds += price.output_s + dialogue.gap_s(i)
        if seconds > self._max_output_s:
            raise PayloadTooLarge(
                f"the dialogue would give about {seconds:.0f} s of audio (its turns as "
                f"spoken, with their gaps); at most {self._max_output_s:.0f} s per request "
                "(max_output_s)",
                field="turns",
                limit=self._max_output_s,
                value=round(seconds, 1),
            )
        return PreparedDialogue(dialogue, tuple(prepared), seconds)

    def voice_ids(self, p: PreparedDialogue) -> tuple[str, ...]:
        """The stored voices the dialogue speaks with (a job links them)."""
        found: dict[str, None] = {}
        catalog = self._speech.catalog
        for i in range(len(p.dialogue.turns)):
            req = p.dialogue.request(i)
            for voice_id in spoken_voice_ids(lambda v, o: catalog.resolve(v, o), req):
                found.setdefault(voice_id)
        return tuple(found)

    def text_size(self, p: PreparedDialogue) -> int:
        return sum(t.service.text_size(t.request) for t in p.turns)

    # -- admission ------------------------------------------------------------------
    def admit(
        self,
        p: PreparedDialogue,
        deadline: float,
        *,
        stream: bool,
        must_finish: bool | None = None,
        first_audio_s: float | None = None,
    ) -> list[Admission]:
        """Every turn's reservation, taken now (all or none: 503 when the work
        ahead would make the dialogue late). The renders release them."""
        taken: list[Admission] = []
        try:
            for i, t in enumerate(p.turns):
                taken.append(
                    t.service.admit(
                        t.request,
                        deadline,
                        stream=stream,
                        must_finish=must_finish,
                        first_audio_s=first_audio_s if i == 0 else None,
                    )
                )
        except BaseException:
            for a in taken:
                a.release()
            raise
        return taken

    # -- rendering ------------------------------------------------------------------
    def render(
        self,
        p: PreparedDialogue,
        admissions: Sequence[Admission] | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
        words: list[SpeakerWord] | None = None,
        untimed: list[int] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """The dialogue's audio at ``p.rate``, a gap then a turn at a time.
        ``admissions``: one per turn (:meth:`admit`); None: each turn takes a
        background one as it starts (a job). With ``words``, each turn's
        words are appended (output time, speaker) before its audio is yielded;
        a turn whose words cannot be had (an engine without word times) is
        then a 4xx naming it, or, with ``untimed``, spoken without words and
        its index appended there (an audiobook's chapter is not lost for its
        captions)."""
        rate = p.rate
        at = 0
        try:
            for i, t in enumerate(p.turns):
                if cancelled is not None and cancelled():
                    raise Cancelled("request cancelled")
                admission = (
                    admissions[i]
                    if admissions is not None
                    else t.service.admit_background(t.request)
                )
                track = None
                if words is not None:
                    try:
                        track = t.service.word_track(t.request)
                    except VoxcloneError as exc:
                        if untimed is None or exc.status >= 500:
                            admission.release()
                            raise in_turn(i, exc) from None
                        untimed.append(i)
                audio = _whole(
                    t.service.render_pieces(
                        t.request,
                        fast_start=False,
                        cancelled=cancelled,
                        progress=progress,
                        admission=admission,
                        words=track,
                    )
                )
                own_rate = t.service.sample_rate
                bounds = audible_bounds(audio, own_rate)
                start = 0 if bounds is None else bounds[0]
                audio = audio[start : bounds[1]] if bounds is not None else audio[:0]
                audio = level_to(resample(audio, own_rate, rate), rate).audio
                gap = int(round(p.dialogue.gap_s(i) * rate))
                if gap:
                    yield np.zeros(gap, np.float32)
                    at += gap
                if words is not None and track is not None:
                    offset, length = at / rate, audio.size / rate
                    shift = start / own_rate
                    label = p.dialogue.turns[i].label
                    for w in track.words:
                        s = min(max(w.start_s - shift, 0.0), length)
                        e = min(max(w.end_s - shift, s), length)
                        words.append(SpeakerWord(label, i, w.word, offset + s, offset + e))
                if audio.size:
                    yield audio
                    at += audio.size
        finally:
            for a in admissions or ():
                a.release()  # turns not reached (releasing twice is harmless)

    def synthesize(
        self,
        p: PreparedDialogue,
        admissions: Sequence[Admission] | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
        timestamps: bool = False,
    ) -> DialogueResult:
        """The whole file (and its speaker-labelled words with ``timestamps``)."""
        words: list[SpeakerWord] | None = [] if timestamps else None
        seconds = 0.0

        def render(_stats: RenderStats) -> Iterator[np.ndarray]:
            nonlocal seconds
            for piece in self.render(p, admissions, cancelled=cancelled, words=words):
                seconds += piece.size / p.rate
                yield piece

        d = p.dialogue
        data = encode_file(d.format, p.rate, d.sample_rate, render)
        return DialogueResult(data, p.content_type, tuple(words or ()), seconds)

    def stream(
        self,
        p: PreparedDialogue,
        admissions: Sequence[Admission] | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[bytes]:
        """Encoded audio as each turn is rendered (the container header first)."""

        def render(_stats: RenderStats) -> Iterator[np.ndarray]:
            return self.render(p, admissions, cancelled=cancelled)

        d = p.dialogue
        return encode_stream(d.format, p.rate, d.sample_rate, render, stream=True)

    def render_into(
        self,
        p: PreparedDialogue,
        out: IO[bytes],
        *,
        max_output_s: float,
        progress: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        words: list[SpeakerWord] | None = None,
        untimed: list[int] | None = None,
    ) -> str:
        """A dialogue job's render: written into ``out`` as it is made, held
        to ``max_output_s`` (OutputOverEstimate past it). Its content type.
        ``words``/``untimed``: as :meth:`render` (an audiobook chapter's job)."""

        def render(_stats: RenderStats) -> Iterator[np.ndarray]:
            pieces = self.render(
                p, cancelled=cancelled, progress=progress, words=words, untimed=untimed
            )
            return held_to(pieces, p.rate, max_output_s)

        d = p.dialogue
        encode_file_into(d.format, p.rate, d.sample_rate, render, out)
        return p.content_type


def _whole(pieces: Iterator[np.ndarray]) -> np.ndarray:
    parts = list(pieces)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
