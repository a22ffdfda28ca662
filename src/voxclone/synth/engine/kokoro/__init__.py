"""Kokoro-82M (int8 ONNX): the embedded, fully offline default engine.

``create`` is the factory the registry calls (``model_manager`` what
``voxclone models`` asks for); nothing outside
``synth/engine/`` names the classes in this package.

Options (``Settings.engine_options["kokoro"]``):
  * ``optimized_cache``: "true" (default) or "false": save ONNX Runtime's
    optimized graph under models_dir and load it on later starts;
  * ``edge_silence_frames``: frames (25 ms each) of a chunk's edge silence
    the decoder renders, default 4; "off" renders all of it, as exported;
  * ``head_piece``: "false" (default) or "true": on the all-cores lane, a
    stream's first chunk leaves in two pieces, its head first (head_piece.py):
    first audio ~30 % sooner, at a cost in words (docs/studies.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxclone.synth.engine.base import EngineConfig
from voxclone.synth.engine.kokoro.edge_silence import DEFAULT_KEEP_FRAMES
from voxclone.synth.engine.kokoro.engine import KokoroEngine

if TYPE_CHECKING:  # pragma: no cover
    from voxclone.synth.engine.kokoro.models import KokoroModels

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def create(config: EngineConfig) -> KokoroEngine:
    optimized = config.options.get("optimized_cache", "true").strip().lower()
    head = config.options.get("head_piece", "false").strip().lower()
    if head not in _ON + _OFF:
        raise ValueError(f"engine option kokoro.head_piece must be true or false, not {head!r}")
    return KokoroEngine(
        config.models_dir,
        intra_op_threads=config.threads,
        providers=list(config.providers) or None,
        fast_lane_threads=config.fast_lane_threads,
        optimized_cache=optimized not in _OFF,
        edge_frames=edge_frames(config.options.get("edge_silence_frames")),
        first_chunk_pieces=head in _ON,
    )


def edge_frames(option: str | None) -> int | None:
    """The ``edge_silence_frames`` option: None keeps the export's edges."""
    if option is None:
        return DEFAULT_KEEP_FRAMES
    value = option.strip().lower()
    if value in _OFF:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"engine option kokoro.edge_silence_frames must be a whole number >= 1 or 'off', "
            f"not {option!r}"
        )
    return int(value)


def model_manager() -> KokoroModels:
    """``voxclone models`` for this engine (registry.model_manager)."""
    from voxclone.synth.engine.kokoro.models import KokoroModels

    return KokoroModels()


__all__ = ["KokoroEngine", "create", "edge_frames", "model_manager"]
