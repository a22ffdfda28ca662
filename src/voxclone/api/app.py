"""The FastAPI application: routers, middleware, error handlers, start-up.

``create_app`` returns at once. Models load in a background thread started
by the lifespan, so ``/healthz`` answers immediately and ``/readyz`` turns
200 only once the runtime is built and warmed. Tests may pass a ready
``runtime``; the app then never closes it (its owner does).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

import voxclone
from voxclone.api import (
    routes_admin,
    routes_audiobooks,
    routes_captions,
    routes_consent,
    routes_dialogue,
    routes_jobs,
    routes_lexicon,
    routes_openai,
    routes_provenance,
    routes_realtime,
    routes_receipts,
    routes_tts,
    routes_voices,
)
from voxclone.api.auth import Authenticator, RateLimitHeadersMiddleware
from voxclone.api.body_guard import BodyGuardMiddleware, text_body_limit
from voxclone.api.body_timeout import BodyReadTimeoutMiddleware
from voxclone.api.deadline import ArrivalClockMiddleware
from voxclone.api.docs import install_offline_docs
from voxclone.api.errors import BodySizeLimitMiddleware, install_error_handlers
from voxclone.api.header_guard import HeaderHygieneMiddleware
from voxclone.api.host_guard import HostGuardMiddleware
from voxclone.api.observability import RequestContextMiddleware
from voxclone.api.startup_notes import startup_notes
from voxclone.api.streaming import StreamSlots
from voxclone.api.watermark_header import WatermarkHeaderMiddleware
from voxclone.assembly import Runtime
from voxclone.bootstrap import build_rate_limiter
from voxclone.config import Settings
from voxclone.errors import VoxcloneError
from voxclone.key_setup import open_key_store
from voxclone.runtime.background import run_at_low_priority, wait_for_quiet
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.private_home import secure_home

log = logging.getLogger("voxclone.api")

STATIC_DIR = Path(__file__).parent / "static"
# Paths the web UI must never shadow: an unknown method on an API route then
# gets 405 from the router instead of 404 from the file server.
_API_PREFIXES = ("/v1/", "/docs", "/redoc", "/openapi.json", "/metrics", "/healthz", "/readyz")


class UIMount(Mount):
    """Static files at ``/`` that step aside for every API path."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path", "")
        if any(path == p.rstrip("/") or path.startswith(p) for p in _API_PREFIXES):
            return Match.NONE, {}
        return super().matches(scope)


# Longest the shutdown waits for a model load still in progress.
LOADER_JOIN_S = 5.0
# The cloning models load once speech has been idle this long, or after the
# delay at the latest (a clone sent before then loads them on use).
CLONING_LOAD_QUIET_S = 0.5
CLONING_LOAD_MAX_DELAY_S = 30.0


def _load_runtime(
    app: FastAPI, settings: Settings, metrics: Metrics, *, wait_for_quiet_speech: bool = True
) -> None:
    """``wait_for_quiet_speech`` False: load the cloning models at once (start-up
    that blocks, as under Ray, serves no speech meanwhile to keep clear of)."""
    import time

    from voxclone.bootstrap import build_runtime

    started = time.perf_counter()
    try:
        # Speech first: the cloning models load after /readyz says speech is ready.
        runtime = build_runtime(settings, warmup=True, metrics=metrics, warm_cloning=False)
    except VoxcloneError as exc:
        # A configuration problem we can name (blob store, database): one line.
        log.error("start-up failed: %s", exc.message)
        app.state.startup_error = type(exc).__name__
        return
    except Exception as exc:
        log.exception("model loading failed")
        # Shown on /readyz: the class name only, never paths from the message.
        app.state.startup_error = type(exc).__name__
        return
    speech_s = time.perf_counter() - started
    metrics.model_load_seconds.set(speech_s)
    app.state.owned_runtime = runtime
    app.state.runtime = runtime
    log.info(
        "speech ready in %.1f s",
        speech_s,
        extra={"startup_s": runtime.stages.as_dict()},
    )
    for note in startup_notes(runtime):  # missing model assets, older models folder (issue 46)
        log.warning("%s", note)
    if settings.job_worker:
        # Queued speech jobs (also ones a dead process left) start as soon as
        # speech is ready; Runtime.close() stops the worker.
        runtime.start_job_worker()
    # One measured engine call, so admission plans with this machine's speed
    # from the first burst on.
    runtime.speech.calibrate_in_background()
    if settings.warm_cloning and runtime.voices is not None:
        try:
            # Speech is being served now. Loading the cloning models when they
            # imported torch (Python holding the GIL) made the first streams'
            # first audio up to 0.8 s later on 2 cores. The encoder needs no
            # torch since (synth/voice/ge2e.py: ~0.1 s once its graph is saved;
            # a child process builds it on the first start), and the load still
            # waits for a quiet moment, then takes only idle CPU.
            if wait_for_quiet_speech:
                wait_for_quiet(runtime.speech_idle, CLONING_LOAD_QUIET_S, CLONING_LOAD_MAX_DELAY_S)
            run_at_low_priority(runtime.warm_cloning, name="voxclone-load-cloning")
        except VoxcloneError as exc:
            # A model file not installed (a plain `pip install .` has no asset
            # packages, synth/asset_packages.py): one line that says what to run.
            log.error("cloning unavailable: %s", exc.message)
            return
        except Exception:  # a clone loads them on first use and reports its own error
            log.exception("loading the cloning models failed")
            return
        log.info(
            "cloning ready in %.1f s",
            time.perf_counter() - started,
            extra={"startup_s": runtime.stages.as_dict()},
        )


def create_app(
    settings: Settings, runtime: Runtime | None = None, *, load_in_background: bool = True
) -> FastAPI:
    """The app; without ``runtime`` it builds one itself (``bootstrap.build_runtime``).

    ``load_in_background=False`` builds it during the lifespan start-up instead,
    so start-up completes only once the models are warm and fails if they do
    not load. Ray Serve needs that: it routes to a replica as soon as start-up
    returns, and replaces a replica whose start-up failed.
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loader: threading.Thread | None = None
        # A runtime handed in (tests, Ray) works on jobs while this app runs.
        given: Runtime | None = app.state.runtime
        worker_started = given is not None and settings.job_worker and given.start_job_worker()
        if app.state.runtime is None and not load_in_background:
            # In a worker thread: the event loop stays free (Ray health checks).
            await anyio.to_thread.run_sync(
                functools.partial(_load_runtime, wait_for_quiet_speech=False),
                app,
                settings,
                metrics,
            )
            if app.state.runtime is None:
                app.state.keys.close()
                raise RuntimeError(f"model loading failed: {app.state.startup_error}")
        elif app.state.runtime is None:
            loader = threading.Thread(
                target=_load_runtime,
                args=(app, settings, metrics),
                name="voxclone-load",
                daemon=True,
            )
            loader.start()
        try:
            yield
        finally:
            if loader is not None:
                # A stop during model loading (a container stopped before it
                # was ready) must not outlast the runtime's stop grace period
                # (30 s in our manifests, after uvicorn's 10 s drain): wait a
                # little for the loader, then leave it; it is a daemon thread.
                loader.join(timeout=LOADER_JOIN_S)
            if worker_started and given is not None:
                given.job_worker.stop()
            owned: Runtime | None = getattr(app.state, "owned_runtime", None)
            if owned is not None:
                owned.close()
            app.state.keys.close()

    app = FastAPI(
        title="voxclone",
        version=getattr(voxclone, "__version__", "0.1.0"),
        description="Self-hosted zero-shot voice-cloning text-to-speech.",
        lifespan=lifespan,
        # FastAPI's own /docs and /redoc load scripts from a CDN; ours are local.
        docs_url=None,
        redoc_url=None,
    )
    secure_home(settings.home)  # before the first file in it is created
    keys = open_key_store(settings)
    app.state.settings = settings
    app.state.runtime = runtime
    app.state.startup_error = None
    app.state.metrics = metrics
    app.state.keys = keys
    app.state.authenticator = Authenticator(
        keys, require_keys=settings.require_keys, watermark_per_key=settings.watermark_per_key
    )
    app.state.rate_limiter = build_rate_limiter(settings)
    app.state.stream_slots = StreamSlots(settings.max_concurrent_streams)

    install_error_handlers(app)
    install_offline_docs(app)
    api_routers = [
        module.router
        for module in (
            routes_admin,
            routes_tts,
            routes_openai,
            routes_captions,
            routes_dialogue,
            routes_audiobooks,
            routes_voices,
            routes_consent,
            routes_jobs,
            routes_lexicon,
            routes_realtime,
            routes_provenance,
            routes_receipts,
        )
    ]
    for api_router in api_routers:
        app.include_router(api_router)
    if STATIC_DIR.is_dir():
        # Mounted last: routes registered above always match first.
        app.router.routes.append(
            UIMount("/", app=StaticFiles(directory=STATIC_DIR, html=True), name="ui")
        )

    # Middleware added last runs first: request id wraps everything, so even
    # a 413 from the body limit carries an X-Request-ID.
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=[
                "X-Request-ID",
                "X-Cache",
                "Retry-After",
                "X-RateLimit-Limit",
                "X-RateLimit-Remaining",
                "X-RateLimit-Reset",
            ],
        )
    # Inside the size limit. It reads each route's body kinds from the routers
    # (the routes in include order, as the app's router tries them; FastAPI
    # versions differ in how app.router holds included routes) and holds JSON
    # and URL-encoded bodies to what the longest text needs.
    app.add_middleware(
        BodyGuardMiddleware,
        routes=[route for api_router in api_routers for route in api_router.routes],
        text_body_bytes=text_body_limit(settings.max_text_chars),
    )
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=int(settings.max_upload_mb * (1 << 20)))
    # Around every body read: a stalled or trickling body is a 408, not an
    # open connection forever.
    app.add_middleware(
        BodyReadTimeoutMiddleware,
        idle_s=settings.body_idle_timeout_s,
        min_rate=settings.body_min_rate,
    )
    # Outside every response of a rate-limited route (its 429, a 408, a 504).
    app.add_middleware(RateLimitHeadersMiddleware)
    # Deadlines count from here: before the body is read.
    app.add_middleware(ArrivalClockMiddleware)
    # Before the body is read: a foreign page's request costs nothing.
    app.add_middleware(
        HostGuardMiddleware,
        keys_active=app.state.authenticator.keys_active,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=[*settings.allowed_origins, *settings.cors_origins],
    )
    # First of the guards: every one after it sees each decisive header once.
    app.add_middleware(HeaderHygieneMiddleware)
    app.add_middleware(WatermarkHeaderMiddleware, marked=settings.watermark)
    app.add_middleware(RequestContextMiddleware, metrics=metrics)
    return app
