"""Deep refine (issue 47): move a voice's timbre toward a reference by gradient
descent through the differentiable Kokoro, as the product's listeners hear it.

Selection among stock timbres and DSP after synthesis stopped near their
ceiling (docs/studies.md); here the style vector itself is optimized. The
decoder hears the style only through its timbre half (AdaIN), and everything
before the decoder depends on the tokens and the prosody half, so each probe
sentence's decoder inputs are computed once and a step is one decoder pass
forward and back per probe plus the listeners (about 4 s for 3 s of audio on
2 idle cores: studies/results/deep_refine_parity.json).

The search variable is one 128-d offset added to the timbre half of every row
of the voice's pack (a pack holds one row per sentence length; the same
offset on every row keeps the voice one voice at every length, as the
cross-entropy search over timbre directions did). The loss is

    sum over listeners  w * (1 - cosine(embedding(render), reference))
  + prior_weight * mean over probes  Mahalanobis²(row + offset) / 128

The prior is a Gaussian fitted on the shipped packs' timbre halves at the
probe's row (covariance shrunk toward its diagonal: 54 packs for 128
dimensions): the decoder was trained on that region, and a style far outside
it buys listener similarity with artefacts no listener was trained to punish.

Torch is imported on use: this module runs only where enrollment has the
``[deep]`` extra; serving never imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from voxclone.errors import Cancelled

if TYPE_CHECKING:  # pragma: no cover
    import torch

TIMBRE = slice(0, 128)
# Shrinkage of the packs' covariance toward its diagonal: with 54 packs the
# sample covariance has rank 53 of 128, so unshrunk it calls every direction
# the packs never moved in infinitely unlikely.
PRIOR_SHRINK = 0.3
# A listener turns 24 kHz audio [samples] into an embedding [d], differentiably.
EmbedFn = Callable[["torch.Tensor"], "torch.Tensor"]
# Applied to every render before the listeners hear it (the voice's tone filter).
PostFn = Callable[["torch.Tensor"], "torch.Tensor"]


class DifferentiableModel(Protocol):
    """An engine's differentiable copy (``StyleCloning.differentiable``; Kokoro's
    is synth/engine/kokoro/torch_model.py): the decoder's inputs for a sentence
    from the tokens and the style's prosody half, then audio from those inputs
    and a timbre half, with the graph kept for backward."""

    def decoder_inputs(
        self,
        tokens: list[int] | tuple[int, ...],
        style: torch.Tensor,
        speed: float = 1.0,
        *,
        frames: torch.Tensor | None = None,
    ) -> Any: ...

    def decode(self, inputs: Any, timbre: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class DeepRefineConfig:
    steps: int = 16
    learning_rate: float = 0.02  # per step, in timbre units (the packs' per-dimension std is ~0.09)
    prior_weight: float = 0.3
    listener_weights: Mapping[str, float] = field(
        default_factory=lambda: {"campplus": 1.0, "ge2e": 1.0}
    )


@dataclass(frozen=True)
class DeepStep:
    step: int
    loss: float
    similarity: dict[str, float]  # per listener, mean over the probes
    prior: float
    seconds: float


@dataclass
class DeepRefineResult:
    offset: np.ndarray  # [128] added to the timbre half of every row
    steps: list[DeepStep]
    best_step: int  # the step whose offset is returned (lowest loss seen)
    seconds: float

    def pack(self, start_pack: np.ndarray) -> np.ndarray:
        """The start pack with the offset on every row's timbre half."""
        out = np.array(start_pack, dtype=np.float32, copy=True)
        flat = out.reshape(-1, out.shape[-1])
        flat[:, TIMBRE] += self.offset.astype(np.float32)
        return out


class TimbrePrior:
    """Per-row Gaussians over the shipped packs' timbre halves."""

    def __init__(self, packs: np.ndarray, *, shrink: float = PRIOR_SHRINK) -> None:
        """``packs``: [P, rows, 256] (or [P, rows, 1, 256]) shipped style packs."""
        stacked = np.asarray(packs, dtype=np.float64)
        self._timbre = stacked.reshape(stacked.shape[0], stacked.shape[1], -1)[:, :, TIMBRE]
        if self._timbre.shape[0] < 2:
            raise ValueError("a prior needs at least two packs")
        self._shrink = shrink
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def rows(self) -> int:
        return int(self._timbre.shape[1])

    def row_index(self, n_tokens: int) -> int:
        """The pack row the engine uses for ``n_tokens`` tokens (engine.style_row)."""
        return min(max(n_tokens, 1), self.rows) - 1

    def gaussian(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean [128], precision [128, 128]) at one row."""
        cached = self._cache.get(row)
        if cached is None:
            x = self._timbre[:, row, :]
            mean = x.mean(axis=0)
            cov = np.cov(x, rowvar=False)
            cov = (1 - self._shrink) * cov + self._shrink * np.diag(np.diag(cov))
            cached = (mean, np.linalg.inv(cov))
            self._cache[row] = cached
        return cached

    def distance(self, timbre: np.ndarray, row: int) -> float:
        """Mahalanobis² / 128 of a timbre half at a row (~1 for a typical pack)."""
        mean, precision = self.gaussian(row)
        d = np.asarray(timbre, np.float64) - mean
        return float(d @ precision @ d) / d.size


@dataclass
class _Probe:
    inputs: Any  # the model's decoder inputs for the probe
    timbre: torch.Tensor  # the start pack's timbre half at this probe's row
    mean: torch.Tensor
    precision: torch.Tensor


class DeepRefiner:
    """Descends on a timbre offset; the collaborators come in ready-made."""

    def __init__(
        self,
        model: DifferentiableModel,
        listeners: Mapping[str, EmbedFn],
        prior: TimbrePrior,
        config: DeepRefineConfig | None = None,
    ) -> None:
        self.model = model
        self.listeners = dict(listeners)
        self.prior = prior
        self.config = config or DeepRefineConfig()
        missing = set(self.config.listener_weights) - set(self.listeners)
        if missing:
            raise ValueError(f"no listener for {sorted(missing)}")

    def refine(
        self,
        start_pack: np.ndarray,
        probes: Sequence[tuple[int, ...]],
        references: Mapping[str, np.ndarray],
        *,
        frames: Sequence[np.ndarray | None] | None = None,
        post: PostFn | None = None,
        on_step: Callable[[DeepStep], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> DeepRefineResult:
        """``probes``: token ids per sentence (boundary ids added by the model);
        ``references``: the reference's embedding per listener (any scale);
        ``frames``: per-probe durations to follow (e.g. the ONNX engine's), so
        the audio the listeners hear has the engine's timing."""
        import torch

        began = time.perf_counter()
        pack = np.asarray(start_pack, dtype=np.float32)
        rows = pack.reshape(-1, pack.shape[-1])
        refs = {
            name: torch.nn.functional.normalize(
                torch.as_tensor(np.asarray(v, np.float32).ravel()), dim=0
            )
            for name, v in references.items()
            if name in self.config.listener_weights
        }
        if set(refs) != set(self.config.listener_weights):
            raise ValueError("a reference embedding per weighted listener is needed")
        prepared = []
        with torch.no_grad():
            for i, tokens in enumerate(probes):
                row = self.prior.row_index(len(tokens))
                style = torch.from_numpy(rows[min(row, rows.shape[0] - 1)].copy())
                wanted = None if frames is None or frames[i] is None else frames[i]
                inputs = self.model.decoder_inputs(
                    tokens, style, frames=None if wanted is None else torch.as_tensor(wanted)
                )
                mean, precision = self.prior.gaussian(row)
                prepared.append(
                    _Probe(
                        inputs=inputs,
                        timbre=style[TIMBRE].clone(),
                        mean=torch.from_numpy(mean.astype(np.float32)),
                        precision=torch.from_numpy(precision.astype(np.float32)),
                    )
                )
        offset = torch.zeros(128, requires_grad=True)
        optimizer = torch.optim.Adam([offset], lr=self.config.learning_rate)
        history: list[DeepStep] = []
        best = (float("inf"), np.zeros(128, np.float32), -1)
        # One more evaluation than steps: the last offset is scored too.
        for step in range(self.config.steps + 1):
            if should_stop is not None and should_stop():
                raise Cancelled("deep refine cancelled")
            started = time.perf_counter()
            optimizer.zero_grad()
            sims = {name: torch.zeros(()) for name in refs}
            prior_term = torch.zeros(())
            for probe in prepared:
                timbre = probe.timbre + offset
                audio = self.model.decode(probe.inputs, timbre)
                if post is not None:
                    audio = post(audio)
                for name in refs:
                    emb = torch.nn.functional.normalize(self.listeners[name](audio), dim=0)
                    sims[name] = sims[name] + torch.dot(emb, refs[name]) / len(prepared)
                d = timbre - probe.mean
                prior_term = prior_term + (d @ probe.precision @ d) / (128 * len(prepared))
            loss = self.config.prior_weight * prior_term
            for name, weight in self.config.listener_weights.items():
                loss = loss + weight * (1 - sims[name])
            value = float(loss.detach())
            if value < best[0]:
                best = (value, offset.detach().numpy().copy(), step)
            if step < self.config.steps:
                loss.backward()
                optimizer.step()
            record = DeepStep(
                step=step,
                loss=value,
                similarity={k: round(float(v.detach()), 4) for k, v in sims.items()},
                prior=round(float(prior_term.detach()), 4),
                seconds=round(time.perf_counter() - started, 3),
            )
            history.append(record)
            if on_step is not None:
                on_step(record)
        return DeepRefineResult(
            offset=best[1],
            steps=history,
            best_step=best[2],
            seconds=time.perf_counter() - began,
        )


def tone_post(taps: np.ndarray) -> PostFn:
    """The voice's tone filter (synth/audio/tone.ToneFilter.taps at 24 kHz) as a
    differentiable step: the same linear-phase FIR, ``same``-mode, RMS kept,
    so the listeners hear what the engine's renders will sound like."""
    import torch

    kernel = torch.from_numpy(np.asarray(taps, np.float32)[::-1].copy()).reshape(1, 1, -1)
    pad = kernel.shape[-1] // 2

    def apply(audio: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.conv1d(audio.reshape(1, 1, -1), kernel, padding=pad).reshape(-1)
        y = y[: audio.shape[0]]
        rms_in = audio.pow(2).mean().clamp_min(1e-12).sqrt()
        rms_out = y.pow(2).mean().clamp_min(1e-12).sqrt()
        return y * (rms_in / rms_out)

    return apply
