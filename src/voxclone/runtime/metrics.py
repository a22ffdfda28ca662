"""Prometheus metrics for one service instance.

Each ``Metrics`` owns its own registry instead of the process-global one, so
tests (and several apps in one process) can create as many as they like
without "duplicated timeseries" errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

# Request latency spans tiny cached replies to long chapters.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TTFA_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10)
# Real-time factor: below 1 is faster than real time.
_RTF_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5)
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)


class Metrics:
    def __init__(self, namespace: str = "voxclone") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # Every metric of this instance: its namespace, its own registry.
        reg = self.registry
        counter = partial(Counter, namespace=namespace, registry=reg)
        gauge = partial(Gauge, namespace=namespace, registry=reg)
        histogram = partial(Histogram, namespace=namespace, registry=reg)
        self.http_requests = counter(
            "http_requests_total",
            "HTTP requests by route template, method and status code.",
            ["route", "method", "status"],
        )
        self.request_latency = histogram(
            "http_request_duration_seconds",
            "Time from request received to response complete, by route template.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
        )
        self.time_to_first_audio = histogram(
            "time_to_first_audio_seconds",
            "Time from request received to the first audio byte sent.",
            buckets=_TTFA_BUCKETS,
        )
        self.first_audio_stage = histogram(
            "first_audio_stage_seconds",
            "Where a stream's time to first audio went, by stage: plan, queue, "
            "engine, post (processing) and encode (transport not included).",
            ["stage"],
            buckets=_TTFA_BUCKETS,
        )
        self.real_time_factor = histogram(
            "real_time_factor",
            "Synthesis time divided by audio duration (below 1 is faster than real time).",
            buckets=_RTF_BUCKETS,
        )
        self.queue_depth = gauge(
            "queue_depth",
            "Synthesis requests waiting for an engine worker.",
        )
        self.batch_size = histogram(
            "batch_size",
            "Number of requests per engine batch.",
            buckets=_BATCH_BUCKETS,
        )
        self.cache_hits = counter("cache_hits_total", "Audio cache hits by tier.", ["tier"])
        self.cache_misses = counter(
            "cache_misses_total",
            "Audio cache misses by tier.",
            ["tier"],
        )
        self.audio_seconds = counter(
            "audio_seconds_synthesized_total",
            "Seconds of audio produced by the engine (cache hits excluded).",
        )
        self.model_load_seconds = gauge(
            "model_load_seconds",
            "Time it took to load and warm the models at start-up.",
        )
        self.voices_stored = gauge("voices_stored", "Cloned voices in the library.")
        self.engine_failures = counter(
            "engine_failures_total",
            "Engine calls that raised or returned unusable audio.",
        )
        self.circuit_open = gauge(
            "circuit_open",
            "1 while the engine circuit breaker fails requests fast, else 0.",
        )
        self.ready = gauge("ready", "1 once models are loaded and warmed, else 0.")
        self.rate_limited = counter(
            "rate_limited_total",
            "Requests refused by the rate limiter.",
        )

        self.redis_circuit_open = gauge(
            "redis_circuit_open",
            "1 while Redis calls are skipped after a failure (local tiers serve), else 0.",
            ["client"],
        )
        self.rate_limiter_degraded = gauge(
            "rate_limiter_degraded",
            "1 while the Redis rate limiter cannot reach Redis and decides by its "
            "fallback mode (see mode label), else 0.",
            ["mode"],
        )
        self.rate_limiter_decisions_without_redis = gauge(
            "rate_limiter_decisions_without_redis",
            "Rate-limit decisions made without Redis since start.",
        )
        self.purges_pending = gauge(
            "purges_pending",
            "Deleted voices whose cached audio could not be purged yet (Redis unreachable).",
        )
        self.scheduler_backlog_seconds = gauge(
            "scheduler_backlog_seconds",
            "Estimated wait before a new request starts (admitted characters x learned rate).",
        )
        self.engine_busy_seconds = gauge(
            "engine_busy_seconds_total",
            "Wall seconds the engine workers spent in engine calls since start.",
        )
        self.scheduler_dropped = gauge(
            "scheduler_dropped_total",
            "Queued chunks dropped before the engine (client gone or deadline passed).",
        )
        self.scheduler_rejected = gauge(
            "scheduler_rejected_total",
            "Requests refused at admission (queue full, backlog over their deadline).",
        )
        # Issue 48: a barge-in's cut is seen here (bench/realtime.py polls it).
        self.engine_in_flight = gauge(
            "engine_in_flight",
            "Chunks inside an engine call now (0: the engine is idle).",
        )
        self.engine_seconds_per_unit = gauge(
            "engine_seconds_per_unit",
            "Engine seconds per unit of spoken text on one worker that admission plans with.",
        )
        self.engine_rate_samples = gauge(
            "engine_rate_samples_total",
            "Engine calls the planning rate was learned from (0: still the cold prior).",
        )
        self.engine_items = gauge(
            "engine_items_total",
            "Chunks the engine rendered since start.",
        )

    # -- conveniences for the callers that report most often

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http_requests.labels(route=route, method=method, status=str(status)).inc()
        self.request_latency.labels(route=route).observe(seconds)

    def observe_render(self, audio_seconds: float, compute_seconds: float) -> None:
        """A finished render: the audio it made and its real-time factor."""
        self.audio_seconds.inc(audio_seconds)
        if audio_seconds > 0:
            self.real_time_factor.observe(compute_seconds / audio_seconds)

    def observe_first_audio_stages(self, stages: Mapping[str, float]) -> None:
        """Where a stream's time to first audio went, seconds by stage."""
        for stage, seconds in stages.items():
            self.first_audio_stage.labels(stage=stage).observe(seconds)

    def cache_event(self, tier: str, outcome: str) -> None:
        """Matches ``cache.CacheListener``: pass ``metrics.cache_event`` to TieredCache."""
        if outcome == "hit":
            self.cache_hits.labels(tier=tier).inc()
        elif outcome == "miss":
            self.cache_misses.labels(tier=tier).inc()
        else:
            raise ValueError(f"unknown cache outcome {outcome!r}; expected 'hit' or 'miss'")

    def render(self) -> tuple[bytes, str]:
        """Exposition payload and its content type, for the /metrics endpoint."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
