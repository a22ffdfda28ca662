"""A voice's float arrays: their shapes per engine, their checks, and their
bytes in the ``voice_arrays`` table."""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from voxclone.errors import InvalidInput, VoxcloneError
from voxclone.runtime.voice_store.records import (
    DEFAULT_EMBEDDING_SHAPE,
    DEFAULT_TONE_SHAPE,
    ENGINE_MAX_CHARS,
    PROMPT_MAX_BYTES,
    VoiceRecord,
)
from voxclone.runtime.voice_store.validation import validate_short_text

# Arrays are stored as raw little-endian float32 bytes plus their shape, which
# any language (and PostgreSQL BYTEA) can read without numpy's .npy header.
_ARRAY_DTYPE = "<f4"


def checked_array(value: np.ndarray, field_name: str, shape: tuple[int, ...]) -> np.ndarray:
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


def copy_or_none(array: np.ndarray | None) -> np.ndarray | None:
    return None if array is None else array.copy()


def encode_array(array: np.ndarray) -> tuple[bytes, str]:
    return array.astype(_ARRAY_DTYPE, copy=False).tobytes(), json.dumps(list(array.shape))


def decode_array(data: bytes, shape_json: str) -> np.ndarray:
    shape = tuple(int(n) for n in json.loads(shape_json))
    expected = int(np.prod(shape, dtype=np.int64)) * 4
    if len(data) != expected:
        raise VoxcloneError("stored voice data is corrupted; delete and re-create the voice")
    # frombuffer is read-only and tied to the bytes object; copy to a normal array.
    return np.frombuffer(data, dtype=_ARRAY_DTYPE).reshape(shape).astype(np.float32)


class VoiceShapes:
    """What a voice's arrays must look like: the speaker embedding's shape, each
    engine's style shape (None: a prompt engine, whose voices carry an opaque
    prompt instead of a style array) and the tone vectors' shape."""

    def __init__(
        self,
        style_shapes: Mapping[str, tuple[int, ...] | None] | None = None,
        embedding_shape: tuple[int, ...] = DEFAULT_EMBEDDING_SHAPE,
        tone_shape: tuple[int, ...] = DEFAULT_TONE_SHAPE,
    ) -> None:
        self.embedding = tuple(embedding_shape)
        self.styles: dict[str, tuple[int, ...] | None] = {
            name: None if shape is None else tuple(shape)
            for name, shape in (style_shapes or {}).items()
        }
        self.tone = tuple(tone_shape)

    def checked_embedding(self, embedding: np.ndarray) -> np.ndarray:
        return checked_array(embedding, "embedding", self.embedding)

    def checked_model(self, record: VoiceRecord) -> tuple[str, str, str]:
        engine = validate_short_text(record.engine, "engine", ENGINE_MAX_CHARS)
        if engine not in self.styles:
            known = sorted(self.styles)
            raise InvalidInput(
                f"voices cannot be stored for engine {engine[:32]!r}; known: {', '.join(known)}",
                field="engine",
                limit=known,
            )
        model_id = validate_short_text(record.model_id, "model_id", ENGINE_MAX_CHARS)
        version = record.model_version
        if not isinstance(version, str) or len(version) > ENGINE_MAX_CHARS:
            raise InvalidInput("model_version must be short text", field="model_version")
        return engine, model_id, version

    def checked_conditioning(
        self, engine: str, style: np.ndarray | None, prompt: bytes | None
    ) -> tuple[np.ndarray | None, bytes | None]:
        """(style, prompt) as the engine's clone method wants them: exactly one is set."""
        if engine not in self.styles:
            raise InvalidInput(f"unknown engine {engine[:32]!r}", field="engine")
        shape = self.styles[engine]
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
        return checked_array(style, "style", shape), None

    def checked_tone(
        self, reference_spectrum: np.ndarray | None, tone_db: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Validated optional tone arrays, keyed by their ``voice_arrays`` kind."""
        checked: dict[str, np.ndarray] = {}
        if reference_spectrum is not None:
            checked["reference_spectrum"] = checked_array(
                reference_spectrum, "reference_spectrum", self.tone
            )
        if tone_db is not None:
            checked["tone"] = checked_array(tone_db, "tone_db", self.tone)
        return checked
