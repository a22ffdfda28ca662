"""Spoken consent's phrases (service/voices/spoken_consent.py): a nonce per phrase,
bound to its owner, single use, expiring."""

from __future__ import annotations

import pytest
from fakes import FakeClock

from voxclone.service.voices.spoken_consent import (
    NONCE_LENGTH,
    NONCE_WORDS,
    PHRASE_PREFIX,
    ConsentPhrases,
    SpokenConsentRefused,
)


def test_a_phrase_is_the_fixed_sentence_and_a_fresh_nonce() -> None:
    phrases = ConsentPhrases()
    issued = [phrases.issue("ada") for _ in range(50)]
    for phrase in issued:
        assert phrase.text == f"{PHRASE_PREFIX} {' '.join(phrase.nonce)}."
        assert len(phrase.nonce) == NONCE_LENGTH and set(phrase.nonce) <= set(NONCE_WORDS)
    assert len({p.id for p in issued}) == 50
    assert len({p.nonce for p in issued}) > 45  # 175,616 nonces: repeats are rare


def _refused(phrases: ConsentPhrases, phrase_id: str, owner: str) -> SpokenConsentRefused:
    with pytest.raises(SpokenConsentRefused) as caught:
        phrases.take(phrase_id, owner)
    assert caught.value.field == "consent_phrase_id" and caught.value.status == 422
    return caught.value


def test_a_phrase_is_single_use_and_its_owners_only() -> None:
    phrases = ConsentPhrases()
    phrase = phrases.issue("ada")
    assert _refused(phrases, phrase.id, "mallory").reason == "unknown"
    assert phrases.take(phrase.id, "ada") == phrase
    refused = _refused(phrases, phrase.id, "ada")
    assert refused.reason == "replayed"
    assert refused.to_body()["error"]["reason"] == "replayed"


def test_a_phrase_expires() -> None:
    clock = FakeClock()
    phrases = ConsentPhrases(ttl_s=600, clock=clock)
    phrase = phrases.issue("ada")
    clock.now += 601
    refused = _refused(phrases, phrase.id, "ada")
    assert refused.reason == "expired" and refused.limit == 600


def test_a_phrase_given_back_can_be_taken_once_more_and_still_expires() -> None:
    """A refused enrollment (a taken name) gives its phrase back: open again
    for its owner only, single use again, with its original expiry."""
    clock = FakeClock()
    phrases = ConsentPhrases(ttl_s=600, clock=clock)
    phrase = phrases.issue("ada")
    phrases.give_back(phrases.take(phrase.id, "ada"))
    assert _refused(phrases, phrase.id, "mallory").reason == "unknown"
    assert phrases.take(phrase.id, "ada") == phrase
    assert _refused(phrases, phrase.id, "ada").reason == "replayed"
    phrases.give_back(phrase)
    clock.now += 601
    assert _refused(phrases, phrase.id, "ada").reason == "expired"
