"""English normalization: exact readings per category, plus hostile inputs."""

from __future__ import annotations

import random
import re
import time

import pytest

from voxclone.synth.text.normalize_en import (
    digits_to_words,
    normalize_english,
    number_to_words,
    ordinal_to_words,
    year_to_words,
)

# -----------------------------------------------------------------------------
# Number words
# -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (21, "twenty-one"),
        (100, "one hundred"),
        (105, "one hundred five"),
        (999, "nine hundred ninety-nine"),
        (1000, "one thousand"),
        (1001, "one thousand one"),
        (20_000, "twenty thousand"),
        (1_000_000, "one million"),
        (1_234_567, "one million two hundred thirty-four thousand five hundred sixty-seven"),
        (3_000_000_005, "three billion five"),
        (-42, "minus forty-two"),
    ],
)
def test_number_to_words(number: int, words: str) -> None:
    assert number_to_words(number) == words


@pytest.mark.parametrize(
    ("number", "words"),
    [
        (1, "first"),
        (2, "second"),
        (3, "third"),
        (5, "fifth"),
        (8, "eighth"),
        (9, "ninth"),
        (12, "twelfth"),
        (20, "twentieth"),
        (22, "twenty-second"),
        (103, "one hundred third"),
        (1000, "one thousandth"),
    ],
)
def test_ordinal_to_words(number: int, words: str) -> None:
    assert ordinal_to_words(number) == words


@pytest.mark.parametrize(
    ("year", "words"),
    [
        (1999, "nineteen ninety-nine"),
        (2005, "two thousand five"),
        (2024, "twenty twenty-four"),
        (2000, "two thousand"),
        (1900, "nineteen hundred"),
        (1105, "eleven oh five"),
        (2010, "twenty ten"),
    ],
)
def test_year_to_words(year: int, words: str) -> None:
    assert year_to_words(year) == words


def test_digits_to_words_reads_each_digit_and_ignores_other_characters() -> None:
    assert digits_to_words("0451") == "zero four five one"
    assert digits_to_words("1-2") == "one two"


# -----------------------------------------------------------------------------
# normalize_english: exact readings by category
# -----------------------------------------------------------------------------

CASES = {
    "cardinals": [
        ("I have 42 apples.", "I have forty-two apples."),
        ("It was -5 outside.", "It was minus five outside."),
        (
            "Population 1,234,567.",
            "Population one million two hundred thirty-four thousand five hundred sixty-seven.",
        ),
        ("Pi is 3.14.", "Pi is three point one four."),
        ("Only .5 left", "Only point five left"),
        ("Agent 007", "Agent zero zero seven"),
        ("It is 0.25", "It is zero point two five"),
        ("2+2=4", "two plus two equals four"),
    ],
    "ordinals": [
        ("the 1st, 22nd and 103rd", "the first, twenty-second and one hundred third"),
        ("her 11th birthday", "her eleventh birthday"),
    ],
    "years": [
        ("In 1999 we met.", "In nineteen ninety-nine we met."),
        ("Since 2005.", "Since two thousand five."),
        ("Back in 2024, things changed.", "Back in twenty twenty-four, things changed."),
        ("It cost 2024 dollars", "It cost two thousand twenty-four dollars"),
        ("We counted 5000 birds", "We counted five thousand birds"),
        ("From 1990-1995.", "From nineteen ninety to nineteen ninety-five."),
    ],
    "decades": [
        ("the 1990s", "the nineteen nineties"),
        ("the '90s", "the nineties"),
        ("the 1900s", "the nineteen hundreds"),
        ("the 2000s", "the two thousands"),
        ("in her 20s", "in her twenties"),
    ],
    "dates": [
        ("On 2024-03-15 we left.", "On March fifteenth, twenty twenty-four we left."),
        ("On March 15, 2024 we left.", "On March fifteenth, twenty twenty-four we left."),
        ("On 15 March 2024 we left.", "On the fifteenth of March, twenty twenty-four we left."),
        ("Due Jan. 5.", "Due January fifth."),
        ("on July 4th", "on July fourth"),
        ("3/15/2024", "March fifteenth, twenty twenty-four"),
        ("2024-03-15T14:30", "March fifteenth, twenty twenty-four at fourteen thirty"),
    ],
    "times": [
        ("at 3:45 pm", "at three forty-five p m"),
        ("at 14:30", "at fourteen thirty"),
        ("at 9am", "at nine a m"),
        ("at 10:05", "at ten oh five"),
        ("at 7:00", "at seven o'clock"),
        ("at 18:00", "at eighteen hundred"),
        ("Meet at 9 a.m. Then go.", "Meet at nine a m. Then go."),
        ("at 11:30 AM sharp", "at eleven thirty a m sharp"),
    ],
    "currency": [
        ("$5", "five dollars"),
        ("$1", "one dollar"),
        ("$5.99", "five dollars and ninety-nine cents"),
        ("$1.01", "one dollar and one cent"),
        ("$0.50", "fifty cents"),
        ("$1,234.56", "one thousand two hundred thirty-four dollars and fifty-six cents"),
        ("$1.5 million", "one point five million dollars"),
        ("$5k", "five thousand dollars"),
        ("$2B", "two billion dollars"),
        ("€20", "twenty euros"),
        ("€1", "one euro"),
        ("£3.50", "three pounds and fifty pence"),
        ("£0.01", "one penny"),
        ("¥100", "one hundred yen"),
        ("20€", "twenty euros"),
        ("5 USD", "five dollars"),
        ("-$5", "minus five dollars"),
        ("$10-$20", "ten dollars to twenty dollars"),
    ],
    "percentages": [
        ("50%", "fifty percent"),
        ("3.5%", "three point five percent"),
        ("10-20%", "ten to twenty percent"),
        ("-2%", "minus two percent"),
    ],
    "abbreviations": [
        ("Mr. Smith met Mrs. Jones.", "Mister Smith met Missus Jones."),
        ("Dr. Who lives on Elm Dr.", "Doctor Who lives on Elm Drive."),
        ("St. Louis is on Main St. The end.", "Saint Louis is on Main Street. The end."),
        ("cats vs. dogs", "cats versus dogs"),
        ("apples, pears, etc. The rest", "apples, pears, et cetera. The rest"),
        ("apples, pears, etc.", "apples, pears, et cetera."),
        ("fruit, e.g. apples, i.e. food", "fruit, for example apples, that is food"),
        ("No. 5 is approx. 3 km", "number five is approximately three kilometers"),
        ("Smith Jr. said", "Smith Junior said"),
        ("The answer is no.", "The answer is no."),
    ],
    "units": [
        ("5 km", "five kilometers"),
        ("1 km", "one kilometer"),
        ("2.5 kg", "two point five kilograms"),
        ("500 g", "five hundred grams"),
        ("20 mg", "twenty milligrams"),
        ("10 cm", "ten centimeters"),
        ("1 mm", "one millimeter"),
        ("100 m", "one hundred meters"),
        ("3 mi", "three miles"),
        ("6 ft", "six feet"),
        ("1 ft", "one foot"),
        ("12in", "twelve inches"),
        ("5 in the box", "five in the box"),
        ("5 lbs", "five pounds"),
        ("1 lb", "one pound"),
        ("20 °C", "twenty degrees Celsius"),
        ("1°C", "one degree Celsius"),
        ("70°F", "seventy degrees Fahrenheit"),
        ("60 mph", "sixty miles per hour"),
        ("100 km/h", "one hundred kilometers per hour"),
        ("16 GB", "sixteen gigabytes"),
        ("512 MB", "five hundred twelve megabytes"),
        ("1 KB", "one kilobyte"),
        ("2 TB", "two terabytes"),
        ("3.2 GHz", "three point two gigahertz"),
        ("100 MHz", "one hundred megahertz"),
        ("44 kHz", "forty-four kilohertz"),
        ("50 Hz", "fifty hertz"),
        ("200 ms", "two hundred milliseconds"),
        ("5 s", "five seconds"),
        ("1 h", "one hour"),
        ("30 min", "thirty minutes"),
        ("2 L", "two liters"),
        ("250 ml", "two hundred fifty milliliters"),
        ("5 ft. tall", "five feet tall"),
        ("10-20 km", "ten to twenty kilometers"),
    ],
    "fractions": [
        ("1/2", "one half"),
        ("3/4", "three quarters"),
        ("1/4", "one quarter"),
        ("2/3", "two thirds"),
        ("5/8", "five eighths"),
        ("1 1/2 cups", "one and one half cups"),
        ("5/32", "five over thirty-two"),
        ("open 24/7", "open twenty-four seven"),
        ("½ cup", "one half cup"),
    ],
    "phone numbers": [
        ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
        ("Call (555) 123-4567", "Call five five five, one two three, four five six seven"),
        (
            "Call +44 20 7946 0958",
            "Call plus four four, two zero, seven nine four six, zero nine five eight",
        ),
        ("Call 1-800-555-1234", "Call one, eight zero zero, five five five, one two three four"),
    ],
    "ranges": [
        ("10-20 people", "ten to twenty people"),
        ("pages 5–9", "pages five to nine"),
        ("5 - 3", "five - three"),
    ],
    "addresses": [
        ("See https://www.example.com/path.", "See example dot com slash path."),
        ("See http://example.org/", "See example dot org"),
        ("Go to www.foo-bar.io now", "Go to foo dash bar dot io now"),
        ("Visit example.com today", "Visit example dot com today"),
        ("Mail a.b@c.org now", "Mail a dot b at c dot org now"),
        (
            "Mail john_doe@mail.example.co.uk",
            "Mail john underscore doe at mail dot example dot co dot uk",
        ),
    ],
    "social": [
        ("#TextToSpeech rocks", "hashtag Text To Speech rocks"),
        ("ask @john_doe", "ask at john doe"),
        ("we're #1", "we're number one"),
    ],
    "symbols": [
        ("salt & pepper", "salt and pepper"),
        ("R&D", "R and D"),
    ],
    "acronyms": [
        ("The FBI and the CIA", "The F B I and the C I A"),
        ("NASA and NATO", "NASA and NATO"),
        ("the FBI's files", "the F B I's files"),
        ("two CDs", "two C D's"),
        ("It is OK", "It is okay"),
        ("The U.S. Army", "The U S Army"),
        ("I live in the U.S.", "I live in the U S."),
        ("THIS IS GREAT", "THIS IS GREAT"),
        ("COVID-19", "COVID nineteen"),
        ("an MP3 file", "an M P three file"),
    ],
    "roman numerals": [
        ("World War II ended", "World War two ended"),
        ("Henry VIII had wives", "Henry the eighth had wives"),
        ("Louis XIV ruled", "Louis the fourteenth ruled"),
        ("Chapter IV begins", "Chapter four begins"),
        ("Then I left", "Then I left"),
    ],
    "versions and addresses of digits": [
        ("Python 3.11.7", "Python three dot eleven dot seven"),
        (
            "ping 192.168.0.1",
            "ping one hundred ninety-two dot one hundred sixty-eight dot zero dot one",
        ),
    ],
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [pytest.param(t, e, id=f"{cat}: {t}") for cat, pairs in CASES.items() for t, e in pairs],
)
def test_normalize_english_exact(text: str, expected: str) -> None:
    assert normalize_english(text) == expected


def test_newlines_are_kept_and_spaces_collapsed() -> None:
    assert normalize_english("  One   line \n\n\n Two\tlines ") == "One line\n\nTwo lines"


def test_plain_prose_is_unchanged() -> None:
    text = "The quick brown fox jumps over the lazy dog, doesn't it?"
    assert normalize_english(text) == text


# -----------------------------------------------------------------------------
# Hostile inputs: never raise, stay linear
# -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n\n",
        "?!.,;:",
        "😀🎉👍🏽 1️⃣",
        "日本語のテキスト2024年3月15日",
        "שלום עולם 123 مرحبا ٣",
        "\x00\x07\x1b[31m red \x7f\x9f",
        "\ud800 lone surrogate \udfff",
        '"unmatched quote',
        "<script>alert(1)</script>",
        "$", "%", "$.", "1/0", "0/0", "9" * 40 + "st", "$" + "9" * 40, "Henry MMMM",
        "².³ ⁴/₅ ½",
    ],
)  # fmt: skip
def test_hostile_inputs_return_strings(text: str) -> None:
    result = normalize_english(text)
    assert isinstance(result, str)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", result)


def test_cjk_next_to_numbers_reads_the_number() -> None:
    result = normalize_english("日本2024年")
    assert result.startswith("日本")
    assert result.endswith("年")
    assert "twenty twenty-four" in result


def test_huge_number_is_read_digit_by_digit() -> None:
    assert normalize_english("1" * 25) == " ".join(["one"] * 25)


def _mixed_text(length: int) -> str:
    rng = random.Random(7)
    parts = [
        "Hello", "world.", "😀", "日本語。", "שלום", "123", "1,234.5", "$5.99", "3:45 pm",
        "\x00", "FBI", "e.g.", "a.b@c.org", "https://x.com/a", "&", "#tag", "@me", "1/2",
        "-7", "2024-01-01", "\n", "....", "50%", "20 °C", "Henry VIII", "Dr.", "1990s",
    ]  # fmt: skip
    return " ".join(rng.choice(parts) for _ in range(length // 4))[:length]


@pytest.mark.parametrize(
    "text",
    [
        _mixed_text(100_000),
        "9" * 100_000,
        "1," * 50_000,
        "1." * 50_000,
        "1-" * 50_000,
        "1 " * 50_000,
        "a." * 50_000,
        "%a" * 50_000,
        "AB " * 33_000,
        "+1" * 50_000,
        " " * 100_000 + "&",
        "A" * 100_000,
        "http://" + "a." * 50_000,
    ],
    ids=lambda t: repr(t[:6]),
)
def test_100k_characters_finish_under_a_second(text: str) -> None:
    # CPU time, not wall time: the budget is about our algorithm, not the machine's load.
    started = time.process_time()
    result = normalize_english(text)
    assert time.process_time() - started < 1.0
    assert isinstance(result, str)
