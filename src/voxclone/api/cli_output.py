"""Where ``voxclone say`` puts its audio: a file, or standard output for ``-o -``.

``-o -`` is how Piper users play speech without a file (``... -o - --raw |
aplay -r 24000 -f S16_LE -c 1 -t raw``): the audio is then the only thing on
stdout, so anything the command or a library prints while it runs goes to
stderr instead (:meth:`AudioSink.keeping_stdout`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

STDOUT = "-"


class AudioSink:
    """The audio's destination, named by ``-o``; stdout is taken as it is when
    the sink is made, before :meth:`keeping_stdout` points ``sys.stdout`` away."""

    def __init__(self, path: str, stdout: TextIO | None = None) -> None:
        self.path = path
        self._stdout = stdout if stdout is not None else sys.stdout

    @property
    def is_stdout(self) -> bool:
        return self.path == STDOUT

    @property
    def shown(self) -> str:
        """The destination as the command's messages name it."""
        return "standard output" if self.is_stdout else self.path

    @contextlib.contextmanager
    def keeping_stdout(self) -> Iterator[None]:
        """While the command runs, a ``print`` to stdout goes to stderr when
        stdout carries the audio (a stray line would corrupt the WAV)."""
        if not self.is_stdout:
            yield
            return
        with contextlib.redirect_stdout(sys.stderr):
            yield

    @contextlib.contextmanager
    def opened(self) -> Iterator[BinaryIO]:
        """A binary file to write the audio into (stdout is flushed, not closed)."""
        if self.is_stdout:
            out: BinaryIO = self._stdout.buffer
            yield out
            out.flush()
            return
        with open(self.path, "wb") as file:
            yield file

    def write(self, data: bytes) -> None:
        with self.opened() as out:
            out.write(data)


def audio_format(path: str, explicit: str | None, raw: bool = False) -> str:
    """The format ``say`` writes: ``--format``, else ``--raw`` (PCM), else the
    file name's suffix; standard output and a name without one get WAV."""
    if explicit:
        return explicit.lower()
    if raw:
        return "pcm"
    suffix = "" if path == STDOUT else Path(path).suffix.lower().lstrip(".")
    return {"ogg": "opus", "raw": "pcm", "": "wav"}.get(suffix, suffix)
