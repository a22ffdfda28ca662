"""Built-in voices have plain names and descriptions; old names and OpenAI's still work."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import catalog_engine

from voxclone.errors import NotFound
from voxclone.runtime.voice_store import SqliteVoiceStore
from voxclone.service.catalog import VoiceCatalog
from voxclone.synth.engine.base import EngineVoice
from voxclone.synth.engine.kokoro.builtin_voices import PACK_SEX, builtin_voices, openai_aliases

PACKS = {name: np.full((510, 256), i, np.float32) for i, name in enumerate(sorted(PACK_SEX))}


def catalog_of(store: SqliteVoiceStore | None = None) -> VoiceCatalog:
    """A catalog of a fake Kokoro whose built-ins are made from ``PACKS``."""
    voices = {
        name: EngineVoice(name, info.description, style=style, aliases=info.aliases)
        for name, (info, style) in builtin_voices(PACKS).items()
    }
    return VoiceCatalog({"kokoro": catalog_engine(voices)}, store)


def test_names_and_descriptions_are_plain() -> None:
    voices = builtin_voices(PACKS)
    for name, (info, _) in voices.items():
        assert name not in PACK_SEX, f"{name} is a pack id, not a plain name"
        assert "_" not in name or name.startswith("clear_"), name
        # One line a listener understands: no percentages, no pack ids, no WER.
        assert "%" not in info.description and "WER" not in info.description
        assert not any(pack in info.description for pack in PACK_SEX), info.description
        assert 10 < len(info.description) <= 80, info.description


def test_old_names_and_openai_names_resolve(tmp_path: object) -> None:
    catalog = catalog_of()
    for old in PACK_SEX:
        resolved = catalog.resolve(old, None)
        assert resolved.builtin and resolved.id != old
        # Same style as the pack it was before.
        assert resolved.style is not None and np.array_equal(resolved.style, PACKS[old])
    assert catalog.resolve("alloy", None).id == "clear_female"
    assert catalog.resolve("Echo", None).id == "clear_male"
    with pytest.raises(NotFound):
        catalog.resolve("nobody", None)


def test_listing_names_the_aliases() -> None:
    listing = {v.id: v for v in catalog_of().listing(None)}
    assert set(openai_aliases()) <= {a for v in listing.values() for a in v.aliases}
    assert "jm_kumo" in listing["kenji"].aliases


def test_a_users_voice_named_like_an_openai_voice_wins(tmp_path: object) -> None:
    from pathlib import Path

    store = SqliteVoiceStore(Path(str(tmp_path)) / "v.sqlite3")
    try:
        catalog = catalog_of(store)
        assert catalog.resolve("nova", "someone").id == "clear_female"
    finally:
        store.close()
