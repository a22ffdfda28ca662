"""voxclone: self-hosted zero-shot voice-cloning text-to-speech."""

__version__ = "0.1.0"
