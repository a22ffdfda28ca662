"""What a :class:`~voxclone.service.voices.service.VoiceService` is built from, in four
values the composition root (bootstrap.py, cloning_setup.py) fills in: where
voices and their jobs are kept, the engines' cloning kit, the hooks into the
rest of the server, and the policy settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from voxclone.errors import VoxcloneError
from voxclone.runtime.inline_log import InlineLog
from voxclone.runtime.job_store import JobEvents, JobQueue, JobStore
from voxclone.runtime.voice_store import VoiceStore
from voxclone.service.voices.refine import RefinerSource
from voxclone.service.voices.request import PromptCloning
from voxclone.service.voices.spoken_consent import ConsentClips, SpokenConsentCheck
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.voice.clone import InstantCloner
from voxclone.synth.voice.deep_voice import DeepVoiceRefiner
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.probe_store import StockProbeStore
from voxclone.synth.voice.quality_report import QualityReporter
from voxclone.synth.voice.stock_check import STOCK_PREFERENCE


@dataclass(frozen=True)
class VoiceStores:
    """Where voices and their jobs are kept. ``report_queue``: the durable
    queue an enrollment's quality report waits in (``wait=false``), claimed
    by any process after a crash; None: enrollment measures before it answers."""

    voices: VoiceStore
    jobs: JobStore
    job_events: JobEvents
    report_queue: JobQueue | None = None
    inline_log: InlineLog | None = None  # inline voices to purge after a crash


def _no_reference_reader(_audio: bytes) -> ReferenceAudio:
    raise VoxcloneError("this server has no cloning stack: it cannot read reference audio")


@dataclass(frozen=True)
class CloningKit:
    """The engines' cloning stack. The style engine's parts (``cloner`` …
    ``pitch_calibrator``) are None when no style engine is loaded;
    ``prompt_engines`` maps prompt engines' names to their cloning. An empty
    kit clones nothing: listing, renaming and deleting voices still work."""

    cloner: InstantCloner | None = None
    refiner: RefinerSource | None = None
    reference_loader: Callable[[bytes], ReferenceAudio] = _no_reference_reader
    quality_reporter: QualityReporter | None = None
    pitch_calibrator: PitchCalibrator | None = None
    style_engine: EngineCapabilities | None = None  # named in the records
    prompt_engines: Mapping[str, PromptCloning] = field(default_factory=dict)
    default_engine: str | None = None
    resolve_model: Callable[[str | None], str | None] | None = None  # a request's model → engine
    deep_refiner: DeepVoiceRefiner | None = None
    deep_refine_missing: str | None = None  # why there is no deep refine
    spoken_consent: SpokenConsentCheck | None = None  # None: spoken consent is refused
    consent_clips: ConsentClips | None = None  # keeps consent clips with the voice
    stock_probes: StockProbeStore | None = None  # built-ins' probe renders on disk


@dataclass(frozen=True)
class VoiceHooks:
    """What the rest of the server does when a voice changes or goes:
    ``on_voice_changed`` drops audio made with it from the caches; ``purge``
    removes a deleted voice's cached audio (False: postponed, journaled);
    ``revoke_jobs`` revokes the speech jobs of deleted voices."""

    on_voice_changed: Callable[[str], None]
    purge: Callable[[str], int | bool | None] | None = None
    revoke_jobs: Callable[[Sequence[str]], object] | None = None


@dataclass(frozen=True)
class VoicePolicy:
    """Settings: ``enroll_slots`` enrollments render at once and
    ``enroll_queue`` more wait their turn (service/voices/admission.py);
    ``refine_method``: what a refine naming no method runs."""

    refine_budget_s: float = 180.0
    refine_workers: int = 1
    refine_method: str = "atlas"
    follow_rate: bool = True
    stock_check: bool = True
    stock_preference: float = STOCK_PREFERENCE
    inline_ttl_s: float = 3600.0
    enroll_slots: int = 1
    enroll_queue: int = 4
