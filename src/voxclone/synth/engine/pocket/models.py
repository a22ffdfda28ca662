"""Pocket TTS's side of ``voxclone models``: operator-supplied bundles.

``import`` installs a verified bundle (a directory, an archive, or the hub's
files plus ``--config``, made into a bundle here); ``pull`` fetches one from
the hub on a connected host. Both check the files' hashes and the engine's
own structure (:func:`.loading.check_bundle`) before anything is installed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from voxclone.synth.engine.models import InstalledModel, ModelInfo
from voxclone.synth.engine.pocket.bundle import (
    MANIFEST,
    InstalledBundle,
    install_bundle,
    installed_bundles,
)
from voxclone.synth.engine.pocket.hub import bundle_from_files, pull
from voxclone.synth.engine.pocket.loading import ENGINE, check_bundle

_TMP_PREFIX = "voxclone-models-"


class PocketModels:
    """The :class:`~voxclone.synth.engine.models.ModelManager` of Pocket TTS."""

    engine = ENGINE
    imports = True

    def installed(self, models_dir: Path) -> list[ModelInfo]:
        found = []
        for bundle in installed_bundles(models_dir, ENGINE):
            m = bundle.manifest
            licence = ", ".join(f"{part} {name}" for part, name in sorted(m.license.items()))
            found.append(
                ModelInfo(
                    engine=ENGINE,
                    name=m.name,
                    version=m.version,
                    size_bytes=m.size,
                    license=licence or "unknown",
                    languages=m.languages,
                    source="imported",
                    imported_at=bundle.imported_at,
                )
            )
        return found

    def import_model(
        self, source: Path, models_dir: Path, *, config: str | None = None
    ) -> InstalledModel:
        with tempfile.TemporaryDirectory(prefix=_TMP_PREFIX) as tmp:
            # The hub's loose files (no manifest) become a bundle first.
            if source.is_dir() and not (source / MANIFEST).exists() and config:
                built = Path(tmp) / "bundle"
                bundle_from_files(source, config, built)
                source = built
            return _install(source, models_dir)

    def pull(self, config: str, models_dir: Path, *, timeout: float) -> InstalledModel:
        with tempfile.TemporaryDirectory(prefix=_TMP_PREFIX) as tmp:
            source = Path(tmp) / "bundle"
            pull(config, source, timeout=timeout)
            return _install(source, models_dir)


def _install(source: Path, models_dir: Path) -> InstalledModel:
    models_dir.mkdir(parents=True, exist_ok=True)
    return _described(install_bundle(source, models_dir, engine=ENGINE, check=check_bundle))


def _described(bundle: InstalledBundle) -> InstalledModel:
    m = bundle.manifest
    return InstalledModel(
        engine=ENGINE,
        name=m.name,
        size_bytes=m.size,
        files=len(m.files),
        languages=m.languages,
        license=dict(m.license),
    )
