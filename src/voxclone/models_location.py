"""Where model files live: installation data, shared by every ``VOXCLONE_HOME``.

Models (Kokoro's assembled graph, its voice packs, built ONNX graphs, the
measured atlas) are not user data. Until issue 46 they lived in
``<home>/models``, so an operator who pointed ``VOXCLONE_HOME`` at a new folder
(a service account, a container volume, a second instance) silently got the 7
earlier built-ins instead of Kokoro's 54 standard voices, and cloning searched
fewer voices (held-out clone identity 0.270 instead of 0.439).

The models folder is, in this order:

1. ``VOXCLONE_MODELS_DIR`` when set (the container image sets it);
2. the first of these that already holds models: the installation's own data
   folder (``<sys.prefix>/share/voxclone/models``, which ``make install``
   fills for its ``.venv``), the user cache (``$XDG_CACHE_HOME/voxclone/models``,
   where every earlier version kept the default home's models), and last
   ``<home>/models`` (an older install that used its own home: still read, and
   said at start, see :func:`legacy_note`);
3. for a fresh install: the installation's folder when its prefix is writable
   (a virtual environment), else the user cache.

Every home of one installation therefore resolves to the same folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MODELS_DIR_ENV = "VOXCLONE_MODELS_DIR"


def installation_models_dir() -> Path:
    """The installation's data folder (``.venv/share/voxclone/models`` for ``make install``)."""
    return Path(sys.prefix) / "share" / "voxclone" / "models"


def user_models_dir() -> Path:
    """The user cache's models folder (the default home's ``models`` before issue 46)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "voxclone" / "models"


def legacy_models_dir(home: Path) -> Path:
    return Path(home) / "models"


def default_models_dir(home: Path) -> Path:
    """The models folder of ``home`` when ``VOXCLONE_MODELS_DIR`` is not set."""
    install = installation_models_dir()
    user = user_models_dir()
    for candidate in (install, user, legacy_models_dir(home)):
        if holds_models(candidate):
            return candidate
    return install if _writable(install) else user


def holds_models(folder: Path) -> bool:
    """True when ``folder`` is a directory with anything in it."""
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return False


def legacy_note(home: Path, models_dir: Path) -> str | None:
    """One line when ``models_dir`` is the older per-home folder: other homes do
    not see those models; how to share them. None otherwise."""
    if Path(models_dir) != legacy_models_dir(home) or os.environ.get(MODELS_DIR_ENV):
        return None
    return (
        f"models are read from {models_dir}, the per-home folder of older versions: "
        f"another VOXCLONE_HOME will not see them; move them to {installation_models_dir()} "
        f"(or set {MODELS_DIR_ENV}={models_dir})"
    )


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists writable or could be created (nearest existing parent)."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
