"""What the composition root assembles: the :class:`Runtime` and its engine stacks.

``bootstrap.build_runtime`` builds every part first and then the ``Runtime``
in one call; the dataclass is frozen, so a part is never attached or swapped
afterwards (a test that needs another part builds a copy with
``dataclasses.replace``). The types live here, apart from ``bootstrap``, so
the transports (``api/``) can name them without importing the composition
root; the parts' own types are imported only for the type checker, so this
module costs nothing at run time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from voxclone.errors import VoxcloneError
from voxclone.runtime.startup import StartupStages

if TYPE_CHECKING:
    from voxclone.config import Settings
    from voxclone.engine_setup import EngineFailure
    from voxclone.runtime.blobs import BlobStore
    from voxclone.runtime.cache import TieredCache
    from voxclone.runtime.db import Database
    from voxclone.runtime.job_store import JobEvents, JobQueue
    from voxclone.runtime.lexicon_store import LexiconStore
    from voxclone.runtime.scheduler import Scheduler
    from voxclone.runtime.url_signing import UrlSigner
    from voxclone.runtime.voice_store import VoiceStore
    from voxclone.service.catalog import VoiceCatalog
    from voxclone.service.jobs import JobWorker, SpeechJobs
    from voxclone.service.purge import CachePurger
    from voxclone.service.speech.router import SpeechRouter
    from voxclone.service.speech.service import SpeechService
    from voxclone.service.voices.service import VoiceService
    from voxclone.synth.engine.base import Engine


@dataclass(frozen=True)
class EngineStack:
    """One loaded engine and what serves speech with it."""

    engine: Engine
    scheduler: Scheduler
    speech: SpeechService


@dataclass(frozen=True)
class Runtime:
    """Every component of one serving process, complete when constructed.

    Two parts are ``None`` by configuration, never because they are not built
    yet: ``voices`` and ``purger`` exist only in a runtime built with cloning
    (``build_runtime(with_voices=True)``, the server's default; Wyoming and
    ``voxclone say`` build without), and ``cache`` only when some cache tier is
    configured.
    """

    settings: Settings
    engines: dict[str, EngineStack]  # in VOXCLONE_ENGINES order; the first is the default
    speech: SpeechRouter
    catalog: VoiceCatalog
    # The one pool every store below borrows (closed last, by close()); /readyz
    # probes it.
    database: Database
    voice_store: VoiceStore
    # None: every tier is switched off (memory, disk and Redis sizes 0 / unset).
    cache: TieredCache | None
    job_events: JobEvents
    # The jobs table (refinement and speech jobs), the durable speech-job queue
    # on it, and this process's worker (started by the app, see api/app.py).
    jobs: JobQueue
    speech_jobs: SpeechJobs
    job_worker: JobWorker
    # Signs download links of blobs when the blob store has no URLs of its own.
    url_signer: UrlSigner
    # Where blobs live (kept references, job audio); shown on /readyz.
    blobs: BlobStore
    lexicon: LexiconStore  # pronunciations per owner (/v1/lexicon)
    stages: StartupStages
    # Engines VOXCLONE_ENGINES names that failed to load (not in ``engines``):
    # the others serve and /readyz names these (engine_setup.build_engines).
    engine_failures: dict[str, EngineFailure] = field(default_factory=dict)
    # Cloning: None when built without it (the voice routes answer 503).
    voices: VoiceService | None = None
    # Finishes purges of deleted voices that a down tier or blob store
    # postponed; None without cloning (this process deletes no voices).
    purger: CachePurger | None = None
    # Set once the cloning models are loaded (clones before that load them on use).
    cloning_warm: threading.Event = field(default_factory=threading.Event)
    # Why loading the cloning models failed (a model file not installed, e.g.
    # a plain `pip install .` without the asset packages): /readyz says
    # "unavailable" with this reason instead of "warming" forever.
    cloning_failure: list[str] = field(default_factory=list)

    def warm_cloning(self) -> None:
        """Load the speaker encoder before the first clone (the VAD and Whisper
        load when a clone first needs them)."""
        if self.voices is None:
            return
        try:
            with self.stages.stage("cloning_warmup"):
                self.voices.warmup()
        except VoxcloneError as exc:
            self.cloning_failure[:] = [exc.message]
            raise
        self.cloning_failure.clear()
        self.cloning_warm.set()

    def speech_idle(self) -> bool:
        """No speech queued, rendering or admitted-but-unrendered on any engine."""
        for stack in self.engines.values():
            stats = stack.scheduler.stats()
            if stats.queued or stats.in_flight or stats.reserved_chars > 0:
                return False
        return True

    @property
    def cloning_state(self) -> str:
        """One of: off (no cloning here), warming (loading now), on_demand
        (``warm_cloning`` is off: the first clone loads them), unavailable
        (loading failed: :attr:`cloning_failure` says why), ready."""
        if self.voices is None:
            return "off"
        if self.cloning_warm.is_set():
            return "ready"
        if self.cloning_failure:
            return "unavailable"
        return "warming" if self.settings.warm_cloning else "on_demand"

    @property
    def default(self) -> EngineStack:
        return next(iter(self.engines.values()))

    @property
    def engine(self) -> Engine:
        """The default engine."""
        return self.default.engine

    @property
    def scheduler(self) -> Scheduler:
        """The default engine's scheduler."""
        return self.default.scheduler

    @property
    def ready(self) -> bool:
        return all(stack.engine.ready for stack in self.engines.values())

    def start_job_worker(self) -> bool:
        """Start this process's speech-job worker; False if it was already running."""
        if self.job_worker.running:
            return False
        self.job_worker.start()
        return True

    def close(self) -> None:
        # First: a job mid-render goes back to the queue before the
        # schedulers it renders on close.
        self.job_worker.stop()
        if self.purger is not None:
            self.purger.close()
        if self.voices is not None:
            self.voices.close()
        for stack in self.engines.values():
            stack.scheduler.close()
        self.voice_store.close()
        self.database.close()
