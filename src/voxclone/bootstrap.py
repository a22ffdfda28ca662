"""Composition root: build every concrete component from one Settings object.

Only this module (and tests) wires concrete classes together; the layers below
receive what they need through constructors. The HTTP app, the CLI, the dev
server and Ray Serve replicas all get their runtime (or the lighter voice
library) from here.

Engines come from the registry by name (``VOXCLONE_ENGINES``, first = the
default). Each loaded engine gets its own text frontend, scheduler and
speech service; a :class:`SpeechRouter` picks one per request and one
:class:`VoiceCatalog` knows every engine's voices.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from voxclone import __version__
from voxclone.assembly import EngineStack, Runtime
from voxclone.cloning_setup import build_voice_service
from voxclone.config import Settings
from voxclone.engine_setup import EngineFailure, EngineLoad, build_engines, warm_engines
from voxclone.runtime.blobs import BlobStore, BlobStoreUnavailable, LocalBlobStore
from voxclone.runtime.cache import DiskTier, MemoryTier, TieredCache
from voxclone.runtime.cache_guard import DeletedVoices, voices_held
from voxclone.runtime.db import Database, open_database
from voxclone.runtime.inline_log import InlineVoiceLog
from voxclone.runtime.job_store import JobEvents, JobQueue, SqlJobStore
from voxclone.runtime.lexicon_store import SqlLexiconStore
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.private_home import secure_home
from voxclone.runtime.ratelimit import InMemoryRateLimiter, RateLimiter, RedisRateLimiter
from voxclone.runtime.scheduler import Scheduler
from voxclone.runtime.signing_key import load_or_create
from voxclone.runtime.startup import StartupStages
from voxclone.runtime.url_signing import build_signer
from voxclone.runtime.voice_store import SqlVoiceStore, VoiceStore
from voxclone.service.c2pa_manifest import ManifestStamper
from voxclone.service.catalog import VoiceCatalog
from voxclone.service.jobs import JobWorker, SpeechJobConfig, SpeechJobs
from voxclone.service.purge import CachePurger, orphan_audio_purge
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.speech.service import SpeechService
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import VoiceStores
from voxclone.synth.audio import watermark
from voxclone.synth.audio.file_encode import load_codecs
from voxclone.synth.engine.base import Engine
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.langdetect import detect_language

if TYPE_CHECKING:
    import redis

    from voxclone.runtime.cache import RedisTier

log = logging.getLogger(__name__)


@dataclass
class VoiceLibrary:
    """The voice library without loaded models (CLI ``voices`` commands)."""

    catalog: VoiceCatalog
    store: VoiceStore
    cache: TieredCache | None
    database: Database  # the store's; closed with the library

    def purge_voice(self, voice_id: str) -> None:
        """What a deleted voice leaves behind: cached audio and its blobs."""
        invalidate = self.cache.invalidate_voice if self.cache else None
        deleted = DeletedVoices.of(self.cache)
        voice_purge(self.store, invalidate, deleted.record if deleted else None)(voice_id)

    def close(self) -> None:
        self.store.close()
        self.database.close()


# -- small builders ---------------------------------------------------------------


def build_redis(settings: Settings) -> redis.Redis | None:
    """The one way a Redis client is made (None without ``redis_url``): connect
    and read timeouts, no retries, a circuit breaker (runtime/redis_conn.py)."""
    if not settings.redis_url:
        return None
    from voxclone.runtime.redis_conn import connect

    return connect(
        settings.redis_url,
        timeout_s=settings.redis_timeout_s,
        cooldown_s=settings.redis_breaker_cooldown_s,
    )


def build_blob_store(settings: Settings) -> BlobStore:
    """Where blobs live: the S3 bucket when ``VOXCLONE_S3_BUCKET`` is set, else a
    directory under ``home`` (docs/deploy.md). boto3 is imported only for S3."""
    if settings.s3_bucket:
        from voxclone.runtime.blobs_s3 import S3BlobStore

        return S3BlobStore(
            settings.s3_bucket,
            prefix=settings.s3_prefix,
            endpoint_url=settings.s3_endpoint_url or None,
            region=settings.s3_region or None,
            connect_timeout_s=settings.s3_timeout_s,
            read_timeout_s=settings.s3_timeout_s,
            max_attempts=settings.s3_max_attempts,
        )
    return LocalBlobStore(settings.blob_dir)


def check_blob_store(settings: Settings) -> str | None:
    """None when the configured blob store is usable, else why not (one readable
    line for the operator: missing bucket, wrong credentials, endpoint down)."""
    try:
        build_blob_store(settings).check()
    except BlobStoreUnavailable as exc:
        return exc.message
    except ValueError as exc:  # a malformed prefix or endpoint URL
        return f"invalid blob store settings: {exc}"
    return None


def build_speech_jobs(
    settings: Settings,
    jobs: JobQueue,
    router: SpeechRouter,
    events: JobEvents,
    blobs: BlobStore,
) -> SpeechJobs:
    """Speech jobs on the jobs table, their audio in the blob store."""
    return SpeechJobs(
        queue=jobs,
        speech=router,
        blobs=blobs,
        events=events,
        config=SpeechJobConfig(
            lease_s=settings.job_lease_s,
            max_attempts=max(1, settings.job_max_attempts),
            retry_base_s=settings.job_retry_base_s,
            retention_s=settings.job_retention_s,
        ),
    )


def build_cache(settings: Settings, metrics: Metrics | None = None) -> TieredCache | None:
    tiers: list[MemoryTier | DiskTier | RedisTier] = []
    if settings.memory_cache_mb > 0:
        tiers.append(MemoryTier(int(settings.memory_cache_mb * (1 << 20))))
    if settings.disk_cache_mb > 0:
        tiers.append(DiskTier(settings.cache_dir, int(settings.disk_cache_mb * (1 << 20))))
    client = build_redis(settings)
    if client is not None:
        from voxclone.runtime.cache import RedisTier

        tiers.append(
            RedisTier(client, settings.redis_ttl_s, int(settings.redis_max_value_mb * (1 << 20)))
        )
    listener = metrics.cache_event if metrics is not None else None
    return TieredCache(tiers, listener=listener) if tiers else None


def build_rate_limiter(settings: Settings) -> RateLimiter | None:
    """The limiter for these settings, or None when rate limiting is switched off (rate <= 0)."""
    if settings.rate_limit_per_minute <= 0:
        return None
    rate_per_s = settings.rate_limit_per_minute / 60.0
    burst = max(1.0, settings.rate_limit_burst)
    client = build_redis(settings)
    if client is not None:
        local = settings.rate_limit_without_redis == "local"
        return RedisRateLimiter(
            client,
            rate_per_s,
            burst,
            fail_open=not local,
            fallback=InMemoryRateLimiter(rate_per_s, burst) if local else None,
        )
    return InMemoryRateLimiter(rate_per_s, burst)


def build_database(settings: Settings) -> Database:
    """The voxclone database: ``VOXCLONE_DATABASE_URL``, else the embedded SQLite
    file. Every store of a process borrows this one pool (the first to open
    migrates it); whoever builds it closes it."""
    return open_database(settings.database_target)


def build_voice_store(
    settings: Settings,
    engines: dict[str, Engine],
    database: Database,
    blobs: BlobStore | None = None,
) -> VoiceStore:
    """The voice library in ``database``. New voices keep their reference audio
    in ``blobs`` (default: the configured blob store)."""
    shapes = {name: engine.capabilities.style_shape for name, engine in engines.items()}
    return SqlVoiceStore(
        database,
        style_shapes=shapes,
        blobs=blobs if blobs is not None else build_blob_store(settings),
    )


def build_job_store(settings: Settings, database: Database) -> JobQueue:
    """Jobs and the durable queue in ``database``.

    A shared database is shared by live processes: failing every unfinished
    in-process job at start would fail the other replicas' live jobs. Queue
    jobs are never failed this way (their leases decide).
    """
    return SqlJobStore(database, recover_on_open=settings.database_url is None)


def voice_purge(
    store: VoiceStore,
    invalidate: Callable[[str], object] | None,
    record_deleted: Callable[[str], object] | None = None,
) -> Callable[[str], int]:
    """The journaled purge of a deleted voice: its cached audio (every tier
    tried, runtime/cache/tiered.py), its id into Redis's list of deleted voices (for
    the orphan sweep, runtime/cache_guard.py), then its blobs. Any of them
    raising keeps the purge owed (service/purge.py retries it). Returns how
    many cache entries went, when ``invalidate`` counts them (the receipt's)."""

    def purge(voice_id: str) -> int:
        removed = invalidate(voice_id) if invalidate is not None else 0
        if record_deleted is not None:
            record_deleted(voice_id)
        store.purge_blobs(voice_id)
        if isinstance(removed, dict):  # TieredCache.invalidate_voice: per tier
            return sum(removed.values())
        return removed if isinstance(removed, int) else 0

    return purge


def build_purger(
    store: VoiceStore,
    cache: TieredCache | None,
    invalidate: Callable[[str], object],
    *,
    retry_s: float = 10.0,
) -> CachePurger:
    """Deleted voices' purges (journaled, retried) and, with a cache, the orphan
    sweep whatever the database: audio no purge could reach (another server's
    own tiers, a render's take-back that failed against Redis) is found and
    removed (service/purge.py, runtime/cache_guard.py)."""
    deleted = DeletedVoices.of(cache)
    reconcile = None
    if cache is not None:
        reconcile = orphan_audio_purge(
            voices_held(cache, deleted), store.existing_voice_ids, invalidate
        )
    return CachePurger(
        store,
        voice_purge(store, invalidate, deleted.record if deleted is not None else None),
        retry_s=retry_s,
        reconcile=reconcile,
    )


def build_library(settings: Settings) -> VoiceLibrary:
    """Catalog and store of the configured engines, without loading any model."""
    engines = build_engines(settings, load=False)
    database = build_database(settings)
    store = build_voice_store(settings, engines, database)
    return VoiceLibrary(VoiceCatalog(engines, store), store, build_cache(settings), database)


# The default voice of an engine with no built-in voices and none configured:
# the project's first default (Kokoro's clear_female, the voice a name-less
# request spoke with before engines had their own defaults).
_NO_BUILTINS_VOICE = "clear_female"


def _default_voice(settings: Settings, engine: Engine) -> str:
    """The engine's default voice: the configured one, else the engine's own
    (its American English default, else its first built-in)."""
    builtins = engine.builtin_voices()
    if settings.default_voice and (settings.default_voice in builtins or not builtins):
        return settings.default_voice
    for name, voice in builtins.items():
        if settings.default_language in voice.default_for:
            return name
    return next(iter(builtins), settings.default_voice or _NO_BUILTINS_VOICE)


def _language_defaults(settings: Settings, catalog: VoiceCatalog) -> dict[str, dict[str, str]]:
    """Per engine, the measured default voice of each language; none when the
    operator configured one default voice for every language."""
    if settings.default_voice:
        return {}
    return {name: catalog.language_defaults(name) for name in catalog.engine_names}


def build_runtime(
    settings: Settings,
    *,
    warmup: bool = True,
    metrics: Metrics | None = None,
    with_voices: bool = True,
    warm_cloning: bool | None = None,
    engine_load: EngineLoad | None = None,
) -> Runtime:
    """Build everything. ``metrics`` (optional) receives engine, cache and render events.

    ``engine_load``: engines already loading in a thread (``voxclone say``
    starts them before importing the rest); used instead of loading here.

    ``warm_cloning`` (default ``settings.warm_cloning``): load the cloning
    models now. The server passes False and calls :meth:`Runtime.warm_cloning`
    after speech is ready, so speech is served while they load.
    """
    stages = engine_load.stages if engine_load is not None else StartupStages()
    secure_home(settings.home)  # before the blob directory is created in it
    blobs = build_blob_store(settings)
    # Once per process, before the models load: a missing bucket or wrong
    # credentials stops the start with a readable BlobStoreUnavailable
    # instead of failing the first clone.
    with stages.stage("blob_store_check"):
        blobs.check()
    # Engines that failed to load (reported on /readyz); the others serve.
    failed: dict[str, EngineFailure] = {}
    if engine_load is not None:
        engines = engine_load.result()
        failed.update(engine_load.failed)
        if warmup:
            engines = warm_engines(engines, stages, failed)
    else:
        engines = build_engines(settings, warmup=warmup, stages=stages, failed=failed)
    if warmup:
        # A serving process: its first Opus/AAC stream must not import FFmpeg.
        with stages.stage("codec_import"):
            load_codecs()
    marking = settings.watermark and _watermark_installed(settings)
    if warmup and marking:
        # Off the start path (graphs saved under models_dir: ~0.1 s; the first
        # start builds them in a child): the first request finds them loaded.
        threading.Thread(target=_load_watermark, name="watermark-load", daemon=True).start()
    stamper = build_stamper(settings)
    if warmup and stamper is not None:
        # c2pa's import (0.06-0.09 s) off the start and off the first file.
        threading.Thread(target=stamper.warm, name="c2pa-import", daemon=True).start()
    database = build_database(settings)
    store = build_voice_store(settings, engines, database, blobs)
    # Pronunciations live next to the voice library (same database, same pool).
    lexicon = SqlLexiconStore(database)
    catalog = VoiceCatalog(engines, store)
    cache = build_cache(settings, metrics)
    stacks: dict[str, EngineStack] = {}
    for name, engine in engines.items():
        caps = engine.capabilities
        scheduler = Scheduler(
            engine,
            workers=settings.workers,
            queue_size=settings.queue_size,
            max_batch=settings.max_batch,
            max_wait_ms=settings.max_wait_ms,
            default_timeout_s=settings.request_timeout_s,
            on_batch=metrics.batch_size.observe if metrics is not None else None,
            on_engine_failure=metrics.engine_failures.inc if metrics is not None else None,
        )
        speech = SpeechService(
            frontend=TextFrontend(engine.tokenizer(), max_tokens=caps.max_tokens),
            catalog=catalog,
            scheduler=scheduler,
            capabilities=caps,
            cache=cache,
            default_voice=_default_voice(settings, engine),
            default_language=settings.default_language,
            max_text_chars=settings.max_text_chars,
            detect_language=detect_language,
            metrics=metrics,
            lexicon=lexicon.entries,
            max_output_s=settings.max_output_s,
            watermark=marking,
            stamper=stamper,
        )
        stacks[name] = EngineStack(engine, scheduler, speech)
    router = SpeechRouter(
        {name: stack.speech for name, stack in stacks.items()},
        catalog,
        default_voices={name: _default_voice(settings, s.engine) for name, s in stacks.items()},
        language_defaults=_language_defaults(settings, catalog),
    )
    events = JobEvents()
    jobs = build_job_store(settings, database)
    speech_jobs = build_speech_jobs(settings, jobs, router, events, blobs)
    voices: VoiceService | None = None
    purger: CachePurger | None = None
    if with_voices:
        purger = build_purger(
            store, cache, router.purge_voice_audio, retry_s=settings.purge_retry_s
        )
        purger.start()  # purges a previous process could not finish, then retries
        stores = VoiceStores(
            voices=store,
            jobs=jobs,
            job_events=events,
            report_queue=jobs,
            inline_log=InlineVoiceLog(database),
        )
        voices = build_voice_service(
            settings,
            stacks,
            stores,
            router,
            blobs=blobs,
            purge=purger.purge_counted,
            revoke_jobs=speech_jobs.revoke_voice_jobs,
        )
    runtime = Runtime(
        settings=settings,
        engines=stacks,
        speech=router,
        catalog=catalog,
        database=database,
        voice_store=store,
        cache=cache,
        job_events=events,
        jobs=jobs,
        speech_jobs=speech_jobs,
        job_worker=JobWorker(speech_jobs, poll_s=settings.job_poll_s, slots=settings.job_slots),
        url_signer=build_signer(settings.url_signing_secret, settings.home),
        blobs=blobs,
        lexicon=lexicon,
        stages=stages,
        engine_failures=failed,
        voices=voices,
        purger=purger,
    )
    if with_voices and warmup and (settings.warm_cloning if warm_cloning is None else warm_cloning):
        runtime.warm_cloning()
    return runtime


def build_stamper(settings: Settings) -> ManifestStamper | None:
    """What signs whole files' C2PA manifests (service/c2pa_manifest.py): the
    operator's certificate and key, or this home's (made at first start).
    None when Settings.c2pa_manifest is off or c2pa-python is not installed
    (whole files are then served unsigned, and the start logs why)."""
    if not settings.c2pa_manifest:
        return None
    if importlib.util.find_spec("c2pa") is None:
        log.error("c2pa-python is not installed: whole files are served without a manifest")
        return None
    credential = load_or_create(
        settings.home, cert_path=settings.signing_cert, key_path=settings.signing_key
    )
    return ManifestStamper(credential, __version__)


def _watermark_installed(settings: Settings) -> bool:
    """Whether speech can be marked. Without resemble-perth (a plain ``pip
    install .``) it is served unmarked, never refused: one line says what to
    install, /readyz shows detail.watermark "unavailable (...)" and responses
    X-Voxclone-Watermark: none (like "cloning unavailable", api/app.py)."""
    watermark.configure(settings.models_dir)
    reason = watermark.unavailable()
    if reason is None:
        return True
    log.error("watermark unavailable: %s; speech is served unmarked", reason)
    return False


def _load_watermark() -> None:
    try:
        watermark.shared()
    except Exception:  # renders then speak unmarked (service/speech/render.py), and say so
        log.exception("the watermark model could not be loaded")
