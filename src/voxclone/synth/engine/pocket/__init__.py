"""Pocket TTS (Kyutai): a reference-prompted neural cloner, weights supplied by the operator.

Code MIT, weights CC-BY-4.0. The package ``pocket-tts`` is an optional extra
(``pip install 'voxclone[pocket]'``); weights and tokenizer enter only through
``voxclone models import pocket-tts`` (see :mod:`.bundle`), never from a hub.
``create`` is the factory the engine registry calls, ``model_manager`` what
``voxclone models`` asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxclone.synth.engine.pocket.loading import ENGINE

if TYPE_CHECKING:  # pragma: no cover
    from voxclone.synth.engine.base import EngineConfig
    from voxclone.synth.engine.pocket.engine import PocketEngine
    from voxclone.synth.engine.pocket.models import PocketModels


def create(config: EngineConfig) -> PocketEngine:
    from voxclone.synth.engine.pocket.engine import create_engine

    return create_engine(config.models_dir, config.options)


def model_manager() -> PocketModels:
    """``voxclone models`` for this engine (registry.model_manager)."""
    from voxclone.synth.engine.pocket.models import PocketModels

    return PocketModels()


__all__ = ["ENGINE", "create", "model_manager"]
