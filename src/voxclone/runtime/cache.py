"""Audio cache: memory, disk and Redis tiers behind one ``TieredCache``.

Every entry is the encoded audio bytes plus a little metadata (content type and
the voice it was made with). The voice is recorded so that deleting a voice can
remove every cached clip made with it, in every tier: a voice is biometric data
and its derived artifacts must not outlive it.

Hit/miss counting is reported through a plain callback so this module stays free
of any metrics library; ``Metrics.cache_event`` fits the callback signature.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from voxclone.lru import Lru
from voxclone.synth.files import TMP_PREFIX, write_atomically

if TYPE_CHECKING:
    from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# Bumped whenever the key derivation changes, so old entries simply stop matching.
_KEY_SCHEMA = "voxclone-audio-v1"

DEFAULT_CONTENT_TYPE = "application/octet-stream"

CacheListener = Callable[[str, str], None]
"""Called as ``listener(tier_name, outcome)`` with outcome ``"hit"`` or ``"miss"``."""


# --------------------------------------------------------------------------- keys


def _canonical(value: Any) -> Any:
    """Normalize a key part so equal requests always serialize identically."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError("cache key parts must be finite numbers")
        # speed=1 and speed=1.0 (or 1.0000000001 after float arithmetic) are one request.
        return round(number, 6)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_canonical(v) for v in value)
    raise TypeError(f"cache key parts must be JSON-like values, not {type(value).__name__}")


def cache_key(**parts: Any) -> str:
    """SHA-256 hex digest of a canonical JSON rendering of ``parts``.

    Pass everything that changes the output audio: model id and version, voice id
    and version, normalized text, language, every control, format, sample rate.
    """
    if not parts:
        raise ValueError("cache_key needs at least one part")
    document = {"schema": _KEY_SCHEMA, "parts": _canonical(parts)}
    blob = json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def voice_tag(voice_id: str) -> str:
    """Stable, file-name and Redis-key safe tag for indexing entries by voice."""
    return hashlib.sha256(("voice:" + voice_id).encode("utf-8")).hexdigest()[:40]


# ------------------------------------------------------------------------ entries


@dataclass(frozen=True)
class CacheEntry:
    data: bytes
    content_type: str = DEFAULT_CONTENT_TYPE
    voice_id: str | None = None

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass
class TierCounters:
    hits: int = 0
    misses: int = 0
    stores: int = 0
    evictions: int = 0
    skipped: int = 0  # values refused (over the tier's size limit)
    errors: int = 0  # corrupt files, unreachable Redis: served as misses


class CacheTier(Protocol):
    name: str
    counters: TierCounters

    def get(self, key: str) -> CacheEntry | None: ...

    def put(self, key: str, entry: CacheEntry) -> bool: ...

    def delete(self, key: str, voice_id: str | None = None) -> None:
        """Remove ``key``; ``voice_id``: the voice it was made with, whose
        index must not keep pointing at it."""
        ...

    def invalidate_voice(self, voice_id: str) -> int: ...

    def stats(self) -> dict[str, Any]: ...


def _counter_stats(counters: TierCounters) -> dict[str, Any]:
    return {
        "hits": counters.hits,
        "misses": counters.misses,
        "stores": counters.stores,
        "evictions": counters.evictions,
        "skipped": counters.skipped,
        "errors": counters.errors,
    }


# ------------------------------------------------------------------------- memory


class MemoryTier:
    """Thread-safe LRU bounded by the total size of the stored audio bytes."""

    name = "memory"

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self.counters = TierCounters()
        self._entries: Lru[str, CacheEntry] = Lru(max_weight=max_bytes, weigh=_entry_size)
        self._by_voice: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes_used(self) -> int:
        return self._entries.weight

    def keys(self) -> list[str]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._entries)

    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.counters.misses += 1
                return None
            self.counters.hits += 1
            return entry

    def put(self, key: str, entry: CacheEntry) -> bool:
        if entry.size > self.max_bytes:
            self.counters.skipped += 1
            return False
        with self._lock:
            self._remove_locked(key)
            evicted = self._entries.put(key, entry)
            if entry.voice_id is not None:
                self._by_voice.setdefault(entry.voice_id, set()).add(key)
            self.counters.stores += 1
            for old_key, old in evicted:
                self._unindex(old_key, old)
                self.counters.evictions += 1
            return True

    def delete(self, key: str, voice_id: str | None = None) -> None:
        with self._lock:
            self._remove_locked(key)  # the voice index follows the entry

    def voice_ids(self) -> set[str]:
        """Voices that entries here were made with."""
        with self._lock:
            return set(self._by_voice)

    def invalidate_voice(self, voice_id: str) -> int:
        with self._lock:
            keys = self._by_voice.pop(voice_id, set())
            for key in keys:
                self._remove_locked(key)
            return len(keys)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                **_counter_stats(self.counters),
                "entries": len(self._entries),
                "bytes": self._entries.weight,
                "max_bytes": self.max_bytes,
            }

    def _remove_locked(self, key: str) -> None:
        entry = self._entries.pop(key)
        if entry is not None:
            self._unindex(key, entry)

    def _unindex(self, key: str, entry: CacheEntry) -> None:
        if entry.voice_id is not None:
            keys = self._by_voice.get(entry.voice_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_voice[entry.voice_id]


def _entry_size(entry: CacheEntry) -> int:
    return entry.size


# --------------------------------------------------------------------------- disk

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


def _read_entry_voice(path: Path) -> str | None:
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
        found: set[str] = set()
        for path in list(self._entry_files()):
            if not path.name.endswith(_ENTRY_SUFFIX) or path.name.startswith(_TMP_PREFIX):
                continue
            try:
                voice = _read_entry_voice(path)
            except (CorruptEntry, OSError):
                continue
            if voice is not None:
                found.add(voice)
        return found

    def invalidate_voice(self, voice_id: str) -> int:
        """Delete every entry made with ``voice_id``.

        Scans the metadata of every file instead of trusting an in-process
        index, so entries written by other processes are removed too. Voice
        deletion is rare, and the scan reads headers only.
        """
        removed = 0
        for path in list(self._entry_files()):
            if not path.name.endswith(_ENTRY_SUFFIX) or path.name.startswith(_TMP_PREFIX):
                continue
            try:
                voice = _read_entry_voice(path)
            except (CorruptEntry, OSError):
                voice = None
            if voice == voice_id:
                self._drop_file(path.name[: -len(_ENTRY_SUFFIX)])
                removed += 1
        return removed

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                **_counter_stats(self.counters),
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


# -------------------------------------------------------------------------- redis


# Deleting the members and the set in one script means no entry can be added to
# the set between reading it and deleting it and then survive the invalidation.
_INVALIDATE_LUA = """
local keys = redis.call('SMEMBERS', KEYS[1])
local removed = 0
for _, k in ipairs(keys) do
  removed = removed + redis.call('DEL', k)
end
redis.call('DEL', KEYS[1])
return removed
"""


def _log_redis_error(what: str, exc: RedisError) -> None:
    # While the circuit is open every call fails at once: one line per call
    # at warning level would flood the log during an outage.
    from voxclone.runtime.redis_conn import RedisUnavailable

    if isinstance(exc, RedisUnavailable):
        log.debug("redis cache %s: %s", what, exc)
    else:
        log.warning("redis cache %s: %s", what, type(exc).__name__)


class RedisTier:
    """Entries as Redis hashes with a TTL; a SET per voice indexes them.

    Shared by every replica. Values above ``max_value_bytes`` are not stored
    (large transfers would block Redis for everyone). An unreachable Redis
    degrades to misses rather than failing the request.
    """

    name = "redis"

    def __init__(
        self,
        client: Any,
        ttl_s: int,
        max_value_bytes: int,
        prefix: str = "voxclone:audio:",
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be > 0")
        self.client = client
        self.ttl_s = int(ttl_s)
        self.max_value_bytes = max_value_bytes
        self.prefix = prefix
        self.counters = TierCounters()
        self._invalidate = client.register_script(_INVALIDATE_LUA)
        # Imported here, not with the module: the redis package takes ~0.7 s
        # to import on 2 cores and only a server configured with Redis needs it.
        from redis.exceptions import RedisError

        self._redis_error: type[RedisError] = RedisError

    def _entry_key(self, key: str) -> str:
        return f"{self.prefix}e:{key}"

    def _voice_key(self, voice_id: str) -> str:
        return f"{self.prefix}v:{voice_tag(voice_id)}"

    def voice_index_key(self, voice_id: str) -> str:
        """The SET indexing ``voice_id``'s entries (exists while any may be left)."""
        return self._voice_key(voice_id)

    def get(self, key: str) -> CacheEntry | None:
        try:
            fields = self.client.hgetall(self._entry_key(key))
        except self._redis_error as exc:
            _log_redis_error("read failed; serving a miss", exc)
            self.counters.errors += 1
            self.counters.misses += 1
            return None
        data = fields.get(b"data") if fields else None
        if data is None:
            self.counters.misses += 1
            return None
        self.counters.hits += 1
        content_type = fields.get(b"ct", b"").decode("utf-8") or DEFAULT_CONTENT_TYPE
        voice = fields.get(b"voice")
        return CacheEntry(
            data=bytes(data),
            content_type=content_type,
            voice_id=voice.decode("utf-8") if voice else None,
        )

    def put(self, key: str, entry: CacheEntry) -> bool:
        if entry.size > self.max_value_bytes:
            self.counters.skipped += 1
            return False
        entry_key = self._entry_key(key)
        mapping: dict[str, bytes | str] = {"data": entry.data, "ct": entry.content_type}
        if entry.voice_id is not None:
            mapping["voice"] = entry.voice_id
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(entry_key)
            pipe.hset(entry_key, mapping=mapping)
            pipe.expire(entry_key, self.ttl_s)
            if entry.voice_id is not None:
                voice_key = self._voice_key(entry.voice_id)
                pipe.sadd(voice_key, entry_key)
                # The index lives as long as its newest entry could.
                pipe.expire(voice_key, self.ttl_s)
            pipe.execute()
        except self._redis_error as exc:
            _log_redis_error("write failed", exc)
            self.counters.errors += 1
            return False
        self.counters.stores += 1
        return True

    def delete(self, key: str, voice_id: str | None = None) -> None:
        try:
            if voice_id is None:
                self.client.delete(self._entry_key(key))
            else:
                pipe = self.client.pipeline(transaction=True)
                pipe.delete(self._entry_key(key))
                pipe.srem(self._voice_key(voice_id), self._entry_key(key))
                pipe.execute()
        except self._redis_error as exc:
            self.counters.errors += 1
            _log_redis_error("delete failed", exc)

    def invalidate_voice(self, voice_id: str) -> int:
        # Errors propagate: a silent failure here would leave biometric-derived
        # audio behind after the user asked for deletion.
        return int(self._invalidate(keys=[self._voice_key(voice_id)]))

    def stats(self) -> dict[str, Any]:
        return {**_counter_stats(self.counters), "ttl_s": self.ttl_s}


# ------------------------------------------------------------------------- tiered


class TieredCache:
    """Looks tiers up fastest first; a hit is copied into the faster tiers."""

    def __init__(self, tiers: Sequence[CacheTier], listener: CacheListener | None = None) -> None:
        names = [tier.name for tier in tiers]
        if len(set(names)) != len(names):
            raise ValueError("tier names must be unique")
        self.tiers = list(tiers)
        self.listener = listener
        # Voice purges running now and begun so far: a hit read before a purge
        # and copied into the faster tiers after it would outlive it (get_entry).
        self._purge_lock = threading.Lock()
        self._purges_running = 0
        self._purges_begun = 0

    def _notify(self, tier: str, outcome: str) -> None:
        if self.listener is not None:
            try:
                self.listener(tier, outcome)
            except Exception:  # metrics must never break serving
                log.exception("cache listener failed")

    def get_entry(self, key: str) -> tuple[CacheEntry, str] | None:
        with self._purge_lock:
            before = (self._purges_running, self._purges_begun)
        for position, tier in enumerate(self.tiers):
            entry = tier.get(key)
            if entry is None:
                self._notify(tier.name, "miss")
                continue
            self._notify(tier.name, "hit")
            if position:
                self._promote(key, entry, self.tiers[:position], before)
            return entry, tier.name
        return None

    def _promote(
        self, key: str, entry: CacheEntry, faster: Sequence[CacheTier], before: tuple[int, int]
    ) -> None:
        """Copy a hit into the faster tiers, unless a purge overlapped the lookup.

        A purge running when the lookup began may not have reached the slower
        tier yet (what was read may be its leftover): no copy. One that began
        after it may have cleared the faster tiers before the copy landed: the
        copy is taken back. Either way this process's own purge leaves nothing
        (another process's purge of a shared tier is the orphan sweep's job).
        """
        if before[0]:
            return
        for tier in faster:
            tier.put(key, entry)
        with self._purge_lock:
            overlapped = self._purges_begun != before[1]
        if overlapped:
            for tier in faster:
                tier.delete(key, entry.voice_id)

    def get(self, key: str) -> tuple[bytes, str] | None:
        """``(audio bytes, tier name)`` or None; see ``get_entry`` for metadata."""
        found = self.get_entry(key)
        if found is None:
            return None
        entry, tier_name = found
        return entry.data, tier_name

    def put(
        self,
        key: str,
        value: bytes,
        voice_id: str | None,
        content_type: str = DEFAULT_CONTENT_TYPE,
    ) -> None:
        entry = CacheEntry(data=bytes(value), content_type=content_type, voice_id=voice_id)
        for tier in self.tiers:
            tier.put(key, entry)

    def delete(self, key: str, voice_id: str | None = None) -> None:
        for tier in self.tiers:
            tier.delete(key, voice_id)

    def local_voice_ids(self) -> set[str]:
        """Voices this process's own tiers (memory, disk) hold audio of; a shared
        tier (Redis) is left out: the deleting server purges it (and the orphan
        sweep finds what was written after, runtime/cache_guard.py)."""
        found: set[str] = set()
        for tier in self.tiers:
            lister = getattr(tier, "voice_ids", None)
            if lister is not None:
                found |= lister()
        return found

    def invalidate_voice(self, voice_id: str) -> dict[str, int]:
        """Remove every entry made with ``voice_id``; returns removals per tier.

        Every tier is tried even when one fails (the local ones must not keep
        audio because Redis is down); then the first failure is raised, so the
        caller keeps the purge owed.
        """
        removed: dict[str, int] = {}
        failure: Exception | None = None
        with self._purge_lock:
            self._purges_running += 1
            self._purges_begun += 1
        try:
            for tier in self.tiers:
                try:
                    removed[tier.name] = tier.invalidate_voice(voice_id)
                except Exception as exc:
                    failure = failure or exc
        finally:
            with self._purge_lock:
                self._purges_running -= 1
        if failure is not None:
            raise failure
        return removed

    def stats(self) -> dict[str, dict[str, Any]]:
        return {tier.name: tier.stats() for tier in self.tiers}


# ---------------------------------------------------------------------- embedding


class EmbeddingCache:
    """Bounded LRU of speaker embeddings keyed by a hash of the source content.

    Stored arrays are read-only copies, so a caller mutating its result cannot
    corrupt what later callers receive.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.counters = TierCounters()
        self._entries: Lru[str, NDArray[Any]] = Lru(max_entries)
        self._lock = threading.Lock()

    @staticmethod
    def content_key(content: bytes, *, model: str = "") -> str:
        """Key for ``content`` (e.g. decoded reference audio) under a given encoder."""
        digest = hashlib.sha256(model.encode("utf-8") + b"\0" + content)
        return digest.hexdigest()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> NDArray[Any] | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.counters.misses += 1
                return None
            self.counters.hits += 1
            return value

    def put(self, key: str, embedding: NDArray[Any]) -> NDArray[Any]:
        """Store a read-only copy of ``embedding`` and return that copy."""
        frozen = np.array(embedding, copy=True)
        frozen.setflags(write=False)
        with self._lock:
            evicted = self._entries.put(key, frozen)
            self.counters.stores += 1
            self.counters.evictions += len(evicted)
        return frozen

    def get_or_compute(self, key: str, compute: Callable[[], NDArray[Any]]) -> NDArray[Any]:
        cached = self.get(key)
        if cached is not None:
            return cached
        return self.put(key, compute())

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**_counter_stats(self.counters), "entries": len(self._entries)}
