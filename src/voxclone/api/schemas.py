"""Request and response bodies of the HTTP API (pydantic models).

Ranges of the speaking controls are checked once, by ``SpeechControls``, so
every surface reports the same limits; these models only check types.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from voxclone.runtime.job_store import JobRecord
from voxclone.runtime.voice_store import VoiceRecord, VoiceSummary


def _not_a_boolean(value: Any) -> Any:
    # pydantic's lax mode reads JSON true as 1 (speed 1.0): a type error the
    # client should hear about, not a silent default.
    if isinstance(value, bool):
        raise ValueError("a number is required, not a boolean")
    return value


# Numbers from JSON or form fields: finite, and never a boolean.
Number = Annotated[float, BeforeValidator(_not_a_boolean), Field(allow_inf_nan=False)]
Integer = Annotated[int, BeforeValidator(_not_a_boolean)]


class SpeechFields(BaseModel):
    """What to say and how: the fields a live request and a speech job share."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="text to speak")
    voice: str | None = Field(None, description="built-in voice, cloned voice id or name")
    model: str | None = Field(
        None,
        description="engine to speak with (see GET /v1/models); default: the voice's own engine",
    )
    language: str | None = Field(None, description="en-us, en-gb, es, fr, it, pt-br, hi, ja, zh")
    speed: Number | None = Field(None, description="0.5-2.0")
    pitch: Number | None = Field(None, description="-0.5..+0.5 octave")
    energy: Number | None = Field(None, description="0.8-1.2")
    emotion: str = Field("neutral", description="neutral, happy, sad, angry, surprised, ...")
    intensity: Number = Field(1.0, description="0-1 strength of the emotion")
    format: str = Field("wav", description="wav, mp3, opus, flac, aac, pcm")
    sample_rate: Integer = Field(24_000, description="16000, 22050, 24000, 44100, 48000")


class TTSRequest(SpeechFields):
    """Native speech request (JSON body or multipart form fields)."""

    # The route reads its body itself (JSON or a form with a clip), so FastAPI
    # does not list this model; api/docs.py adds it to the OpenAPI components
    # with this example, which Swagger UI fills its "Try it out" body from.
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "text": "Hello! This is voxclone speaking.",
                    "voice": "clear_female",
                    "format": "mp3",
                }
            ]
        }
    )

    stream: bool = Field(False, description="stream audio as it is synthesized")
    ssml: bool | None = Field(
        None,
        description="true: text is SSML (a fragment is wrapped in <speak>); false: plain "
        "text; unset: SSML when the text starts with <speak>",
    )
    timestamps: bool = Field(
        False,
        description="answer JSON: base64 audio and word timestamps "
        "(as POST /v1/audio/speech/captioned; with stream: server-sent events)",
    )


class SpeechJobRequest(SpeechFields):
    """Body of ``POST /v1/jobs/speech``: the fields of ``/v1/tts`` without streaming.

    The text may be as long as the server's ``max_text_chars``: a job has no
    request deadline, unlike the synchronous routes.
    """

    text: str = Field(description="text to speak (long texts welcome)")


class DialogueTurnIn(BaseModel):
    """One turn of ``POST /v1/audio/dialogue``."""

    model_config = ConfigDict(extra="forbid")

    voice: str = Field(
        description="built-in voice, cloned voice id or name, saved blend, a(2)+b(1)"
    )
    text: str = Field(description="what the voice says (plain text)")
    speed: Number | None = Field(None, description="0.5-2.0")
    emotion: str = Field("neutral", description="neutral, happy, sad, angry, surprised, ...")
    pause_ms: Integer | None = Field(
        None, description="silence before this turn, 0-10000 ms (default: 250 between turns)"
    )
    speaker: str | None = Field(
        None, max_length=64, description="name in captions and subtitles (default: the voice)"
    )


class DialogueFields(BaseModel):
    """Turns and output of a dialogue (live or a job)."""

    model_config = ConfigDict(extra="forbid")

    turns: list[DialogueTurnIn] = Field(description="the turns in order (1-500)")
    model: str | None = Field(None, description="engine to speak with (default: each voice's)")
    language: str | None = Field(None, description="en-us, en-gb, es, fr, ... (default: detected)")
    response_format: str = Field("wav", description="wav, mp3, opus, flac, aac, pcm")
    sample_rate: Integer = Field(24_000, description="16000, 22050, 24000, 44100, 48000")


class DialogueRequest(DialogueFields):
    """Body of ``POST /v1/audio/dialogue``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "turns": [
                        {"voice": "af_heart", "text": "Did you hear the news?"},
                        {"voice": "am_michael", "text": "No. Tell me!", "emotion": "surprised"},
                    ],
                    "response_format": "mp3",
                }
            ]
        }
    )

    stream: bool = Field(False, description="send audio as each turn is rendered")
    timestamps: bool = Field(
        False, description="answer JSON: base64 audio and word timestamps with speakers"
    )


class OpenAIVoiceObject(BaseModel):
    """OpenAI's voice object (``"voice": {"id": "..."}``, its custom voices)."""

    model_config = ConfigDict(extra="ignore")

    id: str


class OpenAISpeechRequest(BaseModel):
    """Body of OpenAI's ``POST /v1/audio/speech``."""

    model_config = ConfigDict(extra="ignore")  # OpenAI clients may send newer fields

    model: str
    input: str
    # A name (built-in, OpenAI's, a cloned voice's id or name) or {"id": ...}.
    voice: str | OpenAIVoiceObject

    @property
    def voice_name(self) -> str | None:
        """The voice named, whichever way it was sent (None: none)."""
        voice: str | OpenAIVoiceObject | None = self.voice
        return voice.id if isinstance(voice, OpenAIVoiceObject) else voice

    response_format: str = "mp3"
    speed: Number = 1.0
    stream_format: Literal["audio", "sse"] = "audio"
    instructions: str | None = None


class CaptionedSpeechRequest(OpenAISpeechRequest):
    """OpenAI's speech body, answered with word timestamps (``/v1/audio/speech/captioned``)."""

    model: str = "kokoro"
    # None: the request language's default voice, as in /v1/tts.
    voice: str | OpenAIVoiceObject | None = None  # type: ignore[assignment]
    stream: bool = False


class RenameVoiceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str


# Quality entries the service keeps for itself: the reference as the deep
# refine's listeners heard it (a biometric embedding, like the print, which
# no answer carries either) and the timbre offset it found.
STORED_ONLY_QUALITY = frozenset({"listener_embeddings", "timbre_offset"})


class RefineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget_s: Number | None = Field(
        None, gt=0, description="search time budget in seconds (method 'atlas')"
    )
    method: Literal["atlas", "deep"] | None = Field(
        None,
        description="'atlas': audition atlas voices within the budget; 'deep': descend on "
        "the voice's timbre through a differentiable copy of the engine toward the "
        "reference, kept only when heard closer on other sentences (needs the server's "
        "[deep] extra: /readyz?capability=cloning says whether it has it). Default: "
        "the server's VOXCLONE_REFINE_METHOD.",
    )


class JobOut(BaseModel):
    id: str
    kind: str
    voice_id: str | None
    state: str
    progress: float
    message: str
    created_at: str
    updated_at: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    attempts: int = Field(0, description="tries so far (speech jobs)")
    max_attempts: int = Field(1, description="tries before the job fails")
    audio_url: str | None = Field(
        None, description="speech jobs that succeeded: where to GET the audio until expires_at"
    )
    expires_at: str | None = Field(None, description="when audio_url stops working (UTC)")

    @classmethod
    def of(
        cls, job: JobRecord, *, audio_url: str | None = None, expires_at: str | None = None
    ) -> JobOut:
        result = job.result
        if result is not None and "blob_key" in result:
            # Where the audio is stored is the server's business; the URL is the API.
            result = {k: v for k, v in result.items() if k != "blob_key"}
        return cls(
            id=job.id,
            kind=job.kind,
            voice_id=job.voice_id,
            state=job.state,
            progress=job.progress,
            message=job.message,
            created_at=job.created_at,
            updated_at=job.updated_at,
            result=result,
            error=job.error,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            audio_url=audio_url,
            expires_at=expires_at,
        )


class VoiceOut(BaseModel):
    id: str
    name: str
    language: str
    version: int
    source: str
    created_at: str
    updated_at: str
    quality: dict[str, Any] = Field(default_factory=dict)
    has_reference_audio: bool = False
    engine: str = Field("", description="the engine that speaks this voice")
    model_id: str = ""
    model_version: str = ""

    @classmethod
    def of(cls, voice: VoiceRecord | VoiceSummary) -> VoiceOut:
        # Only metadata crosses this line: never the style or embedding arrays.
        if isinstance(voice, VoiceRecord):
            has_reference = voice.reference_audio is not None
        else:
            has_reference = voice.has_reference_audio
        return cls(
            id=voice.id,
            name=voice.name,
            language=voice.language,
            version=voice.version,
            source=voice.source,
            created_at=voice.created_at,
            updated_at=voice.updated_at,
            quality={
                k: v for k, v in (voice.quality or {}).items() if k not in STORED_ONLY_QUALITY
            },
            has_reference_audio=has_reference,
            engine=voice.engine,
            model_id=voice.model_id,
            model_version=voice.model_version,
        )


class SaveBlendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="a name for the new voice, unique per owner")
    blend: str = Field(
        description="the blend expression to save, e.g. 'alice(2)+clear_male(1)': your own "
        "voices or built-ins of one style engine"
    )
    language: str | None = Field(None, description="default: the parts' language")


class EnrolledVoiceOut(VoiceOut):
    job: JobOut | None = Field(None, description="refinement job, when one was requested")
    report_job: JobOut | None = Field(
        None,
        description="with wait=false: the background job that calibrates pitch and tone and "
        "writes the quality report (the voice becomes version 2 when it succeeds)",
    )


class VoiceListOut(BaseModel):
    voices: list[VoiceOut]


class DeletedOut(BaseModel):
    id: str
    deleted: bool = True
    derived_deleted: list[str] | None = Field(
        default=None,
        description="ids of saved blends made from this voice, deleted and purged with it "
        "(a blend holds data derived from its parts' recordings)",
    )
    # "pending" when a cache tier was unreachable: the purge is journaled and
    # completes when it is back (absent once everything is purged).
    purge: str | None = None
    receipt: dict[str, Any] | None = Field(
        default=None,
        description="the signed deletion receipt: {receipt, signature, signature_algorithm}; "
        "the signature covers the canonical JSON of receipt (sorted keys, no whitespace) and "
        "verifies with GET /v1/provenance/public-key (voxclone verify-receipt FILE). Its "
        "owner can fetch it once more at GET /v1/receipts/{receipt.receipt_id}",
    )


class CatalogVoiceOut(BaseModel):
    id: str
    name: str
    description: str
    language: str | None
    builtin: bool
    engine: str = Field("", description="the engine that speaks this voice")
    model_id: str = ""
    aliases: list[str] = Field(
        default_factory=list, description="other names that select this voice (earlier, OpenAI)"
    )
    sex: str | None = Field(None, description="F or M (built-in voices)")
    accent: str | None = Field(None, description="what a listener hears, e.g. British English")
    default_for: list[str] = Field(
        default_factory=list, description="languages that speak with it when no voice is named"
    )


class AudioVoicesOut(BaseModel):
    voices: list[CatalogVoiceOut]
    aliases: dict[str, str] = Field(description="OpenAI voice names and the voice they speak with")


class ModelOut(BaseModel):
    """OpenAI's model object, plus what the engine behind the name can do."""

    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = "voxclone"
    engine: str | None = None
    model_id: str | None = None
    model_version: str | None = None
    alias: bool = Field(False, description="an OpenAI name standing for the default engine")
    default: bool = Field(False, description="speaks requests that name no model")
    sample_rate: int | None = None
    languages: list[str] = Field(default_factory=list)
    clone_method: str | None = Field(None, description="style or prompt")
    native_controls: list[str] = Field(
        default_factory=list, description="controls the model realises itself; others are DSP"
    )
    streaming: str | None = None


class ModelListOut(BaseModel):
    object: str = "list"
    data: list[ModelOut]


class LexiconEntryIn(BaseModel):
    """How the caller wants one word said, in one language."""

    model_config = ConfigDict(extra="forbid")

    word: str = Field(description="word or fixed phrase, matched whole and case-insensitively")
    language: str = Field(description="en-us, en-gb, es, ... (or en: both Englishes)")
    ipa: str | None = Field(None, description="IPA to speak, e.g. təˈmɑːtoʊ")
    respelling: str | None = Field(None, description="text to read instead, e.g. win")


class LexiconEntryOut(BaseModel):
    word: str
    language: str
    ipa: str | None = None
    respelling: str | None = None


class LexiconOut(BaseModel):
    entries: list[LexiconEntryOut]
