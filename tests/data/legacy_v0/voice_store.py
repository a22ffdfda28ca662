"""Voice library store: who owns which cloned voice, with its consent record.

A voice is biometric data (DESIGN.md §1.5), so this module is strict about
three things:

* **Tenancy.** Every read and write takes an ``owner``. A voice of another
  owner behaves exactly like a missing one (``NotFound``), so ids cannot be
  probed. ``owner=None`` means an administrator acting on any voice.
* **Atomicity.** A voice and all of its rows (consent, arrays, optional
  reference audio) are written in one transaction: a crash in the middle of an
  enrollment leaves either the whole voice or nothing.
* **Complete deletion.** Deleting a voice removes every row that mentions it,
  and SQLite is run with ``secure_delete`` plus a WAL checkpoint so the bytes
  do not linger in free pages or in the write-ahead log.

All SQL of the voice library lives in this module. The SQL is kept to
portable types (TEXT, INTEGER, BLOB) and plain statements so that a
PostgreSQL implementation of :class:`VoiceStore` can follow it closely. What
would differ there:

* placeholders are ``%s`` instead of ``?``; BLOB becomes BYTEA; timestamps
  could become TIMESTAMPTZ (we store ISO-8601 UTC text, which sorts correctly
  in both);
* ``BEGIN IMMEDIATE`` (take the write lock up front) becomes an ordinary
  transaction, with ``SELECT ... FOR UPDATE`` on the voice row where a read
  precedes a write, and the unique index on ``(owner, name_key)`` catching the
  race between two creates of the same name (``UniqueViolation`` instead of
  ``sqlite3.IntegrityError``);
* connections come from a pool instead of one connection per thread;
* ``secure_delete`` / WAL checkpoints have no equivalent: deleted tuples are
  reclaimed by VACUUM, which the operator schedules.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

import numpy as np

from voxclone.errors import Conflict, InvalidInput, NotFound, VoxcloneError
from voxclone.synth.audio.tone import GRID_HZ

VoiceSource = Literal["instant", "refined", "builtin"]
VOICE_SOURCES: frozenset[str] = frozenset({"instant", "refined", "builtin"})

NAME_MAX_CHARS = 64
LANGUAGE_MAX_CHARS = 16
OWNER_MAX_CHARS = 128
LIST_MAX_LIMIT = 1000

DEFAULT_EMBEDDING_SHAPE: tuple[int, ...] = (256,)
# Voices stored before engines were recorded were all made for Kokoro; the
# schema migration gives them these values.
LEGACY_ENGINE = "kokoro"
LEGACY_MODEL_ID = "kokoro-82m-v1.0-int8"
ENGINE_MAX_CHARS = 64
PROMPT_MAX_BYTES = 64 << 20
# Recording-tone vectors: the reference's long-term spectrum and the gain
# curve applied to the voice, one value per point of the tone grid.
DEFAULT_TONE_SHAPE: tuple[int, ...] = (GRID_HZ.size,)

# Arrays are stored as raw little-endian float32 bytes plus their shape, which
# any language (and PostgreSQL BYTEA) can read without numpy's .npy header.
_ARRAY_DTYPE = "<f4"

# A test hook called between the statements of a write transaction, with the
# name of the step just done. Production code leaves it unset.
StatementHook = Callable[[str], None]


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


@dataclass
class ConsentRecord:
    """Proof that the speaker agreed to be cloned (who, when, to what text)."""

    statement_sha256: str
    given_by: str
    given_at: str  # ISO-8601 UTC
    client_address: str | None = None


@dataclass
class VoiceRecord:
    """A voice with everything the synthesizer needs to speak with it.

    When passed to :meth:`VoiceStore.create`, an empty ``id``, ``created_at``
    or ``updated_at`` is filled in by the store and ``version`` starts at 1.
    ``reference_audio`` is kept only when the user asked for it.
    """

    id: str
    name: str
    language: str
    owner: str
    created_at: str
    updated_at: str
    version: int
    consent: ConsentRecord
    embedding: np.ndarray
    # Style engines: the float style array. Prompt engines: None (see ``prompt``).
    style: np.ndarray | None
    quality: dict[str, Any]
    source: str
    reference_audio: bytes | None = None
    # Optional recording-tone data: None for voices made without it.
    reference_spectrum: np.ndarray | None = None
    tone_db: np.ndarray | None = None
    # The engine (registry name) and weights the voice was made for; another
    # engine or model refuses it.
    engine: str = LEGACY_ENGINE
    model_id: str = LEGACY_MODEL_ID
    model_version: str = ""
    # Prompt engines: the engine's serialized conditioning (opaque bytes).
    prompt: bytes | None = None


@dataclass(frozen=True)
class VoiceSummary:
    """What a voice listing shows: metadata only, never arrays or audio."""

    id: str
    name: str
    language: str
    owner: str
    created_at: str
    updated_at: str
    version: int
    source: str
    quality: dict[str, Any] = field(default_factory=dict)
    has_reference_audio: bool = False
    engine: str = LEGACY_ENGINE
    model_id: str = LEGACY_MODEL_ID
    model_version: str = ""


@runtime_checkable
class VoiceStore(Protocol):
    """Persistence of the voice library. ``owner=None`` means any owner (admin)."""

    def create(self, record: VoiceRecord) -> VoiceRecord: ...

    def get(
        self, voice_id: str, owner: str | None, *, include_reference_audio: bool = True
    ) -> VoiceRecord: ...

    def find_by_name(self, name: str, owner: str) -> VoiceRecord | None: ...

    def list(self, owner: str | None, limit: int = 100, offset: int = 0) -> list[VoiceSummary]: ...

    def update_style(
        self,
        voice_id: str,
        owner: str | None,
        *,
        style: np.ndarray,
        quality: dict[str, Any],
        source: str,
        embedding: np.ndarray | None = None,
        tone_db: np.ndarray | None = None,
        reference_spectrum: np.ndarray | None = None,
    ) -> VoiceRecord: ...

    def rename(self, voice_id: str, owner: str | None, name: str) -> VoiceRecord: ...

    def drop_reference_audio(self, voice_id: str, owner: str | None) -> bool: ...

    def delete(self, voice_id: str, owner: str | None) -> VoiceRecord: ...

    def count(self, owner: str | None = None) -> int: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------
# Small helpers shared by the stores
# --------------------------------------------------------------------------


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with microseconds; sorts lexically."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_voice_id() -> str:
    """Opaque id: ``v_`` + 16 url-safe random characters (96 bits)."""
    return "v_" + secrets.token_urlsafe(12)


def validate_voice_name(name: str) -> str:
    """Return the stripped name, or raise InvalidInput if it is not usable."""
    if not isinstance(name, str):
        raise InvalidInput("name must be text", field="name", limit=NAME_MAX_CHARS)
    cleaned = name.strip()
    if not cleaned or len(cleaned) > NAME_MAX_CHARS:
        raise InvalidInput(
            f"name must be 1 to {NAME_MAX_CHARS} characters after trimming spaces",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    if not cleaned.isprintable():
        raise InvalidInput(
            "name must contain only printable characters (no control characters or line breaks)",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    return cleaned


def _name_key(name: str) -> str:
    # Names are unique per owner regardless of case: "Alice" and "alice" as two
    # different voices would only confuse whoever picks one by name.
    return name.casefold()


def _validate_short_text(value: object, field_name: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise InvalidInput(
            f"{field_name} must be 1 to {max_chars} characters",
            field=field_name,
            limit=max_chars,
        )
    return value


def _validate_source(source: str) -> str:
    if source not in VOICE_SOURCES:
        raise InvalidInput(
            f"source must be one of {', '.join(sorted(VOICE_SOURCES))}",
            field="source",
            value=str(source)[:32],
        )
    return source


def _validate_consent(consent: ConsentRecord) -> ConsentRecord:
    digest = consent.statement_sha256
    if not (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest.lower())
    ):
        raise InvalidInput(
            "consent statement hash must be 64 hexadecimal characters (SHA-256)",
            field="consent",
        )
    _validate_short_text(consent.given_by, "consent.given_by", OWNER_MAX_CHARS)
    try:
        datetime.fromisoformat(consent.given_at)
    except (TypeError, ValueError):
        raise InvalidInput(
            "consent time must be an ISO-8601 timestamp", field="consent.given_at"
        ) from None
    return ConsentRecord(digest.lower(), consent.given_by, consent.given_at, consent.client_address)


def _json_default(value: object) -> Any:
    # Quality reports are often built from numpy scalars; store them as plain JSON.
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _quality_to_json(quality: dict[str, Any]) -> str:
    if not isinstance(quality, dict):
        raise InvalidInput("quality report must be a JSON object", field="quality")
    try:
        return json.dumps(quality, default=_json_default, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        raise InvalidInput(
            "quality report must contain only JSON values (no NaN or infinity)", field="quality"
        ) from None


def _checked_array(value: np.ndarray, field_name: str, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise InvalidInput(f"{field_name} must be a float array", field=field_name)
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.shape != shape:
        raise InvalidInput(
            f"{field_name} must have shape {list(shape)}, got {list(array.shape)}",
            field=field_name,
            limit=list(shape),
        )
    if not np.isfinite(array).all():
        raise InvalidInput(f"{field_name} must contain only finite numbers", field=field_name)
    return array


def _copy_or_none(array: np.ndarray | None) -> np.ndarray | None:
    return None if array is None else array.copy()


def _encode_array(array: np.ndarray) -> tuple[bytes, str]:
    return array.astype(_ARRAY_DTYPE, copy=False).tobytes(), json.dumps(list(array.shape))


def _decode_array(data: bytes, shape_json: str) -> np.ndarray:
    shape = tuple(int(n) for n in json.loads(shape_json))
    expected = int(np.prod(shape, dtype=np.int64)) * 4
    if len(data) != expected:
        raise VoxcloneError("stored voice data is corrupted; delete and re-create the voice")
    # frombuffer is read-only and tied to the bytes object; copy to a normal array.
    return np.frombuffer(data, dtype=_ARRAY_DTYPE).reshape(shape).astype(np.float32)


def _check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {LIST_MAX_LIMIT}", field="limit", limit=LIST_MAX_LIMIT
        )
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset must be 0 or more", field="offset")


# --------------------------------------------------------------------------
# SQLite plumbing (also used by the job store, which may share the file)
# --------------------------------------------------------------------------


class SqliteDatabase:
    """One SQLite file in WAL mode with one connection per thread.

    Write transactions use ``BEGIN IMMEDIATE`` so the write lock is taken
    before any read; a concurrent writer waits (``busy_timeout``) instead of
    failing halfway. Connections live until :meth:`close`; that suits a
    bounded thread pool (asyncio's default executor), not a thread per request.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self._path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._open: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise VoxcloneError("the voice database is closed")
            # isolation_level=None: we issue BEGIN/COMMIT ourselves so that the
            # transaction boundaries are exactly the ones written below.
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL stays atomic and consistent after a process crash;
            # only a power loss may drop the very last commit.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            # Overwrite deleted content with zeros: voice data is biometric.
            conn.execute("PRAGMA secure_delete=ON")
            self._open.append(conn)
        self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A snapshot: several SELECTs see the same committed state."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def checkpoint(self) -> None:
        """Fold the WAL into the main file and truncate it (best effort)."""
        # With readers active SQLite checkpoints what it can; a later
        # checkpoint (ours or SQLite's automatic one) finishes the job.
        with contextlib.suppress(sqlite3.OperationalError):
            self.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._open:
                conn.close()
            self._open.clear()
        self._local = threading.local()


def apply_migrations(
    db: SqliteDatabase, component: str, migrations: Sequence[Sequence[str]]
) -> int:
    """Bring ``component``'s tables to the newest version; return that version.

    ``migrations[i]`` holds the statements that take the schema from version
    ``i`` to ``i + 1``. Everything runs in one write transaction, so two
    processes opening a fresh file at once cannot both migrate it.
    """
    with db.write() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " component TEXT PRIMARY KEY,"
            " version INTEGER NOT NULL)"
        )
        row = conn.execute(
            "SELECT version FROM schema_version WHERE component = ?", (component,)
        ).fetchone()
        current = int(row[0]) if row else 0
        if current > len(migrations):
            raise VoxcloneError(
                f"the {component} database was written by a newer voxclone "
                f"(schema {current}, this version knows up to {len(migrations)})"
            )
        for statements in migrations[current:]:
            for statement in statements:
                conn.execute(statement)
        if row is None:
            conn.execute(
                "INSERT INTO schema_version (component, version) VALUES (?, ?)",
                (component, len(migrations)),
            )
        else:
            conn.execute(
                "UPDATE schema_version SET version = ? WHERE component = ?",
                (len(migrations), component),
            )
    return len(migrations)


# --------------------------------------------------------------------------
# SQLite voice store
# --------------------------------------------------------------------------

_VOICE_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the library itself.
    (
        (
            "CREATE TABLE voices ("
            " id TEXT PRIMARY KEY,"
            " owner TEXT NOT NULL,"
            " name TEXT NOT NULL,"
            " name_key TEXT NOT NULL,"
            " language TEXT NOT NULL,"
            " created_at TEXT NOT NULL,"
            " updated_at TEXT NOT NULL,"
            " version INTEGER NOT NULL,"
            " source TEXT NOT NULL,"
            " quality_json TEXT NOT NULL)"
        ),
        "CREATE UNIQUE INDEX voices_owner_name ON voices (owner, name_key)",
        (
            "CREATE TABLE voice_consents ("
            " voice_id TEXT PRIMARY KEY REFERENCES voices (id) ON DELETE CASCADE,"
            " statement_sha256 TEXT NOT NULL,"
            " given_by TEXT NOT NULL,"
            " given_at TEXT NOT NULL,"
            " client_address TEXT)"
        ),
        (
            "CREATE TABLE voice_arrays ("
            " voice_id TEXT NOT NULL REFERENCES voices (id) ON DELETE CASCADE,"
            " kind TEXT NOT NULL,"
            " shape_json TEXT NOT NULL,"
            " data BLOB NOT NULL,"
            " PRIMARY KEY (voice_id, kind))"
        ),
        (
            "CREATE TABLE voice_reference_audio ("
            " voice_id TEXT PRIMARY KEY REFERENCES voices (id) ON DELETE CASCADE,"
            " audio BLOB NOT NULL)"
        ),
    ),
    # 2: listings page through one owner's voices by creation time.
    ("CREATE INDEX voices_owner_created ON voices (owner, created_at, id)",),
    # 3: engines as plug-ins. Every voice records the engine and weights it was
    # made for (existing voices are Kokoro's); prompt engines store an opaque
    # conditioning blob instead of a style array.
    (
        f"ALTER TABLE voices ADD COLUMN engine TEXT NOT NULL DEFAULT '{LEGACY_ENGINE}'",
        f"ALTER TABLE voices ADD COLUMN model_id TEXT NOT NULL DEFAULT '{LEGACY_MODEL_ID}'",
        "ALTER TABLE voices ADD COLUMN model_version TEXT NOT NULL DEFAULT ''",
        (
            "CREATE TABLE voice_prompts ("
            " voice_id TEXT PRIMARY KEY REFERENCES voices (id) ON DELETE CASCADE,"
            " data BLOB NOT NULL)"
        ),
    ),
)

# The purge journal has its own schema version (component "purge_journal"),
# independent of the library's tables. A row says: audio derived from this
# voice may still sit in a cache tier that could not be reached when the voice
# was deleted. It is written in the deletion's own transaction, so a crash or
# an unreachable Redis can delay a purge but never lose it.
_PURGE_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        (
            "CREATE TABLE purge_journal ("
            " voice_id TEXT PRIMARY KEY,"
            " requested_at TEXT NOT NULL,"
            " attempts INTEGER NOT NULL DEFAULT 0,"
            " last_error TEXT)"
        ),
    ),
)


@dataclass(frozen=True)
class PendingPurge:
    voice_id: str
    requested_at: str
    attempts: int
    last_error: str | None


# Every table holding a voice's data, child tables first. Deletion walks this
# list explicitly rather than trusting ON DELETE CASCADE alone.
_VOICE_CHILD_TABLES = ("voice_reference_audio", "voice_prompts", "voice_arrays", "voice_consents")

_SUMMARY_COLUMNS = (
    "v.id, v.name, v.language, v.owner, v.created_at, v.updated_at, v.version,"
    " v.source, v.quality_json,"
    " EXISTS (SELECT 1 FROM voice_reference_audio r WHERE r.voice_id = v.id),"
    " v.engine, v.model_id, v.model_version"
)


def _owner_clause(owner: str | None) -> tuple[str, tuple[str, ...]]:
    # Built in Python rather than "(? IS NULL OR owner = ?)", which PostgreSQL
    # cannot type and which defeats the index.
    if owner is None:
        return "", ()
    return " AND owner = ?", (owner,)


def _summary_from_row(row: Sequence[Any]) -> VoiceSummary:
    return VoiceSummary(
        id=row[0],
        name=row[1],
        language=row[2],
        owner=row[3],
        created_at=row[4],
        updated_at=row[5],
        version=int(row[6]),
        source=row[7],
        quality=json.loads(row[8]),
        has_reference_audio=bool(row[9]),
        engine=row[10],
        model_id=row[11],
        model_version=row[12],
    )


def _not_found(voice_id: str) -> NotFound:
    # Same message whether the voice is missing or belongs to someone else.
    return NotFound(f"voice {voice_id[:40]!r} not found", field="voice_id")


class SqliteVoiceStore:
    """The voice library in a SQLite file (the embedded default).

    ``style_shapes`` maps each engine voices may be written for to its
    ``EngineCapabilities.style_shape`` (None: a prompt engine, whose voices
    carry an opaque prompt instead of a style array). Writing a voice for an
    engine not in the map is refused; reading never needs it.
    """

    COMPONENT = "voices"

    def __init__(
        self,
        path: Path,
        *,
        style_shapes: Mapping[str, tuple[int, ...] | None] | None = None,
        embedding_shape: tuple[int, ...] = DEFAULT_EMBEDDING_SHAPE,
        tone_shape: tuple[int, ...] = DEFAULT_TONE_SHAPE,
        statement_hook: StatementHook | None = None,
    ) -> None:
        self._db = SqliteDatabase(path)
        self._embedding_shape = tuple(embedding_shape)
        self._style_shapes: dict[str, tuple[int, ...] | None] = {
            name: None if shape is None else tuple(shape)
            for name, shape in (style_shapes or {}).items()
        }
        self._tone_shape = tuple(tone_shape)
        self._hook = statement_hook
        self.schema_version = apply_migrations(self._db, self.COMPONENT, _VOICE_MIGRATIONS)
        apply_migrations(self._db, "purge_journal", _PURGE_MIGRATIONS)

    # -- writes -------------------------------------------------------------

    def create(self, record: VoiceRecord) -> VoiceRecord:
        name = validate_voice_name(record.name)
        owner = _validate_short_text(record.owner, "owner", OWNER_MAX_CHARS)
        language = _validate_short_text(record.language, "language", LANGUAGE_MAX_CHARS)
        source = _validate_source(record.source)
        consent = _validate_consent(record.consent)
        embedding = _checked_array(record.embedding, "embedding", self._embedding_shape)
        engine, model_id, model_version = self._checked_model(record)
        style, prompt = self._checked_conditioning(engine, record.style, record.prompt)
        tone_arrays = self._checked_tone(record.reference_spectrum, record.tone_db)
        quality_json = _quality_to_json(record.quality)
        if record.reference_audio is not None and not isinstance(record.reference_audio, bytes):
            raise InvalidInput("reference audio must be bytes", field="reference_audio")

        voice_id = record.id or new_voice_id()
        now = utc_now_iso()
        created_at = record.created_at or now
        updated_at = record.updated_at or created_at

        with self._db.write() as conn:
            if conn.execute("SELECT 1 FROM voices WHERE id = ?", (voice_id,)).fetchone():
                raise Conflict("a voice with this id already exists", field="id")
            self._ensure_name_free(conn, owner, name, except_id=None)
            try:
                conn.execute(
                    "INSERT INTO voices (id, owner, name, name_key, language, created_at,"
                    " updated_at, version, source, quality_json, engine, model_id, model_version)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
                    (
                        voice_id,
                        owner,
                        name,
                        _name_key(name),
                        language,
                        created_at,
                        updated_at,
                        source,
                        quality_json,
                        engine,
                        model_id,
                        model_version,
                    ),
                )
            except sqlite3.IntegrityError:
                raise Conflict(f"you already have a voice named {name!r}", field="name") from None
            self._step("voice")
            conn.execute(
                "INSERT INTO voice_consents (voice_id, statement_sha256, given_by, given_at,"
                " client_address) VALUES (?, ?, ?, ?, ?)",
                (
                    voice_id,
                    consent.statement_sha256,
                    consent.given_by,
                    consent.given_at,
                    consent.client_address,
                ),
            )
            self._step("consent")
            self._write_array(conn, voice_id, "embedding", embedding)
            self._step("embedding")
            if style is not None:
                self._write_array(conn, voice_id, "style", style)
                self._step("style")
            if prompt is not None:
                conn.execute(
                    "INSERT INTO voice_prompts (voice_id, data) VALUES (?, ?)", (voice_id, prompt)
                )
                self._step("prompt")
            for kind, array in tone_arrays.items():
                self._write_array(conn, voice_id, kind, array)
                self._step(kind)
            if record.reference_audio is not None:
                conn.execute(
                    "INSERT INTO voice_reference_audio (voice_id, audio) VALUES (?, ?)",
                    (voice_id, record.reference_audio),
                )
                self._step("reference_audio")

        return VoiceRecord(
            id=voice_id,
            name=name,
            language=language,
            owner=owner,
            created_at=created_at,
            updated_at=updated_at,
            version=1,
            consent=consent,
            embedding=embedding.copy(),
            style=_copy_or_none(style),
            quality=json.loads(quality_json),
            source=source,
            reference_audio=record.reference_audio,
            reference_spectrum=_copy_or_none(tone_arrays.get("reference_spectrum")),
            tone_db=_copy_or_none(tone_arrays.get("tone")),
            engine=engine,
            model_id=model_id,
            model_version=model_version,
            prompt=prompt,
        )

    def update_style(
        self,
        voice_id: str,
        owner: str | None,
        *,
        style: np.ndarray,
        quality: dict[str, Any],
        source: str,
        embedding: np.ndarray | None = None,
        tone_db: np.ndarray | None = None,
        reference_spectrum: np.ndarray | None = None,
    ) -> VoiceRecord:
        """Replace the style (and optionally embedding, tone curve and the
        reference's long-term spectrum, e.g. after a recording was added); bump ``version``.

        The version is what audio caches key on, so audio made with the old
        style is never served for the new one.
        """
        where, params = _owner_clause(owner)
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT engine FROM voices WHERE id = ?" + where, (voice_id, *params)
            ).fetchone()
        if row is None:
            raise _not_found(voice_id)
        checked_style, _ = self._checked_conditioning(row[0], style, None)
        assert checked_style is not None
        checked_embedding = (
            None
            if embedding is None
            else _checked_array(embedding, "embedding", self._embedding_shape)
        )
        tone_arrays = self._checked_tone(reference_spectrum, tone_db)
        quality_json = _quality_to_json(quality)
        _validate_source(source)
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE voices SET version = version + 1, updated_at = ?, quality_json = ?,"
                " source = ? WHERE id = ?" + where,
                (utc_now_iso(), quality_json, source, voice_id, *params),
            )
            if cursor.rowcount == 0:
                raise _not_found(voice_id)
            self._step("voice")
            self._write_array(conn, voice_id, "style", checked_style, replace=True)
            self._step("style")
            if checked_embedding is not None:
                self._write_array(conn, voice_id, "embedding", checked_embedding, replace=True)
                self._step("embedding")
            for kind, array in tone_arrays.items():
                self._write_array(conn, voice_id, kind, array, replace=True)
                self._step(kind)
        return self.get(voice_id, owner)

    def rename(self, voice_id: str, owner: str | None, name: str) -> VoiceRecord:
        cleaned = validate_voice_name(name)
        where, params = _owner_clause(owner)
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT owner FROM voices WHERE id = ?" + where, (voice_id, *params)
            ).fetchone()
            if row is None:
                raise _not_found(voice_id)
            self._ensure_name_free(conn, row[0], cleaned, except_id=voice_id)
            conn.execute(
                "UPDATE voices SET name = ?, name_key = ?, updated_at = ? WHERE id = ?",
                (cleaned, _name_key(cleaned), utc_now_iso(), voice_id),
            )
        return self.get(voice_id, owner)

    def drop_reference_audio(self, voice_id: str, owner: str | None) -> bool:
        """Forget the kept reference recording; True if there was one."""
        where, params = _owner_clause(owner)
        with self._db.write() as conn:
            if not conn.execute(
                "SELECT 1 FROM voices WHERE id = ?" + where, (voice_id, *params)
            ).fetchone():
                raise _not_found(voice_id)
            cursor = conn.execute(
                "DELETE FROM voice_reference_audio WHERE voice_id = ?", (voice_id,)
            )
            dropped = cursor.rowcount > 0
        if dropped:
            self._db.checkpoint()
        return dropped

    def delete(self, voice_id: str, owner: str | None) -> VoiceRecord:
        """Delete the voice and every row derived from it; return what was deleted.

        Callers use the returned record (id, version, owner) to purge audio
        caches and other artifacts made with the voice.
        """
        where, params = _owner_clause(owner)
        with self._db.write() as conn:
            record = self._load(conn, voice_id, owner, include_reference_audio=False)
            for table in _VOICE_CHILD_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE voice_id = ?", (voice_id,))
                self._step(f"delete_{table}")
            conn.execute("DELETE FROM voices WHERE id = ?" + where, (voice_id, *params))
            # Same transaction: the voice cannot be gone without its purge owed.
            self._journal_purge(conn, voice_id)
        # Push the zeroed pages out of the WAL so no copy of the deleted voice
        # survives in the log file either.
        self._db.checkpoint()
        return record

    # -- purge journal ------------------------------------------------------

    def record_purge(self, voice_id: str) -> None:
        """Owe a purge of the caches for ``voice_id`` (deleted voices record it themselves)."""
        with self._db.write() as conn:
            self._journal_purge(conn, voice_id)

    @staticmethod
    def _journal_purge(conn: sqlite3.Connection, voice_id: str) -> None:
        conn.execute(
            "INSERT INTO purge_journal (voice_id, requested_at, attempts) VALUES (?, ?, 0)"
            " ON CONFLICT (voice_id) DO UPDATE SET requested_at = excluded.requested_at",
            (voice_id, utc_now_iso()),
        )

    def pending_purges(self, limit: int = 1000) -> list[PendingPurge]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT voice_id, requested_at, attempts, last_error FROM purge_journal"
                " ORDER BY requested_at, voice_id LIMIT ?",
                (limit,),
            ).fetchall()
        return [PendingPurge(r[0], r[1], int(r[2]), r[3]) for r in rows]

    def purge_failed(self, voice_id: str, error: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE purge_journal SET attempts = attempts + 1, last_error = ?"
                " WHERE voice_id = ?",
                (error[:200], voice_id),
            )

    def purge_done(self, voice_id: str) -> None:
        with self._db.write() as conn:
            conn.execute("DELETE FROM purge_journal WHERE voice_id = ?", (voice_id,))

    # -- reads --------------------------------------------------------------

    def get(
        self, voice_id: str, owner: str | None, *, include_reference_audio: bool = True
    ) -> VoiceRecord:
        with self._db.read() as conn:
            return self._load(conn, voice_id, owner, include_reference_audio)

    def find_by_name(self, name: str, owner: str) -> VoiceRecord | None:
        """The owner's voice with this name (case-insensitive), or None."""
        key = _name_key(name.strip()) if isinstance(name, str) else ""
        if not key:
            return None
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT id FROM voices WHERE owner = ? AND name_key = ?", (owner, key)
            ).fetchone()
            if row is None:
                return None
            return self._load(conn, row[0], owner, include_reference_audio=True)

    def list(self, owner: str | None, limit: int = 100, offset: int = 0) -> list[VoiceSummary]:
        """Voices oldest first, metadata only."""
        _check_page(limit, offset)
        where = "" if owner is None else " WHERE v.owner = ?"
        params: tuple[Any, ...] = () if owner is None else (owner,)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_SUMMARY_COLUMNS} FROM voices v{where}"
                " ORDER BY v.created_at, v.id LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
        return [_summary_from_row(row) for row in rows]

    def count(self, owner: str | None = None) -> int:
        where = "" if owner is None else " WHERE owner = ?"
        params: tuple[Any, ...] = () if owner is None else (owner,)
        with self._db.read() as conn:
            row = conn.execute("SELECT COUNT(*) FROM voices" + where, params).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------

    def _checked_model(self, record: VoiceRecord) -> tuple[str, str, str]:
        engine = _validate_short_text(record.engine, "engine", ENGINE_MAX_CHARS)
        if engine not in self._style_shapes:
            known = sorted(self._style_shapes)
            raise InvalidInput(
                f"voices cannot be stored for engine {engine[:32]!r}; known: {', '.join(known)}",
                field="engine",
                limit=known,
            )
        model_id = _validate_short_text(record.model_id, "model_id", ENGINE_MAX_CHARS)
        version = record.model_version
        if not isinstance(version, str) or len(version) > ENGINE_MAX_CHARS:
            raise InvalidInput("model_version must be short text", field="model_version")
        return engine, model_id, version

    def _checked_conditioning(
        self, engine: str, style: np.ndarray | None, prompt: bytes | None
    ) -> tuple[np.ndarray | None, bytes | None]:
        """(style, prompt) as the engine's clone method wants them: exactly one is set."""
        if engine not in self._style_shapes:
            raise InvalidInput(f"unknown engine {engine[:32]!r}", field="engine")
        shape = self._style_shapes[engine]
        if shape is None:  # a prompt engine
            if style is not None:
                raise InvalidInput(
                    f"engine {engine!r} takes a reference prompt, not a style array", field="style"
                )
            if not isinstance(prompt, bytes) or not prompt or len(prompt) > PROMPT_MAX_BYTES:
                raise InvalidInput(
                    f"a prompt voice needs 1 byte to {PROMPT_MAX_BYTES >> 20} MiB of prompt data",
                    field="prompt",
                    limit=PROMPT_MAX_BYTES,
                )
            return None, prompt
        if prompt is not None:
            raise InvalidInput(
                f"engine {engine!r} takes a style array, not a reference prompt", field="prompt"
            )
        if style is None:
            raise InvalidInput(
                "a style voice needs a style array", field="style", limit=list(shape)
            )
        return _checked_array(style, "style", shape), None

    def _checked_tone(
        self, reference_spectrum: np.ndarray | None, tone_db: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Validated optional tone arrays, keyed by their ``voice_arrays`` kind."""
        checked: dict[str, np.ndarray] = {}
        if reference_spectrum is not None:
            checked["reference_spectrum"] = _checked_array(
                reference_spectrum, "reference_spectrum", self._tone_shape
            )
        if tone_db is not None:
            checked["tone"] = _checked_array(tone_db, "tone_db", self._tone_shape)
        return checked

    def _step(self, name: str) -> None:
        if self._hook is not None:
            self._hook(name)

    @staticmethod
    def _ensure_name_free(
        conn: sqlite3.Connection, owner: str, name: str, except_id: str | None
    ) -> None:
        row = conn.execute(
            "SELECT id FROM voices WHERE owner = ? AND name_key = ?", (owner, _name_key(name))
        ).fetchone()
        if row is not None and row[0] != except_id:
            raise Conflict(f"you already have a voice named {name!r}", field="name")

    @staticmethod
    def _write_array(
        conn: sqlite3.Connection,
        voice_id: str,
        kind: str,
        array: np.ndarray,
        *,
        replace: bool = False,
    ) -> None:
        data, shape_json = _encode_array(array)
        if replace:
            # Upsert: a voice stored before this kind of array existed has no row yet.
            conn.execute(
                "INSERT INTO voice_arrays (voice_id, kind, shape_json, data) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (voice_id, kind) DO UPDATE"
                " SET shape_json = excluded.shape_json, data = excluded.data",
                (voice_id, kind, shape_json, data),
            )
        else:
            conn.execute(
                "INSERT INTO voice_arrays (voice_id, kind, shape_json, data) VALUES (?, ?, ?, ?)",
                (voice_id, kind, shape_json, data),
            )

    @staticmethod
    def _load(
        conn: sqlite3.Connection,
        voice_id: str,
        owner: str | None,
        include_reference_audio: bool,
    ) -> VoiceRecord:
        where, params = _owner_clause(owner)
        row = conn.execute(
            "SELECT id, name, language, owner, created_at, updated_at, version, source,"
            " quality_json, engine, model_id, model_version FROM voices WHERE id = ?" + where,
            (voice_id, *params),
        ).fetchone()
        if row is None:
            raise _not_found(voice_id)
        consent_row = conn.execute(
            "SELECT statement_sha256, given_by, given_at, client_address"
            " FROM voice_consents WHERE voice_id = ?",
            (voice_id,),
        ).fetchone()
        arrays = {
            kind: _decode_array(data, shape_json)
            for kind, shape_json, data in conn.execute(
                "SELECT kind, shape_json, data FROM voice_arrays WHERE voice_id = ?", (voice_id,)
            )
        }
        prompt_row = conn.execute(
            "SELECT data FROM voice_prompts WHERE voice_id = ?", (voice_id,)
        ).fetchone()
        prompt = bytes(prompt_row[0]) if prompt_row else None
        if (
            consent_row is None
            or "embedding" not in arrays
            or (("style" in arrays) == (prompt is not None))
        ):
            # Cannot happen with atomic writes; if the file was edited by hand,
            # refuse to speak with a voice whose consent or data is missing.
            raise VoxcloneError("stored voice data is incomplete; delete and re-create the voice")
        audio: bytes | None = None
        if include_reference_audio:
            audio_row = conn.execute(
                "SELECT audio FROM voice_reference_audio WHERE voice_id = ?", (voice_id,)
            ).fetchone()
            audio = bytes(audio_row[0]) if audio_row else None
        return VoiceRecord(
            id=row[0],
            name=row[1],
            language=row[2],
            owner=row[3],
            created_at=row[4],
            updated_at=row[5],
            version=int(row[6]),
            consent=ConsentRecord(*consent_row),
            embedding=arrays["embedding"],
            style=arrays.get("style"),
            quality=json.loads(row[8]),
            source=row[7],
            reference_audio=audio,
            reference_spectrum=arrays.get("reference_spectrum"),
            tone_db=arrays.get("tone"),
            engine=row[9],
            model_id=row[10],
            model_version=row[11],
            prompt=prompt,
        )
