"""What a render reports: where a stream's first audio time went, and its totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from voxclone.runtime.scheduler import WorkTiming


@dataclass
class FirstAudioStages:
    """Where a stream's time to first audio went, in seconds (issue #20):
    ``plan`` (text to the first chunk handed to the scheduler: validation of
    the chunk, G2P), ``queue`` (waiting for a worker), ``engine`` (the model
    call; for a frame engine, until its first piece), ``post`` (tone,
    controls, joining), ``encode`` (the output format's first bytes). What a
    client sees on top is the transport (HTTP, the socket)."""

    plan: float = 0.0
    queue: float = 0.0
    engine: float = 0.0
    post: float = 0.0
    encode: float = 0.0

    STAGES: ClassVar[tuple[str, ...]] = ("plan", "queue", "engine", "post", "encode")

    def as_dict(self) -> dict[str, float]:
        return {stage: getattr(self, stage) for stage in self.STAGES}

    @classmethod
    def of(cls, started: float, timing: WorkTiming, now: float) -> FirstAudioStages:
        """Stages up to ``now`` (the first audio leaving the pipeline) of a
        render that began at ``started`` and whose first chunk is ``timing``."""
        engine_start = timing.started if timing.started is not None else timing.submitted
        # A head piece leaves while its call still runs: the call's end may
        # come after the first audio (or not be known yet).
        engine_end = min(timing.finished, now) if timing.finished is not None else now
        return cls(
            plan=max(0.0, timing.submitted - started),
            queue=max(0.0, engine_start - timing.submitted),
            engine=max(0.0, engine_end - engine_start),
            post=max(0.0, now - engine_end),
        )


@dataclass
class RenderStats:
    """Filled in while a request renders; read by metrics and benchmarks."""

    audio_seconds: float = 0.0
    compute_seconds: float = 0.0
    first_audio_s: float | None = None
    chunks: int = 0
    first_audio_stages: FirstAudioStages | None = None
