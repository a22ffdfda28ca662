"""A lexicon entry's IPA is checked by the engines that will speak it, when it is written.

An entry applies to every speech request of its owner in its language, on
whichever engine speaks the request. So its IPA must have a sound in the
vocabulary of each loaded engine that reads IPA in that language (a text
engine says the word instead: nothing to check). Each engine judges by its
own tokenizer, so a plug-in engine validates by its own vocabulary. Before
this check, an emoji-only IPA entry was stored and spoke a 44-byte WAV with
no audio (issue 45).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from voxclone.synth.text.inline_phonemes import UnspeakablePhonemes, unspeakable_detail
from voxclone.synth.text.lexicon import Pronunciation


class IpaChecker(Protocol):
    """What this check needs of a speech service (:class:`SpeechService`)."""

    @property
    def languages(self) -> tuple[str, ...]: ...

    def check_ipa(self, word: str, ipa: str, language: str) -> None: ...


def covered_languages(entry_language: str, served: tuple[str, ...]) -> list[str]:
    """The served languages an entry of ``entry_language`` applies to: itself,
    or every served language of a base language ("en": en-us and en-gb)."""
    return [
        lang for lang in served if lang == entry_language or lang.split("-")[0] == entry_language
    ]


def check_lexicon_entry(services: Mapping[str, IpaChecker], entry: Pronunciation) -> None:
    """Raise UnspeakablePhonemes (400, field ``ipa``) when an engine that will
    speak ``entry`` has no sound for its IPA; a respelling is ordinary text."""
    if entry.ipa is None:
        return
    for engine, service in services.items():
        for language in covered_languages(entry.language, service.languages):
            try:
                service.check_ipa(entry.word, entry.ipa, language)
            except UnspeakablePhonemes as exc:
                raise UnspeakablePhonemes(
                    f"ipa '{entry.ipa[:40]}' for '{entry.word[:40]}' has no sound the "
                    f"{engine} engine can speak in {language} ({unspeakable_detail(exc)}); "
                    "write the word's pronunciation in IPA, or give a respelling instead",
                    field="ipa",
                    value=entry.ipa[:200],
                    limit=exc.limit,
                ) from None
