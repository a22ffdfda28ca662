"""Resemble's PerTh watermark (``resemble-perth``) without torch: embed and detect.

Why this library (measured 2026-12, bench/watermark.py and
docs/benchmarks.md, "Watermark"): of the four candidates, only resemble-perth
ships its trained weights inside the registry wheel (MIT, 37 MB
``perth_net_250000.pth.tar``). ``audioseal`` and ``silentcipher`` fetch theirs
from the Hugging Face hub at first use (no network here), and ``aware`` has
no trained weights at all: its detector is torch's random initialisation under
a fixed seed (hence its pin to torch 2.7.1) and embedding runs 400 optimiser
steps per signal through it (torch autograd, seconds per second of audio).

PerthNet is small: on a 32 kHz STFT (2048-point Hann window, 10 ms hop) the
log magnitudes of the 128 bins below 2 kHz go through seven 1-D convolutions
(128 -> 256, five 256 -> 256 of width 7, 256 -> 128) whose output is a residual
added to those log magnitudes where the frame is not silent; the detector runs
three such stacks at 0.75x, 1x and 1.25x time scale and returns one number in
[0, 1] (PerTh rounds it: >= 0.5 is marked). The convolutions run in ONNX
Runtime on one thread, from graphs built from the shipped weights at the first
start (synth/audio/watermark_graph.py: 5-16x less CPU than NumPy's BLAS, whose
threads spin on every core); the STFTs stay in NumPy. Outputs match the
package's torch code (tests/integration/test_watermark.py).

Serving adds only the watermark's *change* to the signal: the residual
multiplies each sub-2 kHz STFT bin by ``10 ** (9.75 * residual) - 1`` (the
package's dB normalisation undone), the inverse STFT of that is the change,
resampled back to the output rate and added. Audio above 2 kHz is never
touched and the speech itself never goes through two resamplings.
Streams (:class:`StreamMarker`) mark each chunk with the previous 0.3 s as
context and fade the change in and out over 10 ms at chunk edges, so chunks
join without a seam whatever the chunking.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.asset_packages import missing
from voxclone.synth.audio.resample import resample
from voxclone.synth.audio.watermark_graph import StackSession, onnx_models

log = logging.getLogger(__name__)

MODEL_RATE = 32_000
N_FFT = 2048
HOP = 320
SUBBAND = 128  # round(1025 bins * 2 kHz / 16 kHz): the bins PerthNet reads and marks
MAG_FLOOR_DB = -180.0  # 20 * log10(1e-9), PerTh's stft_magnitude_min
NORM_SPAN_DB = 195.0  # 180 dB + 15 dB headroom (perth.perth_net...utils.normalize)
MASK_RATIO = 0.05  # frames below 5% of the loudest frame's summed level are not marked
SCALES = (0.75, 1.0, 1.25)  # the decoder's fast, normal and slow branches (watermark_graph.DECODER)
THRESHOLD = 0.5  # PerTh's get_watermark rounds the [0, 1] score
WEIGHTS = "perth_net/pretrained/implicit/perth_net_250000.pth.tar"
# The generator marked here; a change to the network or the weights changes it.
WATERMARK_ID = "resemble-perth-1.0.1/implicit"

# Streams: the context kept from earlier chunks, and the fade at chunk edges.
STREAM_CONTEXT_S = 0.3  # > the receptive field (15 frames each side = 150 ms) + a window
EDGE_FADE_S = 0.010


def shipped_weights() -> Path:
    """resemble-perth's checkpoint, found without importing perth (its
    ``__init__`` imports torch, librosa and torchaudio)."""
    spec = importlib.util.find_spec("perth")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(locations[0]) / WEIGHTS if locations else None
    if path is None or not path.is_file():
        raise ModelAssetError(missing("the watermark model (resemble-perth's perth_net weights)"))
    return path


def _window() -> np.ndarray:
    # torch.hann_window (periodic), as torchaudio's Spectrogram uses it
    n = np.arange(N_FFT)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)).astype(np.float32)


def stft(signal: np.ndarray) -> np.ndarray:
    """(1025, frames) complex: torch.stft(center=True, reflect padding), as PerTh's."""
    x = np.asarray(signal, dtype=np.float32)
    half = N_FFT // 2
    if x.size <= half:  # reflect padding needs more samples than the pad
        x = np.pad(x, (0, half + 1 - x.size))
    padded = np.pad(x, (half, half), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    return np.fft.rfft(frames * _window(), axis=1).T.astype(np.complex64)


def istft(spec: np.ndarray, length: int) -> np.ndarray:
    """Inverse of :func:`stft` (torch.istft's window-square normalisation)."""
    window = _window()
    frames = np.fft.irfft(spec.T, n=N_FFT, axis=1).astype(np.float32) * window
    count = frames.shape[0]
    total = N_FFT + HOP * (count - 1)
    out = np.zeros(total, dtype=np.float32)
    norm = np.zeros(total, dtype=np.float32)
    square = window * window
    for i in range(count):
        out[i * HOP : i * HOP + N_FFT] += frames[i]
        norm[i * HOP : i * HOP + N_FFT] += square
    half = N_FFT // 2
    out = out[half : half + length]
    norm = norm[half : half + length]
    return np.where(norm > 1e-11, out / np.maximum(norm, 1e-11), 0.0).astype(np.float32)


def log_magnitude(spec: np.ndarray) -> np.ndarray:
    """PerTh's normalised log magnitude: 0 at -180 dB, 1 at +15 dB."""
    db = 20.0 * np.log10(np.maximum(np.abs(spec), 1e-9))
    return ((db - MAG_FLOOR_DB) / NORM_SPAN_DB).astype(np.float32)


def _frame_mask(mag: np.ndarray, loudest: float | None = None) -> np.ndarray:
    level = mag.sum(axis=0)
    top = float(level.max()) if loudest is None else loudest
    return (level > top * MASK_RATIO).astype(np.float32)


def _lerp(x: np.ndarray, size: int) -> np.ndarray:
    """F.interpolate(mode='linear', align_corners=True) along time."""
    t = x.shape[1]
    if size == t:
        return x
    pos = np.arange(size, dtype=np.float64) * ((t - 1) / (size - 1) if size > 1 else 0.0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, t - 1)
    frac = (pos - lo).astype(np.float32)
    return (x[:, lo] * (1 - frac) + x[:, hi] * frac).astype(np.float32)


def _nearest(x: np.ndarray, size: int) -> np.ndarray:
    """F.interpolate(mode='nearest') along time."""
    t = x.shape[0]
    idx = np.minimum(np.floor(np.arange(size) * (t / size)).astype(np.int64), t - 1)
    return x[idx]


@dataclass(frozen=True)
class Detection:
    watermarked: bool
    confidence: float  # PerthNet's score in [0, 1]; >= THRESHOLD is marked


class PerthMark:
    """PerthNet's encoder and decoder (ONNX Runtime graphs of the shipped weights)."""

    def __init__(self, encoder: StackSession, decoder: StackSession) -> None:
        self._encoder = encoder
        self._decoder = decoder  # the 0.75x, 1x and 1.25x branches, in that order

    @classmethod
    def load(cls, models_dir: Path | None = None, weights: Path | None = None) -> PerthMark:
        """From the saved graphs under ``models_dir`` (built at the first
        start); built in memory when it is None."""
        graphs = onnx_models(weights or shipped_weights(), models_dir)
        return cls(StackSession(graphs["encoder"]), StackSession(graphs["decoder"]))

    # -- the network --------------------------------------------------------------------
    def residual(self, mag: np.ndarray, loudest: float | None = None) -> np.ndarray:
        """The encoder's residual (SUBBAND, T) on normalised log magnitudes."""
        (res,) = self._encoder(mag[:SUBBAND])
        return res * _frame_mask(mag, loudest)[None]

    def score(self, mag: np.ndarray) -> float:
        """The decoder's score (unclipped) for normalised log magnitudes (1025, T)."""
        mask = _frame_mask(mag)
        sub = mag[:SUBBAND]
        t = sub.shape[1]
        marks, attns = [], []
        # PerTh's order is slow (1.25), normal, fast (0.75); softmax and sum do not care.
        sizes = [t if scale == 1.0 else int(t * scale) for scale in SCALES]
        outs = self._decoder(*(_lerp(sub, size) for size in sizes))
        for size, out in zip(sizes, outs, strict=True):
            m = _nearest(mask, size)
            total = float(m.sum())
            if total == 0.0:
                return 0.0  # silence: nothing was marked and nothing can be read
            attns.append(float((out[0] * m).sum()) / total)
            marks.append(float((out[1] * m).sum()) / total)
        a = np.array(attns, dtype=np.float64)
        w = np.exp(a - a.max())
        w /= w.sum()
        return float((w * np.array(marks)).sum())

    # -- signals --------------------------------------------------------------------
    def change(
        self, signal: np.ndarray, loudest: float | None = None, spec: np.ndarray | None = None
    ) -> np.ndarray:
        """What marking adds to a 32 kHz signal (same length); ``spec`` is its
        :func:`stft` when the caller has it already."""
        spec = stft(signal) if spec is None else spec
        return self.change_of(spec, log_magnitude(spec), len(signal), loudest)

    def change_of(
        self, spec: np.ndarray, mag: np.ndarray, length: int, loudest: float | None = None
    ) -> np.ndarray:
        res = self.residual(mag, loudest)
        delta = np.zeros_like(spec)
        # wm_mag_dB = mag_dB + 195 * res  =>  wm = X * 10 ** (9.75 * res)
        gain = np.power(10.0, (NORM_SPAN_DB / 20.0) * res, dtype=np.float32) - 1.0
        delta[:SUBBAND] = spec[:SUBBAND] * gain
        return istft(delta, length)

    def embed(self, audio: np.ndarray, rate: int) -> np.ndarray:
        """``audio`` (mono float) marked, at its own rate and length."""
        x = np.asarray(audio, dtype=np.float32)
        if x.size == 0:
            return x
        at_model = resample(x, rate, MODEL_RATE)
        delta = _fit(resample(self.change(at_model), MODEL_RATE, rate), x.size)
        return (x + delta).astype(np.float32)

    def detect(self, audio: np.ndarray, rate: int) -> Detection:
        x = np.asarray(audio, dtype=np.float32)
        if x.ndim > 1:
            x = x.mean(axis=1)
        if x.size < HOP * 2:
            return Detection(False, 0.0)
        mag = log_magnitude(stft(resample(x, rate, MODEL_RATE)))
        confidence = min(max(self.score(mag), 0.0), 1.0)
        return Detection(confidence >= THRESHOLD, confidence)


def _fit(x: np.ndarray, length: int) -> np.ndarray:
    if x.size >= length:
        return x[:length]
    return np.pad(x, (0, length - x.size))


class StreamMarker:
    """Marks a stream chunk by chunk, without seams.

    Each chunk is marked with the last STREAM_CONTEXT_S of earlier audio as
    context (so the convolutions see what the whole-file marker would on the
    left), the frame mask uses the loudest frame so far, and the change fades
    in and out over EDGE_FADE_S at each chunk edge: what the next chunk's
    change starts with cannot be known when this one is sent, so both meet at
    zero instead of with a step.
    """

    def __init__(self, mark: PerthMark, rate: int) -> None:
        self._mark = mark
        self._rate = rate
        self._context = np.zeros(0, dtype=np.float32)
        self._keep = int(STREAM_CONTEXT_S * rate)
        self._fade = max(1, int(EDGE_FADE_S * rate))
        self._loudest: float | None = None

    def push(self, chunk: np.ndarray) -> np.ndarray:
        x = np.asarray(chunk, dtype=np.float32)
        if x.size == 0:
            return x
        joined = np.concatenate([self._context, x])
        at_model = resample(joined, self._rate, MODEL_RATE)
        spec = stft(at_model)  # once: the mask's level and the change both read it
        mag = log_magnitude(spec)
        level = float(mag.sum(axis=0).max())
        self._loudest = level if self._loudest is None else max(self._loudest, level)
        change = self._mark.change_of(spec, mag, at_model.size, self._loudest)
        delta = _fit(resample(change, MODEL_RATE, self._rate), joined.size)[-x.size :]
        delta = delta * _edges(x.size, self._fade)
        self._context = joined[-self._keep :]
        return (x + delta).astype(np.float32)


def _edges(n: int, fade: int) -> np.ndarray:
    env = np.ones(n, dtype=np.float32)
    f = min(fade, n // 2)
    if f > 0:
        ramp = (0.5 - 0.5 * np.cos(np.pi * (np.arange(f) + 0.5) / f)).astype(np.float32)
        env[:f] = ramp
        env[n - f :] = ramp[::-1]
    return env


_shared: PerthMark | None = None
_models_dir: Path | None = None
_found: Path | None = None  # the weights, once found (they do not go away while serving)
_failure: str | None = None  # why the installed weights did not load, once they failed
_lock = threading.Lock()


def configure(models_dir: Path | None) -> None:
    """Where the process's graphs are saved (bootstrap: Settings.models_dir),
    set before the first :func:`shared`."""
    global _models_dir
    _models_dir = models_dir


def unavailable() -> str | None:
    """Why nothing can be marked, or None when marking works: the weights are
    not installed (a plain ``pip install .``, synth/asset_packages.py; the
    message names the install command) or failed to load. Cheap once found:
    serving asks it for every response's ``X-Voxclone-Watermark``."""
    global _found
    if _failure is not None:
        return _failure
    if _found is None:
        try:
            _found = shipped_weights()
        except ModelAssetError as exc:
            return exc.message
    return None


def state(enabled: bool) -> str:
    """/readyz's ``detail.watermark``: "perth", "off" (the operator's choice)
    or "unavailable (why)" (speech is served unmarked)."""
    if not enabled:
        return "off"
    reason = unavailable()
    return "perth" if reason is None else f"unavailable ({reason})"


def shared() -> PerthMark:
    """The process's one PerthMark (graphs saved under the configured models
    directory: ~0.1 s to load once built). A failure is remembered for
    :func:`unavailable` and raised again."""
    global _shared, _failure
    with _lock:
        if _shared is None:
            try:
                _shared = PerthMark.load(_models_dir)
            except ModelAssetError as exc:
                _failure = f"the watermark model did not load: {exc.message}"
                raise
            except Exception as exc:  # a damaged weights file: torch_zip's or ORT's own errors
                _failure = f"the watermark model did not load ({type(exc).__name__})"
                raise ModelAssetError(_failure) from exc
        return _shared


def stream_marker(rate: int) -> StreamMarker | None:
    """A marker for one render, or None when marking is unavailable: speech
    is never refused for want of its watermark (the header says "none")."""
    if unavailable() is not None:
        return None
    try:
        return StreamMarker(shared(), rate)
    except ModelAssetError as exc:
        log.error("watermark unavailable: %s; speech is served unmarked", exc.message)
        return None
