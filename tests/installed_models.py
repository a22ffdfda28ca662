"""The installation's models folder (src/voxclone/models_location.py), for
tests that need the real shipped model files rather than the suite's own
empty folder (``make test`` points VOXCLONE_MODELS_DIR at a temporary one).

Not the user cache: since issue 46 ``make install`` puts models in the
virtual environment's ``share/voxclone/models``; tests that still read
``~/.cache/voxclone/models`` skipped on a fresh machine (Kokoro's standard
packs "not installed") or assembled a second copy of the model there.
"""

from __future__ import annotations

from voxclone.config import Settings
from voxclone.models_location import default_models_dir

INSTALLED_MODELS = default_models_dir(Settings().home)
