"""Building a Pocket TTS model from an installed bundle, offline.

The package's configs name their weights and tokenizer on a model hub
(``hf://…``); a bundle's ``config.yaml`` names them by *file name inside the
bundle* instead. Every path field is resolved here against the bundle
directory and must be a file its manifest lists; a URL or a path that leaves
the bundle is refused. The hub client is also switched to offline mode before
pocket_tts is imported, so no code path of the package can reach the network.

pocket_tts is imported lazily (it is an optional extra) and its private
constructor ``TTSModel._from_pydantic_config_with_weights`` is used because
the public ``load_model`` only accepts a config *file* whose paths it
downloads; the version is pinned in pyproject.toml for that reason.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from voxclone.synth.engine.pocket.bundle import BundleError, Manifest

if TYPE_CHECKING:  # pragma: no cover
    from pocket_tts.models.tts_model import TTSModel
    from pocket_tts.utils.config import Config

ENGINE = "pocket-tts"
CONFIG_FILE = "config.yaml"
CODE_LICENSE = "MIT"
WEIGHTS_LICENSE = "CC-BY-4.0"
# The safetensors format caps its JSON header at 100 MB; a longer one is not a header.
SAFETENSORS_MAX_HEADER = 100_000_000
# Package config stem -> voxclone language codes it speaks (from the package's config names).
CONFIG_LANGUAGES = {
    "english": ("en-us", "en-gb"),
    "french": ("fr",),
    "german": ("de",),
    "spanish": ("es",),
    "italian": ("it",),
    "portuguese": ("pt-br", "pt"),
    "dutch": ("nl",),
}

_import_lock = threading.Lock()


def pocket_available() -> bool:
    try:
        import pocket_tts  # noqa: F401
    except ImportError:
        return False
    return True


def import_pocket() -> Any:
    """Import pocket_tts offline, without letting it change torch's thread count.

    Importing ``pocket_tts.models.tts_model`` calls ``torch.set_num_threads(1)``
    for the whole process; the other torch users here (speaker encoder) keep
    the count they had.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"  # belt and braces: we only pass local paths
    with _import_lock:
        import torch

        threads = torch.get_num_threads()
        try:
            import pocket_tts.models.tts_model as tts_model
        except ImportError as exc:
            raise BundleError(
                "the Pocket TTS engine needs the optional package: pip install 'voxclone[pocket]'"
            ) from exc
        finally:
            torch.set_num_threads(threads)
    return tts_model


def languages_for(config_name: str) -> tuple[str, ...]:
    for stem, langs in CONFIG_LANGUAGES.items():
        if config_name.startswith(stem):
            return langs
    return ()


def _local(bundle_dir: Path, manifest: Manifest, value: str | None, field: str) -> str | None:
    if value is None:
        return None
    text = str(value)
    if "://" in text or "/" in text or "\\" in text or text in (".", ".."):
        raise BundleError(
            f"config.yaml: {field} must name a file inside the bundle, not {text!r}",
            field=field,
        )
    manifest.file(text)  # listed (so hashed at import), or BundleError
    return str(bundle_dir / text)


def read_config(bundle_dir: Path, manifest: Manifest) -> Config:
    """The bundle's config with every file reference made an absolute local path."""
    from pocket_tts.utils.config import Config
    from pydantic import ValidationError

    manifest.file(CONFIG_FILE)
    try:
        raw = yaml.safe_load((bundle_dir / CONFIG_FILE).read_text(encoding="utf-8"))
        config = Config(**raw)
    # ValueError: not UTF-8; RecursionError: YAML nested deep enough to exhaust the parser.
    except (OSError, ValueError, RecursionError, yaml.YAMLError, TypeError, ValidationError) as exc:
        raise BundleError(
            f"config.yaml is not a Pocket TTS config ({exc.__class__.__name__})"
        ) from None
    config.weights_path = _local(bundle_dir, manifest, config.weights_path, "weights_path")
    # Never fall back to a second file (upstream falls back to a hub download).
    config.weights_path_without_voice_cloning = None
    fl = config.flow_lm
    fl.weights_path = _local(bundle_dir, manifest, fl.weights_path, "flow_lm.weights_path")
    config.mimi.weights_path = _local(
        bundle_dir, manifest, config.mimi.weights_path, "mimi.weights_path"
    )
    tok = _local(
        bundle_dir, manifest, fl.lookup_table.tokenizer_path, "flow_lm.lookup_table.tokenizer_path"
    )
    assert tok is not None
    fl.lookup_table.tokenizer_path = tok
    if config.weights_path is None and fl.weights_path is None:
        raise BundleError("config.yaml names no weights (weights_path)", field="weights_path")
    return config


def _safetensors_header(path: Path) -> dict[str, Any]:
    """Header of a safetensors file; the file must be exactly as long as it declares.

    The header is JSON from the operator's file: parsed with limits (a deep
    one or a ``1e400`` offset is a damaged header, not a traceback)."""
    from voxclone.synth.json_limits import load_json

    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) != 8:
            raise BundleError(f"'{path.name}' is not a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n <= 0 or 8 + n > size or n > SAFETENSORS_MAX_HEADER:
            raise BundleError(f"'{path.name}' is not a safetensors file (bad header length)")
        try:
            header = load_json(handle.read(n))
        except ValueError:  # JSONLimitError and UnicodeDecodeError are ValueErrors
            raise BundleError(f"'{path.name}' has a damaged safetensors header") from None
    if not isinstance(header, dict):
        raise BundleError(f"'{path.name}' has a damaged safetensors header")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    try:
        end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    except (TypeError, KeyError, ValueError, IndexError, OverflowError):
        raise BundleError(f"'{path.name}' has a damaged safetensors header") from None
    if 8 + n + end != size:
        raise BundleError(f"'{path.name}' is truncated or has trailing data")
    return tensors


def expected_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor the model built from ``config`` loads (no memory used)."""
    import torch

    tts = import_pocket()
    from pocket_tts.models.mimi import build_mimi

    with torch.device("meta"):
        model = tts.TTSModel._from_pydantic_config(config, 0.3, 1, None, -4.0, origin=None)
        model.flow_lm.speaker_proj_weight = torch.nn.Parameter(
            torch.zeros(
                config.flow_lm.transformer.d_model,
                config.mimi.inner_dim or config.mimi.seanet.dimension,
            )
        )
        model.mimi = build_mimi(config.mimi)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def check_bundle(bundle_dir: Path, manifest: Manifest) -> None:
    """Structural check run at import, after the hashes: config, weights, tokenizer agree."""
    import_pocket()
    config = read_config(bundle_dir, manifest)
    from pocket_tts.modules.text_conditioner import build_tokenizer

    lut = config.flow_lm.lookup_table
    try:
        build_tokenizer(lut.n_bins, lut.tokenizer_path, lut.tokenizer)
    except AssertionError as exc:  # upstream reports a vocabulary mismatch with assert
        raise BundleError(f"tokenizer does not match config.yaml: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any parser failure means a bad file
        raise BundleError(f"tokenizer cannot be read ({exc.__class__.__name__})") from None
    for weights in (config.flow_lm.weights_path, config.mimi.weights_path):
        if weights is not None:
            _safetensors_header(Path(weights))
    if config.weights_path is not None:
        # The one-file layout the hub publishes: every tensor of the model, by name.
        found = {
            k: tuple(v.get("shape", ()))
            for k, v in _safetensors_header(Path(config.weights_path)).items()
        }
        wanted = expected_shapes(config)
        missing = sorted(set(wanted) - set(found))
        unexpected = sorted(set(found) - set(wanted))
        wrong = sorted(k for k in set(wanted) & set(found) if wanted[k] != found[k])
        if missing or unexpected or wrong:
            example = (wrong or missing or unexpected)[0]
            raise BundleError(
                "the weights do not fit config.yaml "
                f"({len(wrong)} tensors of another shape, {len(missing)} missing, "
                f"{len(unexpected)} unexpected; e.g. '{example}'): "
                "were they made for another language or size?"
            )


def build_model(
    bundle_dir: Path, manifest: Manifest, *, temperature: float | None = None
) -> TTSModel:
    """Instantiate the model with the bundle's weights (strict: every tensor must fit)."""
    tts = import_pocket()
    config = read_config(bundle_dir, manifest)
    from pocket_tts.default_parameters import DEFAULT_NOISE_CLAMP, DEFAULT_SAMPLER_DECODE_STEPS

    try:
        model = tts.TTSModel._from_pydantic_config_with_weights(
            config,
            config.default_temperature if temperature is None else temperature,
            DEFAULT_SAMPLER_DECODE_STEPS,
            DEFAULT_NOISE_CLAMP,
            config.default_eos_threshold,
            origin=None,
        )
    except RuntimeError as exc:  # load_state_dict(strict=True): shapes or names differ
        raise BundleError(
            f"the weights do not fit config.yaml: {str(exc).splitlines()[0][:200]}"
        ) from None
    model.eval()
    return model
