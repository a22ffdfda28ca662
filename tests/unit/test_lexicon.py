"""Pronunciation lexicon: the repository on SQLite and PostgreSQL (migration
0003_lexicon), and the phonemes a lexicon makes the frontend produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxclone.errors import InvalidInput
from voxclone.runtime import lexicon_store
from voxclone.runtime.db import open_database
from voxclone.runtime.db.migrate import current_revision, head_revision
from voxclone.runtime.lexicon_store import SqlLexiconStore
from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.lexicon import Lexicon, Pronunciation, for_language


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(MultiG2P(dict(load_vocab())), max_tokens=510)


def test_store_crud_per_owner_on_both_databases(database_url: str) -> None:
    db = open_database(database_url)
    store = SqlLexiconStore(db)
    try:
        assert current_revision(db) == head_revision()  # 0003_lexicon and later
        assert store.put("alice", Pronunciation("Tomato", "en", ipa="təˈmɑːtoʊ")) is True
        assert store.put("alice", Pronunciation("Nguyen", "en-us", respelling="win")) is True
        # Same word, other case: replaced, not added.
        assert store.put("alice", Pronunciation("TOMATO", "en", respelling="tomahto")) is False
        assert store.entries("alice") == [
            Pronunciation("TOMATO", "en", respelling="tomahto"),
            Pronunciation("Nguyen", "en-us", respelling="win"),
        ]
        assert store.entries("alice", "en-us") == [Pronunciation("Nguyen", "en-us", None, "win")]
        assert store.entries("bob") == []  # owners never see each other's words
        assert store.get("alice", "en", "tomato") == Pronunciation("TOMATO", "en", None, "tomahto")
        assert store.get("bob", "en", "tomato") is None
        assert store.delete("bob", "en", "tomato") is False
        assert store.delete("alice", "en", "Tomato") is True
        assert store.get("alice", "en", "tomato") is None
    finally:
        db.close()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (Pronunciation("", "en", ipa="a"), "word"),
        (Pronunciation("...", "en", ipa="a"), "word"),
        (Pronunciation("w" * 101, "en", ipa="a"), "word"),
        (Pronunciation("word", "en"), "ipa"),
        (Pronunciation("word", "en", ipa="a", respelling="b"), "ipa"),
        (Pronunciation("word", "en", ipa="/wɜːd/"), "ipa"),
        (Pronunciation("word", "en", respelling="  "), "respelling"),
        (Pronunciation("word", "en", respelling="x" * 201), "respelling"),
        (Pronunciation("word", "en", respelling="a\ue000b"), "respelling"),
        (Pronunciation("wo\u200brd", "en", ipa="a"), "word"),
    ],
)
def test_unusable_entries_are_refused_by_field(
    tmp_path: Path, entry: Pronunciation, field: str
) -> None:
    store = SqlLexiconStore(tmp_path / "lex.sqlite3")
    with pytest.raises(InvalidInput) as caught:
        store.put("alice", entry)
    assert caught.value.field == field
    store.close()


def test_an_owner_has_a_bounded_lexicon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexicon_store, "MAX_ENTRIES_PER_OWNER", 2)
    store = SqlLexiconStore(tmp_path / "lex.sqlite3")
    store.put("alice", Pronunciation("one", "en", respelling="won"))
    store.put("alice", Pronunciation("two", "en", respelling="too"))
    store.put("alice", Pronunciation("two", "en", respelling="tew"))  # replacing is fine
    store.put("bob", Pronunciation("three", "en", respelling="tree"))  # others have their own
    with pytest.raises(InvalidInput) as caught:
        store.put("alice", Pronunciation("three", "en", respelling="tree"))
    assert caught.value.limit == 2
    store.close()


def test_a_lexicon_changes_the_spoken_phonemes(frontend: TextFrontend) -> None:
    text = "Tomato and TOMATO from Nguyen in New  York, tomatoes too."
    entries = [
        Pronunciation("tomato", "en", ipa="təˈmɑːtoʊ"),
        Pronunciation("Nguyen", "en-us", respelling="win"),
        Pronunciation("new york", "en-us", respelling="Noo Yawk"),
        Pronunciation("tomato", "fr", ipa="tɔmat"),
    ]
    plain = " ".join(c.phonemes for c in frontend.plan(text, "en-us"))
    spoken = " ".join(
        c.phonemes for c in frontend.plan(text, "en-us", lexicon=for_language(entries, "en-us"))
    )
    assert plain.count("təmˈATO ") == 2 and "nˈujɛn" in plain
    # Whole words only, any case: "tomatoes" keeps its own G2P.
    assert spoken.count("təˈmɑtO") == 2 and "təmˈATOz" in spoken
    assert "wˈɪn" in spoken and "nˈujɛn" not in spoken
    assert "jˈɔk" in spoken and "jˈɔɹk" not in spoken
    # The French entry does not apply to English; an inline phoneme beats the lexicon.
    inline = frontend.plan("[tomato](/tʃiːz/)", "en-us", lexicon=for_language(entries, "en-us"))
    assert next(inline).phonemes == "ʧiz"


def test_fingerprint_follows_every_change() -> None:
    a = Lexicon([Pronunciation("x", "en", ipa="a")])
    assert a.fingerprint() == Lexicon([Pronunciation("X", "en", ipa="a")]).fingerprint()
    assert a.fingerprint() != Lexicon([Pronunciation("x", "en", ipa="b")]).fingerprint()
    assert a.fingerprint() != Lexicon([Pronunciation("x", "en", respelling="a")]).fingerprint()
    assert not Lexicon([])
