"""An OpenAI voice name maps through the requested engine's aliases, not the
default engine's: with a default engine whose ``alloy`` is one of its own
voices, ``model=kokoro`` + ``alloy`` spoke Kokoro's default voice."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from voxclone.api.routes_openai import _openai_voice
from voxclone.errors import NotFound


class _Catalog:
    default_engine = "tones"

    def resolve(self, name: str, owner: str, engine: str) -> Any:
        raise NotFound(f"no voice {name!r}")

    def openai_aliases(self, engine: str | None = None) -> dict[str, str]:
        return {"tones": {"alloy": "tone_a"}, "kokoro": {"alloy": "af_heart"}}[
            engine or self.default_engine
        ]

    def builtins_by_engine(self) -> dict[str, list[str]]:
        return {"tones": ["tone_a"], "kokoro": ["af_heart", "clear_female"]}


def test_an_openai_name_speaks_the_requested_engines_voice() -> None:
    runtime: Any = SimpleNamespace(catalog=_Catalog())
    assert _openai_voice(runtime, "alloy", "alice", "kokoro") == ("af_heart", None)
    assert _openai_voice(runtime, "Alloy", "alice", "tones") == ("tone_a", None)
