"""The deep refine's descent (synth/voice/deep_refine.py) on a stand-in model.

The real differentiable Kokoro takes ~10-25 s to build and seconds a step
(tests/integration/test_torch_kokoro_parity.py runs the refiner on it); here a
linear "decoder" whose audio is the timbre times a fixed matrix, and a
"listener" that is a fixed projection, let the optimizer's own behaviour be
checked exactly: it moves toward the reference, the prior holds it near the
packs, the best step is returned, every step is reported, and a stop request
ends it with Cancelled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the deep refine needs torch ([deep] extra)")

from voxclone.errors import Cancelled  # noqa: E402
from voxclone.synth.voice.deep_refine import (  # noqa: E402
    DeepRefineConfig,
    DeepRefiner,
    DeepStep,
    TimbrePrior,
    tone_post,
)

ROWS = 8
SAMPLES = 64


@dataclass
class _Inputs:
    frames: object


class _LinearModel:
    """decode(inputs, timbre) = timbre @ W: differentiable, deterministic."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.weight = torch.from_numpy(rng.standard_normal((128, SAMPLES)).astype(np.float32))
        self.prepared: list[tuple[int, ...]] = []

    def decoder_inputs(self, tokens, style, speed=1.0, *, frames=None):  # type: ignore[no-untyped-def]
        self.prepared.append(tuple(tokens))
        return _Inputs(frames=frames)

    def decode(self, inputs, timbre):  # type: ignore[no-untyped-def]
        return timbre.reshape(-1) @ self.weight


def _packs(seed: int = 1, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, 1, 256)).astype(np.float32) * 0.1
    return np.repeat(base, ROWS, axis=1)  # every row alike: one voice at every length


def _listener(seed: int) -> Callable[[Any], Any]:
    projection = torch.from_numpy(
        np.random.default_rng(seed).standard_normal((SAMPLES, 16)).astype(np.float32)
    )
    return lambda audio: audio @ projection


def _setup(prior_weight: float, steps: int = 40) -> tuple[DeepRefiner, np.ndarray, dict]:
    model = _LinearModel()
    packs = _packs()
    listeners = {"campplus": _listener(2), "ge2e": _listener(3)}
    config = DeepRefineConfig(steps=steps, learning_rate=0.02, prior_weight=prior_weight)
    refiner = DeepRefiner(model, listeners, TimbrePrior(packs), config)  # type: ignore[arg-type]
    # The reference: what another pack "sounds like" to each listener.
    target = torch.from_numpy(packs[4, 0, :128].copy())
    with torch.no_grad():
        refs = {n: fn(model.decode(None, target)).numpy() for n, fn in listeners.items()}
    return refiner, packs[0], refs


def _similarity(step: DeepStep) -> float:
    return sum(step.similarity.values()) / len(step.similarity)


def test_the_descent_moves_the_voice_toward_the_reference() -> None:
    refiner, start, refs = _setup(prior_weight=0.0)
    seen: list[DeepStep] = []
    result = refiner.refine(start, [(1, 2, 3), (4, 5)], refs, on_step=seen.append)
    assert [s.step for s in seen] == list(range(41))  # every step reported, the last scored
    assert _similarity(result.steps[result.best_step]) > _similarity(result.steps[0]) + 0.05
    assert result.steps[result.best_step].loss == min(s.loss for s in result.steps)
    # The offset lands on every row's timbre half, never on the prosody half.
    pack = result.pack(start)
    assert np.allclose(pack[:, 128:], start[:, 128:])
    assert np.allclose(pack[:, :128] - start[:, :128], result.offset[None, :], atol=1e-6)


def test_the_prior_keeps_the_voice_near_the_packs() -> None:
    free, start, refs = _setup(prior_weight=0.0)
    held, _, _ = _setup(prior_weight=5.0)
    loose = free.refine(start, [(1, 2, 3)], refs)
    tight = held.refine(start, [(1, 2, 3)], refs)
    assert tight.steps[tight.best_step].prior < loose.steps[loose.best_step].prior
    assert np.linalg.norm(tight.offset) < np.linalg.norm(loose.offset)


def test_a_stop_request_ends_the_descent_with_cancelled() -> None:
    refiner, start, refs = _setup(prior_weight=0.1)
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(Cancelled):
        refiner.refine(start, [(1, 2)], refs, should_stop=stop)
    assert calls["n"] == 4


def test_a_weighted_listener_without_a_reference_is_refused() -> None:
    refiner, start, refs = _setup(prior_weight=0.1)
    with pytest.raises(ValueError, match="reference"):
        refiner.refine(start, [(1, 2)], {"ge2e": refs["ge2e"]})
    with pytest.raises(ValueError, match="no listener"):
        DeepRefiner(
            _LinearModel(),  # type: ignore[arg-type]
            {"ge2e": _listener(3)},
            TimbrePrior(_packs()),
            DeepRefineConfig(listener_weights={"ge2e": 1.0, "campplus": 1.0}),
        )


def test_the_prior_reads_a_typical_pack_as_about_one() -> None:
    rng = np.random.default_rng(5)
    packs = rng.standard_normal((200, 3, 256)).astype(np.float32)
    prior = TimbrePrior(packs)
    assert prior.row_index(0) == 0 and prior.row_index(2) == 1 and prior.row_index(99) == 2
    typical = np.mean([prior.distance(packs[i, 1, :128], 1) for i in range(200)])
    assert 0.5 < typical < 1.5
    assert prior.distance(packs[0, 1, :128] * 6, 1) > 10 * typical


def test_the_tone_step_filters_as_the_tone_filter_does() -> None:
    from voxclone.synth.audio.tone import GRID_HZ, ToneFilter

    gain = np.where(GRID_HZ < 1000, 6.0, -6.0).astype(np.float32)
    tone = ToneFilter(gain)
    audio = np.random.default_rng(7).standard_normal(24_000).astype(np.float32) * 0.1
    expected = tone.apply(audio, 24_000)
    got = tone_post(tone.taps(24_000))(torch.from_numpy(audio)).numpy()
    assert np.abs(got - expected).max() < 1e-4


class _RepeatModel:
    """decode = each timbre value held for 3 samples: what a listener that
    averages those 3 samples hears is the timbre itself."""

    def decoder_inputs(self, tokens, style, speed=1.0, *, frames=None):  # type: ignore[no-untyped-def]
        return _Inputs(frames=frames)

    def decode(self, inputs, timbre):  # type: ignore[no-untyped-def]
        return timbre.reshape(-1).repeat_interleave(3)


def _deep_voice(
    transcribe: Callable[[np.ndarray, int], str] | None = None, steps: int = 30
) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    from voxclone.synth.voice.deep_voice import DeepVoiceRefiner

    packs = _packs(n=8)

    def speak(tokens: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        row = np.asarray(pack).reshape(-1, 256)[0, :128]
        return np.repeat(row, 3).astype(np.float32)  # the engine's render, 24 kHz

    def hear(x16k: np.ndarray) -> np.ndarray:  # 16 kHz: each timbre value holds 2 samples
        return x16k[: 256 - 256 % 2].reshape(-1, 2).mean(axis=1)

    refiner = DeepVoiceRefiner(
        build=lambda: (_RepeatModel(), {"ge2e": lambda a: a.reshape(-1, 3).mean(dim=1)}),
        packs=packs,
        probe_tokens=[(1, 2, 3)],
        accept_tokens=[(4, 5), (6, 7)],
        accept_texts=["one two", "three four"],
        speak=speak,
        hear={"ge2e": hear},
        transcribe=transcribe,
        word_error_rate=lambda ref, hyp: 0.0 if ref == hyp else 1.0,
        config=DeepRefineConfig(
            steps=steps, learning_rate=0.02, prior_weight=0.0, listener_weights={"ge2e": 1.0}
        ),
    )
    start = packs[0].copy()
    reference = {"ge2e": packs[5, 0, :128].copy()}
    return refiner, start, reference


def test_a_deep_refine_heard_closer_on_other_sentences_is_kept() -> None:
    refiner, start, reference = _deep_voice()
    progress: list[float] = []
    outcome = refiner.refine(start, reference, None, on_progress=progress.append)
    assert outcome.improved
    assert outcome.after["ge2e"] > outcome.before["ge2e"] + 0.01
    assert not np.allclose(outcome.pack, start)
    assert progress[-1] == 1.0 and progress == sorted(progress)


def test_a_deep_refine_that_garbles_the_words_is_not_kept() -> None:
    texts = iter(["one two", "three four"])  # the start's two renders read right

    def transcribe(audio: np.ndarray, rate: int) -> str:
        return next(texts, "mumble")

    refiner, start, reference = _deep_voice(transcribe)
    outcome = refiner.refine(start, reference, None)
    assert outcome.after["ge2e"] > outcome.before["ge2e"]  # closer, but
    assert not outcome.improved and np.array_equal(outcome.pack, start)
    assert outcome.wer_after == 1.0 and any("WER" in n for n in outcome.notes)


def test_a_voice_already_at_the_reference_is_kept_as_it_was() -> None:
    refiner, start, _ = _deep_voice(steps=3)
    outcome = refiner.refine(start, {"ge2e": start[0, :128].copy()}, None)
    assert not outcome.improved and np.array_equal(outcome.pack, start)


def test_the_enrollment_keeps_only_the_other_listeners_view_of_the_reference() -> None:
    refiner, _, _ = _deep_voice()
    # GE2E's reference is the voice's stored print: nothing more to keep.
    assert refiner.reference_embeddings([np.ones(512, np.float32)]) == {}
