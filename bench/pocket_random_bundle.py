"""Make a Pocket TTS bundle with random weights from the package's own classes.

The real weights live on a hub this environment cannot reach, so tests
(tests/integration/test_pocket_*.py) and benchmarks (bench/engines_speed.py)
build the model from a config with random weights and a tokenizer trained on
a few sentences (``tokenizers`` BPE). That runs every code path of the engine
(bundle import, prompt encoding, streaming generation, decoding) and, at full
size, has the real model's speed — but it says nothing about how the speech
sounds: the audio is noise.

The EOS head's bias is set far below the threshold so a random model never
stops early: every call generates the package's maximum length for its text
(token count / 3 s + 2 s), which keeps tests and timings deterministic.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from voxclone.synth.engine.pocket.bundle import Manifest, write_manifest
from voxclone.synth.engine.pocket.loading import (
    CODE_LICENSE,
    CONFIG_FILE,
    ENGINE,
    import_pocket,
    languages_for,
)

WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"

DEFAULT_SENTENCES = (
    "Hello world, this is a test of the voice cloning service.",
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
    "A journey of a thousand miles begins with a single step.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "Numbers like one, two, three and four are spoken slowly and clearly.",
)

# A few-hundred-kilobyte model with the real model's structure (same sample
# and frame rates, same module types), for tests.
TINY_CONFIG: dict[str, Any] = {
    "default_temperature": 0.3,
    "flow_lm": {
        "insert_bos_before_voice": True,
        "dtype": "float32",
        "flow": {"depth": 1, "dim": 32},
        "transformer": {
            "d_model": 64,
            "hidden_scale": 2,
            "max_period": 10000,
            "num_heads": 2,
            "num_layers": 1,
        },
        "lookup_table": {"dim": 64, "n_bins": 0, "tokenizer": "tokenizers", "tokenizer_path": ""},
    },
    "mimi": {
        "dtype": "float32",
        "sample_rate": 24000,
        "inner_dim": 8,
        "outer_dim": 32,
        "channels": 1,
        "frame_rate": 12.5,
        "seanet": {
            "dimension": 32,
            "channels": 1,
            "n_filters": 4,
            "n_residual_layers": 1,
            "ratios": [6, 5, 4],
            "kernel_size": 7,
            "residual_kernel_size": 3,
            "last_kernel_size": 3,
            "dilation_base": 2,
            "pad_mode": "constant",
            "compress": 2,
        },
        "transformer": {
            "d_model": 32,
            "num_heads": 2,
            "num_layers": 1,
            "layer_scale": 0.01,
            "context": 50,
            "dim_feedforward": 64,
            "input_dimension": 32,
            "output_dimensions": [32],
        },
        "quantizer": {"dimension": 8, "output_dimension": 32},
    },
}


def train_tokenizer(sentences: tuple[str, ...] | list[str], path: Path, vocab_size: int) -> int:
    """Train a byte-pair tokenizer on ``sentences``; return its vocabulary size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"])
    tokenizer.train_from_iterator(list(sentences), trainer=trainer)
    tokenizer.save(str(path))
    return int(tokenizer.get_vocab_size())


def base_config(config: str) -> dict[str, Any]:
    """``"tiny"`` or the stem of one of the package's configs (``english``, ``french``…)."""
    if config == "tiny":
        return copy.deepcopy(TINY_CONFIG)
    from pocket_tts.utils.config import CONFIGS_DIR

    path = CONFIGS_DIR / f"{config}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))
        raise ValueError(f"unknown Pocket TTS config {config!r}; the package has {names}")
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def make_random_bundle(
    dest: Path,
    *,
    config: str = "tiny",
    name: str | None = None,
    sentences: tuple[str, ...] | list[str] = DEFAULT_SENTENCES,
    vocab_size: int = 400,
    seed: int = 0,
) -> Manifest:
    """Write a complete bundle (config, weights, tokenizer, manifest) to ``dest``."""
    import safetensors.torch
    import torch

    tts = import_pocket()
    from pocket_tts.utils.config import Config

    dest.mkdir(parents=True, exist_ok=True)
    n_bins = train_tokenizer(sentences, dest / TOKENIZER_FILE, vocab_size)

    raw = base_config(config)
    raw["weights_path"] = None
    raw.pop("weights_path_without_voice_cloning", None)
    lut = raw["flow_lm"]["lookup_table"]
    lut.update(n_bins=n_bins, tokenizer="tokenizers", tokenizer_path=str(dest / TOKENIZER_FILE))
    raw["flow_lm"].pop("weights_path", None)
    raw["mimi"].pop("weights_path", None)

    torch.manual_seed(seed)
    model = tts.TTSModel._from_pydantic_config_with_weights(
        Config(**raw), 0.3, 1, None, -4.0, origin=None
    )
    with torch.no_grad():
        # Loaders create this projection as zeros; random, so the prompt matters.
        proj = model.flow_lm.speaker_proj_weight
        proj.normal_(0.0, proj.shape[1] ** -0.5)
        model.flow_lm.out_eos.bias.fill_(-1e4)  # never stop early (see module doc)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, str(dest / WEIGHTS_FILE))

    raw["weights_path"] = WEIGHTS_FILE
    lut["tokenizer_path"] = TOKENIZER_FILE
    (dest / CONFIG_FILE).write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return write_manifest(
        dest,
        engine=ENGINE,
        name=name or f"random-{config}",
        version=f"random-seed{seed}",
        license={"code": CODE_LICENSE, "weights": "none (random weights, for tests)"},
        languages=list(languages_for(config) or languages_for("english")),
        extra={"random_weights": True, "base_config": config},
    )
