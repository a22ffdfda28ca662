"""Where phonemizer's private copies of libespeak-ng go, and how they disappear.

phonemizer loads espeak-ng from a fresh copy of the shared library per
wrapper (espeak-ng is full of globals; two dlopen calls of one path would share
them), in a ``tempfile.mkdtemp()`` directory it deletes in a ``weakref``
finalizer. Finalizers run only on a normal interpreter exit; uvicorn re-raises
SIGTERM after its graceful shutdown, so a server that is stopped the usual way
left every copy in /tmp, two per language used.

Here the copies are made in one private directory per process
(``voxclone-espeak-<pid>-…``, mode 0700) and each copy is unlinked as soon as
it is loaded: a loaded library stays mapped after its file is gone, so no copy
outlives its loading however the process ends. The (then empty) directory is
removed at a normal exit, and directories of processes that no longer exist
are removed when the next process makes its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PREFIX = "voxclone-espeak-"

_lock = threading.Lock()
_root: Path | None = None
_root_owner: object | None = None  # the finalizer that removes _root is tied to it


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to clean
    return True


def remove_stale_dirs(temp_root: Path | None = None) -> list[Path]:
    """Remove this user's espeak directories whose process is gone; return them."""
    base = Path(temp_root or tempfile.gettempdir())
    removed: list[Path] = []
    for path in base.glob(PREFIX + "*"):
        pid_text = path.name[len(PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            if not path.is_dir() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _pid_alive(int(pid_text)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def private_dir() -> Path:
    """This process's directory for library copies (made, and stale ones swept, once)."""
    global _root, _root_owner
    with _lock:
        if _root is None or not _root.is_dir():
            remove_stale_dirs()
            _root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
            os.chmod(_root, 0o700)
            # Made before phonemizer's finalizers, so it runs after theirs at
            # exit (newest first) and finds their directories already gone.
            _root_owner = _Owner()
            weakref.finalize(_root_owner, shutil.rmtree, str(_root), ignore_errors=True)
        return _root


class _Owner:
    """Anchor object for the directory's exit finalizer."""


class _PrivateTempfile:
    """The ``tempfile`` module as phonemizer's espeak API sees it: mkdtemp in ``root``."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def mkdtemp(self, suffix: str | None = None, prefix: str | None = None, dir: Any = None) -> str:
        return tempfile.mkdtemp(suffix, prefix, dir or str(self._root))

    def __getattr__(self, name: str) -> Any:
        return getattr(tempfile, name)


def forget_copies(root: Path) -> int:
    """Unlink every library copy under ``root`` (loaded ones stay mapped); count them."""
    removed = 0
    for path in root.rglob("*"):
        if path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed


@contextlib.contextmanager
def espeak_copies_private() -> Iterator[Path]:
    """While open, phonemizer copies libespeak-ng into ``private_dir()``; on leaving,
    the copies are unlinked. Wrap every construction of a phonemizer espeak backend."""
    from phonemizer.backend.espeak import api

    root = private_dir()
    with _lock:
        saved = api.tempfile
        api.tempfile = _PrivateTempfile(root)  # type: ignore[assignment]
        try:
            yield root
        finally:
            api.tempfile = saved
            forget_copies(root)
