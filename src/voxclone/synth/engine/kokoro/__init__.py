"""Kokoro-82M (int8 ONNX): the embedded, fully offline default engine.

``create`` is the factory the registry calls; nothing outside
``synth/engine/`` names the classes in this package.
"""

from __future__ import annotations

from voxclone.synth.engine.base import EngineConfig
from voxclone.synth.engine.kokoro.engine import KokoroEngine


def create(config: EngineConfig) -> KokoroEngine:
    optimized = config.options.get("optimized_cache", "true").strip().lower()
    return KokoroEngine(
        config.models_dir,
        intra_op_threads=config.threads,
        providers=list(config.providers) or None,
        fast_lane_threads=config.fast_lane_threads,
        optimized_cache=optimized not in ("0", "false", "no", "off"),
    )


__all__ = ["KokoroEngine", "create"]
