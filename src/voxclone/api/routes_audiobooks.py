"""Audiobooks: ``POST /v1/audiobooks`` (an EPUB, Markdown or text file as
multipart, or JSON text) queues a book; ``GET /v1/audiobooks/{id}`` shows its
chapters' progress (``/events``: server-sent events per chapter); ``/audio`` is
the M4B with chapter marks, ``/manifest`` its chapters' titles, start times,
durations and word counts, ``/chapters/{n}/audio`` one chapter (FLAC),
``/chapters/{n}/words`` its words with speaker and voice (JSON, SRT or WebVTT;
``timeline=book`` in the M4B's seconds); ``POST /chapters/{n}/render``
re-renders one chapter. How: service/audiobooks.py. Both audio routes stream
the stored file in parts and answer ``Range: bytes=`` (api/blob_download.py).

Books are per owner like jobs (another owner's book answers 404) and need the
``tts`` scope.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from voxclone.api.auth import TTSCaller
from voxclone.api.blob_download import blob_response
from voxclone.api.body_guard import FORM_KINDS, MediaKind, json_body, media_kind, unsupported
from voxclone.api.deps import RuntimeDep
from voxclone.api.routes_jobs import IdempotencyKey
from voxclone.api.streaming import CancelFlag, CancellableStreamingResponse
from voxclone.assembly import Runtime
from voxclone.errors import InvalidInput
from voxclone.service.audiobook_words import Timeline
from voxclone.service.audiobooks import (
    BOOK_CONTENT_TYPE,
    Audiobooks,
    BookLimits,
    BookView,
    Casting,
)
from voxclone.service.dialogue_captions import speaker_srt, speaker_vtt
from voxclone.synth.text.chapters import BookKind, parse_book, sniff_kind

router = APIRouter(tags=["audiobooks"])

BOOK_FILE_FIELD = "file"
_MAX_FORM_FIELDS = 16
SSE_POLL_S = 1.0
SSE_KEEPALIVE_S = 5.0


class AudiobookFields(BaseModel):
    """A book's text (JSON) or its fields beside the file (multipart)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(None, description="the book as Markdown or plain text (JSON)")
    kind: Literal["epub", "markdown", "text"] | None = Field(
        None, description="how to read the book (default: from the file name and bytes)"
    )
    title: str | None = Field(None, max_length=200, description="the book's title")
    voice: str = Field(description="the narrator's voice")
    cast: dict[str, str] = Field(
        default_factory=dict, description='character voices: {"Alice": "af_heart"}'
    )
    quotes: bool = Field(False, description="quoted speech to the character its paragraph names")
    speed: float | None = Field(None, description="0.5-2.0")
    format: Literal["m4b", "m4a"] = "m4b"


class RerenderFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    voice: str | None = Field(None, description="another narrator (default: as before)")
    cast: dict[str, str] | None = None
    quotes: bool | None = None
    speed: float | None = None


class ChapterOut(BaseModel):
    n: int
    title: str
    state: str
    progress: float
    message: str
    voice: str
    job_id: str | None
    error: dict[str, Any] | None = None


class AudiobookOut(BaseModel):
    id: str
    title: str | None
    state: str
    progress: float
    format: str
    created_at: str
    chapters: list[ChapterOut]


def book_out(view: BookView) -> AudiobookOut:
    return AudiobookOut(
        id=view.record.id,
        title=view.title,
        state=view.state,
        progress=view.progress,
        format=view.format,
        created_at=view.record.created_at,
        chapters=[
            ChapterOut(
                n=c.n,
                title=c.title,
                state=c.state,
                progress=c.job.progress if c.job else 0.0,
                message=c.job.message if c.job else "its job is gone (expired or deleted)",
                voice=c.casting.voice,
                job_id=c.job.id if c.job else None,
                error=c.job.error if c.job else None,
            )
            for c in view.chapters
        ],
    )


def audiobooks(runtime: Runtime) -> Audiobooks:
    settings = runtime.settings
    return Audiobooks(
        store=runtime.jobs,
        jobs=runtime.speech_jobs,
        speech=runtime.speech,
        limits=BookLimits(
            max_output_s=settings.max_output_s,
            max_text_chars=settings.max_text_chars,
            max_book_output_s=settings.max_book_output_s,
        ),
    )


_BODY_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            # Inline (no $ref): the model is read by hand, so FastAPI lists no schema for it.
            "application/json": {"schema": AudiobookFields.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "properties": {
                        BOOK_FILE_FIELD: {
                            "type": "string",
                            "format": "binary",
                            "description": "the book: EPUB, Markdown or plain text",
                        },
                        "voice": {"type": "string"},
                        "cast": {"type": "string", "description": "the cast map as JSON"},
                        "quotes": {"type": "boolean"},
                        "kind": {"type": "string"},
                        "format": {"type": "string"},
                    }
                }
            },
        },
    }
}


async def _parse(request: Request) -> tuple[AudiobookFields, bytes | None, str | None]:
    """(fields, the uploaded file or None, its name)."""
    content_type = request.headers.get("content-type")
    kind = media_kind(content_type)
    data: bytes | None = None
    filename: str | None = None
    if kind in FORM_KINDS:
        form = await request.form(max_files=1, max_fields=_MAX_FORM_FIELDS)
        raw: dict[str, Any] = {}
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key != BOOK_FILE_FIELD:
                    raise InvalidInput(
                        f"unexpected file field '{key[:40]}'; send the book as '{BOOK_FILE_FIELD}'",
                        field=key[:40],
                    )
                data, filename = await value.read(), value.filename
            else:
                raw[key] = value
        if "cast" in raw:
            try:
                raw["cast"] = json.loads(raw["cast"]) if raw["cast"] else {}
            except ValueError:
                raise InvalidInput(
                    'cast must be a JSON object {"Name": "voice"}', field="cast"
                ) from None
    elif kind is MediaKind.JSON:
        raw = await json_body(request)
    else:
        raise unsupported(content_type, FORM_KINDS | {MediaKind.JSON})
    try:
        fields = AudiobookFields.model_validate(raw)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None
    if (data is None) == (fields.text is None):
        raise InvalidInput(
            f"send the book as a '{BOOK_FILE_FIELD}' upload or as JSON 'text' (one of them)",
            field=BOOK_FILE_FIELD,
        )
    return fields, data, filename


@router.post(
    "/v1/audiobooks",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=AudiobookOut,
    summary="Queue a book (EPUB, Markdown or text); a job per chapter",
    openapi_extra=_BODY_DOC,
)
async def create_audiobook(
    request: Request,
    response: Response,
    principal: TTSCaller,
    runtime: RuntimeDep,
    idempotency_key: IdempotencyKey,
) -> AudiobookOut:
    fields, data, filename = await _parse(request)
    raw = data if data is not None else (fields.text or "").encode()
    kind: BookKind = fields.kind or sniff_kind(raw, filename)
    books = audiobooks(runtime)
    casting = Casting(fields.voice, fields.cast, fields.quotes, fields.speed)

    def submit() -> tuple[BookView, bool]:
        book = parse_book(raw, kind, max_chars=runtime.settings.max_book_chars)
        if fields.title:
            book = type(book)(fields.title, book.chapters)
        return books.submit(
            book,
            casting,
            owner=principal.owner,
            fmt=fields.format,
            unmarked=principal.unmarked,
            idempotency_key=idempotency_key,
        )

    view, created = await run_in_threadpool(submit)
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/audiobooks/{view.record.id}"
    return book_out(view)


@router.get("/v1/audiobooks/{book_id}", response_model=AudiobookOut, summary="A book's progress")
async def get_audiobook(book_id: str, principal: TTSCaller, runtime: RuntimeDep) -> AudiobookOut:
    view = await run_in_threadpool(audiobooks(runtime).get, book_id, principal.owner)
    return book_out(view)


@router.post(
    "/v1/audiobooks/{book_id}/cancel",
    response_model=AudiobookOut,
    summary="Cancel the chapters not rendered yet (rendered ones are kept)",
)
async def cancel_audiobook(book_id: str, principal: TTSCaller, runtime: RuntimeDep) -> AudiobookOut:
    view = await run_in_threadpool(audiobooks(runtime).cancel, book_id, principal.owner)
    return book_out(view)


@router.delete(
    "/v1/audiobooks/{book_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a book, its chapters' jobs and its audio",
)
async def delete_audiobook(book_id: str, principal: TTSCaller, runtime: RuntimeDep) -> Response:
    await run_in_threadpool(audiobooks(runtime).delete, book_id, principal.owner)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/v1/audiobooks/{book_id}/audio",
    summary="The book as M4B (AAC) with a chapter mark per chapter (409 until rendered)",
    response_class=Response,
    responses={
        200: {"content": {BOOK_CONTENT_TYPE: {}}},
        206: {"description": "the bytes a Range: bytes= header asked for"},
        416: {"description": "a Range past the file's end"},
    },
)
async def audiobook_audio(
    book_id: str, request: Request, principal: TTSCaller, runtime: RuntimeDep
) -> Response:
    books = audiobooks(runtime)
    key = await run_in_threadpool(books.audio_key, book_id, principal.owner)
    view = await run_in_threadpool(books.get, book_id, principal.owner)
    # X-Voxclone-Watermark (api/watermark_header.py): as the book was rendered.
    request.state.unmarked = view.unmarked
    # Streamed from the store in parts, Range honoured (api/blob_download.py):
    # a ten-hour book is ~300 MB, never held whole by one request.
    return await blob_response(
        books.blobs,
        key,
        range_header=request.headers.get("range"),
        media_type=BOOK_CONTENT_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{book_id}.{view.format}"'},
        gone_field="book_id",
    )


@router.get(
    "/v1/audiobooks/{book_id}/manifest",
    summary="The book's chapters: titles, start times, durations, voices",
)
async def audiobook_manifest(
    book_id: str, principal: TTSCaller, runtime: RuntimeDep
) -> dict[str, Any]:
    return await run_in_threadpool(audiobooks(runtime).manifest, book_id, principal.owner)


@router.get(
    "/v1/audiobooks/{book_id}/chapters/{n}/audio",
    summary="One chapter's audio (FLAC)",
    response_class=Response,
    responses={
        206: {"description": "the bytes a Range: bytes= header asked for"},
        416: {"description": "a Range past the file's end"},
    },
)
async def chapter_audio(
    book_id: str, n: int, request: Request, principal: TTSCaller, runtime: RuntimeDep
) -> Response:
    books = audiobooks(runtime)
    key, ctype = await run_in_threadpool(books.chapter_audio_key, book_id, principal.owner, n)
    view = await run_in_threadpool(books.get, book_id, principal.owner)
    request.state.unmarked = view.unmarked
    return await blob_response(
        books.blobs,
        key,
        range_header=request.headers.get("range"),
        media_type=ctype,
        headers={},
        gone_field="n",
    )


@router.get(
    "/v1/audiobooks/{book_id}/chapters/{n}/words",
    summary="One chapter's words with speaker and voice (JSON, SRT or WebVTT)",
    responses={
        200: {"content": {"application/json": {}, "text/vtt": {}, "application/x-subrip": {}}}
    },
)
async def chapter_words(
    book_id: str,
    n: int,
    principal: TTSCaller,
    runtime: RuntimeDep,
    timeline: Annotated[
        Timeline,
        Query(description="chapter: seconds of /chapters/{n}/audio; book: of /audio (the M4B)"),
    ] = "chapter",
    format: Annotated[  # noqa: A002 - the query parameter's public name
        Literal["json", "srt", "vtt"], Query(description="json, srt or vtt")
    ] = "json",
) -> Response:
    words = await run_in_threadpool(
        audiobooks(runtime).chapter_words, book_id, principal.owner, n, timeline
    )
    if format == "srt":
        return Response(
            speaker_srt(words.speaker_words()), media_type="application/x-subrip; charset=utf-8"
        )
    if format == "vtt":
        return Response(speaker_vtt(words.speaker_words()), media_type="text/vtt; charset=utf-8")
    return Response(json.dumps(words.to_json()), media_type="application/json")


@router.post(
    "/v1/audiobooks/{book_id}/chapters/{n}/render",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=AudiobookOut,
    summary="Render one chapter again (another voice, or after a lexicon fix)",
)
async def rerender_chapter(
    book_id: str,
    n: int,
    principal: TTSCaller,
    runtime: RuntimeDep,
    body: RerenderFields | None = None,
) -> AudiobookOut:
    books = audiobooks(runtime)

    def work() -> BookView:
        old = books.get(book_id, principal.owner)
        casting = None
        if body is not None and body.model_fields_set:
            before = old.chapters[n].casting if 0 <= n < len(old.chapters) else None
            if before is not None:
                casting = Casting(
                    body.voice or before.voice,
                    before.cast if body.cast is None else body.cast,
                    before.quotes if body.quotes is None else body.quotes,
                    body.speed if "speed" in body.model_fields_set else before.speed,
                )
        return books.rerender(book_id, principal.owner, n, casting)

    return book_out(await run_in_threadpool(work))


async def _events(runtime: Runtime, book_id: str, owner: str | None) -> AsyncIterator[bytes]:
    books = audiobooks(runtime)
    seen: dict[int, tuple[str, float]] = {}
    while True:
        view = await run_in_threadpool(books.get, book_id, owner)
        out = book_out(view)
        for c in out.chapters:
            key = (c.state, c.progress)
            if seen.get(c.n) != key:
                seen[c.n] = key
                yield f"event: chapter\ndata: {c.model_dump_json()}\n\n".encode()
        if view.state == "succeeded":
            # The M4B is made now, so the download that follows is instant; a
            # comment every few seconds keeps the stream (and proxies) awake.
            assembly = books.start_assembly(book_id, owner)
            while assembly.is_alive():
                yield b": assembling the book\n\n"
                await asyncio.to_thread(assembly.join, SSE_KEEPALIVE_S)
        if view.state in ("succeeded", "failed"):
            yield f"event: done\ndata: {out.model_dump_json()}\n\n".encode()
            return
        await asyncio.sleep(SSE_POLL_S)


@router.get(
    "/v1/audiobooks/{book_id}/events",
    summary="Server-sent events: a 'chapter' event per chapter change, 'done' at the end",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def audiobook_events(
    book_id: str, principal: TTSCaller, runtime: RuntimeDep
) -> CancellableStreamingResponse:
    await run_in_threadpool(audiobooks(runtime).get, book_id, principal.owner)
    return CancellableStreamingResponse(
        _events(runtime, book_id, principal.owner),
        flag=CancelFlag(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
