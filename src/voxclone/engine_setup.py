"""The engines part of the composition root: settings → loaded engines.

Kept apart from ``bootstrap.py`` (which builds on it) because importing
bootstrap imports every layer, SQLAlchemy included, ~0.8 s of a one-shot
``voxclone say`` on 2 cores; this module needs only the engine registry. So
``EngineLoad`` can start loading the engines in a thread before the rest is
imported: ONNX Runtime builds its session without holding the GIL, and the
imports and the session overlap (0.82-1.07 s one after the other, 0.51 s
together, measured 2026-12-03 on 2 cores with the Kokoro graph and SQLAlchemy).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from voxclone.config import Settings
from voxclone.errors import VoxcloneError
from voxclone.runtime.private_home import secure_home
from voxclone.runtime.startup import StartupStages
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import Engine, EngineConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineFailure:
    """Why an engine ``VOXCLONE_ENGINES`` names did not load (so the others serve)."""

    error: str  # the exception's class: all /readyz shows (never paths from a message)
    message: str  # the whole message: the log and `voxclone models list` show it

    @classmethod
    def of(cls, exc: BaseException) -> EngineFailure:
        message = exc.message if isinstance(exc, VoxcloneError) else str(exc)
        return cls(type(exc).__name__, message or type(exc).__name__)


def engine_config(settings: Settings, name: str) -> EngineConfig:
    return EngineConfig(
        settings.models_dir,
        threads=settings.onnx_threads,
        providers=tuple(settings.onnx_providers),
        fast_lane_threads=settings.fast_lane_threads,
        options=dict(settings.engine_options.get(name, {})),
    )


def build_engines(
    settings: Settings,
    *,
    load: bool = True,
    warmup: bool = True,
    stages: StartupStages | None = None,
    failed: dict[str, EngineFailure] | None = None,
) -> dict[str, Engine]:
    """The engines ``VOXCLONE_ENGINES`` names, in order (loaded and warmed when asked).

    An engine that fails (a plug-in that raises at import, weights missing)
    is logged, put in ``failed`` and left out: the others serve, rather than
    one broken plug-in keeping the whole server at 503. Only when none of
    them loads does this raise (the first engine's error).
    """
    # umask 077, home 0700, databases 0600: a voice library is biometric data.
    secure_home(settings.home)
    stages = stages if stages is not None else StartupStages()
    engines: dict[str, Engine] = {}
    first_error: Exception | None = None
    for name in settings.engine_names:
        try:
            engines[name] = _build_engine(settings, name, load=load, warmup=warmup, stages=stages)
        except Exception as exc:
            first_error = first_error or exc
            failure = EngineFailure.of(exc)
            if failed is not None:
                failed[name] = failure
            log.error(
                "engine %r failed to load; serving without it: %s: %s",
                name,
                failure.error,
                failure.message,
                exc_info=not isinstance(exc, VoxcloneError),
            )
    if not engines and first_error is not None:
        raise first_error
    return engines


def warm_engines(
    engines: dict[str, Engine], stages: StartupStages, failed: dict[str, EngineFailure]
) -> dict[str, Engine]:
    """Warm loaded engines; one whose warm-up raises is left out as a failed
    load is (see :func:`build_engines`), unless none would be left."""
    warm: dict[str, Engine] = {}
    first_error: Exception | None = None
    for name, engine in engines.items():
        try:
            with stages.stage(f"{name}_warmup"):
                engine.warmup()
        except Exception as exc:
            first_error = first_error or exc
            failed[name] = EngineFailure.of(exc)
            log.error("engine %r failed to warm up; serving without it", name, exc_info=True)
            continue
        warm[name] = engine
    if not warm and first_error is not None:
        raise first_error
    return warm


def _build_engine(
    settings: Settings, name: str, *, load: bool, warmup: bool, stages: StartupStages
) -> Engine:
    engine = registry.create(name, engine_config(settings, name))
    if load:
        with stages.stage(f"{name}_load"):
            engine.load()
        if warmup:
            with stages.stage(f"{name}_warmup"):
                engine.warmup()
    return engine


class EngineLoad:
    """``build_engines`` (load, no warm-up: ``build_runtime`` warms if asked)
    running in a thread from construction; ``result()`` waits for it and
    returns the engines (or raises what the load raised)."""

    def __init__(self, settings: Settings) -> None:
        self.stages = StartupStages()
        self.failed: dict[str, EngineFailure] = {}  # filled by the load
        self._settings = settings
        self._engines: dict[str, Engine] | None = None
        self._error: BaseException | None = None
        # Not a daemon: a process that exits early (bad input) waits for the
        # load rather than tearing down the interpreter under ONNX Runtime.
        self._thread = threading.Thread(target=self._run, name="engine-load")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._engines = build_engines(
                self._settings, warmup=False, stages=self.stages, failed=self.failed
            )
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> dict[str, Engine]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._engines is not None
        return self._engines
