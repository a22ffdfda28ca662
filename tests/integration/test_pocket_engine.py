"""Pocket TTS engine with a test-built bundle: the package's own classes, random
weights and a tokenizer trained here on a few sentences (the real weights are
operator-supplied and not reachable from this environment).

Covers: `voxclone models import | list | pull`, the bundle check (corrupted and
unknown files), cloning a prompt from real speech, frame-by-frame streaming,
and prompts that outlive the engine instance.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxclone.api.cli import main
from voxclone.errors import InvalidInput
from voxclone.synth.engine.base import Engine, SynthItem
from voxclone.synth.engine.pocket.bundle import MANIFEST, installed_bundles
from voxclone.synth.engine.pocket.engine import PocketEngine, PocketPrompt

# The random-weight bundle builder is shared with bench/engines_speed.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from pocket_random_bundle import make_random_bundle  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
# The tokenizer is trained on these, inside the test: no vocabulary is shipped.
SENTENCES = [
    "Voices are cloned from a short recording of the speaker.",
    "The weather today is sunny with a light breeze from the west.",
    "Please read the following sentence slowly and clearly.",
    "Numbers such as seven, eleven and forty two are spelled out.",
    "A streaming engine sends audio while it is still speaking.",
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pocket") / "tiny-bundle"
    make_random_bundle(path, config="tiny", name="tiny", sentences=SENTENCES, vocab_size=300)
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, bundle: Path) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("pocket-home")
    mp = pytest.MonkeyPatch()
    mp.setenv("VOXCLONE_HOME", str(home))
    # Models live apart from the library (models_location.py); the
    # suite points them at a shared session folder, this test at its own.
    mp.setenv("VOXCLONE_MODELS_DIR", str(home / "models"))
    assert main(["models", "import", "pocket-tts", str(bundle)]) == 0
    yield home
    mp.undo()


PIECE_FRAMES = 4


@pytest.fixture(scope="module")
def engine(home: Path) -> PocketEngine:
    # At most 4 frames a piece: by default the decoder takes every frame the
    # generator has queued, so on a busy host (CI's other workers) a whole
    # answer came back in 2 pieces, and "streams frame by frame" was a race.
    made = PocketEngine(home / "models", frames_per_piece=PIECE_FRAMES)
    made.load()
    made.warmup()
    return made


def _reference() -> tuple[np.ndarray, int]:
    audio, sr = sf.read(DATA / "librispeech_1088-129236-0000.wav", dtype="float32")
    return audio, sr


def _ids(engine: PocketEngine, text: str) -> tuple[int, ...]:
    tok = engine.tokenizer()
    return tok.token_ids(tok.phonemize(text, "en-us"))


def test_import_installs_verified_copy_and_list_shows_it(
    home: Path, bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [installed] = installed_bundles(home / "models", "pocket-tts")
    assert installed.manifest.name == "tiny"
    assert installed.imported_at is not None
    for f in installed.manifest.files:  # every file copied, byte for byte
        assert (installed.path / f.name).read_bytes() == (bundle / f.name).read_bytes()
    capsys.readouterr()
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    kokoro = next(line for line in out.splitlines() if line.startswith("kokoro"))
    pocket = next(line for line in out.splitlines() if line.startswith("pocket-tts"))
    assert "Apache-2.0" in kokoro and "ja" in kokoro
    assert "tiny" in pocket and "KB" in pocket and "code MIT" in pocket and "en-us" in pocket


def test_engine_conforms_and_says_how_it_clones(engine: PocketEngine) -> None:
    assert isinstance(engine, Engine)
    caps = engine.capabilities
    assert (caps.engine, caps.clone_method, caps.input_kind) == ("pocket-tts", "prompt", "text")
    assert caps.sample_rate == 24_000 and caps.streaming == "frame"
    assert caps.native_controls == frozenset()  # speed, pitch, … are all post-processing
    assert caps.post_controls >= {"speed", "pitch", "energy", "emotion"}
    assert caps.model_id == "pocket-tts-tiny" and len(caps.model_version) == 12
    assert engine.ready


def test_clone_from_reference_and_stream_speech(engine: PocketEngine) -> None:
    audio, sr = _reference()
    assert sr != engine.sample_rate  # the engine resamples to the codec's rate
    started = time.perf_counter()
    blob = engine.make_prompt(audio, sr)
    assert time.perf_counter() - started < 30
    prompt = engine.load_prompt(blob)
    assert isinstance(prompt, PocketPrompt)
    seconds = len(audio) / sr
    assert abs(prompt.frames - seconds * 12.5) <= 3  # Mimi latents at 12.5 frames/s

    ids = _ids(engine, "the weather today is sunny, please read slowly")
    assert ids and max(ids) < 300
    pieces = list(engine.stream(SynthItem(token_ids=ids, prompt=prompt)))
    assert len(pieces) >= 3, "streaming should yield audio frame by frame"
    assert max(p.size for p in pieces) <= PIECE_FRAMES * 1920  # the option bounds a piece
    for piece in pieces:
        assert piece.dtype == np.float32 and piece.ndim == 1 and piece.size > 0
        assert np.isfinite(piece).all()
    total = sum(p.size for p in pieces)
    # Random weights never emit EOS: the package's length cap for this many
    # tokens (tokens / 3 s + 2 s) at 24 kHz, in whole 80 ms frames.
    assert total % 1920 == 0 and total / 24_000 >= 2.0
    [whole] = engine.synthesize([SynthItem(token_ids=ids, prompt=prompt)])
    assert whole.size == total and np.isfinite(whole).all()


def test_stream_stops_when_the_consumer_goes_away(engine: PocketEngine) -> None:
    audio, sr = _reference()
    prompt = engine.load_prompt(engine.make_prompt(audio, sr))
    stream = engine.stream(SynthItem(token_ids=_ids(engine, "voices are cloned"), prompt=prompt))
    next(stream)
    assert isinstance(stream, Generator)
    stream.close()  # must release the model for the next caller
    [again] = engine.synthesize([SynthItem(token_ids=_ids(engine, "hello"), prompt=prompt)])
    assert again.size > 0


def test_prompt_survives_a_new_engine_and_is_refused_by_another_model(
    engine: PocketEngine, home: Path
) -> None:
    audio, sr = _reference()
    blob = engine.make_prompt(audio, sr)
    fresh = PocketEngine(home / "models")
    fresh.load()
    prompt = fresh.load_prompt(blob)
    [out] = fresh.synthesize([SynthItem(token_ids=_ids(fresh, "hello there"), prompt=prompt)])
    assert out.size > 0 and np.isfinite(out).all()

    other = blob.replace(engine.capabilities.model_version.encode(), b"0" * 12)
    with pytest.raises(InvalidInput, match="made with"):
        fresh.load_prompt(other)
    with pytest.raises(InvalidInput, match="damaged"):
        fresh.load_prompt(b"not a prompt at all")


def test_speaking_needs_a_cloned_voice(engine: PocketEngine) -> None:
    with pytest.raises(InvalidInput, match="cloned voice"):
        list(engine.stream(SynthItem(token_ids=(1, 2, 3), style=np.zeros(256, np.float32))))
    with pytest.raises(InvalidInput, match="not supported"):
        engine.tokenizer().phonemize("bonjour", "ja")


def _copy(bundle: Path, dest: Path) -> Path:
    shutil.copytree(bundle, dest)
    return dest


def test_corrupted_file_is_rejected_and_nothing_changes(
    home: Path, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _copy(bundle, tmp_path / "bad")
    weights = bytearray((bad / "model.safetensors").read_bytes())
    weights[len(weights) // 2] ^= 0xFF  # one flipped byte, same size
    (bad / "model.safetensors").write_bytes(bytes(weights))
    before = (home / "models" / "pocket-tts" / "tiny" / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "corrupted file 'model.safetensors'" in err and "SHA-256" in err
    after = (home / "models" / "pocket-tts" / "tiny" / "model.safetensors").read_bytes()
    assert after == before
    assert [p.name for p in (home / "models" / "pocket-tts").iterdir()] == ["tiny"]


def test_unknown_file_is_rejected(
    home: Path, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _copy(bundle, tmp_path / "extra")
    (bad / "voices.pt").write_bytes(b"\x80\x04pickle payload")
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(bad)]) == 2
    assert "unknown file 'voices.pt'" in capsys.readouterr().err


def test_manifest_for_another_engine_or_truncated_file_is_rejected(
    home: Path, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _copy(bundle, tmp_path / "other")
    manifest = json.loads((other / MANIFEST).read_text())
    manifest["engine"] = "f5-tts"
    (other / MANIFEST).write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(other)]) == 2
    assert "for engine 'f5-tts'" in capsys.readouterr().err

    short = _copy(bundle, tmp_path / "short")
    data = (short / "tokenizer.json").read_bytes()
    (short / "tokenizer.json").write_bytes(data[:-10])
    assert main(["models", "import", "pocket-tts", str(short)]) == 2
    assert "corrupted file 'tokenizer.json'" in capsys.readouterr().err


def test_archive_bundle_imports(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bundle, arcname="tiny")
    other_home = tmp_path / "home2"
    monkeypatch.setenv("VOXCLONE_HOME", str(other_home))
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(other_home / "models"))
    assert main(["models", "import", "pocket-tts", str(archive)]) == 0
    [installed] = installed_bundles(other_home / "models", "pocket-tts")
    assert installed.manifest.name == "tiny"


def test_pull_fails_at_once_offline_and_says_how_to_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(tmp_path / "models"))
    started = time.perf_counter()
    rc = main(["models", "pull", "pocket-tts", "--timeout", "1"])
    elapsed = time.perf_counter() - started
    err = capsys.readouterr().err
    assert rc != 0
    assert "voxclone models import pocket-tts" in err
    assert elapsed < 10, f"pull took {elapsed:.1f} s offline"
    assert not (tmp_path / "models" / "pocket-tts").exists()


def test_engines_without_bundles_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "import", "kokoro", "/nonexistent"]) == 2
    assert "takes no imported models" in capsys.readouterr().err


def test_hub_files_with_the_wrong_config_are_refused(
    home: Path, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An operator's directory of hub files (no manifest) + the package config
    # they claim to belong to: tiny random weights do not fit "english".
    raw = tmp_path / "download"
    raw.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.copyfile(bundle / name, raw / name)
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(raw), "--config", "english"]) == 2
    err = capsys.readouterr().err
    assert "do not fit config.yaml" in err or "tokenizer does not match" in err
    assert main(["models", "import", "pocket-tts", str(raw), "--config", "klingon"]) == 2
    assert "unknown Pocket TTS config" in capsys.readouterr().err


def test_weights_that_do_not_fit_the_config_are_refused(
    home: Path, bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from voxclone.synth.engine.pocket.bundle import read_manifest, write_manifest

    bad = _copy(bundle, tmp_path / "deeper")
    config = yaml.safe_load((bad / "config.yaml").read_text())
    config["flow_lm"]["transformer"]["num_layers"] = 2  # the weights have one layer
    (bad / "config.yaml").write_text(yaml.safe_dump(config))
    m = read_manifest(bad)
    write_manifest(  # a consistent manifest: the hashes are fine, the model is not
        bad,
        engine=m.engine,
        name=m.name,
        version=m.version,
        license=m.license,
        languages=list(m.languages),
    )
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "do not fit config.yaml" in err and "missing" in err


def test_long_references_are_cut_at_a_pause_before_the_prompt_limit() -> None:
    from voxclone.synth.engine.pocket.engine import MAX_PROMPT_S, _cut_at_pause

    rate = 24_000
    rng = np.random.default_rng(1)
    speech = (0.3 * rng.standard_normal(int(20 * rate))).astype(np.float32)
    pause_at = int((MAX_PROMPT_S - 1.2) * rate)
    speech[pause_at : pause_at + rate // 10] = 0.0  # a 100 ms pause 1.2 s before the limit
    cut = _cut_at_pause(speech, rate)
    assert pause_at < cut.size <= pause_at + rate // 10
    short = speech[: 5 * rate]
    assert _cut_at_pause(short, rate) is short


def test_block_local_encoder_attention_matches_the_dense_pass(engine: PocketEngine) -> None:
    """The clone's encoder pass attends block by block (a quarter of the score work
    for a 10 s reference); it must give the package's dense masked result."""
    import torch
    from pocket_tts.modules.attention import StreamingMultiheadAttention

    transformer = engine.model.mimi.encoder_transformer
    layers = [m for m in transformer.modules() if isinstance(m, StreamingMultiheadAttention)]
    assert layers and all("forward" in vars(m) for m in layers)  # installed at load
    context = int(layers[0].context)
    torch.manual_seed(0)
    x = torch.randn(1, layers[0].embed_dim, 5 * context + 7)
    with torch.no_grad():
        local = transformer(x, model_state=None)[0]
        for m in layers:
            del m.forward  # back to the package's dense pass
        try:
            dense = transformer(x, model_state=None)[0]
        finally:
            from voxclone.synth.engine.pocket.local_attention import use_block_local_attention

            use_block_local_attention(transformer)
    assert torch.allclose(local, dense, atol=1e-5, rtol=1e-4)
