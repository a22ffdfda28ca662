"""``/v1/lexicon``: the caller's pronunciation lexicon (word → IPA or respelling).

Entries belong to the key's owner and apply to that owner's speech requests
in the text frontend. Reading needs ``voices:read``, changing ``voices:write``
(the scopes of the voice library, which it sits beside).

An entry is addressed as ``/v1/lexicon/{language}/{word}`` where the word is
the rest of the path: entries such as ``and/or`` or ``24/7`` can be created,
so they must be readable and deletable too (sent as ``and/or`` or ``and%2For``,
which the server decodes to the same path before routing).
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import VoiceReader, VoiceWriter
from voxclone.api.deps import RuntimeDep
from voxclone.api.schemas import LexiconEntryIn, LexiconEntryOut, LexiconOut
from voxclone.assembly import Runtime
from voxclone.errors import NotFound
from voxclone.service.lexicon_check import check_lexicon_entry
from voxclone.synth.text.lexicon import Pronunciation, check_pronunciation, entry_language

router = APIRouter(tags=["lexicon"])


def _language(runtime: Runtime, language: str) -> str:
    """One of the served languages, or a base language that covers some ("en")."""
    return entry_language(language, runtime.speech.languages)


def _out(entry: Pronunciation) -> LexiconEntryOut:
    return LexiconEntryOut(
        word=entry.word, language=entry.language, ipa=entry.ipa, respelling=entry.respelling
    )


@router.get("/v1/lexicon", summary="List your pronunciation entries", response_model=LexiconOut)
async def list_entries(
    principal: VoiceReader, runtime: RuntimeDep, language: str | None = None
) -> LexiconOut:
    code = _language(runtime, language) if language is not None else None
    entries = await run_in_threadpool(runtime.lexicon.entries, principal.owner, code)
    return LexiconOut(entries=[_out(e) for e in entries])


@router.post(
    "/v1/lexicon",
    summary="Add or replace a pronunciation (201 when new, 200 when replaced)",
    response_model=LexiconEntryOut,
    status_code=status.HTTP_201_CREATED,
)
async def put_entry(
    body: LexiconEntryIn, principal: VoiceWriter, runtime: RuntimeDep, response: Response
) -> LexiconEntryOut:
    entry = Pronunciation(
        body.word, _language(runtime, body.language), ipa=body.ipa, respelling=body.respelling
    )
    # The form first (400 naming the field), then each engine that will speak
    # the entry: IPA with no sound in its vocabulary is refused, not stored.
    check_pronunciation(entry.word, entry.ipa, entry.respelling)
    await run_in_threadpool(check_lexicon_entry, runtime.speech.services, entry)
    created = await run_in_threadpool(runtime.lexicon.put, principal.owner, entry)
    if not created:
        response.status_code = status.HTTP_200_OK
    stored = await run_in_threadpool(
        runtime.lexicon.get, principal.owner, entry.language, entry.word
    )
    assert stored is not None
    return _out(stored)


@router.get(
    "/v1/lexicon/{language}/{word:path}",
    summary="One pronunciation entry",
    response_model=LexiconEntryOut,
)
async def get_entry(
    language: str, word: str, principal: VoiceReader, runtime: RuntimeDep
) -> LexiconEntryOut:
    code = _language(runtime, language)
    entry = await run_in_threadpool(runtime.lexicon.get, principal.owner, code, word)
    if entry is None:
        raise NotFound(f"no lexicon entry for '{word[:40]}' in {code}", field="word")
    return _out(entry)


@router.delete(
    "/v1/lexicon/{language}/{word:path}",
    summary="Remove a pronunciation entry",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
)
async def delete_entry(
    language: str, word: str, principal: VoiceWriter, runtime: RuntimeDep
) -> Response:
    code = _language(runtime, language)
    if not await run_in_threadpool(runtime.lexicon.delete, principal.owner, code, word):
        raise NotFound(f"no lexicon entry for '{word[:40]}' in {code}", field="word")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
