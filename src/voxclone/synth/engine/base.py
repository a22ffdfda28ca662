"""The engine contract: phoneme ids + style vector + speed in, float audio out.

Everything above the engine (text frontend, cloning, scheduling, encoding) is
engine-agnostic; a stronger model supplied by an operator only has to
implement this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class EngineCapabilities:
    model_id: str
    model_version: str
    sample_rate: int
    max_tokens: int  # phoneme ids per call, excluding the boundary tokens
    style_shape: tuple[int, ...]
    native_batching: bool  # can one call synthesize several items
    languages: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    # The engine can run one call on all cores (``synthesize(..., exclusive=True)``);
    # the scheduler uses it for a stream's first chunk when nothing else runs.
    fast_lane: bool = False


@dataclass(frozen=True)
class SynthItem:
    """One model call's worth of input."""

    token_ids: tuple[int, ...]
    style: np.ndarray = field(repr=False)  # [rows, 1, dims] pack or a single [dims] vector
    speed: float = 1.0


@runtime_checkable
class Engine(Protocol):
    @property
    def capabilities(self) -> EngineCapabilities: ...

    @property
    def ready(self) -> bool: ...

    def load(self) -> None: ...

    def warmup(self) -> None: ...

    def synthesize(self, batch: list[SynthItem]) -> list[np.ndarray]:
        """Return one mono float32 waveform per item, in order.

        Engines whose capabilities say ``fast_lane`` also accept
        ``exclusive=True``: the caller guarantees no other call runs meanwhile.
        """
        ...
