"""Resolve a voice reference (built-in name, stored id or stored name) to a style."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxclone.errors import NotFound
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.builtin import BuiltinVoice, openai_aliases


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
    aliases: tuple[str, ...] = ()  # other names that select this voice


class VoiceCatalog:
    def __init__(
        self,
        builtins: dict[str, tuple[BuiltinVoice, np.ndarray]],
        store: VoiceStore | None = None,
    ) -> None:
        self._builtins = builtins
        self._store = store
        # Earlier names of built-ins resolve before the user's voices (they
        # were built-in names then, and stored configs use them); OpenAI's
        # names after them, so a user's own voice called "alloy" wins.
        self._legacy: dict[str, str] = {}
        self._openai: dict[str, str] = {}
        openai_names = set(openai_aliases())
        for name, (info, _) in builtins.items():
            for alias in info.aliases:
                if alias not in builtins:
                    (self._openai if alias in openai_names else self._legacy)[alias] = name

    @property
    def aliases(self) -> dict[str, str]:
        """Every other name that selects a built-in voice -> that voice's name."""
        return {**self._legacy, **self._openai}

    @property
    def builtin_names(self) -> list[str]:
        return list(self._builtins)

    def _builtin(self, name: str) -> ResolvedVoice:
        _, style = self._builtins[name]
        return ResolvedVoice(name, name, 1, style, None, True)

    def resolve(self, voice: str, owner: str | None) -> ResolvedVoice:
        if voice in self._builtins:
            return self._builtin(voice)
        if voice in self._legacy:
            return self._builtin(self._legacy[voice])
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
        alias = self._openai.get(voice.lower())
        if alias is not None:
            return self._builtin(alias)
        raise NotFound(
            f"voice '{voice[:64]}' not found; use a built-in voice or one of your cloned voices",
            field="voice",
            limit=self.builtin_names,
        )

    def listing(self, owner: str | None) -> list[VoiceListing]:
        out = [
            VoiceListing(
                name,
                name,
                info.description,
                None,
                True,
                aliases=tuple(a for a, target in self.aliases.items() if target == name),
            )
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
