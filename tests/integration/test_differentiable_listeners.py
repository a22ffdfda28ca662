"""The listeners' torch copies (synth/voice/differentiable_listeners.py) hear
what the serving listeners hear, and pass a gradient back to the audio.

CAM++ with random weights of the real architecture (the real weights are not
in the repository; test_campplus.py's builder), GE2E with resemblyzer's
shipped weights, on real speech from tests/data. Measured here on the two
LibriSpeech clips with the real CAM++ weights too: cosine 1.0000 for both
listeners; the FFT resampler within 1.5e-3 (max) of soxr away from the ends.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

torch = pytest.importorskip("torch", reason="the deep refine needs torch ([deep] extra)")

from test_campplus import random_state  # noqa: E402

from voxclone.synth.voice import ge2e  # noqa: E402
from voxclone.synth.voice.campplus import CamPlusPlus  # noqa: E402
from voxclone.synth.voice.differentiable_listeners import (  # noqa: E402
    DifferentiableListeners,
    TorchCamPlusPlus,
    TorchGe2e,
    resample_24k_to_16k,
)
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
CLIPS = ("librispeech_1088-129236-0000.wav", "librispeech_3005-163389-0000.wav")


def _clip16(name: str) -> np.ndarray:
    audio, rate = sf.read(DATA / name, dtype="float32")
    return audio if rate == 16_000 else soxr.resample(audio, rate, 16_000).astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("name", CLIPS)
def test_campplus_copy_hears_what_the_numpy_network_hears(name: str) -> None:
    numpy_net = CamPlusPlus(random_state(3))
    copy = TorchCamPlusPlus(numpy_net)
    x = _clip16(name)[: 4 * 16_000]  # > 100 frames: several context segments
    with torch.no_grad():
        got = copy.embed(torch.from_numpy(x)).numpy()
    assert float(got @ _unit(numpy_net.embed(x))) > 0.9999


@pytest.mark.parametrize("name", CLIPS)
def test_ge2e_copy_hears_what_the_product_encoder_hears(name: str) -> None:
    try:
        copy = TorchGe2e.load()
    except Exception as exc:  # the weights ship with resemblyzer (test extra)
        pytest.skip(f"GE2E weights unavailable: {exc}")
    x = _clip16(name)
    with torch.no_grad():
        got = copy.embed(torch.from_numpy(x)).numpy()
    expected = SpeakerEncoder().embed(x)
    assert float(got @ _unit(expected)) > 0.9999


def test_the_speech_mask_is_what_the_trim_keeps() -> None:
    x = _clip16(CLIPS[0])
    silence = np.zeros(16_000, np.float32)
    gappy = np.concatenate([x[:24_000], silence, x[24_000:48_000]])
    keep = ge2e.speech_mask(gappy)
    assert keep.shape == gappy.shape and not keep.all()
    assert np.array_equal(gappy[keep], ge2e.trim_long_silences(gappy))


def test_the_resampler_matches_soxr_away_from_the_ends() -> None:
    x16 = _clip16(CLIPS[1])
    x24 = soxr.resample(x16, 16_000, 24_000).astype(np.float32)
    ours = resample_24k_to_16k(torch.from_numpy(x24)).numpy()
    theirs = soxr.resample(x24, 24_000, 16_000)
    n = min(ours.size, theirs.size)
    assert abs(ours.size - theirs.size) <= 1
    inner = slice(800, n - 800)
    assert np.abs(ours[inner] - theirs[inner]).max() < 5e-3


def test_a_gradient_reaches_the_render_through_both_listeners() -> None:
    try:
        ge2e_copy = TorchGe2e.load()
    except Exception as exc:
        pytest.skip(f"GE2E weights unavailable: {exc}")
    listeners = DifferentiableListeners(ge2e_copy, TorchCamPlusPlus(CamPlusPlus(random_state(1))))
    x24 = soxr.resample(_clip16(CLIPS[0])[: 3 * 16_000], 16_000, 24_000).astype(np.float32)
    embedders = listeners.embedders()
    assert set(embedders) == {"ge2e", "campplus"}
    for embed in embedders.values():
        audio = torch.from_numpy(x24.copy()).requires_grad_(True)
        embedding = embed(audio)
        assert abs(float(embedding.norm()) - 1.0) < 1e-5
        embedding.sum().backward()
        assert audio.grad is not None
        assert bool(torch.isfinite(audio.grad).all()) and float(audio.grad.abs().sum()) > 0
