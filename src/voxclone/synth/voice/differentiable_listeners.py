"""The product's two listeners in torch, so a loss can reach the audio (issue 47).

The deep refine (synth/voice/deep_refine.py) descends on a voice's timbre to
raise the similarity CAM++ and GE2E hear; that needs the gradient from the
embedding back to the 24 kHz render. These are the same computations as the
serving listeners (CAM++: synth/voice/campplus.py on fbank.py's features;
GE2E: synth/voice/ge2e.py), built from the same weights those load — the
CAM++ layers from the NumPy network's parsed, checked tensors, GE2E's LSTM
from the state dict the ONNX graph is built from — with every constant (mel
filters, windows, window grid) taken from those modules, so the two cannot
drift apart. Measured agreement: tests/integration/test_differentiable_listeners.py.

Two steps are not differentiable and need not be: GE2E's volume
normalization and webrtcvad trim *decide* (a gain, a set of kept samples) on
the detached audio, and those decisions are applied to the differentiable
signal. Torch is imported on use; serving never imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.voice import fbank, ge2e
from voxclone.synth.voice.campplus import SEGMENT, STD_EPS, CamPlusPlus

if TYPE_CHECKING:  # pragma: no cover
    import torch

ENGINE_RATE = 24_000
LISTENER_RATE = 16_000


def resample_24k_to_16k(audio: torch.Tensor) -> torch.Tensor:
    """Band-limited 24 -> 16 kHz by the FFT (keep the bins below 8 kHz):
    differentiable, and within a few 1e-3 of soxr's result away from the
    clip's ends (the FFT treats the clip as periodic; renders start and end
    in near-silence)."""
    import torch

    n = audio.shape[-1]
    padded = n + (-n) % 3
    spectrum = torch.fft.rfft(audio, n=padded)
    out_n = padded * 2 // 3
    kept = spectrum[..., : out_n // 2 + 1]
    return torch.fft.irfft(kept, n=out_n) * (out_n / padded)


class TorchGe2e:
    """GE2E (resemblyzer's d-vector) in torch, as ge2e.Ge2eNetwork computes it."""

    def __init__(self, state: dict[str, np.ndarray]) -> None:
        import torch

        self._lstm = torch.nn.LSTM(ge2e.MEL_CHANNELS, 256, num_layers=3, batch_first=True)
        try:
            weights = {
                name: torch.from_numpy(np.asarray(state[f"lstm.{name}"], np.float32))
                for name, _ in self._lstm.named_parameters()
            }
            self._linear_w = torch.from_numpy(np.asarray(state["linear.weight"], np.float32))
            self._linear_b = torch.from_numpy(np.asarray(state["linear.bias"], np.float32))
        except KeyError as exc:
            raise ModelAssetError("the speaker encoder weights lack a layer") from exc
        self._lstm.load_state_dict(weights)
        self._lstm.requires_grad_(False)
        self._basis = torch.from_numpy(ge2e.mel_basis())
        window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(ge2e.MEL_WINDOW) / ge2e.MEL_WINDOW)
        self._window = torch.from_numpy(window.astype(np.float32))

    @classmethod
    def load(cls) -> TorchGe2e:
        return cls(ge2e.read_legacy_state(ge2e.shipped_weights()))

    def _preprocessed(self, audio16: torch.Tensor) -> torch.Tensor:
        """ge2e.preprocess's gain and kept samples, decided on the detached clip."""
        import torch

        raw = audio16.detach().numpy().astype(np.float32)
        normalized = ge2e.normalize_volume(raw)
        peak = float(np.abs(raw).max()) if raw.size else 0.0
        gain = float(np.abs(normalized).max()) / peak if peak > 0 else 1.0
        keep = ge2e.speech_mask(normalized)
        if int(keep.sum()) < LISTENER_RATE // 4:
            return audio16  # preprocess keeps the raw clip then
        index = torch.from_numpy(np.flatnonzero(keep))
        return audio16[index] * gain

    def embed(self, audio16: torch.Tensor) -> torch.Tensor:
        """Unit 256-d embedding of 16 kHz audio [samples]."""
        import torch

        wav = self._preprocessed(audio16)
        windows = ge2e.partial_windows(int(wav.shape[0]))
        needed = windows[-1].stop * ge2e.MEL_HOP
        if needed >= wav.shape[0]:
            wav = torch.nn.functional.pad(wav, (0, needed - wav.shape[0]))
        half = ge2e.MEL_WINDOW // 2
        padded = torch.nn.functional.pad(wav, (half, half))
        frames = padded.unfold(0, ge2e.MEL_WINDOW, ge2e.MEL_HOP)
        spectrum = torch.fft.rfft(frames * self._window, dim=1)
        mel = (spectrum.real**2 + spectrum.imag**2) @ self._basis.T
        batch = torch.stack([mel[w] for w in windows])
        _, (hidden, _) = self._lstm(batch)
        raw = torch.relu(hidden[-1] @ self._linear_w.T + self._linear_b)
        units = raw / raw.norm(dim=1, keepdim=True).clamp_min(1e-12)
        mean = units.mean(dim=0)
        return mean / mean.norm().clamp_min(1e-12)


class TorchCamPlusPlus:
    """CAM++ in torch, from the NumPy network's parsed weights (campplus.py)."""

    def __init__(self, net: CamPlusPlus) -> None:
        import torch

        def t(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))

        def affine(a: object) -> tuple[torch.Tensor, torch.Tensor]:
            return t(a.scale), t(a.shift)  # type: ignore[attr-defined]

        self.final_relu = net.final_relu
        self._head_conv1 = t(net._head_conv1)
        self._head_bn1 = affine(net._head_bn1)
        self._res = [
            (
                b.stride,
                t(b.conv1),
                affine(b.bn1),
                t(b.conv2),
                affine(b.bn2),
                None if b.proj is None else t(b.proj),
                None if b.proj_bn is None else affine(b.proj_bn),
            )
            for b in net._res
        ]
        self._head_conv2 = t(net._head_conv2)
        self._head_bn2 = affine(net._head_bn2)
        self._tdnn = t(net._tdnn)
        self._tdnn_bn = affine(net._tdnn_bn)
        self._blocks = [
            (
                [
                    (
                        affine(d.bn1),
                        t(d.bottleneck),
                        affine(d.bn2),
                        t(d.local),
                        d.dilation,
                        t(d.ctx1),
                        t(d.ctx1_bias),
                        t(d.ctx2),
                        t(d.ctx2_bias),
                    )
                    for d in dense
                ],
                affine(transit_bn),
                t(transit),
            )
            for dense, transit_bn, transit in net._blocks
        ]
        self._out_bn = affine(net._out_bn)
        self._dense = t(net._dense)
        self._dense_bn = affine(net._dense_bn)
        self._filters = t(fbank.mel_filters(fbank.N_MELS))
        self._povey = t(fbank.povey_window())

    @classmethod
    def load(cls, weights: Path) -> TorchCamPlusPlus:
        return cls(CamPlusPlus.from_file(weights))

    @staticmethod
    def _bn(
        x: torch.Tensor, affine: tuple[torch.Tensor, torch.Tensor], relu: bool = True
    ) -> torch.Tensor:
        import torch

        scale, shift = affine
        shape = (-1,) + (1,) * (x.dim() - 2)  # channels on axis 1 of a batch of one
        y = x * scale.reshape(shape) + shift.reshape(shape)
        return torch.relu(y) if relu else y

    def features(self, audio16: torch.Tensor) -> torch.Tensor:
        """fbank.mean_normalized_fbank in torch: [frames, 80]."""
        import torch

        frames = audio16.unfold(0, fbank.FRAME_LENGTH, fbank.FRAME_SHIFT)
        frames = frames - frames.mean(dim=1, keepdim=True)
        previous = torch.cat([frames[:, :1], frames[:, :-1]], dim=1)
        frames = (frames - fbank.PREEMPHASIS * previous) * self._povey
        power = torch.fft.rfft(frames, n=fbank.N_FFT, dim=1).abs() ** 2
        feats = torch.log((power @ self._filters.T).clamp_min(fbank.LOG_FLOOR))
        return feats - feats.mean(dim=0, keepdim=True)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """[frames, 80] -> the raw 192-d embedding (as CamPlusPlus.forward)."""
        import torch
        import torch.nn.functional as F

        x = feats.T[None, None]  # [1, 1, F, T]
        x = self._bn(F.conv2d(x, self._head_conv1, padding=1), self._head_bn1)
        for stride, conv1, bn1, conv2, bn2, proj, proj_bn in self._res:
            y = self._bn(F.conv2d(x, conv1, stride=(stride, 1), padding=1), bn1)
            y = self._bn(F.conv2d(y, conv2, padding=1), bn2, relu=False)
            if proj is None or proj_bn is None:
                y = y + x
            else:
                shortcut = torch.einsum("oc,bcft->boft", proj, x[:, :, ::stride])
                y = y + self._bn(shortcut, proj_bn, relu=False)
            x = torch.relu(y)
        x = self._bn(F.conv2d(x, self._head_conv2, stride=(2, 1), padding=1), self._head_bn2)
        x = x.reshape(1, -1, x.shape[-1])  # [1, C*F', T]
        x = self._bn(F.conv1d(x, self._tdnn, stride=2, padding=2), self._tdnn_bn)
        for dense, transit_bn, transit in self._blocks:
            for layer in dense:
                x = torch.cat([x, self._dense_layer(x, *layer)], dim=1)
            x = (transit @ self._bn(x, transit_bn)[0])[None]
        x = self._bn(x, self._out_bn)[0]
        stats = torch.cat([x.mean(dim=1), x.std(dim=1) if x.shape[1] > 1 else _eps(x)])
        emb = self._dense @ stats
        scale, shift = self._dense_bn
        emb = emb * scale + shift
        return torch.relu(emb) if self.final_relu else emb

    def _dense_layer(
        self,
        x: torch.Tensor,
        bn1: tuple[torch.Tensor, torch.Tensor],
        bottleneck: torch.Tensor,
        bn2: tuple[torch.Tensor, torch.Tensor],
        local: torch.Tensor,
        dilation: int,
        ctx1: torch.Tensor,
        ctx1_bias: torch.Tensor,
        ctx2: torch.Tensor,
        ctx2_bias: torch.Tensor,
    ) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        h = self._bn((bottleneck @ self._bn(x, bn1)[0])[None], bn2)  # [1, 128, T]
        pad = (local.shape[2] - 1) // 2 * dilation
        out = F.conv1d(h, local, dilation=dilation, padding=pad)
        frames = h.shape[2]
        segments = math.ceil(frames / SEGMENT)
        padded = F.pad(h, (0, segments * SEGMENT - frames))
        sums = padded.reshape(1, h.shape[1], segments, SEGMENT).sum(dim=3)
        counts = torch.tensor(
            [min(SEGMENT, frames - s * SEGMENT) for s in range(segments)], dtype=h.dtype
        )
        context = (sums / counts + h.mean(dim=2, keepdim=True))[0]
        hidden = torch.relu(ctx1 @ context + ctx1_bias[:, None])
        gates = torch.sigmoid(ctx2 @ hidden + ctx2_bias[:, None])
        return out * gates.repeat_interleave(SEGMENT, dim=1)[:, :frames][None]

    def embed(self, audio16: torch.Tensor) -> torch.Tensor:
        """Unit 192-d embedding of 16 kHz audio [samples] (at least 0.5 s)."""
        emb = self.forward(self.features(audio16))
        return emb / emb.norm().clamp_min(1e-12)


def _eps(x: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.full((x.shape[0],), STD_EPS, dtype=x.dtype)


@dataclass(frozen=True)
class DifferentiableListeners:
    """The listeners a deep refine can hear with, by the product's names."""

    ge2e: TorchGe2e
    campplus: TorchCamPlusPlus | None

    @classmethod
    def load(cls, models_dir: Path | None) -> DifferentiableListeners:
        from voxclone.synth.voice.campplus_weights import installed_weights, verify_weights

        weights = installed_weights(models_dir)
        campplus = None
        if weights is not None:
            verify_weights(weights)
            campplus = TorchCamPlusPlus.load(weights)
        return cls(TorchGe2e.load(), campplus)

    def embedders(self) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
        """Name -> 24 kHz render [samples] -> unit embedding, differentiable."""
        ge2e_net, campplus = self.ge2e, self.campplus
        out: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "ge2e": lambda audio: ge2e_net.embed(resample_24k_to_16k(audio))
        }
        if campplus is not None:
            out["campplus"] = lambda audio: campplus.embed(resample_24k_to_16k(audio))
        return out
