"""Making a bundle from the files the model hub publishes, and ``models pull``.

An operator with the hub's files (``model.safetensors`` and ``tokenizer.json``
or ``tokenizer.model``, downloaded on a connected machine) turns them into a
bundle with ``voxclone models import pocket-tts DIR --config english``: the
package's config for that language is copied in with its hub references
replaced by the local file names, and a manifest hashes every file.

``pull`` is the connected shortcut. It first checks, with a short timeout,
that the hub answers at all; offline it fails at once with the import
instructions instead of hanging in DNS or TCP retries. This code runs only
from the CLI: the server never downloads.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from voxclone.synth.engine.pocket.bundle import BundleError, Manifest, write_manifest
from voxclone.synth.engine.pocket.loading import (
    CODE_LICENSE,
    CONFIG_FILE,
    ENGINE,
    WEIGHTS_LICENSE,
    languages_for,
)

HUB_HOST = "huggingface.co"
PROBE_TIMEOUT_S = 3.0
WEIGHTS_NAMES = ("model.safetensors",)
TOKENIZER_NAMES = ("tokenizer.json", "tokenizer.model")

IMPORT_HELP = (
    "on a machine with internet access, download the Pocket TTS files for your language "
    "(model.safetensors from the kyutai/pocket-tts repository, which needs its terms "
    "accepted, and tokenizer.json), copy them here and run "
    "`voxclone models import pocket-tts DIR --config english` (or french, german, …); "
    "a prepared bundle directory or archive imports with `voxclone models import pocket-tts PATH`"
)


def _configs_dir() -> Path:
    # Found without importing pocket_tts: importing it sets the hub client
    # offline for the whole process (loading.import_pocket), which `pull` must
    # not inherit.
    import importlib.util

    spec = importlib.util.find_spec("pocket_tts")
    if spec is None or not spec.submodule_search_locations:
        raise BundleError(
            "the Pocket TTS engine needs the optional package: pip install 'voxclone[pocket]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "config"


def package_config(config_name: str) -> dict[str, Any]:
    configs = _configs_dir()
    path = configs / f"{config_name}.yaml"
    if not path.is_file() or "/" in config_name:
        names = sorted(p.stem for p in configs.glob("*.yaml"))
        raise BundleError(
            f"unknown Pocket TTS config '{config_name[:40]}'; the package has: {', '.join(names)}",
            field="config",
        )
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def bundle_from_files(src: Path, config_name: str, dest: Path) -> Manifest:
    """Write a bundle to ``dest`` from a directory of hub files + the package's config."""
    raw = package_config(config_name)
    weights = next((src / n for n in WEIGHTS_NAMES if (src / n).is_file()), None)
    tokenizer = next((src / n for n in TOKENIZER_NAMES if (src / n).is_file()), None)
    if weights is None or tokenizer is None:
        raise BundleError(
            f"'{src.name}' needs {' and '.join(WEIGHTS_NAMES)} and one of "
            f"{', '.join(TOKENIZER_NAMES)} (or a manifest.json if it is a bundle)"
        )
    extra = sorted(p.name for p in src.iterdir() if p.name not in (weights.name, tokenizer.name))
    if extra:
        raise BundleError(f"unknown file '{extra[0]}' next to the model files; remove it")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, dest / weights.name)
    shutil.copyfile(tokenizer, dest / tokenizer.name)
    raw["weights_path"] = weights.name
    raw.pop("weights_path_without_voice_cloning", None)
    lut = raw["flow_lm"]["lookup_table"]
    lut["tokenizer_path"] = tokenizer.name
    lut["tokenizer"] = "tokenizers" if tokenizer.suffix == ".json" else "sentencepiece"
    (dest / CONFIG_FILE).write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return write_manifest(
        dest,
        engine=ENGINE,
        name=config_name,
        version=f"pocket-tts-{_package_version()}-{config_name}",
        license={"code": CODE_LICENSE, "weights": WEIGHTS_LICENSE},
        languages=list(languages_for(config_name)),
        extra={"base_config": config_name},
    )


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pocket-tts")
    except PackageNotFoundError:
        return "unknown"


def hub_reachable(host: str = HUB_HOST, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when a TCP connection to ``host``:443 opens within ``timeout`` (DNS included).

    Name resolution has no timeout of its own, so the probe runs in a daemon
    thread and is abandoned when the time is up.
    """
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=probe, daemon=True, name="hub-probe")
    worker.start()
    worker.join(timeout)
    return bool(result and result[0])


def pull(config_name: str, dest: Path, *, timeout: float = PROBE_TIMEOUT_S) -> Manifest:
    """Download the hub's files for ``config_name`` and write a bundle to ``dest``."""
    raw = package_config(config_name)
    if not hub_reachable(timeout=timeout):
        raise BundleError(
            f"the model hub ({HUB_HOST}) is not reachable from this machine "
            f"(no answer within {timeout:g} s). To install Pocket TTS offline: {IMPORT_HELP}"
        )
    from huggingface_hub import hf_hub_download

    with tempfile.TemporaryDirectory(prefix="voxclone-pull-") as tmp:
        staging = Path(tmp)
        for ref, name in (
            (raw.get("weights_path"), "model.safetensors"),
            (raw["flow_lm"]["lookup_table"]["tokenizer_path"], None),
        ):
            repo, filename, revision = _split_hf(str(ref))
            try:
                local = hf_hub_download(repo_id=repo, filename=filename, revision=revision)
            except Exception as exc:  # noqa: BLE001 - gated repo, no login, network…
                raise BundleError(
                    f"the hub refused {repo}/{filename} ({exc.__class__.__name__}); "
                    f"the voice-cloning weights need their terms accepted and a login. "
                    f"Or: {IMPORT_HELP}"
                ) from None
            shutil.copyfile(local, staging / (name or Path(filename).name))
        return bundle_from_files(staging, config_name, dest)


def _split_hf(ref: str) -> tuple[str, str, str | None]:
    if not ref.startswith("hf://"):
        raise BundleError(f"the package config names no hub file ({ref[:60]})")
    body = ref.removeprefix("hf://")
    revision = None
    if "@" in body:
        body, revision = body.rsplit("@", 1)
    parts = body.split("/")
    return "/".join(parts[:2]), "/".join(parts[2:]), revision
