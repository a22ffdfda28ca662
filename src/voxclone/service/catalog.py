"""Resolve a voice reference (built-in name, stored id or stored name) to what
an engine speaks with: a style array (style engines) or a loaded prompt
(prompt engines).

Several engines may be loaded at once. Built-in voices belong to one engine
each; a stored voice records the engine and model it was made for, and asking
another engine to speak with it is refused (``VoiceModelMismatch``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from voxclone.errors import NotFound, VoiceModelMismatch
from voxclone.lru import Lru
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.service.blends import BlendPart, BlendTerm, blend_style, parse_blend
from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.engine.base import OPENAI_VOICE_NAMES, Engine

# Loaded prompts kept per (voice id, version): loading one deserializes the
# engine's conditioning state, which a request should not pay every time.
PROMPT_CACHE_ENTRIES = 64


@dataclass(frozen=True)
class ResolvedVoice:
    id: str
    name: str
    version: int
    style: np.ndarray | None
    language: str | None
    builtin: bool
    # The reference recording's tone, applied after synthesis (cloned voices only).
    tone: ToneFilter | None = None
    engine: str = ""  # registry name of the engine that speaks it
    model_id: str = ""
    prompt: object | None = None  # prompt engines: what Engine.load_prompt returned
    # The voice's own pace: every request's speed is multiplied by it (a clone
    # follows its reference's speaking rate, synth/voice/rate_match.py).
    speed: float = 1.0
    # A clone the stock check replaced: the built-in it speaks as (its quality
    # report's ``replaced_by_stock_voice``), named in the X-Voice header.
    stock_voice: str | None = None

    @property
    def spoken_as(self) -> str:
        """What the X-Voice header names: the built-in a replaced clone speaks
        as, else the voice's id (a built-in's name, a clone's ``v_...``)."""
        return self.stock_voice or self.id

    @classmethod
    def from_record(cls, record: VoiceRecord, prompt: object | None = None) -> ResolvedVoice:
        tone = None if record.tone_db is None else ToneFilter(record.tone_db)
        return cls(
            record.id,
            record.name,
            record.version,
            record.style,
            record.language,
            False,
            tone,
            engine=record.engine,
            model_id=record.model_id,
            prompt=prompt,
            speed=_voice_speed(record.quality),
            stock_voice=_stock_voice(record.quality),
        )


def _stock_voice(quality: dict[str, object]) -> str | None:
    stock = quality.get("replaced_by_stock_voice")
    return stock if isinstance(stock, str) and stock else None


def _voice_speed(quality: dict[str, object]) -> float:
    """The stored pace of a voice; 1.0 when it has none or it is not a sane number."""
    rate = quality.get("speaking_rate")
    speed = rate.get("speed") if isinstance(rate, dict) else None
    if isinstance(speed, int | float) and 0.5 <= float(speed) <= 2.0:
        return float(speed)
    return 1.0


@dataclass(frozen=True)
class VoiceListing:
    id: str
    name: str
    description: str
    language: str | None
    builtin: bool
    version: int = 1
    engine: str = ""
    model_id: str = ""
    aliases: tuple[str, ...] = ()  # other names that select this voice
    sex: str | None = None  # "F", "M" (built-ins; None: unknown)
    accent: str | None = None  # what a listener hears, e.g. "British English"
    default_for: tuple[str, ...] = ()  # languages that speak with it when no voice is named


class VoiceCatalog:
    """Voices of every loaded engine plus the stored library.

    ``engines`` is ordered: the first is the default engine, which answers a
    built-in name that several engines share.
    """

    def __init__(self, engines: Mapping[str, Engine], store: VoiceStore | None = None) -> None:
        if not engines:
            raise ValueError("a voice catalog needs at least one engine")
        self._engines = dict(engines)
        self._builtins = {name: engine.builtin_voices() for name, engine in self._engines.items()}
        self._store = store
        self._prompts: Lru[tuple[str, int], object] = Lru(PROMPT_CACHE_ENTRIES)
        self._prompt_lock = threading.Lock()
        # Other names of each engine's built-ins. Earlier names resolve before
        # the user's voices (they were built-in names then, and stored configs
        # use them); OpenAI's names after them, so a user's own voice called
        # "alloy" wins.
        openai_names = set(OPENAI_VOICE_NAMES)
        self._legacy: dict[str, dict[str, str]] = {}
        self._openai: dict[str, dict[str, str]] = {}
        # Per engine, language -> the built-in a request in it speaks with
        # when it names no voice (the engine's measured defaults).
        self._language_defaults: dict[str, dict[str, str]] = {}
        for engine_name, voices in self._builtins.items():
            legacy = self._legacy.setdefault(engine_name, {})
            openai = self._openai.setdefault(engine_name, {})
            defaults = self._language_defaults.setdefault(engine_name, {})
            for name, info in voices.items():
                for alias in info.aliases:
                    if alias not in voices:
                        (openai if alias in openai_names else legacy)[alias] = name
                for language in info.default_for:
                    defaults.setdefault(language, name)

    @property
    def aliases(self) -> dict[str, str]:
        """Every other name that selects a built-in of the default engine -> its name."""
        engine = self.default_engine
        return {**self._legacy[engine], **self._openai[engine]}

    def openai_aliases(self, engine: str | None = None) -> dict[str, str]:
        """OpenAI's voice names -> the built-in each speaks with (default engine)."""
        return dict(self._openai[engine or self.default_engine])

    def language_defaults(self, engine: str | None = None) -> dict[str, str]:
        """Language -> the built-in voice that speaks it when a request names
        none (empty: the engine has no per-language defaults)."""
        return dict(self._language_defaults[engine or self.default_engine])

    @property
    def default_engine(self) -> str:
        return next(iter(self._engines))

    @property
    def engine_names(self) -> tuple[str, ...]:
        return tuple(self._engines)

    @property
    def builtin_names(self) -> list[str]:
        """Every built-in voice name (a name two engines share appears once)."""
        return list(dict.fromkeys(n for voices in self._builtins.values() for n in voices))

    def builtins_by_engine(self) -> dict[str, list[str]]:
        return {engine: list(voices) for engine, voices in self._builtins.items()}

    def find_stored(self, voice: str, owner: str | None) -> VoiceRecord | None:
        """A stored voice by id (or by name, for an owner), whatever its engine."""
        if self._store is None:
            return None
        if voice.startswith("v_"):
            try:
                return self._store.get(voice, owner, include_reference_audio=False)
            except NotFound:
                pass
        if owner is not None:
            return self._store.find_by_name(voice, owner, include_reference_audio=False)
        return None

    def resolve(self, voice: str, owner: str | None, engine: str | None = None) -> ResolvedVoice:
        """``voice`` for ``engine`` (None: whichever engine the voice belongs to)."""
        builtin = self._builtin(voice, engine) or self._aliased(self._legacy, voice, engine)
        if builtin is not None:
            return builtin
        record = self.find_stored(voice, owner)
        if record is not None:
            return self._from_record(record, engine)
        aliased = self._aliased(self._openai, voice.lower(), engine)
        if aliased is not None:
            return aliased
        # Names are tried first, so a voice really named "a+b" is still found.
        terms = parse_blend(voice)
        if terms is not None:
            return self._blend(voice, terms, owner, engine)
        if engine is not None and any(voice in v for v in self._builtins.values()):
            speakers = [e for e, v in self._builtins.items() if voice in v]
            raise VoiceModelMismatch(
                f"built-in voice '{voice[:64]}' belongs to {', '.join(speakers)}, not {engine}",
                field="voice",
                limit=sorted(self._builtins[engine]),
            )
        names = sorted(self._builtins[engine]) if engine is not None else self.builtin_names
        raise NotFound(
            f"voice '{voice[:64]}' not found; use a built-in voice or one of your cloned voices",
            field="voice",
            limit=names,
        )

    def _blend(
        self, expression: str, terms: list[BlendTerm], owner: str | None, engine: str | None
    ) -> ResolvedVoice:
        voices = [(self.resolve(t.name, owner, engine), t.weight) for t in terms]
        parts = [
            BlendPart(v.id, v.version, v.style, v.tone, v.engine, v.language, v.prompt, w)
            for v, w in voices
        ]
        style, tone, blend_id = blend_style(parts)
        first = voices[0][0]
        languages = {v.language for v, _ in voices}
        return ResolvedVoice(
            blend_id,
            expression.strip(),
            0,  # never cached (service/blends.py), so no version to key on
            style,
            first.language if len(languages) == 1 else None,
            False,
            tone,
            engine=first.engine,
            model_id=first.model_id,
        )

    def _builtin(self, voice: str, engine: str | None) -> ResolvedVoice | None:
        order = [engine] if engine is not None else list(self._builtins)
        for name in order:
            info = self._builtins.get(name, {}).get(voice)
            if info is not None:
                model = self._engines[name].capabilities.model_id
                return ResolvedVoice(
                    voice,
                    voice,
                    1,
                    info.style,
                    info.language,
                    True,
                    engine=name,
                    model_id=model,
                    prompt=info.prompt,
                )
        return None

    def _aliased(
        self, table: dict[str, dict[str, str]], alias: str, engine: str | None
    ) -> ResolvedVoice | None:
        order = [engine] if engine is not None else list(self._builtins)
        for name in order:
            target = table.get(name, {}).get(alias)
            if target is not None:
                return self._builtin(target, name)
        return None

    def _from_record(self, record: VoiceRecord, engine: str | None) -> ResolvedVoice:
        if engine is not None and record.engine != engine:
            raise VoiceModelMismatch(
                f"voice '{record.name[:64]}' was made for the {record.engine} engine and cannot be "
                f"spoken by {engine}; use model '{record.engine}' or a voice made for {engine}",
                field="voice",
                limit=record.engine,
            )
        speaker = self._engines.get(record.engine)
        if speaker is None:
            raise VoiceModelMismatch(
                f"voice '{record.name[:64]}' was made for the {record.engine} engine, "
                f"which this server does not load (loaded: {', '.join(self._engines)})",
                field="voice",
                limit=list(self._engines),
            )
        model = speaker.capabilities.model_id
        if record.model_id != model:
            raise VoiceModelMismatch(
                f"voice '{record.name[:64]}' was made for model {record.model_id}; this server "
                f"runs {model}: enroll the voice again",
                field="voice",
                limit=model,
            )
        if record.prompt is None:
            return ResolvedVoice.from_record(record)
        return ResolvedVoice.from_record(record, self._prompt(speaker, record))

    def _prompt(self, engine: Engine, record: VoiceRecord) -> object:
        key = (record.id, record.version)
        with self._prompt_lock:
            cached = self._prompts.get(key)
            if cached is not None:
                return cached
        assert record.prompt is not None
        loaded = engine.load_prompt(record.prompt)
        with self._prompt_lock:
            self._prompts.put(key, loaded)
        return loaded

    def is_current(self, voice_id: str, version: int) -> bool:
        """Whether audio made with ``voice_id`` at ``version`` may still be kept:
        a stored voice must still be in the library at that version (a store
        read, never a cached answer); other voices (built-ins, inline ones)
        have no library row to lose."""
        if self._store is None or not voice_id.startswith("v_"):
            return True
        return self._store.voice_version(voice_id) == version

    def forget(self, voice_id: str) -> None:
        """Drop loaded prompts of a changed or deleted voice."""
        with self._prompt_lock:
            for key in [k for k in self._prompts if k[0] == voice_id]:
                self._prompts.pop(key)

    def listing(self, owner: str | None) -> list[VoiceListing]:
        out = [
            VoiceListing(
                name,
                name,
                info.description,
                info.language,
                True,
                engine=engine,
                model_id=self._engines[engine].capabilities.model_id,
                aliases=tuple(
                    alias
                    for table in (self._legacy[engine], self._openai[engine])
                    for alias, target in table.items()
                    if target == name
                ),
                sex=info.sex if info.sex in ("F", "M") else None,
                accent=info.accent,
                default_for=info.default_for,
            )
            for engine, voices in self._builtins.items()
            for name, info in voices.items()
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
                        engine=summary.engine,
                        model_id=summary.model_id,
                    )
                )
        return out
