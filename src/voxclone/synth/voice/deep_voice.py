"""A stored voice's deep refine, as the service runs it (issue 47).

:class:`voxclone.synth.voice.deep_refine.DeepRefiner` descends on the timbre
half through the differentiable Kokoro on the refine sentences; this module
wraps it for a background job: the torch model and listeners built once, on
the first deep refine (~10 s and ~1.6 GB on 2 cores, so never at start and
never in a server whose operator did not install the ``[deep]`` extra), torch
held to its own thread budget, and the result **accepted only on other
sentences**: the quality report's two sentences, rendered by the serving
engine (ONNX) with the voice's tone, heard by the product's listeners. The
descent hears the sentences it optimizes; a voice that only won there (the
audition lesson: +0.02 that did not generalize) is not stored. A Whisper
check keeps identity from being bought with garbling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import soxr

from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.deep_refine import (
    DeepRefineConfig,
    DeepRefiner,
    DeepStep,
    EmbedFn,
    TimbrePrior,
    tone_post,
)

ENCODER_RATE = 16_000
# The accepted voice must be heard closer on the acceptance sentences by this
# much (mean over the listeners), and no listener may hear it farther by more
# than LISTENER_SLACK: a cosine differs by ~0.01 between two renders of one
# voice on other text (the winner's curse the atlas refine guards against too).
ACCEPT_MARGIN = 0.01
LISTENER_SLACK = 0.01
WER_MARGIN = 0.05

# The listener whose reference embedding is the voice's stored print.
PRINT_LISTENER = "ge2e"

SpeakFn = Callable[[tuple[int, ...], np.ndarray], np.ndarray]  # tokens, pack -> engine audio
HearFn = Callable[[np.ndarray], np.ndarray]  # 16 kHz audio -> embedding (product listener)


@dataclass(frozen=True)
class DeepModels:
    """What the descent needs, built together on first use."""

    refiner: DeepRefiner


@dataclass
class DeepOutcome:
    improved: bool
    pack: np.ndarray  # the refined pack (the start's when not improved)
    offset: np.ndarray
    before: dict[str, float]  # per listener, mean cosine on the acceptance sentences
    after: dict[str, float]
    wer_before: float | None
    wer_after: float | None
    best_step: int
    steps: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def similarity(self) -> float:
        chosen = self.after if self.improved else self.before
        return float(np.mean(list(chosen.values())))

    @property
    def start_similarity(self) -> float:
        return float(np.mean(list(self.before.values())))


class DeepVoiceRefiner:
    """Deep refine of stored voices; one at a time (the model is not thread-safe
    for concurrent backward passes, and two would halve each other's speed)."""

    def __init__(
        self,
        *,
        build: Callable[[], tuple[object, Mapping[str, EmbedFn]]],
        packs: np.ndarray,
        probe_tokens: Sequence[tuple[int, ...]],
        accept_tokens: Sequence[tuple[int, ...]],
        accept_texts: Sequence[str],
        speak: SpeakFn,
        hear: Mapping[str, HearFn],
        transcribe: Callable[[np.ndarray, int], str] | None,
        word_error_rate: Callable[[str, str], float] | None,
        engine_rate: int = 24_000,
        config: DeepRefineConfig | None = None,
        threads: int = 1,
    ) -> None:
        """``build`` returns (TorchKokoro, differentiable listeners by name);
        ``hear``: the product's listeners by the same names (the acceptance
        check); ``threads``: torch's intra-op threads (serving shares the cores)."""
        if len(accept_tokens) != len(accept_texts):
            raise ValueError("one text per acceptance sentence")
        self._build = build
        self._prior = TimbrePrior(packs)
        self._probes = [tuple(t) for t in probe_tokens]
        self._accept = [tuple(t) for t in accept_tokens]
        self._accept_texts = list(accept_texts)
        self._speak = speak
        self._hear = dict(hear)
        self._transcribe = transcribe
        self._wer = word_error_rate
        self._rate = engine_rate
        self._config = config or DeepRefineConfig()
        self._threads = threads
        self._models: DeepModels | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> DeepRefineConfig:
        return self._config

    def reference_embeddings(self, clips16: Sequence[np.ndarray]) -> dict[str, list[float]]:
        """The enrollment's recordings as the listeners other than the product
        encoder hear them (its print is stored with every voice already), for
        the voice's record: a refine later has no audio (none is kept unless
        the user asks). The mean of each clip's unit embedding."""
        out: dict[str, list[float]] = {}
        for name, hear in self._hear.items():
            if name == PRINT_LISTENER or name not in self._config.listener_weights:
                continue
            vectors = [_unit(hear(np.asarray(c, np.float32))) for c in clips16 if len(c)]
            if vectors:
                mean = _unit(np.mean(vectors, axis=0))
                out[name] = [round(float(x), 6) for x in mean]
        return out

    def listeners_for(self, references: Mapping[str, np.ndarray]) -> list[str]:
        """The weighted listeners a voice has a reference embedding for."""
        return [n for n in self._config.listener_weights if n in references and n in self._hear]

    def _models_now(self, listeners: list[str]) -> DeepRefiner:
        if self._models is None:
            import torch

            torch.set_num_threads(self._threads)
            model, embedders = self._build()
            self._models = DeepModels(
                DeepRefiner(model, embedders, self._prior, self._config)  # type: ignore[arg-type]
            )
        base = self._models.refiner
        weights = {n: self._config.listener_weights[n] for n in listeners}
        config = DeepRefineConfig(
            steps=self._config.steps,
            learning_rate=self._config.learning_rate,
            prior_weight=self._config.prior_weight,
            listener_weights=weights,
        )
        return DeepRefiner(base.model, base.listeners, self._prior, config)

    def _heard(
        self, pack: np.ndarray, tone: ToneFilter | None, references: Mapping[str, np.ndarray]
    ) -> tuple[dict[str, float], float | None]:
        clips = []
        for tokens in self._accept:
            audio = self._speak(tokens, pack)
            if tone is not None:
                audio = tone.apply(audio, self._rate)
            clips.append(audio)
        heard16 = [soxr.resample(c, self._rate, ENCODER_RATE).astype(np.float32) for c in clips]
        sims: dict[str, float] = {}
        for name, ref in references.items():
            target = _unit(ref)
            sims[name] = float(np.mean([_unit(self._hear[name](c)) @ target for c in heard16]))
        wer = None
        if self._transcribe is not None and self._wer is not None:
            wer = float(
                np.mean(
                    [
                        self._wer(text, self._transcribe(c, ENCODER_RATE))
                        for text, c in zip(self._accept_texts, heard16, strict=True)
                    ]
                )
            )
        return sims, wer

    def refine(
        self,
        start_pack: np.ndarray,
        references: Mapping[str, np.ndarray],
        tone: ToneFilter | None,
        *,
        on_progress: Callable[[float], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> DeepOutcome:
        """Descend from ``start_pack`` toward ``references`` (a reference
        embedding per listener name), then accept on the other sentences."""
        began = time.perf_counter()
        listeners = self.listeners_for(references)
        if not listeners:
            raise ValueError("no listener has a reference embedding for this voice")
        refs = {n: np.asarray(references[n], np.float32) for n in listeners}
        total = self._config.steps + 1

        def on_step(step: DeepStep) -> None:
            if on_progress is not None:
                # The descent is ~90 % of the job; the acceptance renders the rest.
                on_progress(0.9 * (step.step + 1) / total)

        with self._lock:
            refiner = self._models_now(listeners)
            result = refiner.refine(
                start_pack,
                self._probes,
                refs,
                post=None if tone is None else tone_post(tone.taps(self._rate)),
                on_step=on_step,
                should_stop=should_cancel,
            )
        candidate = result.pack(start_pack)
        before, wer_before = self._heard(start_pack, tone, refs)
        after, wer_after = self._heard(candidate, tone, refs)
        gains = {n: after[n] - before[n] for n in refs}
        notes = [
            f"descent: {len(result.steps) - 1} steps, best at step {result.best_step}, "
            f"offset {float(np.linalg.norm(result.offset)):.3f}",
            "heard on other sentences: "
            + ", ".join(f"{n} {before[n]:.3f} -> {after[n]:.3f}" for n in refs),
        ]
        improved = (
            result.best_step > 0
            and float(np.mean(list(gains.values()))) >= ACCEPT_MARGIN
            and min(gains.values()) >= -LISTENER_SLACK
        )
        garbled = (
            wer_before is not None and wer_after is not None and wer_after > wer_before + WER_MARGIN
        )
        if improved and garbled:
            improved = False
            notes.append(f"refused: WER {wer_before:.3f} -> {wer_after:.3f}")
        if on_progress is not None:
            on_progress(1.0)
        return DeepOutcome(
            improved=improved,
            pack=candidate if improved else np.asarray(start_pack, np.float32),
            offset=result.offset,
            before={n: round(v, 4) for n, v in before.items()},
            after={n: round(v, 4) for n, v in after.items()},
            wer_before=wer_before,
            wer_after=wer_after,
            best_step=result.best_step,
            steps=len(result.steps) - 1,
            seconds=time.perf_counter() - began,
            notes=notes,
        )


def _unit(v: np.ndarray) -> np.ndarray:
    x = np.asarray(v, np.float64).ravel()
    return x / max(float(np.linalg.norm(x)), 1e-12)
