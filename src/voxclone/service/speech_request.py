"""What a transport asks the speech service for, and what it gets back.

Pure values (no engine, no I/O): the API routes, the CLI, Wyoming and speech
jobs build a :class:`SpeechRequest`; the service answers a
:class:`SpeechResult` (whole file) or a :class:`CaptionedResult` (with word
times).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.scheduler import Admission
from voxclone.service.catalog import ResolvedVoice
from voxclone.synth.controls import SpeechControls
from voxclone.synth.text.ssml import SsmlDocument, as_document, looks_like_ssml, parse_ssml
from voxclone.synth.text.wordtimes import WordTime

# Either an admission taken earlier, or the terms to take one on.
Admit = Admission | AdmissionTerms | None


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    voice: str | None = None
    language: str | None = None
    controls: SpeechControls = field(default_factory=SpeechControls)
    format: str = "wav"
    sample_rate: int = 24_000
    owner: str | None = None
    # Which engine speaks: a registry name, a model id or an alias (see
    # service/router.py); None = the voice's own engine, else the default.
    model: str | None = None
    # An already-resolved voice (e.g. an inline reference clip cloned for this
    # request only); takes precedence over ``voice``.
    voice_override: ResolvedVoice | None = None
    # True: the text is SSML (wrapped in <speak> when it is a fragment);
    # False: plain text even if it starts with <speak>; None: SSML when it does.
    ssml: bool | None = None
    # Served without the watermark: the caller's key is waived by the
    # operator's per-key policy (api/auth.py Principal.unmarked). Other audio
    # than the marked render: it has its own cache entry and in-flight render.
    unmarked: bool = False

    @property
    def is_ssml(self) -> bool:
        return self.ssml is True or (self.ssml is None and looks_like_ssml(self.text))


@dataclass(frozen=True)
class SpeechResult:
    audio: bytes
    content_type: str
    cache: str  # "miss" or the tier that answered
    duration_s: float | None = None


@dataclass(frozen=True)
class CaptionedResult:
    """Audio with the times of its words (seconds in that audio, original text's words)."""

    audio: bytes
    content_type: str
    words: tuple[WordTime, ...]
    duration_s: float


def ssml_warnings(req: SpeechRequest) -> tuple[str, ...]:
    """Check ``req``'s SSML without an engine (InvalidSsml when malformed); what
    its markup asked for that is ignored. Empty for plain text."""
    return ssml_document(req).warnings if req.is_ssml else ()


@functools.lru_cache(maxsize=16)
def _parsed(document: str) -> SsmlDocument:
    # One request asks for its document several times (validation, cache key,
    # plan, warnings header); parsing is pure, so the last few are kept.
    return parse_ssml(document)


def ssml_document(req: SpeechRequest) -> SsmlDocument:
    """``req``'s text as an SSML document (a fragment wrapped in <speak>)."""
    return _parsed(as_document(req.text))
