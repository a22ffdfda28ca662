"""SpeechRouter: one speech surface over every loaded engine.

Each loaded engine has its own :class:`SpeechService` (frontend, scheduler,
capabilities). A request picks one by ``model``:

* an engine's registry name (``kokoro``) or its model id
  (``kokoro-82m-v1.0-int8``) → that engine;
* an OpenAI model name (:data:`OPENAI_ALIASES`: ``tts-1`` …) → the default
  engine, so unmodified OpenAI clients keep working;
* no model → the engine the voice belongs to (a cloned voice records it;
  a built-in name is looked up in the default engine first);
* anything else → 400 listing the names this server answers to.

The router has the same surface as a SpeechService (synthesize, stream,
render_audio, text_size …: each is the service's own method, called on the
service :meth:`SpeechRouter.route` picks), so callers need not know how many
engines run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

from voxclone.errors import NotFound, UnknownModel
from voxclone.lru import Lru
from voxclone.runtime.admission import AdmissionTerms
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog
from voxclone.service.speech.pricing import released_at_end, released_on_failure, speech_request_key
from voxclone.service.speech.request import (
    Resolution,
    ResolvedRequest,
    Speakable,
    SpeechRequest,
)
from voxclone.service.speech.service import SpeechService
from voxclone.synth.engine.base import EngineCapabilities

log = logging.getLogger(__name__)
# Requests remembered as having passed the event-loop precheck (their
# identical followers skip it); a few thousand keys of ~64 bytes.
_SEEN_REQUESTS = 4096

# OpenAI's model names, kept for its clients: they speak with the default engine.
OPENAI_ALIASES: tuple[str, ...] = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "voxclone")

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class ModelInfo:
    """One name a request's ``model`` may use."""

    id: str
    engine: str
    capabilities: EngineCapabilities
    alias: bool  # an OpenAI name standing for the default engine
    default: bool  # speaks when a request names no model


def _on_its_engine(
    method: Callable[Concatenate[SpeechService, Speakable, P], R],
) -> Callable[Concatenate[SpeechRouter, Speakable, P], R]:
    """``method`` of the SpeechService whose engine speaks the request
    (:meth:`SpeechRouter.route`), given the request resolved: the router's one
    way of offering the service's surface, typed as ``method`` is."""

    def on_its_engine(
        router: SpeechRouter, req: Speakable, /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        service, routed = router.route(req)
        return method(service, routed, *args, **kwargs)

    on_its_engine.__name__ = method.__name__
    on_its_engine.__qualname__ = f"SpeechRouter.{method.__name__}"
    on_its_engine.__doc__ = method.__doc__
    return on_its_engine


class SpeechRouter:
    def __init__(
        self,
        services: Mapping[str, SpeechService],
        catalog: VoiceCatalog,
        *,
        aliases: tuple[str, ...] = OPENAI_ALIASES,
        default_voices: Mapping[str, str] | None = None,
        language_defaults: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        if not services:
            raise ValueError("a speech router needs at least one engine")
        self._services = dict(services)
        self._catalog = catalog
        self._aliases = aliases
        self._default_voices = dict(default_voices or {})
        # Per engine, language -> voice for requests that name none (the
        # catalog's measured defaults); else the engine's default voice.
        self._language_defaults = {e: dict(m) for e, m in (language_defaults or {}).items()}
        self._seen: Lru[str, bool] = Lru(_SEEN_REQUESTS)
        self._seen_lock = threading.Lock()

    # -- models ---------------------------------------------------------------
    @property
    def default_engine(self) -> str:
        return next(iter(self._services))

    @property
    def services(self) -> dict[str, SpeechService]:
        return dict(self._services)

    def models(self) -> list[ModelInfo]:
        """Engine names first (the default one first), then model ids, then aliases."""
        default = self.default_engine
        out: list[ModelInfo] = []
        for name, service in self._services.items():
            out.append(ModelInfo(name, name, service.capabilities, False, name == default))
        for name, service in self._services.items():
            model_id = service.capabilities.model_id
            if model_id not in self._services:
                out.append(ModelInfo(model_id, name, service.capabilities, False, False))
        caps = self._services[default].capabilities
        out.extend(ModelInfo(alias, default, caps, True, False) for alias in self._aliases)
        return out

    @property
    def model_names(self) -> list[str]:
        return [m.id for m in self.models()]

    def model(self, name: str) -> ModelInfo:
        for info in self.models():
            if info.id == name:
                return info
        raise NotFound(f"model '{name[:64]}' not found", field="model", limit=self.model_names)

    def engine_for(self, model: str | None) -> str | None:
        """The engine ``model`` names (None when no model is given)."""
        if model is None:
            return None
        if model in self._services:
            return model
        for name, service in self._services.items():
            if service.capabilities.model_id == model:
                return name
        if model in self._aliases:
            return self.default_engine
        names = self.model_names
        raise UnknownModel(
            f"unknown model '{model[:40]}'; use one of {', '.join(names)}",
            field="model",
            limit=names,
        )

    def request(self, req: Speakable, *, voice: ResolvedVoice | None = None) -> ResolvedRequest:
        """``req`` as it travels from the edge (service/speech/request.py): the
        engine its model names is picked here, at once (400 for an unknown
        model), with no I/O; its voice, the engine that speaks it, its
        language, SSML voices and lexicon are resolved once, by :meth:`resolve`
        in the worker thread that routes it. A request already built here is
        returned as it is.

        ``voice``: what ``req.voice`` names for its model's engine, when the
        caller had to look it up already (the OpenAI route, mapping OpenAI's
        voice names): it is kept on the request and used as it is, not looked
        up a second time."""
        if isinstance(req, ResolvedRequest):
            return req
        if voice is not None and (req.voice is None or req.voice_override is not None):
            raise ValueError("a looked-up voice stands for the voice the request names")
        return ResolvedRequest(req, model_engine=self.engine_for(req.model), looked_up=voice)

    def resolve(self, req: Speakable) -> ResolvedRequest:
        """``req`` resolved and checked (4xx when it is wrong), once: the first
        caller resolves it under the request's lock (:meth:`_resolution`) and
        stores the :class:`Resolution` on it; later ones, and threads that
        waited meanwhile, get it as it is. Reads the database: call it from a
        worker thread."""
        r = self.request(req)
        if r.resolution is None:
            with r.lock:
                if r.resolution is None:
                    r.resolution = self._resolution(r)
        return r

    def _resolution(self, r: ResolvedRequest) -> Resolution:
        """Pick the engine and voice of ``r`` (its model's engine, else its
        voice's, else the default; no voice: its language's default), then let
        that engine's resolver check and resolve the rest
        (:meth:`RequestResolver.resolve`). The voice the caller looked up
        (:meth:`request`) is used as it is."""
        req, engine = r.request, r.model_engine
        voice = None
        if req.voice_override is not None:
            chosen = engine or req.voice_override.engine or self.default_engine
        elif req.voice is None:
            chosen = engine or self.default_engine
            name = self.default_voice(chosen, req)
            if name is not None:
                voice = self._catalog.resolve(name, req.owner, chosen)
        else:
            voice = (
                r.looked_up
                if r.looked_up is not None
                else self._catalog.resolve(req.voice, req.owner, engine)
            )
            chosen = engine or voice.engine or self.default_engine
        return self._service(chosen).resolver.resolve(r, voice)

    def route(self, req: Speakable) -> tuple[SpeechService, ResolvedRequest]:
        """The service that speaks ``req`` (the engine its resolution picked)
        and the request, resolved (:meth:`resolve`)."""
        r = self.resolve(req)
        return self._service(r.engine), r

    def language_defaults(self, engine: str | None = None) -> dict[str, str]:
        """Language -> the voice a request in it that names none speaks with."""
        return dict(self._language_defaults.get(engine or self.default_engine, {}))

    def default_voice(self, engine: str, req: SpeechRequest | None = None) -> str | None:
        """The voice ``req`` speaks with when it names none: the default of its
        language (given, else detected) where the engine has one, else the
        engine's default voice."""
        by_language = self._language_defaults.get(engine)
        if by_language and req is not None:
            name = by_language.get(self._service(engine).language_of(req))
            if name is not None:
                return name
        return self._default_voices.get(engine)

    def _service(self, engine: str) -> SpeechService:
        service = self._services.get(engine)
        if service is None:
            raise UnknownModel(
                f"the {engine} engine is not loaded on this server",
                field="model",
                limit=self.model_names,
            )
        return service

    # -- the SpeechService surface -----------------------------------------------
    @property
    def catalog(self) -> VoiceCatalog:
        return self._catalog

    @property
    def sample_rate(self) -> int:
        """The default engine's rate (each service knows its own)."""
        return self._services[self.default_engine].sample_rate

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages any loaded engine speaks."""
        return tuple(dict.fromkeys(lang for s in self._services.values() for lang in s.languages))

    # What a SpeechService does, done by the service of the engine that speaks
    # the request (route()), with the request resolved once: each has that
    # method's own signature (see SpeechService) for callers and for mypy.
    synthesize = _on_its_engine(SpeechService.synthesize)
    stream = _on_its_engine(SpeechService.stream)
    synthesize_captioned = _on_its_engine(SpeechService.synthesize_captioned)
    stream_captioned = _on_its_engine(SpeechService.stream_captioned)
    # Reserves engine time on that engine; validates and prices the request,
    # so call it from a worker thread.
    admit = _on_its_engine(SpeechService.admit)
    admit_background = _on_its_engine(SpeechService.admit_background)  # a speech job's
    estimate = _on_its_engine(SpeechService.estimate)  # a speech job's price, when queued
    synthesize_into = _on_its_engine(SpeechService.synthesize_into)  # a speech job's render
    plan = _on_its_engine(SpeechService.plan)
    render_audio = _on_its_engine(SpeechService.render_audio)
    text_size = _on_its_engine(SpeechService.text_size)

    def precheck(
        self,
        req: Speakable,
        terms: AdmissionTerms,
        *,
        stream: bool,
        request_key: str | None = None,
    ) -> AdmissionTerms:
        """Refuse a flood in microseconds, on the event loop, before any thread
        validates: raise Overloaded (503) when even half of the request's raw
        text, as a lower bound of what it will cost, could not be served by
        its deadline with the work already admitted; else reserve that lower
        bound (the returned terms' ``provisional``: release it if the request
        fails before the service took over). A request identical to
        one that passed lately (``request_key``, default: the request's own
        fields, :func:`request_key`) is never refused here: it may share that render or hit the
        cache, which the service checks before it admits. No voice lookup: a
        stored voice of another engine named without ``model`` is checked on
        the default engine. Measured: 40 clients at once on 2 cores got their
        503s after a median 0.37 s when every refusal went through a thread
        (validation, lexicon read, pricing) behind the renders."""
        r = self.request(req)
        if terms.deadline is None or not isinstance(r.request.text, str):
            return terms
        if request_key is None:
            request_key = speech_request_key(r.request, stream=stream)
        with self._seen_lock:
            if self._seen.get(request_key):
                return terms
        service = self._service(r.model_engine or self.default_engine)
        checked = service.pricer.precheck(r.request, terms, stream=stream)
        with self._seen_lock:
            self._seen.put(request_key, True)
        return checked

    @contextmanager
    def admission(
        self,
        req: Speakable,
        terms: AdmissionTerms,
        *,
        stream: bool,
        request_key: str | None = None,
    ) -> Iterator[AdmissionTerms]:
        """The admit → run → release of a transport on the event loop: refuse
        a flood at once (:meth:`precheck`), then hold the checked terms while
        the block hands them to :meth:`synthesize`, :meth:`stream` or the
        captions, which take them over once the request needs a render of its
        own. A whole file's terms are freed when the block ends; a stream's
        if the block fails (its render frees what it took over)."""
        checked = self.precheck(req, terms, stream=stream, request_key=request_key)
        with (released_on_failure if stream else released_at_end)(checked):
            yield checked

    def ssml_warnings(self, req: Speakable) -> tuple[str, ...]:
        """What ``req``'s markup ignores (its document, parsed once; no voice
        lookup); raises InvalidSsml (400) when the markup is malformed."""
        return self.request(req).warnings

    def calibrate(self) -> None:
        """Measure every engine's rate once (:meth:`SpeechService.calibrate`);
        a failure is logged, never fatal: admission then keeps its prior.
        Serving processes call it once after start-up
        (:func:`calibrate_in_background`)."""
        for name, service in self._services.items():
            try:
                seconds = service.calibrate()
            except Exception as exc:  # admission keeps its prior: not fatal
                log.warning("measuring the %s engine's rate failed: %s", name, exc)
                continue
            log.info("%s engine rate measured in %.2f s", name, seconds)

    def calibrate_in_background(self) -> None:
        """:meth:`calibrate` in a daemon thread, at background priority on the
        engines: speech is served meanwhile. Until it has run, admission
        assumes a fast machine and refuses only what even that could not do."""
        threading.Thread(target=self.calibrate, name="voxclone-calibrate", daemon=True).start()

    def listener_gone(self, listener: str) -> None:
        """A voice agent's socket has closed: every engine forgets that its
        listener is between clauses."""
        for service in self._services.values():
            service.listener_gone(listener)

    def invalidate_voice(self, voice_id: str) -> None:
        self.purge_voice_audio(voice_id)

    def purge_voice_audio(self, voice_id: str) -> int:
        """Forget the voice and drop its cached audio; how many entries went
        (a deletion receipt's count, bootstrap.py ``build_purger``)."""
        self._catalog.forget(voice_id)
        return sum(service.purge_voice_audio(voice_id) for service in self._services.values())
