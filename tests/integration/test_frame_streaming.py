"""A frame-streaming engine's audio goes out as the model makes it, through the
scheduler, joiner and encoder, and a client that leaves stops it at the next frame.

The engine is a tiny real implementation of the Engine protocol that streams
80 ms frames (as Pocket TTS does) with a pause between them, so the test can
see whether audio left before the engine finished a sentence. As "heads" it is
a chunk engine whose all-cores lane yields the chunk in parts (Kokoro's
``head_piece``): only a stream's first chunks may go out that way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from char_tokenizer import CharTokenizer

from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.controls import SpeechControls
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import (
    EngineBase,
    EngineCapabilities,
    EngineConfig,
    EngineVoice,
    SynthItem,
    Tokenizer,
)

RATE = 24_000
FRAME = RATE * 80 // 1000
FRAMES_PER_TOKEN = 1
FRAME_SECONDS = 0.03  # compute time per frame
TEXT = "The quick brown fox jumps over the lazy dog."


@dataclass(frozen=True)
class _Prompt:
    f0_hz: float


class FrameEngine(EngineBase):
    """One 80 ms frame of tone per token, made ``FRAME_SECONDS`` apart."""

    def __init__(self, name: str = "frames") -> None:
        self.name = name
        self.frames_made = 0
        self.stopped_early = threading.Event()

    @property
    def capabilities(self) -> EngineCapabilities:
        return EngineCapabilities(
            engine=self.name,
            model_id=f"{self.name}-tones",
            model_version="1",
            sample_rate=RATE,
            max_tokens=400,
            native_batching=False,
            languages=("en-us",),
            clone_method="prompt",
            input_kind="text",
            # "chunks": the same audio, delivered a whole chunk at a time.
            streaming="frame" if self.name == "frames" else "chunk",
            fast_lane=self.name == "heads",
            head_piece=self.name == "heads",
        )

    @property
    def ready(self) -> bool:
        return True

    def load(self) -> None:
        pass

    def warmup(self) -> None:
        pass

    def tokenizer(self) -> Tokenizer:
        return CharTokenizer()

    def builtin_voices(self) -> dict[str, EngineVoice]:
        return {"hum": EngineVoice("hum", "a hum", prompt=_Prompt(150.0))}

    def stream(
        self, item: SynthItem, *, stop: threading.Event | None = None, exclusive: bool = False
    ) -> Iterator[np.ndarray]:
        if self.name == "heads" and not exclusive:
            # Off the all-cores lane a head engine makes the chunk in one piece.
            yield np.concatenate(list(self._frames(item, stop)))
            return
        yield from self._frames(item, stop)

    def _frames(self, item: SynthItem, stop: threading.Event | None) -> Iterator[np.ndarray]:
        assert isinstance(item.prompt, _Prompt)
        t = np.arange(FRAME) / RATE
        finished = False
        try:
            for i, _token in enumerate(item.token_ids):
                if stop is not None and stop.is_set():
                    return
                time.sleep(FRAME_SECONDS)
                self.frames_made += 1
                phase = 2 * np.pi * item.prompt.f0_hz * (t + i * FRAME / RATE)
                yield (0.3 * np.sin(phase)).astype(np.float32)
            finished = True
        finally:
            # Stopped by ``stop`` or by the caller closing this generator.
            if not finished:
                self.stopped_early.set()

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        return [np.concatenate(list(self.stream(item))) for item in batch]


@pytest.fixture()
def frames() -> Iterator[tuple[Runtime, FrameEngine, FrameEngine]]:
    made: dict[str, FrameEngine] = {}

    def factory(name: str) -> Callable[[EngineConfig], FrameEngine]:
        def create(config: EngineConfig) -> FrameEngine:
            made[name] = FrameEngine(name)
            return made[name]

        return create

    registry.register("frames", factory("frames"))
    registry.register("chunks", factory("chunks"))
    registry.register("heads", factory("heads"))
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as home:
        # Unmarked: these tests compare the engines' audio delivered by frame
        # and by chunk; the watermark (issue 49), marked at other cuts, differs
        # between the two (mean 308 16-bit steps) - marking is tested elsewhere.
        settings = Settings(
            home=Path(home), engines="frames,chunks,heads", warm_cloning=False, watermark=False
        )
        rt = build_runtime(settings)
        try:
            yield rt, made["frames"], made["heads"]
        finally:
            rt.close()
            registry.unregister("frames")
            registry.unregister("chunks")
            registry.unregister("heads")


def _request(model: str = "frames", **controls: float) -> SpeechRequest:
    return SpeechRequest(
        text=TEXT,
        voice="hum",
        language="en-us",
        format="pcm",
        model=model,
        controls=SpeechControls(**controls),  # type: ignore[arg-type]
    )


def _first_chunk_frames(rt: Runtime, model: str) -> int:
    _voice, chunks = rt.speech.plan(_request(model), fast_start=True)
    return len(next(chunks).token_ids) * FRAMES_PER_TOKEN


def _streamed(rt: Runtime, engine: FrameEngine, request: SpeechRequest) -> tuple[int, bytes]:
    """(frames the engine made from the stream's start to its first audio, the body)."""
    before = engine.frames_made
    _ctype, parts = rt.speech.stream(request)
    made_at_first_audio = None
    body = bytearray()
    for part in parts:
        if part and made_at_first_audio is None:
            made_at_first_audio = engine.frames_made - before
        body += part
    assert made_at_first_audio is not None
    return made_at_first_audio, bytes(body)


def test_audio_leaves_while_the_engine_is_still_making_the_sentence(frames) -> None:
    rt, engine, _heads = frames
    first_chunk_frames = _first_chunk_frames(rt, "frames")
    made_at_first_audio, body = _streamed(rt, engine, _request())
    # Delivered chunk by chunk, the first audio would wait for the whole first chunk.
    assert made_at_first_audio <= first_chunk_frames // 2, (made_at_first_audio, first_chunk_frames)
    assert len(body) > 0


def test_streamed_frames_equal_the_same_audio_streamed_in_chunks(frames) -> None:
    rt, _engine, _heads = frames
    _ctype, parts = rt.speech.stream(_request())
    by_frame = b"".join(parts)
    _ctype, parts = rt.speech.stream(_request("chunks"))
    by_chunk = b"".join(parts)
    assert len(by_frame) > RATE  # more than half a second of 16-bit audio
    assert by_frame == by_chunk


def test_a_client_that_leaves_stops_the_engine_at_the_next_frame(frames) -> None:
    rt, engine, _heads = frames
    _ctype, parts = rt.speech.stream(_request())
    for part in parts:
        if part:
            break
    made = engine.frames_made
    parts.close()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 5
    while not engine.stopped_early.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(3 * FRAME_SECONDS)
    assert engine.stopped_early.is_set()
    assert engine.frames_made <= made + 2


def test_controls_that_need_whole_chunks_still_stream(frames) -> None:
    rt, _engine, _heads = frames
    _ctype, parts = rt.speech.stream(_request(speed=1.25))
    fast = b"".join(parts)
    normal = rt.speech.synthesize(_request()).audio
    assert 0.7 < len(fast) / len(normal) < 0.9


def test_a_head_engine_s_first_chunk_leaves_before_it_is_finished(frames) -> None:
    """Chunk engines used to send a stream's first chunk whole: its first
    audio waited for all of it."""
    rt, _frames, heads = frames
    first_chunk_frames = _first_chunk_frames(rt, "heads")
    made_at_first_audio, body = _streamed(rt, heads, _request("heads"))
    assert made_at_first_audio <= first_chunk_frames // 2, (made_at_first_audio, first_chunk_frames)
    # The same audio as the chunk engine sends whole.
    _ctype, parts = rt.speech.stream(_request("chunks"))
    assert body == b"".join(parts)


def test_a_head_engine_s_whole_files_and_dsp_streams_are_made_whole(frames) -> None:
    rt, _frames, heads = frames
    first_chunk_frames = _first_chunk_frames(rt, "heads")
    whole = rt.speech.synthesize(_request("heads")).audio
    assert whole
    made_at_first_audio, _body = _streamed(rt, heads, _request("heads", speed=1.25))
    # Tempo works on whole chunks: the first audio waits for the first chunk.
    assert made_at_first_audio >= first_chunk_frames
