"""The disk tier: one checksummed file per entry, written atomically, kept
across restarts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from voxclone.lru import Lru
from voxclone.runtime.cache.entries import (
    DEFAULT_CONTENT_TYPE,
    CacheEntry,
    TierCounters,
    counter_stats,
)
from voxclone.synth.files import TMP_PREFIX, write_atomically

log = logging.getLogger(__name__)


# File layout: fixed header, JSON metadata, payload.
#   magic(4) | meta_len(u32) | data_len(u64) | sha256(meta + data)(32)
_MAGIC = b"VXC1"
_HEADER = struct.Struct(">4sIQ32s")
_ENTRY_SUFFIX = ".vxc"
_TMP_PREFIX = TMP_PREFIX  # what write_atomically names its temporary files
# A temporary file this old is a leftover of a writer that died, not one in progress.
_STALE_TMP_S = 600.0
_HEX_KEY = re.compile(r"^[0-9a-f]{16,128}$")


class CorruptEntry(Exception):
    """A cache file that is truncated or fails its checksum."""


def _encode_file(entry: CacheEntry, key: str) -> bytes:
    meta = json.dumps(
        {"key": key, "content_type": entry.content_type, "voice_id": entry.voice_id},
        separators=(",", ":"),
    ).encode("utf-8")
    digest = hashlib.sha256(meta + entry.data).digest()
    return _HEADER.pack(_MAGIC, len(meta), len(entry.data), digest) + meta + entry.data


def _read_header(handle: Any, file_size: int) -> tuple[int, int, bytes]:
    raw = handle.read(_HEADER.size)
    if len(raw) != _HEADER.size:
        raise CorruptEntry("short header")
    magic, meta_len, data_len, digest = _HEADER.unpack(raw)
    if magic != _MAGIC or _HEADER.size + meta_len + data_len != file_size:
        raise CorruptEntry("bad magic or length")
    return meta_len, data_len, digest


def _parse_meta(raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise CorruptEntry("bad metadata") from exc
    if not isinstance(meta, dict):
        raise CorruptEntry("bad metadata")
    return meta


def _read_entry_file(path: Path) -> CacheEntry:
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        meta_len, data_len, digest = _read_header(handle, size)
        body = handle.read(meta_len + data_len)
    if len(body) != meta_len + data_len or hashlib.sha256(body).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    meta = _parse_meta(body[:meta_len])
    return CacheEntry(
        data=body[meta_len:],
        content_type=str(meta.get("content_type") or DEFAULT_CONTENT_TYPE),
        voice_id=meta.get("voice_id"),
    )


def read_entry_voice(path: Path) -> str | None:
    """Voice id from a file's metadata without reading the payload."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        meta_len, _, _ = _read_header(handle, size)
        meta = _parse_meta(handle.read(meta_len))
    voice = meta.get("voice_id")
    return voice if isinstance(voice, str) else None


class DiskTier:
    """One file per entry under ``root``, sharded by the first two hex digits.

    Writes go to a temporary file in the target directory, are fsynced, then
    renamed over the final name, so a reader sees either nothing or a whole
    entry. Each file carries its length and a SHA-256, so a truncated or
    damaged file is detected on read and deleted (served as a miss).

    Recency is the file's mtime (bumped on every hit), which survives restarts;
    the in-process size index is rebuilt by scanning at start. Several processes
    may share a directory safely, but each enforces ``max_bytes`` only over the
    entries it has seen, so give each process its own budget share.
    """

    name = "disk"

    def __init__(self, root: Path, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.counters = TierCounters()
        # file name -> size, least recently used first; evicting deletes the file
        self._index: Lru[str, int] = Lru(max_weight=max_bytes, weigh=int)
        self._lock = threading.Lock()
        self.root.mkdir(parents=True, exist_ok=True)
        self._rebuild_index()

    @property
    def bytes_used(self) -> int:
        return self._index.weight

    def __len__(self) -> int:
        return len(self._index)

    # -- paths

    @staticmethod
    def _file_name(key: str) -> str:
        # Keys from cache_key() are hex already; anything else is hashed so a
        # caller-supplied key can never escape the cache directory.
        if _HEX_KEY.match(key):
            return key
        return hashlib.sha256(key.encode("utf-8")).hexdigest()

    def _path(self, name: str) -> Path:
        return self.root / name[:2] / (name + _ENTRY_SUFFIX)

    def _entry_files(self) -> Iterator[Path]:
        for shard in self.root.iterdir():
            if shard.is_dir() and len(shard.name) == 2:
                yield from shard.iterdir()

    # -- start-up scan

    def _rebuild_index(self) -> None:
        found: list[tuple[float, str, int]] = []
        now = time.time()
        for path in self._entry_files():
            try:
                st = path.stat()
                if path.name.startswith(_TMP_PREFIX):
                    if now - st.st_mtime > _STALE_TMP_S:
                        path.unlink(missing_ok=True)
                    continue
                if not path.name.endswith(_ENTRY_SUFFIX):
                    continue
                with path.open("rb") as handle:
                    _read_header(handle, st.st_size)
            except CorruptEntry:
                self.counters.errors += 1
                path.unlink(missing_ok=True)
                continue
            except OSError:
                continue
            found.append((st.st_mtime, path.name[: -len(_ENTRY_SUFFIX)], st.st_size))
        for _, name, size in sorted(found):  # oldest first: the budget keeps the newest
            self._unlink_evicted(self._index.put(name, size))

    # -- operations

    def get(self, key: str) -> CacheEntry | None:
        name = self._file_name(key)
        path = self._path(name)
        try:
            entry = _read_entry_file(path)
        except FileNotFoundError:
            self._forget(name)
            self.counters.misses += 1
            return None
        except (CorruptEntry, OSError):
            log.warning("disk cache entry failed verification; removing it")
            self.counters.errors += 1
            self.counters.misses += 1
            self._drop_file(name)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # mark as recently used, persistently
        evicted: list[tuple[str, int]] = []
        with self._lock:
            if self._index.get(name) is None:  # written by another process sharing the directory
                size = _HEADER.size + len(entry.data)  # close enough for budgeting
                evicted = self._index.put(name, size)
            self.counters.hits += 1
        self._unlink_evicted(evicted)
        return entry

    def put(self, key: str, entry: CacheEntry) -> bool:
        name = self._file_name(key)
        blob = _encode_file(entry, key)
        if len(blob) > self.max_bytes:
            self.counters.skipped += 1
            return False
        path = self._path(name)
        try:
            self._write_atomically(path, blob)
        except OSError:
            log.warning("disk cache write failed", exc_info=True)
            self.counters.errors += 1
            return False
        with self._lock:
            evicted = self._index.put(name, len(blob))
            self.counters.stores += 1
        self._unlink_evicted(evicted)
        return True

    def delete(self, key: str, voice_id: str | None = None) -> None:
        self._drop_file(self._file_name(key))  # the voice is in the file only

    def voice_ids(self) -> set[str]:
        """Voices that entries here were made with (reads every file's header)."""
        return {voice for _, voice in self._entry_voices() if voice is not None}

    def invalidate_voice(self, voice_id: str) -> int:
        """Delete every entry made with ``voice_id``.

        Scans the metadata of every file instead of trusting an in-process
        index, so entries written by other processes are removed too. Voice
        deletion is rare, and the scan reads headers only.
        """
        removed = 0
        for path, voice in self._entry_voices():
            if voice == voice_id:
                self._drop_file(path.name[: -len(_ENTRY_SUFFIX)])
                removed += 1
        return removed

    def _entry_voices(self) -> Iterator[tuple[Path, str | None]]:
        """Every finished entry file with the voice its header names (None for
        none, or for a header that cannot be read)."""
        for path in list(self._entry_files()):
            if not path.name.endswith(_ENTRY_SUFFIX) or path.name.startswith(_TMP_PREFIX):
                continue
            try:
                voice = read_entry_voice(path)
            except (CorruptEntry, OSError):
                voice = None
            yield path, voice

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                **counter_stats(self.counters),
                "entries": len(self._index),
                "bytes": self._index.weight,
                "max_bytes": self.max_bytes,
            }

    # -- helpers

    def _write_atomically(self, path: Path, blob: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, blob)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._index.pop(name)

    def _drop_file(self, name: str) -> None:
        self._forget(name)
        self._path(name).unlink(missing_ok=True)

    def _unlink_evicted(self, evicted: list[tuple[str, int]]) -> None:
        """Delete the files the index evicted (outside the lock: file I/O)."""
        if not evicted:
            return
        with self._lock:
            self.counters.evictions += len(evicted)
        for name, _ in evicted:
            self._path(name).unlink(missing_ok=True)
