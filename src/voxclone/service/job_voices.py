"""Which stored voices a speech job speaks with, and what deleting one does to it.

A job records every stored voice it will speak with (runtime/job_store/voice_links.py):
its ``voice`` (a voice id, a name, or a blend expression such as
``alice(2)+clear_male(1)``, whose parts count) and each SSML ``<voice name>``
it switches to, resolved the way the speech service resolves them. Built-in
voices and the server's default voice are never linked: deleting them is not a
thing a tenant can do. Saved blends are stored voices and are linked as
themselves; deleting one of their parts deletes the blend too
(``delete_with_derived``), and with it the blend's jobs.

Deleting a voice **revokes** its jobs rather than deleting them, so the owner
polling a job learns why its audio is gone: the job ends ``failed`` with error
code ``voice_deleted``, its audio URL is gone (404 on the signed link), its
audio blob is deleted, and a running render stops at its next lease renewal
(within min(lease/3, 2 s)) and stores nothing. The job itself is deleted with
the other ended jobs after the retention period, or by ``DELETE
/v1/jobs/{id}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from voxclone.service.blends import BLEND_PREFIX, is_blend_id
from voxclone.service.purge import STORED_VOICE_PREFIX
from voxclone.synth.text.ssml import as_document, parse_ssml

if TYPE_CHECKING:
    from voxclone.service.catalog import ResolvedVoice
    from voxclone.service.speech.service import SpeechRequest

SPEECH_JOB_KIND = "speech"
VOICE_DELETED = "voice_deleted"
VOICE_DELETED_ERROR: dict[str, Any] = {
    "code": VOICE_DELETED,
    "message": "a voice this job speaks with was deleted, and the job's audio with it",
}

# The catalog's resolve(voice, owner) as the speech service calls it.
Resolve = Callable[[str, "str | None"], "ResolvedVoice"]


def spoken_voice_ids(resolve: Resolve, req: SpeechRequest) -> tuple[str, ...]:
    """Ids of the stored voices ``req`` speaks with, main voice first.

    Call after the request was validated (``SpeechRouter.plan``): every name
    then resolves, and the SSML parses.
    """
    expressions = [req.voice] if req.voice else []
    if req.is_ssml:
        expressions += sorted(parse_ssml(as_document(req.text)).voices)
    found: dict[str, None] = {}
    for expression in expressions:
        for voice_id in _stored_ids(resolve(expression, req.owner)):
            found.setdefault(voice_id)
    return tuple(found)


def _stored_ids(voice: ResolvedVoice) -> list[str]:
    if voice.builtin:
        return []
    ids = [voice.id]
    if is_blend_id(voice.id):
        # "blend:<id>@<version>*<weight>+…" (service/blends.py): its parts.
        ids = [p.split("@", 1)[0] for p in voice.id.removeprefix(BLEND_PREFIX).split("+")]
    return [i for i in ids if i.startswith(STORED_VOICE_PREFIX)]
