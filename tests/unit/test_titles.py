"""Titles outside English ("M. Dupont", "Sr. Silva", "sig.ra Rossi") are spoken
as the word they stand for and never end a sentence.

Through the public frontend with the real espeak G2P: a sentence written with
the abbreviation must give exactly the chunks and phonemes of the same
sentence written out. Before the title tables, French "M." was the letter M
("ˈɛm."), Brazilian "Sr." the letters S-R, Italian "sig." a syllable whose
period cut the sentence in two, and Spanish "Sra." cut it too.
"""

from __future__ import annotations

import pytest

from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.normalize_intl import international_normalizers
from voxclone.synth.text.segment import split_sentences


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(MultiG2P(dict(load_vocab())), max_tokens=510)


def _spoken(frontend: TextFrontend, text: str, language: str) -> list[tuple[str, str]]:
    return [(c.text, c.phonemes) for c in frontend.plan(text, language)]


@pytest.mark.parametrize(
    ("language", "written", "spelled"),
    [
        (
            "fr",
            "Je parle à M. Dupont et à Mme Martin.",
            "Je parle à Monsieur Dupont et à Madame Martin.",
        ),
        (
            "fr",
            "Mlle Dubois et le Dr Lefèvre sont arrivés.",
            "Mademoiselle Dubois et le docteur Lefèvre sont arrivés.",
        ),
        (
            "pt-br",
            "O Sr. Silva e a Sra. Souza chegaram.",
            "O senhor Silva e a senhora Souza chegaram.",
        ),
        (
            "pt-br",
            "A Dra. Costa falou com o Dr. Lima.",
            "A doutora Costa falou com o doutor Lima.",
        ),
        (
            "it",
            "Il sig. Rossi e la sig.ra Bianchi sono qui.",
            "Il signor Rossi e la signora Bianchi sono qui.",
        ),
        (
            "it",
            "Il dott. Verdi e la prof.ssa Neri arrivano.",
            "Il dottor Verdi e la professoressa Neri arrivano.",
        ),
        (
            "es",
            "El Sr. García y la Sra. López hablan con el Dr. Pérez.",
            "El señor García y la señora López hablan con el doctor Pérez.",
        ),
        ("es", "¿Cómo está Ud. hoy?", "¿Cómo está usted hoy?"),
        ("es", "Hablo con el Sr.", "Hablo con el señor."),
    ],
)
def test_a_title_is_spoken_as_its_word_in_one_sentence(
    frontend: TextFrontend, language: str, written: str, spelled: str
) -> None:
    spoken = _spoken(frontend, written, language)
    assert spoken == _spoken(frontend, spelled, language)
    assert len(spoken) == 1


@pytest.mark.parametrize(
    ("language", "written", "letters"),
    [("fr", "Je parle à M. Dupont.", "ˈɛm"), ("pt-br", "O Sr. Silva chegou.", "ɛxe")],
)
def test_no_letter_names_are_read(
    frontend: TextFrontend, language: str, written: str, letters: str
) -> None:
    (chunk,) = frontend.plan(written, language)
    assert letters not in chunk.phonemes


@pytest.mark.parametrize(
    "text",
    [
        "La Sra. Souza chegou.",
        "Il sig. Rossi è qui.",
        "Il dott. Verdi è qui.",
        "Ho visto la sig.ra. Bianchi ieri.",
        "Je vois MM. Durand et Petit.",
        "Hr. Weber kommt morgen.",
        "Der Brief an Hrn. Meier kam heute.",
    ],
)
def test_a_title_period_does_not_end_the_sentence(text: str) -> None:
    assert split_sentences(text) == [text]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Tell me. Now go.", ["Tell me.", "Now go."]),  # "Me" is a title only capitalised
        ("It took one hr. Then we left.", ["It took one hr.", "Then we left."]),
    ],
)
def test_english_sentence_ends_are_unchanged(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        # German (the Pocket engine speaks it) has titles only, no number rules.
        (
            "de",
            "Hr. Müller und Fr. Schmidt treffen Dr. Weber und Prof. Klein.",
            "Herr Müller und Frau Schmidt treffen Doktor Weber und Professor Klein.",
        ),
        ("de", "Fr., 5. Mai", "Fr., 5. Mai"),  # Friday, not Frau
        ("fr", "Tu me dis que Me Dupont plaide.", "Tu me dis que Maître Dupont plaide."),
        ("fr", "Il mesure 5 m. de haut", "Il mesure cinq m. de haut"),  # metres, not Monsieur
        ("fr", "M. le maire arrive.", "Monsieur le maire arrive."),
        ("es", "Gracias, Sr., por todo.", "Gracias, señor, por todo."),
        ("es", "El sr García llegó.", "El señor García llegó."),
        ("it", "Sig. Rossi, il dott. è qui.", "Signor Rossi, il dottore è qui."),
        ("pt-br", "Sr. Silva tem 2 filhos.", "Senhor Silva tem dois filhos."),
    ],
)
def test_title_rules(language: str, text: str, expected: str) -> None:
    assert international_normalizers()[language](text) == expected
