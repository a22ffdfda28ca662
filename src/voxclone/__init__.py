"""voxclone: self-hosted zero-shot voice-cloning text-to-speech."""

import warnings

# pyworld and resemblyzer's webrtcvad still import pkg_resources (we pin
# setuptools<81 so it exists); its deprecation notice is noise for users.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__version__ = "0.1.0"
