"""``voxclone lexicon add | list | remove``: the pronunciation lexicon of this home.

The same store as ``/v1/lexicon`` (``lexicon_entries`` in the home's database,
or ``VOXCLONE_DATABASE_URL``), so a server on this home and ``voxclone say``
speak an entry added here at once. Entries belong to an owner: ``local`` by
default, the owner of the CLI's and the key-less loopback API's requests.
"""

from __future__ import annotations

import argparse
from typing import Any

from voxclone.config import Settings
from voxclone.errors import NotFound
from voxclone.runtime.key_scopes import LOCAL_OWNER
from voxclone.synth.text.lexicon import Pronunciation, entry_language

DEFAULT_LANGUAGE = "en"  # covers en-us and en-gb


def add_lexicon_parser(subparsers: Any) -> argparse.ArgumentParser:
    lexicon = subparsers.add_parser(
        "lexicon", help="add, list or remove pronunciations (word -> IPA or respelling)"
    )
    lsub = lexicon.add_subparsers(dest="lexicon_command", required=True)
    add = lsub.add_parser("add", help="add or replace how a word is spoken")
    add.add_argument("word", help="a word or fixed phrase (matched whole, any case)")
    add.add_argument("pronunciation", help="IPA, e.g. təˈmɑːtoʊ (or a respelling, see below)")
    add.add_argument(
        "--respelling",
        action="store_true",
        help="the pronunciation is ordinary text read instead of the word (e.g. 'win')",
    )
    remove = lsub.add_parser("remove", help="remove a word's entry")
    remove.add_argument("word")
    listing = lsub.add_parser("list", help="the owner's entries")
    for p in (add, remove, listing):
        p.add_argument(
            "--lang",
            "--language",
            dest="language",
            default=None if p is listing else DEFAULT_LANGUAGE,
            help=f"language code (default {DEFAULT_LANGUAGE}: both Englishes)"
            if p is not listing
            else "only this language",
        )
        # "local": who the CLI speaks for (voxclone say, clone) and key-less loopback.
        p.add_argument("--owner", default=LOCAL_OWNER, help="lexicon owner (default: local)")
    return lexicon


def _served_languages(settings: Settings) -> tuple[str, ...]:
    from voxclone.bootstrap import build_engines

    # The configured engines' languages, read without loading any model.
    engines = build_engines(settings, load=False)
    return tuple(dict.fromkeys(lang for e in engines.values() for lang in e.capabilities.languages))


def cmd_lexicon(args: argparse.Namespace, settings: Settings) -> int:
    language = (
        entry_language(args.language, _served_languages(settings))
        if args.language is not None
        else None
    )
    # Imported here: the store's SQLAlchemy costs every CLI command ~0.3 s.
    from voxclone.runtime.lexicon_store import SqlLexiconStore

    store = SqlLexiconStore(settings.database_target)
    try:
        if args.lexicon_command == "list":
            for entry in store.entries(args.owner, language):
                how = f"/{entry.ipa}/" if entry.ipa is not None else f"'{entry.respelling}'"
                print(f"{entry.language:6s} {entry.word:24s} {how}")
            return 0
        assert language is not None
        if args.lexicon_command == "add":
            value = args.pronunciation
            entry = Pronunciation(
                args.word,
                language,
                ipa=None if args.respelling else value,
                respelling=value if args.respelling else None,
            )
            created = store.put(args.owner, entry)
            print(f"{'added' if created else 'replaced'} {language} {' '.join(args.word.split())}")
            return 0
        if not store.delete(args.owner, language, args.word):
            raise NotFound(f"no lexicon entry for '{args.word[:40]}' in {language}", field="word")
        print(f"removed {language} {args.word}")
        return 0
    finally:
        store.close()
