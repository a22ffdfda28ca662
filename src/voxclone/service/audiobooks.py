"""Audiobooks: a book (service/../synth/text/chapters.py) rendered chapter by
chapter on the durable speech-job queue, assembled into one M4B with chapter marks.

A book is a parent record in the jobs table (kind ``audiobook``, never claimed
by a worker: its payload keeps the chapters' text and the casting, its result
the id of each chapter's job) and one *dialogue job* per chapter
(service/dialogue.py, service/jobs.py). This keeps the code small: the
queue already gives each chapter leases, retries, cancellation, fairness,
voice-deletion revocation, blob storage and restart recovery, so a server
killed mid-book resumes by itself — chapters that succeeded stay succeeded,
the one that was running is claimed again when its lease expires, the rest
are claimed in turn. One chapter is re-rendered (another voice, or the same
after a lexicon fix) by queuing a new job for it and pointing the book at it;
the others are not touched.

A chapter is a dialogue: its title, then each paragraph, a turn each; with a
cast and ``quotes``, quoted speech in a paragraph goes to the cast character
named in that paragraph's narration (else the narrator keeps it). Turns get
the dialogue's loudness matching; the pause before a paragraph is
:data:`PARAGRAPH_PAUSE_MS` (longer than the 250 ms turn gap, so a new
paragraph is heard as one), before the first one :data:`TITLE_PAUSE_MS`.

Pricing: each chapter is one request, checked and priced like a dialogue job
(413 over ``max_output_s`` / ``max_text_chars``, naming the chapter); the
whole book is held to ``max_book_output_s``; nothing is queued until every
chapter has passed.

Assembly (on the first download after the chapters are done): each chapter's
FLAC is decoded, :data:`CHAPTER_GAP_S` of silence follows it, AAC in MP4 with
a chapter mark per chapter (PyAV) goes to the blob store under
``audiobooks/<book>/<digest>.m4b`` with its manifest (titles, start times,
durations) beside it; the digest is of the chapter job ids, so a re-rendered
chapter makes a new file and the stale one is deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import math
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import av
import numpy as np
import soundfile as sf

from voxclone.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge, VoxcloneError
from voxclone.runtime.job_store import JobQueue, JobRecord
from voxclone.service.audiobook_expiry import (
    AUDIOBOOK_KIND,
    BOOK_BLOB_PREFIX,
    is_expired,
    remove_book,
    retention_cutoff,
)
from voxclone.service.audiobook_words import ChapterWords, Timeline, chapter_words
from voxclone.service.dialogue import (
    MAX_TURN_CHARS,
    MAX_TURNS,
    UNMARKED_FIELD,
    Dialogue,
    Dialogues,
    Turn,
)
from voxclone.synth.audio.resample import resample
from voxclone.synth.text.chapters import Book, Chapter

if TYPE_CHECKING:
    from voxclone.runtime.blobs import BlobStore
    from voxclone.service.jobs import SpeechJobs
    from voxclone.service.speech.router import SpeechRouter

log = logging.getLogger(__name__)

BOOK_FORMATS = ("m4b", "m4a")
BOOK_CONTENT_TYPE = "audio/mp4"
# Chapters are stored lossless; the book's AAC is encoded once from them.
CHAPTER_FORMAT = "flac"
NARRATOR = "Narrator"
PARAGRAPH_PAUSE_MS = 600
TITLE_PAUSE_MS = 1_000
# Silence after each chapter in the book: ACX asks for 1-5 s at a chapter's end.
CHAPTER_GAP_S = 1.0
BOOK_RATE = 24_000
# 64 kb/s mono AAC: ACX's floor for audiobooks is 192 kb/s *MP3*; AAC-LC at 64
# kb/s mono is the common spoken-word rate (Audible's "high" is 64 kb/s AAC).
BOOK_BIT_RATE = 64_000
_QUOTE = re.compile(r"“[^”]+”|\"[^\"]+\"")


@dataclass(frozen=True)
class Casting:
    """Who reads: the narrator, and characters' voices for quoted speech."""

    voice: str
    cast: dict[str, str] = field(default_factory=dict)  # character name -> voice
    quotes: bool = False  # quoted speech to the character its paragraph names
    speed: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"voice": self.voice, "cast": self.cast, "quotes": self.quotes, "speed": self.speed}

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> Casting:
        return cls(
            data["voice"], dict(data.get("cast") or {}), bool(data.get("quotes")), data.get("speed")
        )

    def check(self) -> None:
        if not self.voice or not self.voice.strip():
            raise InvalidInput("an audiobook needs a narrator voice", field="voice")
        for name, voice in self.cast.items():
            if not name.strip() or not isinstance(voice, str) or not voice.strip():
                raise InvalidInput(
                    'the cast maps character names to voices: {"Alice": "af_heart"}',
                    field=f"cast.{name}",
                )
        if self.quotes and not self.cast:
            raise InvalidInput("quotes needs a cast to give quoted speech to", field="cast")


@dataclass(frozen=True)
class BookLimits:
    max_output_s: float  # one chapter (one request)
    max_text_chars: int  # one chapter
    max_book_output_s: float  # the whole book


@dataclass(frozen=True)
class ChapterView:
    n: int
    title: str
    job: JobRecord | None  # None: its job is gone (expired or deleted)
    casting: Casting

    @property
    def state(self) -> str:
        return "missing" if self.job is None else self.job.state


@dataclass(frozen=True)
class BookView:
    record: JobRecord
    chapters: tuple[ChapterView, ...]

    @property
    def state(self) -> str:
        states = {c.state for c in self.chapters}
        if not states:
            return "queued"  # its chapters are being queued (an Idempotency-Key retry)
        if states == {"succeeded"}:
            return "succeeded"
        if "running" in states or "queued" in states:
            return "running" if states - {"queued"} else "queued"
        return "failed"  # a chapter failed, was cancelled or is gone: re-render it

    @property
    def progress(self) -> float:
        done = [c.job.progress if c.job else 0.0 for c in self.chapters]
        return round(sum(done) / max(1, len(done)), 1)

    @property
    def format(self) -> str:
        return str((self.record.payload or {}).get("format", "m4b"))

    @property
    def unmarked(self) -> bool:
        return bool((self.record.payload or {}).get(UNMARKED_FIELD))

    @property
    def title(self) -> str | None:
        return (self.record.payload or {}).get("title")


# -- a chapter as dialogue turns -------------------------------------------------------
def chapter_turns(chapter: Chapter, casting: Casting) -> tuple[Turn, ...]:
    """The turns a chapter is read as: its title, then its paragraphs."""
    turns = [Turn(casting.voice, chapter.title, casting.speed, speaker=NARRATOR)]
    pause = TITLE_PAUSE_MS
    for para in chapter.paragraphs:
        for i, (speaker, voice, text) in enumerate(_voiced(para, casting)):
            for j, piece in enumerate(_split(text, MAX_TURN_CHARS)):
                first = i == 0 and j == 0
                turns.append(
                    Turn(
                        voice,
                        piece,
                        casting.speed,
                        pause_ms=pause if first else None,
                        speaker=speaker,
                    )
                )
        pause = PARAGRAPH_PAUSE_MS
    return tuple(_merged(turns) if len(turns) > MAX_TURNS else turns)


def _voiced(para: str, casting: Casting) -> list[tuple[str, str, str]]:
    """(speaker, voice, text) runs of a paragraph."""
    if not casting.quotes:
        return [(NARRATOR, casting.voice, para)]
    narration = _QUOTE.sub(" ", para)
    named = [
        (m.start(), name)
        for name in casting.cast
        if (m := re.search(rf"\b{re.escape(name)}\b", narration)) is not None
    ]
    if not named:
        return [(NARRATOR, casting.voice, para)]
    speaker = min(named)[1]
    runs: list[tuple[str, str, str]] = []
    at = 0
    for m in _QUOTE.finditer(para):
        before = para[at : m.start()].strip()
        if before:
            runs.append((NARRATOR, casting.voice, before))
        runs.append((speaker, casting.cast[speaker], m.group(0).strip('“”"')))
        at = m.end()
    rest = para[at:].strip()
    if rest:
        runs.append((NARRATOR, casting.voice, rest))
    return [r for r in runs if r[2].strip(" ,.;:")]


def _split(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at sentence ends."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in re.split(r"(?<=[.!?…])\s+", text):
        while len(sentence) > limit:  # no sentence end within the limit: cut at a space
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            pieces.append(sentence[:cut])
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        pieces.append(current)
    return pieces


def _merged(turns: list[Turn]) -> list[Turn]:
    """Adjacent turns of one voice joined (up to a turn's limit): a chapter of
    more than MAX_TURNS paragraphs loses its paragraph pauses, not its text."""
    out: list[Turn] = []
    for t in turns:
        last = out[-1] if out else None
        if (
            last is not None
            and last.voice == t.voice
            and len(last.text) + 2 + len(t.text) <= MAX_TURN_CHARS
            and len(out) > 1
        ):
            out[-1] = Turn(
                last.voice,
                f"{last.text}\n\n{t.text}",
                last.speed,
                pause_ms=last.pause_ms,
                speaker=last.speaker,
            )
        else:
            out.append(t)
    return out


# -- the use cases ---------------------------------------------------------------------
class Audiobooks:
    """Submit, watch, re-render, assemble and delete audiobooks."""

    def __init__(
        self,
        *,
        store: JobQueue,
        jobs: SpeechJobs,
        speech: SpeechRouter,
        limits: BookLimits,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._limits = limits
        self._dialogues = Dialogues(
            speech, max_output_s=limits.max_output_s, max_text_chars=limits.max_text_chars
        )

    @property
    def blobs(self) -> BlobStore:
        return self._jobs.blobs

    def submit(
        self,
        book: Book,
        casting: Casting,
        *,
        owner: str,
        fmt: str = "m4b",
        unmarked: bool = False,
        idempotency_key: str | None = None,
    ) -> tuple[BookView, bool]:
        """Check and price every chapter (4xx naming it), the whole book
        against ``max_book_output_s``, then queue a job per chapter; (the
        book, created). ``unmarked``: the caller's key is waived from the
        watermark (every chapter, re-renders too, keeps the waiver of the key
        that sent the book). The same ``idempotency_key`` with the same book
        and casting is the book it made the first time (a 409 with another)."""
        if fmt not in BOOK_FORMATS:
            raise InvalidInput(
                f"format must be one of {', '.join(BOOK_FORMATS)}", field="format", value=fmt
            )
        self._check(casting, owner)
        prepared = [
            self._prepare(n, c, casting, owner, unmarked) for n, c in enumerate(book.chapters)
        ]
        seconds = sum(p.output_s for p in prepared) + CHAPTER_GAP_S * len(prepared)
        if seconds > self._limits.max_book_output_s:
            raise PayloadTooLarge(
                f"the book would give about {seconds / 3600:.1f} h of audio; at most "
                f"{self._limits.max_book_output_s / 3600:.1f} h per book (max_book_output_s)",
                field="file",
                limit=self._limits.max_book_output_s,
                value=round(seconds, 1),
            )
        payload = {
            "title": book.title,
            "format": fmt,
            "casting": casting.to_json(),
            UNMARKED_FIELD: unmarked,
            "chapters": [{"title": c.title, "text": c.text} for c in book.chapters],
        }
        record, created = self._store.enqueue(
            kind=AUDIOBOOK_KIND,
            owner=owner,
            payload=payload,
            max_attempts=1,
            idempotency_key=idempotency_key,
        )
        if not created:
            return self.get(record.id, owner), False
        chapters = []
        for p in prepared:
            job, _ = self._jobs.enqueue_dialogue(
                p,
                self._dialogues,
                purge_with=f"{BOOK_BLOB_PREFIX}{record.id}/",
                record_words=True,
            )
            chapters.append({"job_id": job.id, "casting": casting.to_json()})
        self._store.update(
            record.id,
            state="running",
            message="audiobook",
            result={"chapters": chapters, "estimate_s": round(seconds, 1)},
        )
        return self.get(record.id, owner), True

    def _check(self, casting: Casting, owner: str) -> None:
        """The casting's shape, and every cast voice resolved: one no chapter
        gives a line to is still a mistake worth a 4xx (``cast.<name>``)."""
        casting.check()
        for name, voice in casting.cast.items():
            try:
                self._dialogues.prepare(Dialogue((Turn(voice, "A."),), owner=owner))
            except VoxcloneError as exc:
                raise type(exc)(
                    f"cast {name}: {exc.message}", field=f"cast.{name}", value=voice
                ) from None

    def _prepare(
        self, n: int, chapter: Chapter, casting: Casting, owner: str, unmarked: bool
    ) -> Any:
        turns = chapter_turns(chapter, casting)
        dialogue = Dialogue(
            turns, owner=owner, format=CHAPTER_FORMAT, sample_rate=BOOK_RATE, unmarked=unmarked
        )
        try:
            return self._dialogues.prepare(dialogue)
        except VoxcloneError as exc:
            raise _in_chapter(n, chapter, turns, casting, exc) from None

    def get(self, book_id: str, owner: str | None) -> BookView:
        try:
            record = self._store.get(book_id, owner)
        except NotFound:
            raise self._not_found(book_id) from None
        if record.kind != AUDIOBOOK_KIND:
            raise self._not_found(book_id)
        # Expired (its chapters gone and the retention past): gone now, not
        # at the next sweep (service/audiobook_expiry.py).
        if is_expired(self._store, record, retention_cutoff(self._jobs.config.retention_s)):
            remove_book(self._store, self.blobs, book_id)
            raise self._not_found(book_id)
        payload = record.payload or {}
        links = (record.result or {}).get("chapters", [])
        views = []
        for n, (c, link) in enumerate(zip(payload.get("chapters", []), links, strict=False)):
            try:
                job: JobRecord | None = self._store.get(link["job_id"], record.owner)
            except NotFound:
                job = None
            views.append(ChapterView(n, c["title"], job, Casting.of_json(link["casting"])))
        return BookView(record, tuple(views))

    def _not_found(self, book_id: str) -> NotFound:
        # The same answer for a book never made, deleted, expired or another
        # owner's; it says that books expire, and when.
        retention = self._jobs.config.retention_s
        expiry = (
            f", or expired: a book goes with its chapters, {_days(retention)} after "
            "they were rendered (job_retention_s)"
            if retention > 0
            else ""
        )
        return NotFound(
            f"no audiobook {book_id[:40]!r}: never made, deleted{expiry}", field="book_id"
        )

    def rerender(
        self, book_id: str, owner: str | None, n: int, casting: Casting | None = None
    ) -> BookView:
        """Queue chapter ``n`` again (with ``casting``, else as before: after a
        lexicon fix the same voice reads the fixed words); the other chapters
        are kept and the book is assembled again on its next download."""
        view = self.get(book_id, owner)
        old = _chapter(view, n)
        if old.job is not None and not old.job.done:
            raise Conflict(f"chapter {n} is still {old.job.state}", field="n")
        casting = casting or old.casting
        self._check(casting, view.record.owner)
        text = (view.record.payload or {})["chapters"][n]
        prepared = self._prepare(
            n, Chapter(text["title"], text["text"]), casting, view.record.owner, view.unmarked
        )
        job, _ = self._jobs.enqueue_dialogue(
            prepared,
            self._dialogues,
            purge_with=f"{BOOK_BLOB_PREFIX}{book_id}/",
            record_words=True,
        )
        links = list((view.record.result or {})["chapters"])
        links[n] = {"job_id": job.id, "casting": casting.to_json()}
        self._store.update(book_id, result={**(view.record.result or {}), "chapters": links})
        if old.job is not None:
            self._jobs.delete(old.job.id, None)  # its audio with it
        self.blobs.delete_prefix(f"{BOOK_BLOB_PREFIX}{book_id}/")
        return self.get(book_id, owner)

    def cancel(self, book_id: str, owner: str | None) -> BookView:
        """Cancel the chapters not rendered yet (a running one stops at its
        next chunk); rendered ones are kept, and any can be rendered again."""
        for c in self.get(book_id, owner).chapters:
            if c.job is not None and not c.job.done:
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    self._store.request_cancel(c.job.id, None)
        return self.get(book_id, owner)

    def delete(self, book_id: str, owner: str | None) -> None:
        view = self.get(book_id, owner)
        for c in view.chapters:
            if c.job is not None:
                with contextlib.suppress(NotFound):  # swept meanwhile
                    self._jobs.delete(c.job.id, None)
        self.blobs.delete_prefix(f"{BOOK_BLOB_PREFIX}{book_id}/")
        self._store.delete(book_id, None)
        with _LOCKS_GUARD:
            _ASSEMBLY_LOCKS.pop(book_id, None)

    def chapter_audio_key(self, book_id: str, owner: str | None, n: int) -> tuple[str, str]:
        """(the blob key of chapter ``n``'s audio, its content type): the
        route streams it from the store (BlobStore.open_chunks), never whole."""
        view = self.get(book_id, owner)
        chapter = _chapter(view, n)
        result = (chapter.job.result or {}) if chapter.job else {}
        key = result.get("blob_key")
        if chapter.state != "succeeded" or not isinstance(key, str):
            raise Conflict(f"chapter {n} is {chapter.state}, not rendered yet", field="n")
        return key, str(result.get("content_type"))

    def chapter_words(
        self, book_id: str, owner: str | None, n: int, timeline: Timeline = "chapter"
    ) -> ChapterWords:
        """Chapter ``n``'s words, who reads each and in which voice, in the
        chapter's own seconds (as soon as it is rendered) or the book's (the
        M4B's clock: the book is assembled first, 409 until every chapter is
        rendered)."""
        chapter = _chapter(self.get(book_id, owner), n)
        result = (chapter.job.result or {}) if chapter.job else {}
        if chapter.state != "succeeded" or chapter.job is None:
            raise Conflict(f"chapter {n} is {chapter.state}, not rendered yet", field="n")
        key = result.get("words_key")
        if not isinstance(key, str):
            raise Conflict(
                f"chapter {n} was rendered before books kept word timings; render it "
                f"again (POST /v1/audiobooks/{book_id}/chapters/{n}/render)",
                field="n",
            )
        start_s = 0.0
        if timeline == "book":
            marks = self.manifest(book_id, owner)["chapters"]
            if marks[n].get("job_id") != chapter.job.id:  # re-rendered meanwhile
                raise Conflict(f"chapter {n} changed while it was read; ask again", field="n")
            start_s = float(marks[n]["start_s"])
        return chapter_words(
            chapter.job,
            self.blobs.get(key),
            n=n,
            title=chapter.title,
            timeline=timeline,
            start_s=start_s,
        )

    # -- assembly ------------------------------------------------------------------------
    def manifest(self, book_id: str, owner: str | None) -> dict[str, Any]:
        key = self._assembled(book_id, owner)
        return dict(json.loads(self.blobs.get(key + ".json")))

    def audio_key(self, book_id: str, owner: str | None) -> str:
        """The blob key of the book's audio, assembled first if need be: the
        route streams it (a ten-hour book is ~300 MB, never held whole)."""
        return self._assembled(book_id, owner)

    def _assembled(self, book_id: str, owner: str | None) -> str:
        """The blob key of the book's audio (its manifest at key + .json),
        assembled now if this set of chapters has none yet."""
        view = self.get(book_id, owner)
        if view.state != "succeeded":
            # A chapter revoked (its voice deleted) or failed: no stale book stays.
            if view.state == "failed":
                self.blobs.delete_prefix(f"{BOOK_BLOB_PREFIX}{book_id}/")
            raise Conflict(
                f"the book is {view.state}: "
                f"{sum(c.state == 'succeeded' for c in view.chapters)} of "
                f"{len(view.chapters)} chapters rendered",
                field="book_id",
            )
        jobs = [c.job for c in view.chapters if c.job is not None]
        digest = hashlib.sha256("|".join(j.id for j in jobs).encode()).hexdigest()[:16]
        key = f"{BOOK_BLOB_PREFIX}{book_id}/{digest}.{view.format}"
        with _assembly_lock(book_id):  # a second caller waits for the first's file
            if not self.blobs.exists(key + ".json"):
                self._assemble(view, jobs, key)
        return key

    def start_assembly(self, book_id: str, owner: str | None) -> threading.Thread:
        """Assemble the book in a thread of its own (the progress stream runs
        it as the last chapter ends, so the download is the file, not a wait:
        58-75 s per hour of audio on 2 busy cores, bench/audiobook_assembly.py)."""

        def run() -> None:
            try:
                self._assembled(book_id, owner)
            except Exception:  # the download tries again and says why
                log.warning("audiobook assembly failed", exc_info=True)

        thread = threading.Thread(target=run, name=f"voxclone-book-{book_id}", daemon=True)
        thread.start()
        return thread

    def _assemble(self, view: BookView, jobs: list[JobRecord], key: str) -> None:
        book_id = view.record.id
        self.blobs.delete_prefix(f"{BOOK_BLOB_PREFIX}{book_id}/")  # a stale assembly
        with tempfile.NamedTemporaryFile(suffix=f".{view.format}") as out:
            marks = assemble_m4b(
                [str((j.result or {})["blob_key"]) for j in jobs],
                [c.title for c in view.chapters],
                self.blobs,
                out.name,
                title=view.title,
            )
            with open(out.name, "rb") as f:
                self.blobs.put_file(key, f, content_type=BOOK_CONTENT_TYPE)
        manifest = {
            "id": book_id,
            "title": view.title,
            "format": view.format,
            "duration_s": round(sum(m["duration_s"] + CHAPTER_GAP_S for m in marks), 3),
            "chapters": [
                {
                    **m,
                    "job_id": j.id,
                    "voice": c.casting.voice,
                    # Its words: GET /v1/audiobooks/{id}/chapters/{n}/words
                    # (service/audiobook_words.py says why not here).
                    "words": (j.result or {}).get("word_count"),
                }
                for m, j, c in zip(marks, jobs, view.chapters, strict=True)
            ],
        }
        # Written last: its presence says the book's audio is complete.
        self.blobs.put(
            key + ".json", json.dumps(manifest).encode(), content_type="application/json"
        )


_LOCKS_GUARD = threading.Lock()
_ASSEMBLY_LOCKS: dict[str, threading.Lock] = {}


def _assembly_lock(book_id: str) -> threading.Lock:
    """One assembly of a book at a time in this process (a replica that
    assembles the same book too only costs CPU: the file is the same)."""
    with _LOCKS_GUARD:
        return _ASSEMBLY_LOCKS.setdefault(book_id, threading.Lock())


def _days(seconds: float) -> str:
    if seconds >= 86_400:
        return f"{seconds / 86_400:g} days"
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds:g} s"


def _chapter(view: BookView, n: int) -> ChapterView:
    if not 0 <= n < len(view.chapters):
        raise NotFound(
            f"the book has chapters 0 to {len(view.chapters) - 1}",
            field="n",
            limit=len(view.chapters) - 1,
            value=n,
        )
    return view.chapters[n]


def _in_chapter(
    n: int, chapter: Chapter, turns: Sequence[Turn], casting: Casting, exc: VoxcloneError
) -> VoxcloneError:
    """A turn's error as the book's: a bad voice names ``voice`` or
    ``cast.<name>``, a too-long chapter names ``chapters[n]``."""
    out = exc
    m = re.match(r"turns\[(\d+)\]\.(\w+)", exc.field or "")
    if m and m.group(2) == "voice":
        speaker = turns[int(m.group(1))].speaker
        field_name = "voice" if speaker == NARRATOR else f"cast.{speaker}"
    elif m and m.group(2) == "speed":
        field_name = "speed"
    else:
        field_name = f"chapters[{n}]"
    message = f"chapter {n} ({chapter.title[:60]}): {exc.message}"
    out = type(exc)(message, field=field_name, limit=exc.limit, value=exc.value)
    return out


def assemble_m4b(
    keys: Sequence[str],
    titles: Sequence[str],
    blobs: BlobStore,
    path: str,
    *,
    title: str | None,
) -> list[dict[str, Any]]:
    """Chapters' audio (``keys``) into one AAC M4B at ``path`` with a chapter
    mark each, a chapter at a time (a long book is never whole in memory);
    each chapter's start, duration and title."""
    marks: list[dict[str, Any]] = []
    at = 0  # samples written
    gap = np.zeros(int(CHAPTER_GAP_S * BOOK_RATE), np.float32)
    with av.open(path, "w", format="ipod") as out:
        if title:
            out.metadata["title"] = title
        stream = out.add_stream("aac", rate=BOOK_RATE, layout="mono")
        stream.bit_rate = BOOK_BIT_RATE

        def write(x: np.ndarray) -> None:
            nonlocal at
            frame = av.AudioFrame.from_ndarray(x[None, :], format="flt", layout="mono")
            frame.sample_rate = BOOK_RATE
            frame.pts = at
            at += x.size
            for packet in stream.encode(frame):
                out.mux(packet)

        for key, name in zip(keys, titles, strict=True):
            audio, rate = sf.read(io.BytesIO(blobs.get(key)), dtype="float32", always_2d=True)
            mono = np.ascontiguousarray(resample(audio.mean(axis=1), rate, BOOK_RATE))
            start = at
            write(mono)
            marks.append(
                {
                    "title": name,
                    "start_s": round(start / BOOK_RATE, 3),
                    "duration_s": round(mono.size / BOOK_RATE, 3),
                }
            )
            write(gap)
        for packet in stream.encode(None):
            out.mux(packet)
        ms = Fraction(1, 1000)
        out.set_chapters(
            [
                {
                    "id": i + 1,
                    "start": int(math.floor(m["start_s"] * 1000)),
                    "end": int(round((m["start_s"] + m["duration_s"] + CHAPTER_GAP_S) * 1000)),
                    "time_base": ms,
                    "metadata": {"title": m["title"]},
                }
                for i, m in enumerate(marks)
            ]
        )
    return marks
