"""Model files built on this host: hash recorded when built, checked when loaded.

Graphs made at the first start (the CAM++ and GE2E ONNX graphs built from
their pinned weights, ONNX Runtime's optimized Kokoro graph) have no hash to
pin in advance: the build writes the file 0600 with its SHA-256 in a
``<name>.sha256`` record beside it, and every load hashes the file against
the record first. A file that fails (tampered, truncated, or left by a
version that kept no record) is deleted with a log line and its caller
rebuilds it: it is never handed to ONNX Runtime. Hashing costs ~0.26 s per
92 MB (the optimized Kokoro graph, hashlib on this 2-core host, 2026-12-06).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from voxclone.errors import ModelAssetError
from voxclone.synth.files import PRIVATE_MODE, sha256_file, write_atomically

log = logging.getLogger(__name__)

RECORD_SUFFIX = ".sha256"


def record_path(path: Path) -> Path:
    """Where ``path``'s recorded SHA-256 is kept."""
    return path.with_name(path.name + RECORD_SUFFIX)


def record(path: Path, digest: str) -> None:
    """Record ``digest`` as ``path``'s hash (0600). Written before the file
    itself is published, so a reader that sees the new file sees its record."""
    write_atomically(record_path(path), digest.encode(), mode=PRIVATE_MODE)


def save(path: Path, data: bytes) -> None:
    """Write a built model file 0600 with its hash recorded (atomically: a
    reader sees no file or a whole one; several builders may race)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record(path, hashlib.sha256(data).hexdigest())
    write_atomically(path, data, mode=PRIVATE_MODE)


def private(path: Path) -> None:
    """Make a file another library wrote (ONNX Runtime's optimized graph) 0600."""
    os.chmod(path, PRIVATE_MODE)


def _recorded(path: Path) -> str | None:
    try:
        return record_path(path).read_text().strip() or None
    except OSError:
        return None


def matches(path: Path, what: str) -> bool:
    """Whether ``path`` hashes to its record; if not it is deleted (with its
    record) and logged, for the caller to rebuild. False too when it is missing."""
    if not path.exists():
        return False
    expected = _recorded(path)
    try:
        digest = sha256_file(path)
    except OSError:
        digest = None
    if expected is not None and digest == expected:
        return True
    _discard(path, what, expected, digest)
    return False


def load(path: Path, what: str) -> bytes | None:
    """The file's bytes when they hash to its record (read once); None when
    it is missing or fails (then deleted and logged: build it again)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    expected = _recorded(path)
    digest = hashlib.sha256(data).hexdigest()
    if expected is not None and digest == expected:
        return data
    _discard(path, what, expected, digest)
    return None


def _discard(path: Path, what: str, expected: str | None, digest: str | None) -> None:
    reason = "no hash was recorded for it" if expected is None else "its SHA-256 does not match"
    log.warning(
        "%s failed its hash check (%s); discarding and rebuilding it",
        what,
        reason,
        extra={"path": path.name, "sha256": (digest or "")[:16]},
    )
    path.unlink(missing_ok=True)
    record_path(path).unlink(missing_ok=True)


def _load_all(paths: Mapping[str, Path], what: str) -> dict[str, bytes] | None:
    named = len(paths) > 1  # a lone graph's part name says nothing
    found = {
        part: load(path, f"{what} ({part})" if named else what) for part, path in paths.items()
    }
    if any(data is None for data in found.values()):
        return None
    return {part: data for part, data in found.items() if data is not None}


def built_once(
    paths: Mapping[str, Path],
    what: str,
    child: Sequence[str],
    build: Callable[[], Mapping[str, bytes]],
    *,
    timeout_s: float,
) -> dict[str, bytes]:
    """The graphs saved at ``paths`` (part name -> file) when each passes its
    hash check; else built by ``python -m *child`` (which saves them) and read
    back; else built here by ``build`` and saved (a save that fails is logged:
    the graphs still serve this process).

    The child is there because building imports onnx and torch-free readers
    that hold the GIL for ~1 s, which a serving process would otherwise spend
    while it streams speech; it also keeps their memory out of the server.
    """
    saved = _load_all(paths, f"saved {what}")
    if saved is not None:
        return saved
    try:
        subprocess.run(
            [sys.executable, "-m", *child], check=True, capture_output=True, timeout=timeout_s
        )
        built = _load_all(paths, f"{what} built by a child")
        if built is not None:
            return built
    except (OSError, subprocess.SubprocessError):
        log.warning("building the %s in a child failed; building it here", what, exc_info=True)
    made = dict(build())
    try:
        for part, data in made.items():
            save(paths[part], data)
    except OSError:
        log.warning("could not save the %s", what, exc_info=True)
    return made


def cpu_session(model: bytes, what: str, *, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session for a built graph on ``threads`` intra-op
    threads and one inter-op thread (one each by default: several
    single-threaded workers beat intra-op threading on 2 cores for the GE2E,
    CAM++ and watermark graphs), ModelAssetError naming ``what`` when ORT
    refuses the graph."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own classes for a bad graph
        raise ModelAssetError(f"the {what} could not be loaded") from exc
