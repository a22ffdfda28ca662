"""A VoiceService on a real SQLite store with the cloning models replaced by
small stand-ins (tests/unit/test_report_recovery.py, also run in a child
process that the test kills mid-report).

Real: the service, the stores, the durable queue, the cloning pipeline, the
quality reporter, the prosody and tone measurements. Stand-ins: the speaker
encoder (a fixed vector), the atlas (fixed style packs: 0.25 for the atlas
lookup, 0.5 once "spoken", so the tests can tell a measured voice from a
draft) and the renderer (a tone).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from voxclone.errors import InvalidInput
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.voice_store import SqlVoiceStore
from voxclone.service.voices.request import ConsentInput, EnrollRequest
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoicePolicy, VoiceStores
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.clone import InstantClone
from voxclone.synth.voice.quality_report import QualityReporter
from voxclone.synth.voice.style_space import VoiceRecipe

SHAPE = (510, 1, 256)
DRAFT_STYLE = 0.25
SPOKEN_STYLE = 0.5
ENGINE_RATE = 24_000
CONSENT = ConsentInput(given=True, statement="I agree to be cloned.", given_by="tester")


class Atlas:
    def __init__(self, mode: str) -> None:
        self.mode = mode  # "ok", "block" (hangs: killed mid-report) or "refuse"
        self.release = threading.Event()
        self.basis = SimpleNamespace(pack=self.pack)

    def pack(self, recipe: VoiceRecipe) -> np.ndarray:
        if self.mode == "block":
            self.release.wait()
        if self.mode == "refuse":
            raise InvalidInput("the atlas refuses this voice", field="voice")
        return np.full(SHAPE, SPOKEN_STYLE, np.float32)

    def closest_builtin(self, embedding: np.ndarray, **_gate: Any) -> Any:
        return ("af_test", 0.25)


class Encoder:
    def embed(self, audio16: np.ndarray) -> np.ndarray:
        vector = np.zeros(256, np.float32)
        vector[0] = 1.0
        return vector


class Cloner:
    def __init__(self, mode: str) -> None:
        self.atlas = Atlas(mode)
        self.encoder = Encoder()

    def clone_from(
        self, embedding: np.ndarray, pitch: Any, *, spectrum: Any = None, rate: float = 0.0
    ) -> InstantClone:
        one = np.ones(1, np.float32)
        return InstantClone(
            recipe=VoiceRecipe(one, np.zeros(1, np.float32), one),
            style=np.full(SHAPE, DRAFT_STYLE, np.float32),
            embedding=np.asarray(embedding, np.float32),
            pitch=pitch,
            neighbours=[],
            seconds=0.0,
        )


# The fakes' clones are no built-in's: the stock check has nothing to compare.
NO_STOCK_CHECK = VoicePolicy(stock_check=False)


def harmonic_reference(audio: bytes) -> ReferenceAudio:
    """A cleaned 3 s recording of a 150 Hz voice, whatever was uploaded."""
    t = np.arange(3 * 16_000) / 16_000
    phase = 2 * np.pi * np.cumsum(150.0 * (1 + 0.05 * np.sin(2 * np.pi * 2 * t))) / 16_000
    samples = 0.1 * np.sum([np.sin(k * phase) / k for k in range(1, 8)], axis=0)
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)  # syllable-like energy peaks
    return ReferenceAudio(
        samples16k=(samples * envelope).astype(np.float32),
        speech_seconds=3.0,
        original_seconds=3.0,
        snr_db=31.5,
        clipping=0.0,
        warnings=["short: 3.0 s of speech"],
    )


def service(
    db: Path,
    mode: str = "ok",
    jobs: SqlJobStore | None = None,
    *,
    reference_loader: Callable[[bytes], ReferenceAudio] | None = None,
    quality_reporter: QualityReporter | None = None,
    deep_refiner: Any = None,
    policy: VoicePolicy = NO_STOCK_CHECK,
) -> VoiceService:
    """A started service on ``db`` whose cloner behaves as ``mode`` says;
    the other arguments replace the fakes' parts."""
    store = SqlVoiceStore(db, style_shapes={"kokoro": SHAPE})
    cloner = Cloner(mode)

    def synthesize(tokens: tuple[int, ...], style: Any) -> np.ndarray:
        t = np.arange(ENGINE_RATE) / ENGINE_RATE
        return (0.2 * np.sin(2 * np.pi * 180.0 * t)).astype(np.float32)

    reporter = QualityReporter(
        Encoder(),  # type: ignore[arg-type]
        synthesize,
        (1, 2, 3),
        transcribe=None,
        word_error_rate=None,
        engine_rate=ENGINE_RATE,
    )
    queue = jobs if jobs is not None else SqlJobStore(store.database)
    built = VoiceService(
        VoiceStores(voices=store, jobs=queue, job_events=JobEvents(), report_queue=queue),
        CloningKit(
            cloner=cloner,  # type: ignore[arg-type]
            reference_loader=reference_loader or harmonic_reference,
            quality_reporter=quality_reporter or reporter,
            deep_refiner=deep_refiner,
        ),
        VoiceHooks(on_voice_changed=lambda _voice: None),
        policy,
    )
    built.start()
    return built


def until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """``check()``'s first truthy answer, polled until ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def enroll_request(name: str = "Ada", **extra: Any) -> EnrollRequest:
    return EnrollRequest(b"RIFF-any", name, "owner-a", CONSENT, **extra)


def child(db: str, lease_s: str) -> None:
    """Enroll without waiting, print the voice and job ids, then hang mid-report
    until killed (the test's ``kill -9``)."""
    from voxclone.service.voices import report_queue

    report_queue.LEASE_S = float(lease_s)
    svc = service(Path(db), mode="block")
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    assert enrolled.report_job is not None
    print(enrolled.record.id, enrolled.report_job.id, flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    child(*sys.argv[1:])
