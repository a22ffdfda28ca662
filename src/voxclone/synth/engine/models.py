"""What models this host has: the packaged Kokoro and operator-imported bundles.

``voxclone models list`` prints this; nothing here loads a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Engines whose weights the operator imports as bundles (models/<engine>/<name>/).
BUNDLE_ENGINES = ("pocket-tts",)


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


def kokoro_info(models_dir: Path) -> ModelInfo:
    from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, expected_sha256
    from voxclone.synth.text.g2p import ESPEAK_VOICES

    path = models_dir / MODEL_FILENAME
    return ModelInfo(
        engine="kokoro",
        name="kokoro-82m-v1.0-int8",
        version=expected_sha256()[:12],
        size_bytes=path.stat().st_size if path.is_file() else None,
        license="Apache-2.0 (weights, voice packs); MIT (ONNX export)",
        languages=(*ESPEAK_VOICES, "ja", "zh"),
        source="packages",
    )


def installed_models(models_dir: Path) -> list[ModelInfo]:
    from voxclone.synth.engine.pocket.bundle import installed_bundles

    found = [kokoro_info(models_dir)]
    for engine in BUNDLE_ENGINES:
        for bundle in installed_bundles(models_dir, engine):
            m = bundle.manifest
            licence = ", ".join(f"{part} {name}" for part, name in sorted(m.license.items()))
            found.append(
                ModelInfo(
                    engine=engine,
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
