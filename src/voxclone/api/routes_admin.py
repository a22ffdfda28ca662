"""Operations endpoints: liveness, readiness, Prometheus metrics, service info."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import AnyCaller, authenticate_request, rate_limiter_status
from voxclone.api.deps import NOT_READY_RETRY_S, RuntimeDep, loaded_runtime
from voxclone.api.errors import error_body, retry_after_header
from voxclone.api.startup_notes import models_detail, runtime_library_id
from voxclone.assembly import Runtime
from voxclone.errors import Forbidden
from voxclone.runtime.keys import SCOPE_ADMIN
from voxclone.runtime.library_id import LIBRARY_HEADER
from voxclone.runtime.outage import database_state, storage_state
from voxclone.synth.audio import watermark
from voxclone.synth.audio.file_encode import SUPPORTED_RATES, AudioFormat
from voxclone.synth.controls import (
    EMOTIONS,
    ENERGY_RANGE,
    INTENSITY_RANGE,
    PITCH_RANGE,
    SPEED_RANGE,
)

router = APIRouter(tags=["admin"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def _dependencies(state: Any) -> dict[str, Any]:
    """Degraded-but-serving states worth seeing: Redis, the rate limiter, owed
    purges; and which blob store this replica uses."""
    detail: dict[str, Any] = {"rate_limiter": rate_limiter_status(state.rate_limiter)}
    runtime = loaded_runtime(state)
    if runtime is not None and runtime.cache is not None:
        for tier in runtime.cache.tiers:
            breaker = getattr(getattr(tier, "client", None), "breaker", None)
            if breaker is not None:
                detail["cache_redis"] = "unreachable" if breaker.is_open else "ok"
    if runtime is not None:
        detail["blobs"] = runtime.blobs.name  # "local" or "s3"
    purger = runtime.purger if runtime is not None else None
    if purger is not None:
        detail["purges_pending"] = purger.pending()
    return detail


def _engines(runtime: Runtime) -> dict[str, str]:
    """Each engine VOXCLONE_ENGINES names: "ready", or "failed: <error class>"
    for one that did not load (the others serve; the log has the message)."""
    states = dict.fromkeys(runtime.engines, "ready")
    for name, failure in runtime.engine_failures.items():
        states[name] = f"failed: {failure.error}"
    return states


# Free space below which the storage is "full" for /readyz: the largest upload
# (its reference is kept as a blob) plus a SQLite WAL's worth (1,000 pages of
# 4 KiB before the automatic checkpoint).
_WAL_HEADROOM_MB = 4.0


def _store_outages(runtime: Runtime) -> tuple[dict[str, str], dict[str, str]]:
    """The "database" and "storage" capabilities, and why each that is not ready is not."""
    db = runtime.database
    # Where this replica writes locally: SQLite's directory, the local blob store.
    dirs = [db.path.parent] if db.path is not None else []
    blob_root = getattr(runtime.blobs, "root", None)
    if isinstance(blob_root, Path):
        dirs.append(blob_root)
    need_mb = runtime.settings.max_upload_mb + _WAL_HEADROOM_MB
    storage, free = storage_state(dirs, int(need_mb * (1 << 20)))
    states = {"database": database_state(db), "storage": storage}
    outages: dict[str, str] = {}
    if states["database"] != "ok":
        outages["database"] = "database: unreachable"
    if storage != "ok":
        outages["storage"] = f"storage: full ({free / (1 << 20):.1f} MB free, needs {need_mb:g} MB)"
    return states, outages


def _deep_refine_state(runtime: Runtime) -> str:
    voices = runtime.voices
    if voices is None:
        return "unavailable (cloning is off)"
    missing = voices.deep_refine_missing
    return "available" if missing is None else f"unavailable ({missing})"


@router.get("/readyz", summary="Readiness: speech (default) or cloning models loaded and warmed")
async def readyz(
    request: Request,
    capability: Literal["speech", "cloning"] = Query(
        "speech",
        description="'speech': the engines are warm (the default). 'cloning': the "
        "cloning models are loaded too, so a clone is instant (route clones by this).",
    ),
) -> JSONResponse:
    state = request.app.state
    runtime = loaded_runtime(state)
    if runtime is not None:
        cloning = runtime.cloning_state
        # "on_demand": the operator chose not to warm them; a clone works (the
        # first one loads them), so this replica may take clones.
        if capability == "cloning" and cloning not in ("ready", "on_demand"):
            reason = f"cloning models: {cloning}"
            if cloning == "unavailable":
                reason += f" ({'; '.join(runtime.cloning_failure)})"
            body = error_body("not_ready", reason)
            return JSONResponse(
                body, status_code=503, headers=retry_after_header(NOT_READY_RETRY_S)
            )
        # Not ready while nothing can be stored: writes would answer 503/507.
        stores, outages = await run_in_threadpool(_store_outages, runtime)
        if outages:
            body = error_body("not_ready", "; ".join(outages.values()), field=next(iter(outages)))
            body["detail"] = stores
            return JSONResponse(
                body, status_code=503, headers=retry_after_header(NOT_READY_RETRY_S)
            )
        # Ready even when Redis is down (the local tiers serve); the detail says so.
        detail = await run_in_threadpool(_dependencies, state)
        detail.update(stores)
        detail.update(speech="ready", cloning=cloning, startup_s=runtime.stages.as_dict())
        detail["engines"] = _engines(runtime)
        # Ready with fewer voices, but said (issue 46); the CLI compares the header.
        detail["models"] = models_detail(runtime)
        # "perth", "off", or "unavailable (what to install)": speech is served unmarked.
        detail["watermark"] = watermark.state(runtime.settings.watermark)
        # "available", or why `method: "deep"` refines are refused here (issue 47).
        detail["deep_refine"] = _deep_refine_state(runtime)
        return JSONResponse(
            {"status": "ready", "detail": detail},
            headers={LIBRARY_HEADER: runtime_library_id(runtime)},
        )
    failure = getattr(state, "startup_error", None)
    if failure:
        body = error_body("not_ready", f"model loading failed: {failure}")
    else:
        body = error_body("not_ready", "models are loading")
    return JSONResponse(body, status_code=503, headers=retry_after_header(NOT_READY_RETRY_S))


@router.get("/metrics", summary="Prometheus metrics (admin scope when keys exist)")
async def metrics(request: Request) -> Response:
    principal = authenticate_request(request)
    if not principal.allows(SCOPE_ADMIN):
        raise Forbidden("metrics need the 'admin' scope", field="scope", limit=SCOPE_ADMIN)
    m = request.app.state.metrics
    runtime = loaded_runtime(request.app.state)
    if runtime is not None:
        # Gauges are sampled at scrape time rather than updated on every change.
        stats = runtime.scheduler.stats()
        m.queue_depth.set(stats.queued)
        m.circuit_open.set(1 if stats.breaker_open else 0)
        m.voices_stored.set(runtime.voice_store.count())
        m.scheduler_backlog_seconds.set(stats.backlog_s)
        m.engine_busy_seconds.set(stats.engine_seconds)
        m.scheduler_dropped.set(stats.dropped)
        m.scheduler_rejected.set(stats.rejected)
        m.engine_in_flight.set(stats.in_flight)
        m.engine_items.set(stats.completed)
        m.engine_seconds_per_unit.set(stats.seconds_per_char)
        m.engine_rate_samples.set(stats.rate_samples)
    detail = _dependencies(request.app.state)
    limiter = detail["rate_limiter"]
    if limiter.get("backend") == "redis":
        degraded = 1 if limiter["redis"] == "unreachable" else 0
        m.rate_limiter_degraded.labels(mode=limiter["without_redis"]).set(degraded)
        m.rate_limiter_decisions_without_redis.set(limiter["decisions_without_redis"])
    if "cache_redis" in detail:
        m.redis_circuit_open.labels(client="cache").set(
            1 if detail["cache_redis"] == "unreachable" else 0
        )
    if "purges_pending" in detail:
        m.purges_pending.set(detail["purges_pending"])
    m.ready.set(1 if runtime is not None and runtime.ready else 0)
    payload, content_type = m.render()
    return Response(payload, media_type=content_type)


@router.get("/v1/info", summary="Languages, formats, controls and limits of this server")
async def info(
    request: Request,
    principal: AnyCaller,
    runtime: RuntimeDep,
) -> dict[str, Any]:
    settings = runtime.settings
    caps = runtime.engine.capabilities
    return {
        "model": {"id": caps.model_id, "version": caps.model_version, "engine": caps.engine},
        "engines": {
            name: {
                "model_id": c.model_id,
                "model_version": c.model_version,
                "sample_rate": c.sample_rate,
                "languages": sorted(c.languages),
                "clone_method": c.clone_method,
                "native_controls": sorted(c.native_controls),
                "streaming": c.streaming,
            }
            for name, c in ((n, s.engine.capabilities) for n, s in runtime.engines.items())
        },
        "languages": sorted(runtime.speech.languages),
        "formats": [f.value for f in AudioFormat],
        "sample_rates": list(SUPPORTED_RATES),
        "emotions": {name: preset.description for name, preset in EMOTIONS.items()},
        "controls": {
            "speed": list(SPEED_RANGE),
            "pitch": list(PITCH_RANGE),
            "energy": list(ENERGY_RANGE),
            "intensity": list(INTENSITY_RANGE),
        },
        "builtin_voices": runtime.catalog.builtin_names,
        "builtin_voices_by_engine": runtime.catalog.builtins_by_engine(),
        # The default engine's voice for requests that name none (English),
        # and where the language has its own default, that one.
        "default_voice": runtime.speech.default_voice(runtime.speech.default_engine)
        or settings.default_voice,
        "default_voices_by_language": runtime.speech.language_defaults(),
        "limits": {
            "max_text_chars": settings.max_text_chars,
            "max_upload_mb": settings.max_upload_mb,
            "max_concurrent_streams": settings.max_concurrent_streams,
            "rate_limit_per_minute": settings.rate_limit_per_minute,
            "rate_limit_burst": settings.rate_limit_burst,
        },
        "openai": {
            "models": runtime.speech.model_names,
            "voice_aliases": runtime.catalog.openai_aliases(),
        },
        "owner": principal.owner,
        "scopes": sorted(principal.scopes),
        # "typed" or "spoken" (issue 49): how enrollment takes the speaker's consent.
        "consent_mode": request.app.state.settings.consent_mode,
        # Which voice library this is (runtime/library_id.py); its folder only
        # for admins (the CLI names it when it refuses a server of another home).
        "library": {
            "id": runtime_library_id(runtime),
            **({"home": str(settings.home)} if principal.allows(SCOPE_ADMIN) else {}),
        },
    }
