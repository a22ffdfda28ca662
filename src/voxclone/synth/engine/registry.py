"""Engine registry: name → factory, imported only when that engine is asked for.

A second engine is one subpackage exposing ``create(config: EngineConfig)
-> Engine`` plus one line in ``_BUILTIN`` (docs/architecture.md, "Extension
points"). An engine in another distribution needs no line here: it declares
an entry point in the ``voxclone.engines`` group (``name = "module:create"``)
and is found when asked for. Importing this module imports no engine: an
operator who never enables an engine never pays for (or needs) its
dependencies (entry points are read from metadata, their modules imported
only when that engine is created).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING, cast

from voxclone.errors import InvalidInput, ModelAssetError
from voxclone.synth.engine.base import Engine, EngineConfig

if TYPE_CHECKING:  # pragma: no cover
    from voxclone.synth.engine.models import ModelManager

EngineFactory = Callable[[EngineConfig], Engine]

DEFAULT_ENGINE = "kokoro"

# name -> "module:function". One line per engine.
_BUILTIN: dict[str, str] = {
    "kokoro": "voxclone.synth.engine.kokoro:create",
    "pocket-tts": "voxclone.synth.engine.pocket:create",
}

# Entry-point group a third-party distribution declares its engines in.
ENTRY_POINT_GROUP = "voxclone.engines"

_lock = threading.Lock()
_extra: dict[str, EngineFactory] = {}


def register(name: str, factory: EngineFactory) -> None:
    """Add (or replace) an engine at run time: plug-ins outside this package, tests."""
    with _lock:
        _extra[name] = factory


def unregister(name: str) -> None:
    with _lock:
        _extra.pop(name, None)


def _plugins() -> dict[str, str]:
    """name -> "module:function" of every installed ``voxclone.engines`` entry point.

    Read from installed metadata at each call (cheap: a few directory listings,
    done when runtimes are built, not per request), so a plug-in installed
    into the environment is seen without restarting an interpreter that only
    imported this module. A built-in name wins over a plug-in of that name.
    """
    return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def names() -> tuple[str, ...]:
    """Every engine that can be asked for (not necessarily installed)."""
    with _lock:
        extra = list(_extra)
    return tuple(dict.fromkeys([*_BUILTIN, *_plugins(), *extra]))


def factory(name: str) -> EngineFactory:
    with _lock:
        extra = _extra.get(name)
    if extra is not None:
        return extra
    target = _BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise InvalidInput(
            f"unknown engine {name[:32]!r}; known engines: {', '.join(names())}",
            field="engine",
            limit=list(names()),
        )
    module_name, _, function = target.partition(":")
    module = _import(name, module_name)
    made = getattr(module, function, None)
    if not callable(made):
        raise ModelAssetError(f"engine {name!r} is broken: {target} is not a function")
    return cast(EngineFactory, made)


def _import(name: str, module_name: str) -> ModuleType:
    """``name``'s package; ModelAssetError naming the engine when it is missing
    or raises at import (a broken plug-in is reported, never a bare traceback)."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelAssetError(
            f"engine {name!r} is not installed (its package could not be imported: {exc})"
        ) from exc
    except Exception as exc:  # the plug-in's own code raised while importing
        raise ModelAssetError(
            f"engine {name!r} is broken: importing {module_name} raised {type(exc).__name__}: {exc}"
        ) from exc


def create(name: str, config: EngineConfig) -> Engine:
    """A new, not yet loaded engine (call ``load()`` and ``warmup()``)."""
    return factory(name)(config)


def model_manager(name: str) -> ModelManager | None:
    """How ``voxclone models`` lists and installs ``name``'s weights: the
    ``model_manager()`` its package exposes beside its factory (the module its
    registry line or entry point names), None when it has none, is not
    installed, or was added with :func:`register`.

    Raises ModelAssetError for a broken engine: an installed plug-in (its
    entry point is there) whose package raises at import, or a hook that
    raises; the caller lists it as broken instead of crashing.
    """
    with _lock:
        if name in _extra:
            return None
    builtin = _BUILTIN.get(name)
    target = builtin or _plugins().get(name)
    if target is None:
        return None
    try:
        module = _import(name, target.partition(":")[0])
    except ModelAssetError as exc:
        if builtin is not None and isinstance(exc.__cause__, ImportError):
            return None  # a built-in engine whose optional packages are missing
        raise
    hook = getattr(module, "model_manager", None)
    if not callable(hook):
        return None
    try:
        manager: ModelManager = hook()
    except Exception as exc:
        raise ModelAssetError(
            f"engine {name!r} is broken: its model_manager() raised {type(exc).__name__}: {exc}"
        ) from exc
    return manager
