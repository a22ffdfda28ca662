"""Composition root: build every component from one Settings object.

Only this module (and tests) wires concrete classes together; the layers below
receive what they need through constructors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from voxclone.config import Settings
from voxclone.runtime.cache import DiskTier, MemoryTier, TieredCache
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.scheduler import Scheduler
from voxclone.runtime.voice_store import SqliteVoiceStore
from voxclone.service.catalog import VoiceCatalog
from voxclone.service.purge import CachePurger
from voxclone.service.speech import RenderStats, ServiceHooks, SpeechService
from voxclone.synth.engine.kokoro import KokoroEngine
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.langdetect import detect_language
from voxclone.synth.voice.builtin import builtin_voices

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: KokoroEngine
    scheduler: Scheduler
    speech: SpeechService
    catalog: VoiceCatalog
    voice_store: SqliteVoiceStore
    cache: TieredCache | None
    voices: Any = None  # VoiceService (cloning); None when built without it
    extras: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        purger = self.extras.get("purger")
        if purger is not None:
            purger.close()
        if self.voices is not None:
            self.voices.close()
        self.scheduler.close()
        self.voice_store.close()


def build_cache(settings: Settings, metrics: Metrics | None = None) -> TieredCache | None:
    tiers: list[Any] = []
    if settings.memory_cache_mb > 0:
        tiers.append(MemoryTier(int(settings.memory_cache_mb * (1 << 20))))
    if settings.disk_cache_mb > 0:
        tiers.append(DiskTier(settings.cache_dir, int(settings.disk_cache_mb * (1 << 20))))
    if settings.redis_url:
        from voxclone.runtime.cache import RedisTier
        from voxclone.runtime.redis_conn import connect

        client = connect(
            settings.redis_url,
            timeout_s=settings.redis_timeout_s,
            cooldown_s=settings.redis_breaker_cooldown_s,
        )
        tiers.append(
            RedisTier(client, settings.redis_ttl_s, int(settings.redis_max_value_mb * (1 << 20)))
        )
    listener = metrics.cache_event if metrics is not None else None
    return TieredCache(tiers, listener=listener) if tiers else None


def metric_hooks(metrics: Metrics) -> ServiceHooks:
    def on_rendered(stats: RenderStats) -> None:
        metrics.audio_seconds.inc(stats.audio_seconds)
        if stats.audio_seconds > 0:
            metrics.real_time_factor.observe(stats.compute_seconds / stats.audio_seconds)

    return ServiceHooks(on_first_audio=metrics.time_to_first_audio.observe, on_rendered=on_rendered)


def build_runtime(
    settings: Settings,
    *,
    warmup: bool = True,
    metrics: Metrics | None = None,
    with_voices: bool = True,
) -> Runtime:
    """Build everything. ``metrics`` (optional) receives engine, cache and render events."""
    settings.home.mkdir(parents=True, exist_ok=True)
    engine = KokoroEngine(
        settings.models_dir,
        intra_op_threads=settings.onnx_threads,
        providers=settings.onnx_providers,
        fast_lane_threads=settings.fast_lane_threads,
    )
    engine.load()
    if warmup:
        engine.warmup()
    assets = engine.assets
    g2p = MultiG2P(assets.vocab)
    frontend = TextFrontend(g2p, max_tokens=engine.capabilities.max_tokens)
    store = SqliteVoiceStore(settings.db_path)
    catalog = VoiceCatalog(builtin_voices(assets.packs), store)
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
    cache = build_cache(settings, metrics)
    speech = SpeechService(
        frontend=frontend,
        catalog=catalog,
        scheduler=scheduler,
        capabilities=engine.capabilities,
        cache=cache,
        default_voice=settings.default_voice,
        default_language=settings.default_language,
        max_text_chars=settings.max_text_chars,
        detect_language=detect_language,
        hooks=metric_hooks(metrics) if metrics is not None else None,
    )
    runtime = Runtime(settings, engine, scheduler, speech, catalog, store, cache)
    if with_voices:
        from voxclone.runtime.job_store import JobEvents
        from voxclone.service.voices import build_voice_service

        events = JobEvents()
        purger = CachePurger(store, speech.invalidate_voice, retry_s=settings.purge_retry_s)
        purger.start()  # purges a previous process could not finish, then retries
        runtime.extras["purger"] = purger
        runtime.voices = build_voice_service(
            settings,
            engine,
            g2p,
            scheduler,
            store,
            speech.invalidate_voice,
            job_events=events,
            purge=purger.purge,
        )
        runtime.extras["job_events"] = events
        if warmup and settings.warm_cloning:
            # Loads the speaker encoder now so the first clone meets the
            # instant-clone latency target (~27 s otherwise, on first use).
            runtime.voices.warmup()
    return runtime
