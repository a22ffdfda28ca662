"""What models this host has and how they are installed: ``voxclone models``.

Each engine manages its own weights. Its package (the module its registry
entry names) may expose ``model_manager() -> ModelManager``: what it has
installed (``list``) and, for an engine whose weights the operator supplies,
how a verified copy is installed (``import``, ``pull``).
:func:`voxclone.synth.engine.registry.model_manager` finds it; the CLI asks
for it by engine name and names no engine itself. Nothing here loads a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ModelInfo:
    engine: str
    name: str
    version: str
    size_bytes: int | None  # None: not on disk yet (assembled at first start)
    license: str
    languages: tuple[str, ...]
    source: str  # "packages" or "imported"
    imported_at: float | None = None


@dataclass(frozen=True)
class InstalledModel:
    """What an import or a pull installed (every file's hash checked)."""

    engine: str
    name: str
    size_bytes: int
    files: int
    languages: tuple[str, ...]
    license: Mapping[str, str]  # part ("code", "weights") -> licence


class ModelManager(Protocol):
    """One engine's ``voxclone models`` operations."""

    @property
    def engine(self) -> str:
        """The engine's registry name."""
        ...

    @property
    def imports(self) -> bool:
        """Whether the operator installs this engine's weights (``import``,
        ``pull``); False: they come with its packages."""
        ...

    def installed(self, models_dir: Path) -> list[ModelInfo]:
        """The engine's models on this host (reads manifests, hashes nothing)."""
        ...

    def import_model(
        self, source: Path, models_dir: Path, *, config: str | None = None
    ) -> InstalledModel:
        """Verify ``source`` (a bundle directory, an archive, or files the
        engine can make one from, named by ``config``) and install it under
        ``models_dir``; nothing is written unless all of it checks out."""
        ...

    def pull(self, config: str, models_dir: Path, *, timeout: float) -> InstalledModel:
        """Download ``config`` from the engine's hub and install it as
        :meth:`import_model` does (needs internet; fails at once offline)."""
        ...


@dataclass(frozen=True)
class BrokenEngine:
    """An engine whose package or model manager raised: listed, not fatal."""

    engine: str
    error: str


@dataclass(frozen=True)
class ModelListing:
    models: list[ModelInfo]
    broken: list[BrokenEngine]


def _managers() -> tuple[list[ModelManager], list[BrokenEngine]]:
    from voxclone.errors import ModelAssetError
    from voxclone.synth.engine import registry

    found: list[ModelManager] = []
    broken: list[BrokenEngine] = []
    for name in registry.names():
        try:
            manager = registry.model_manager(name)
        except ModelAssetError as exc:  # one broken plug-in must not hide the others
            broken.append(BrokenEngine(name, exc.message))
            continue
        if manager is not None:
            found.append(manager)
    return found, broken


def managers() -> list[ModelManager]:
    """The model managers of every engine that can be asked for, in the
    registry's order (the default engine first); broken engines left out."""
    return _managers()[0]


def model_listing(models_dir: Path) -> ModelListing:
    """Every engine's installed models, and the engines that could not say
    (their package or manager raised): ``voxclone models list``."""
    found, broken = _managers()
    models: list[ModelInfo] = []
    for manager in found:
        try:
            models.extend(manager.installed(models_dir))
        except Exception as exc:  # a plug-in's listing code: reported, not fatal
            broken.append(BrokenEngine(manager.engine, f"{type(exc).__name__}: {exc}"))
    return ModelListing(models, broken)


def installed_models(models_dir: Path) -> list[ModelInfo]:
    return model_listing(models_dir).models
