"""voxclone: self-hosted zero-shot voice-cloning text-to-speech.

As a library: ``voxclone.load().synthesize("Hello.")`` (see voxclone.library).
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voxclone.library import Voxclone

# pyworld and resemblyzer's webrtcvad still import pkg_resources (we pin
# setuptools<81 so it exists); its deprecation notice is noise for users.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__version__ = "0.1.0"


def load(home: str | os.PathLike[str] | None = None, **options: Any) -> Voxclone:
    """Load voxclone for use without a server (:func:`voxclone.library.load`).
    Imported on call, so ``import voxclone`` stays light."""
    from voxclone.library import load as load_library

    return load_library(home, **options)
