"""Resolve a voice reference (built-in name, stored id or stored name) to a style."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxclone.errors import NotFound
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.builtin import BuiltinVoice


@dataclass(frozen=True)
class ResolvedVoice:
    id: str
    name: str
    version: int
    style: np.ndarray
    language: str | None
    builtin: bool
    # The reference recording's tone, applied after synthesis (cloned voices only).
    tone: ToneFilter | None = None

    @classmethod
    def from_record(cls, record: VoiceRecord) -> ResolvedVoice:
        tone = None if record.tone_db is None else ToneFilter(record.tone_db)
        return cls(
            record.id, record.name, record.version, record.style, record.language, False, tone
        )


@dataclass(frozen=True)
class VoiceListing:
    id: str
    name: str
    description: str
    language: str | None
    builtin: bool
    version: int = 1


class VoiceCatalog:
    def __init__(
        self,
        builtins: dict[str, tuple[BuiltinVoice, np.ndarray]],
        store: VoiceStore | None = None,
    ) -> None:
        self._builtins = builtins
        self._store = store

    @property
    def builtin_names(self) -> list[str]:
        return list(self._builtins)

    def resolve(self, voice: str, owner: str | None) -> ResolvedVoice:
        if voice in self._builtins:
            info, style = self._builtins[voice]
            return ResolvedVoice(voice, voice, 1, style, None, True)
        if self._store is not None:
            record = None
            if voice.startswith("v_"):
                try:
                    record = self._store.get(voice, owner)
                except NotFound:
                    record = None
            if record is None and owner is not None:
                record = self._store.find_by_name(voice, owner)
            if record is not None:
                return ResolvedVoice.from_record(record)
        raise NotFound(
            f"voice '{voice[:64]}' not found; use a built-in voice or one of your cloned voices",
            field="voice",
            limit=self.builtin_names,
        )

    def listing(self, owner: str | None) -> list[VoiceListing]:
        out = [
            VoiceListing(name, name, info.description, None, True)
            for name, (info, _) in self._builtins.items()
        ]
        if self._store is not None:
            for summary in self._store.list(owner, limit=1000, offset=0):
                out.append(
                    VoiceListing(
                        summary.id,
                        summary.name,
                        f"cloned voice ({summary.source})",
                        summary.language,
                        False,
                        summary.version,
                    )
                )
        return out
