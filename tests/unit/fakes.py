"""The test doubles several test files share: one fake engine, one fake clock
and one voice-record factory.

Importable by name from tests/unit (pytest puts the folder on ``sys.path``),
tests/integration (its conftest.py puts tests/unit there) and tests/api (the
test file puts tests/unit there itself, as for ``report_fakes``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from voxclone.runtime.voice_store import ConsentRecord, VoiceRecord
from voxclone.synth.engine.base import Engine, EngineCapabilities, EngineVoice, SynthItem

WAIT_S = 5.0  # upper bound for anything that should happen "soon" (a held call's wait)
STYLE_SHAPE = (510, 1, 256)  # a Kokoro voice's stored style
KOKORO_MODEL = "kokoro-82m-v1.0-int8"  # what a catalog names Kokoro's built-ins by


class FakeEngine:
    """Implements the Engine protocol without a model; records every batch it
    is asked for.

    ``voices`` are its built-ins (what a catalog reads, with
    ``capabilities.model_id``). ``gate`` lets a test hold the engine inside a
    call (workers busy; ``entered`` is set on the way in) for up to
    ``wait_s``; ``fail`` makes calls raise. Each item's audio is ``samples``
    copies of ``level``, or of the item's first token id where ``level`` is
    None, so that results can be matched to requests.
    """

    ready = True
    load_seconds: float | None = 0.0

    def __init__(
        self,
        *,
        native_batching: bool = False,
        fast_lane: bool = False,
        model_id: str = "fake",
        capabilities: EngineCapabilities | None = None,
        voices: Mapping[str, EngineVoice] | None = None,
        samples: int = 4,
        level: float | None = None,
        wait_s: float = WAIT_S,
    ) -> None:
        self._caps = capabilities or EngineCapabilities(
            engine="fake",
            model_id=model_id,
            model_version="0",
            sample_rate=24_000,
            max_tokens=510,
            style_shape=(256,),
            native_batching=native_batching,
            fast_lane=fast_lane,
        )
        self._voices = dict(voices or {})
        self._samples = samples
        self._level = level
        self._wait_s = wait_s
        self.exclusive_calls: list[int] = []
        self.active = 0
        self.max_active_during_exclusive = 0
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False
        self._lock = threading.Lock()

    @property
    def capabilities(self) -> EngineCapabilities:
        return self._caps

    def load(self) -> None:
        pass

    def warmup(self) -> None:
        pass

    def builtin_voices(self) -> dict[str, EngineVoice]:
        return dict(self._voices)

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        with self._lock:
            self.batches.append([item.token_ids[0] for item in batch])
            self.active += 1
            if exclusive:
                self.exclusive_calls.append(batch[0].token_ids[0])
        self.entered.set()
        try:
            if not self.gate.wait(self._wait_s):
                raise TimeoutError("test never released the engine")
            with self._lock:
                if self.exclusive_calls:
                    self.max_active_during_exclusive = max(
                        self.max_active_during_exclusive, self.active
                    )
        finally:
            with self._lock:
                self.active -= 1
        if self.fail:
            raise RuntimeError("engine exploded")
        return [np.full(self._samples, self._value(item), np.float32) for item in batch]

    def _value(self, item: SynthItem) -> float:
        return float(item.token_ids[0]) if self._level is None else self._level

    @property
    def seen(self) -> list[int]:
        with self._lock:
            return [tid for batch in self.batches for tid in batch]

    def as_engine(self) -> Engine:
        """This fake where an Engine is wanted: it has the parts the scheduler
        and the catalog call, not the whole protocol."""
        return cast(Engine, self)


def catalog_engine(voices: Mapping[str, EngineVoice]) -> Engine:
    """A fake Kokoro with these built-ins, for a VoiceCatalog."""
    return FakeEngine(model_id=KOKORO_MODEL, voices=voices).as_engine()


def silent_builtins(*names: str) -> dict[str, EngineVoice]:
    """Built-ins ``names``, each described by its name, with a silent (zero) style."""
    style = np.zeros(STYLE_SHAPE, np.float32)
    return {name: EngineVoice(name, name, style=style) for name in names}


class FakeClock:
    """A clock (a scheduler's, a limiter's, a queue's) that moves only when a
    test sets ``now`` or calls ``advance``, or by ``step`` each time it is read."""

    def __init__(self, now: float = 1000.0, *, step: float = 0.0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def voice_record(
    name: str = "Alice",
    owner: str = "owner-a",
    *,
    seed: int = 0,
    statement: bytes = b"I agree",
    given_at: str = "2026-01-02T03:04:05Z",
    client_address: str | None = None,
    quality: dict[str, Any] | None = None,
    **fields: Any,
) -> VoiceRecord:
    """An instant clone for ``owner`` as a store's ``create`` takes it: random
    arrays from ``seed`` (a Kokoro style), consent to ``statement``. ``fields``
    sets any other VoiceRecord field (``id``, ``reference_audio``, ``engine``,
    ``model_id``, ...)."""
    rng = np.random.default_rng(seed)
    made: dict[str, Any] = {
        "id": "",
        "language": "en-us",
        "created_at": "",
        "updated_at": "",
        "version": 0,
        "embedding": rng.standard_normal(256).astype(np.float32),
        "style": rng.standard_normal(STYLE_SHAPE).astype(np.float32),
        "source": "instant",
    }
    consent = ConsentRecord(
        statement_sha256=hashlib.sha256(statement).hexdigest(),
        given_by=owner,
        given_at=given_at,
        client_address=client_address,
    )
    return VoiceRecord(
        **{**made, **fields},
        name=name,
        owner=owner,
        consent=consent,
        quality=dict(quality or {}),
    )
