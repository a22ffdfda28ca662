"""Numbers, ordinals, money and percentages spelled out for non-English languages.

A G2P either skips digits or reads them with English habits, so every
language gets its own pass that rewrites written numbers as words before
phonemization. The spelling rules are written here (no number-to-words
package): they are small, and each language has quirks that generic libraries
get wrong for speech (Spanish "veintiún mil", French "quatre-vingts",
Italian "ventotto", Brazilian "mil e cem", Hindi's irregular 1–99 and
lakh/crore grouping, Chinese 零 and 两).

Japanese is the exception on purpose: pyopenjtalk reads Arabic integers with
the right counter sound changes (3杯 → サンバイ, 6本 → ロッポン) and reads a
lone kanji 八百 as ヤオ (the greengrocer), so integers are left as plain digits
and only separators, decimals, signs, percentages and currencies are rewritten.

Every normalizer is ``str -> str`` and never raises.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from voxclone.synth.text.normalize_titles import title_normalizers

log = logging.getLogger(__name__)

Normalizer = Callable[[str], str]

# Numbers this long are codes or identifiers, not quantities: read digit by digit.
_MAX_SPELLED = 10**15


def _spelled_whole(digits: str) -> bool:
    """True when ``digits`` is read as one number; a longer run (or one with a
    leading zero) is read digit by digit. Decided on the length, before int():
    Python refuses to convert more than 4,300 digits (a 5,000-digit number
    made every normalizer here raise)."""
    if len(digits) > 1 and digits.startswith("0"):
        return False
    return len(digits) < len(str(_MAX_SPELLED))


def _words(text: str) -> tuple[str, ...]:
    """A word table written as one string: easier to proofread than a quoted list."""
    return tuple(text.split())


_DEVANAGARI_DIGITS = str.maketrans("०१२३४५६७८९", "0123456789")

# Full-width digits and signs as typed in CJK text. Only these: a blanket NFKC
# would also turn the full-width comma into ',' and glue neighbouring numbers.
_FULL_WIDTH = str.maketrans("０１２３４５６７８９％￥＄－", "0123456789%¥$-")
_FULL_WIDTH_POINT = re.compile(r"(?<=\d)．(?=\d)")


def _fold_full_width(text: str) -> str:
    return _FULL_WIDTH_POINT.sub(".", text.translate(_FULL_WIDTH))


# --------------------------------------------------------------------------- Spanish

_ES_UNITS = _words(
    "cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince "
    "dieciséis diecisiete dieciocho diecinueve veinte veintiuno veintidós veintitrés "
    "veinticuatro veinticinco veintiséis veintisiete veintiocho veintinueve"
)
_ES_TENS = {
    3: "treinta",
    4: "cuarenta",
    5: "cincuenta",
    6: "sesenta",
    7: "setenta",
    8: "ochenta",
    9: "noventa",
}
_ES_HUNDREDS = {
    1: "ciento",
    2: "doscientos",
    3: "trescientos",
    4: "cuatrocientos",
    5: "quinientos",
    6: "seiscientos",
    7: "setecientos",
    8: "ochocientos",
    9: "novecientos",
}


def _es_below_thousand(n: int) -> str:
    if n == 100:
        return "cien"
    hundreds, rest = divmod(n, 100)
    words = [_ES_HUNDREDS[hundreds]] if hundreds else []
    if rest < 30 and (rest or not hundreds):
        words.append(_ES_UNITS[rest])
    elif rest:
        tens, unit = divmod(rest, 10)
        words.append(_ES_TENS[tens] + (f" y {_ES_UNITS[unit]}" if unit else ""))
    return " ".join(words)


def _es_apocope(words: str) -> str:
    """'uno' shortens before a noun or 'mil': veintiuno → veintiún, uno → un."""
    if words.endswith("veintiuno"):
        return words[: -len("veintiuno")] + "veintiún"
    if words == "uno" or words.endswith(" uno"):
        return words[:-1]
    return words


def spanish_number(n: int) -> str:
    if n < 1000:
        return _es_below_thousand(n)
    if n < 1_000_000:
        thousands, rest = divmod(n, 1000)
        head = "mil" if thousands == 1 else f"{_es_apocope(_es_below_thousand(thousands))} mil"
        return head + (f" {_es_below_thousand(rest)}" if rest else "")
    if n < 10**12:
        millions, rest = divmod(n, 1_000_000)
        head = "un millón" if millions == 1 else f"{_es_apocope(spanish_number(millions))} millones"
        return head + (f" {spanish_number(rest)}" if rest else "")
    billions, rest = divmod(n, 10**12)
    head = "un billón" if billions == 1 else f"{_es_apocope(spanish_number(billions))} billones"
    return head + (f" {spanish_number(rest)}" if rest else "")


_ES_ORDINALS = _words("primer segund tercer cuart quint sext séptim octav noven décim")


def _es_ordinal(n: int, feminine: bool) -> str | None:
    if 1 <= n <= 10:
        return _ES_ORDINALS[n - 1] + ("a" if feminine else "o")
    return None


# ---------------------------------------------------------------------------- French

_FR_UNITS = _words(
    "zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze "
    "seize dix-sept dix-huit dix-neuf"
)
_FR_TENS = {2: "vingt", 3: "trente", 4: "quarante", 5: "cinquante", 6: "soixante"}


def _fr_below_hundred(n: int) -> str:
    if n < 20:
        return _FR_UNITS[n]
    if n < 70:
        tens, unit = divmod(n, 10)
        if unit == 0:
            return _FR_TENS[tens]
        return _FR_TENS[tens] + (" et un" if unit == 1 else f"-{_FR_UNITS[unit]}")
    if n < 80:  # 70–79 count on from sixty: soixante-dix, soixante et onze …
        return "soixante et onze" if n == 71 else f"soixante-{_FR_UNITS[n - 60]}"
    if n == 80:
        return "quatre-vingts"
    return f"quatre-vingt-{_FR_UNITS[n - 80]}"


def _fr_below_thousand(n: int, *, final: bool = True) -> str:
    """``final`` is False before 'mille', where 'cents'/'vingts' lose their s."""
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        words = _fr_below_hundred(rest)
        return words if final or not words.endswith("vingts") else words[:-1]
    head = "cent" if hundreds == 1 else f"{_FR_UNITS[hundreds]} cent"
    if rest:
        return f"{head} {_fr_below_hundred(rest)}"
    return head + ("s" if hundreds > 1 and final else "")


def french_number(n: int) -> str:
    if n < 1000:
        return _fr_below_thousand(n)
    scales = ((10**12, "billion"), (10**9, "milliard"), (10**6, "million"))
    for size, name in scales:
        if n >= size:
            count, rest = divmod(n, size)
            head = f"{french_number(count)} {name}{'s' if count > 1 else ''}"
            return head + (f" {french_number(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    head = "mille" if thousands == 1 else f"{_fr_below_thousand(thousands, final=False)} mille"
    return head + (f" {_fr_below_thousand(rest)}" if rest else "")


def _fr_ordinal(n: int, feminine: bool) -> str | None:
    if n == 1:
        return "première" if feminine else "premier"
    words = french_number(n)
    if words.endswith("cinq"):
        return words + "uième"
    if words.endswith("neuf"):
        return words[:-1] + "vième"
    if words.endswith("e"):
        return words[:-1] + "ième"
    if words.endswith(("cents", "vingts")):
        words = words[:-1]
    return words + "ième"


# --------------------------------------------------------------------------- Italian

_IT_UNITS = _words(
    "zero uno due tre quattro cinque sei sette otto nove dieci undici dodici tredici "
    "quattordici quindici sedici diciassette diciotto diciannove"
)
_IT_TENS = {
    2: "venti",
    3: "trenta",
    4: "quaranta",
    5: "cinquanta",
    6: "sessanta",
    7: "settanta",
    8: "ottanta",
    9: "novanta",
}


def _it_below_hundred(n: int) -> str:
    if n < 20:
        return _IT_UNITS[n]
    tens, unit = divmod(n, 10)
    word = _IT_TENS[tens]
    if unit == 0:
        return word
    if unit in (1, 8):  # the tens word loses its vowel before a vowel: ventuno, ventotto
        word = word[:-1]
    return word + ("tré" if unit == 3 else _IT_UNITS[unit])


def _it_below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _it_below_hundred(rest)
    head = "cento" if hundreds == 1 else f"{_IT_UNITS[hundreds]}cento"
    if not rest:
        return head
    tail = _it_below_hundred(rest)
    if tail.startswith("ott"):  # centootto → centotto, centoottanta → centottanta
        head = head[:-1]
    return head + tail


def italian_number(n: int) -> str:
    if n < 1000:
        return _it_below_thousand(n)
    scales = (
        (10**12, "bilione", "bilioni"),
        (10**9, "miliardo", "miliardi"),
        (10**6, "milione", "milioni"),
    )
    for size, one, many in scales:
        if n >= size:
            count, rest = divmod(n, size)
            head = f"un {one}" if count == 1 else f"{italian_number(count)} {many}"
            return head + (f" {italian_number(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    head = "mille" if thousands == 1 else f"{_it_below_thousand(thousands)}mila"
    return head + (_it_below_thousand(rest) if rest else "")


_IT_ORDINALS = _words("prim second terz quart quint sest settim ottav non decim")


def _it_ordinal(n: int, feminine: bool) -> str | None:
    ending = "a" if feminine else "o"
    if 1 <= n <= 10:
        return _IT_ORDINALS[n - 1] + ending
    words = italian_number(n)
    if words.endswith("tré"):
        return words[:-1] + "eesim" + ending
    if words.endswith("sei"):
        return words + "esim" + ending
    return words[:-1] + "esim" + ending


# --------------------------------------------------------------------- Portuguese (BR)

_PT_UNITS = _words(
    "zero um dois três quatro cinco seis sete oito nove dez onze doze treze catorze quinze "
    "dezesseis dezessete dezoito dezenove"
)
_PT_TENS = {
    2: "vinte",
    3: "trinta",
    4: "quarenta",
    5: "cinquenta",
    6: "sessenta",
    7: "setenta",
    8: "oitenta",
    9: "noventa",
}
_PT_HUNDREDS = {
    1: "cento",
    2: "duzentos",
    3: "trezentos",
    4: "quatrocentos",
    5: "quinhentos",
    6: "seiscentos",
    7: "setecentos",
    8: "oitocentos",
    9: "novecentos",
}


def _pt_below_thousand(n: int) -> str:
    if n == 100:
        return "cem"
    hundreds, rest = divmod(n, 100)
    parts = [_PT_HUNDREDS[hundreds]] if hundreds else []
    if rest >= 20:
        tens, unit = divmod(rest, 10)
        parts.append(_PT_TENS[tens] + (f" e {_PT_UNITS[unit]}" if unit else ""))
    elif rest or not hundreds:
        parts.append(_PT_UNITS[rest])
    return " e ".join(parts)


def portuguese_number(n: int) -> str:
    if n < 1000:
        return _pt_below_thousand(n)
    scales = (
        (10**12, "trilhão", "trilhões"),
        (10**9, "bilhão", "bilhões"),
        (10**6, "milhão", "milhões"),
    )
    for size, one, many in scales:
        if n >= size:
            count, rest = divmod(n, size)
            head = f"um {one}" if count == 1 else f"{portuguese_number(count)} {many}"
            return head + _pt_join(rest)
    thousands, rest = divmod(n, 1000)
    head = "mil" if thousands == 1 else f"{_pt_below_thousand(thousands)} mil"
    return head + _pt_join(rest)


def _pt_join(rest: int) -> str:
    """'e' joins the last group when it is below 100 or a round hundred: mil e cem, mil e um."""
    if not rest:
        return ""
    joiner = " e " if rest < 100 or (rest < 1000 and rest % 100 == 0) else " "
    return joiner + portuguese_number(rest)


_PT_ORDINALS = _words("primeir segund terceir quart quint sext sétim oitav non décim")


def _pt_ordinal(n: int, feminine: bool) -> str | None:
    if 1 <= n <= 10:
        return _PT_ORDINALS[n - 1] + ("a" if feminine else "o")
    return None


# ----------------------------------------------------------------------------- Hindi

_HI_BELOW_HUNDRED = _words(
    "शून्य एक दो तीन चार पाँच छह सात आठ नौ दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अठारह "
    "उन्नीस बीस इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस तीस इकतीस बत्तीस "
    "तैंतीस चौंतीस पैंतीस छत्तीस सैंतीस अड़तीस उनतालीस चालीस इकतालीस बयालीस तैंतालीस चवालीस "
    "पैंतालीस छियालीस सैंतालीस अड़तालीस उनचास पचास इक्यावन बावन तिरपन चौवन पचपन छप्पन सत्तावन "
    "अट्ठावन उनसठ साठ इकसठ बासठ तिरसठ चौंसठ पैंसठ छियासठ सड़सठ अड़सठ उनहत्तर सत्तर इकहत्तर "
    "बहत्तर तिहत्तर चौहत्तर पचहत्तर छिहत्तर सतहत्तर अठहत्तर उन्यासी अस्सी इक्यासी बयासी "
    "तिरासी चौरासी पचासी छियासी सत्तासी अट्ठासी नवासी नब्बे इक्यानवे बानवे तिरानवे चौरानवे "
    "पचानवे छियानवे सत्तानवे अट्ठानवे निन्यानवे"
)
assert len(_HI_BELOW_HUNDRED) == 100

# Indian grouping: thousand, lakh (10^5), crore (10^7), arab (10^9), kharab (10^11).
_HI_SCALES = (
    (10**11, "खरब"),
    (10**9, "अरब"),
    (10**7, "करोड़"),
    (10**5, "लाख"),
    (1000, "हज़ार"),
    (100, "सौ"),
)


def hindi_number(n: int) -> str:
    if n < 100:
        return _HI_BELOW_HUNDRED[n]
    words: list[str] = []
    for size, name in _HI_SCALES:
        if n >= size:
            count, n = divmod(n, size)
            words.append(f"{hindi_number(count)} {name}")
    if n:
        words.append(_HI_BELOW_HUNDRED[n])
    return " ".join(words)


# --------------------------------------------------------------------------- Chinese

_ZH_DIGITS = "零一二三四五六七八九"


def _zh_below_myriad(n: int, *, leading: bool) -> str:
    """0 < n < 10000. ``leading``: first group of the number (一十 → 十 there)."""
    out: list[str] = []
    zero_pending = False
    for size, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit, n = divmod(n, size)
        if digit == 0:
            zero_pending = bool(out)
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        if size == 10 and digit == 1 and leading and not out:
            out.append("十")
        else:
            out.append(_ZH_DIGITS[digit] + unit)
    return "".join(out)


def chinese_number(n: int) -> str:
    if n == 0:
        return "零"
    groups: list[int] = []
    while n:
        n, group = divmod(n, 10000)
        groups.append(group)
    units = ("", "万", "亿", "万亿")
    out = ""
    need_zero = False
    for position in range(len(groups) - 1, -1, -1):
        group = groups[position]
        if group == 0:
            need_zero = bool(out)
            continue
        if out and (need_zero or group < 1000):
            out += "零"
        out += _zh_below_myriad(group, leading=not out) + units[position]
        need_zero = False
    # 两 is the spoken form of 2 before 百/千/万/亿 when it leads the number.
    if out.startswith("二") and len(out) > 1 and out[1] in "百千万亿":
        out = "两" + out[1:]
    return out


def _zh_digits(digits: str) -> str:
    return "".join(_ZH_DIGITS[int(d)] for d in digits)


# -------------------------------------------------------------- the Latin-script passes


@dataclass(frozen=True)
class _Money:
    one: str
    many: str
    cent_one: str
    cent_many: str


@dataclass(frozen=True)
class _LatinSpec:
    cardinal: Callable[[int], str]
    before_noun: Callable[[str], str]  # "uno" → "un" before a noun
    ordinal: Callable[[int, bool], str | None]
    ordinal_suffix: str  # regex alternatives after the digits
    feminine_suffixes: tuple[str, ...]
    decimal_word: str
    minus_word: str
    percent_word: str
    cents_joiner: str  # between the unit and the cents, e.g. " con "
    money: dict[str, _Money] = field(default_factory=dict)


def _identity(words: str) -> str:
    return words


def _first_word_one(one: str) -> Callable[[str], str]:
    def shorten(words: str) -> str:
        return one if words in ("uno", "um") else words

    return shorten


_SPECS: dict[str, _LatinSpec] = {
    "es": _LatinSpec(
        spanish_number,
        _es_apocope,
        _es_ordinal,
        r"\.?[ºª°]|\.?(?:er|ro|ra|do|da|to|ta|mo|ma|vo|va|no|na)\b",
        ("ª", "ra", "da", "ta", "ma", "va", "na"),
        "coma",
        "menos",
        "por ciento",
        " con ",
        {
            "€": _Money("euro", "euros", "céntimo", "céntimos"),
            "$": _Money("dólar", "dólares", "centavo", "centavos"),
            "£": _Money("libra", "libras", "penique", "peniques"),
        },
    ),
    "fr": _LatinSpec(
        french_number,
        _identity,
        _fr_ordinal,
        r"(?:er|re|ère|e|ème|ᵉ|ᵉʳ)\b",
        ("re", "ère"),
        "virgule",
        "moins",
        "pour cent",
        " et ",
        {
            "€": _Money("euro", "euros", "centime", "centimes"),
            "$": _Money("dollar", "dollars", "cent", "cents"),
            "£": _Money("livre", "livres", "penny", "pence"),
        },
    ),
    "it": _LatinSpec(
        italian_number,
        _first_word_one("un"),
        _it_ordinal,
        r"[ºª°]",
        ("ª",),
        "virgola",
        "meno",
        "per cento",
        " e ",
        {
            "€": _Money("euro", "euro", "centesimo", "centesimi"),
            "$": _Money("dollaro", "dollari", "centesimo", "centesimi"),
            "£": _Money("sterlina", "sterline", "penny", "pence"),
        },
    ),
    "pt-br": _LatinSpec(
        portuguese_number,
        _identity,
        _pt_ordinal,
        r"\.?[ºª°]",
        ("ª",),
        "vírgula",
        "menos",
        "por cento",
        " e ",
        {
            "R$": _Money("real", "reais", "centavo", "centavos"),
            "€": _Money("euro", "euros", "centavo", "centavos"),
            "$": _Money("dólar", "dólares", "centavo", "centavos"),
        },
    ),
}

# A number as written in these languages: 1.234.567,89 / 1 234,5 / 3.5 / 42.
_GROUPED = r"\d{1,3}(?:[. \u00a0\u202f]\d{3}(?!\d))+(?:,\d+)?"
_PLAIN = r"\d+(?:[.,]\d+)?"
# Starts only where a run of digits starts: a pattern tried at every digit of a
# long run, backtracking over the rest of it each time, is quadratic (5,000
# digits cost 11.6 s in French, 3.9 s in Hindi, 4.3 s in Chinese).
_RUN = r"(?<!\d)"
_NUMBER = rf"{_RUN}(?:{_GROUPED}|{_PLAIN})"
_SIGN = r"(?:(?<![\w\d])[-−](?=\d))?"


def _split_number(text: str) -> tuple[str, str | None]:
    """'1.234,5' → ('1234', '5'); '3.5' → ('3', '5'); '1.000' → ('1000', None)."""
    text = text.replace(" ", "").replace("\u00a0", "").replace("\u202f", "")
    if "," in text:
        whole, fraction = text.rsplit(",", 1)
        return whole.replace(".", ""), fraction
    if text.count(".") == 1 and len(text.split(".")[1]) != 3:
        whole, fraction = text.split(".")
        return whole, fraction
    return text.replace(".", ""), None


def _spell_integer(digits: str, cardinal: Callable[[int], str]) -> str:
    if not _spelled_whole(digits):
        return " ".join(cardinal(int(d)) for d in digits)
    return cardinal(int(digits))


def _spell_fraction(digits: str, cardinal: Callable[[int], str]) -> str:
    # "3,05" is "three comma zero five"; a short fraction without leading zero reads as a number.
    if len(digits) <= 2 and not digits.startswith("0"):
        return cardinal(int(digits))
    return " ".join(cardinal(int(d)) for d in digits)


def _latin_number(text: str, spec: _LatinSpec, negative: bool = False) -> str:
    whole, fraction = _split_number(text)
    words = _spell_integer(whole, spec.cardinal)
    if fraction:
        words += f" {spec.decimal_word} {_spell_fraction(fraction, spec.cardinal)}"
    return f"{spec.minus_word} {words}" if negative else words


def _latin_money(amount: str, symbol: str, spec: _LatinSpec) -> str:
    money = spec.money[symbol]
    whole, fraction = _split_number(amount)
    unit = money.one if whole.lstrip("0") == "1" else money.many
    words = f"{spec.before_noun(_spell_integer(whole, spec.cardinal))} {unit}"
    if fraction:
        cents = int((fraction + "0")[:2])
        if cents:
            cent_unit = money.cent_one if cents == 1 else money.cent_many
            words += f"{spec.cents_joiner}{spec.before_noun(spec.cardinal(cents))} {cent_unit}"
    return words


def _latin_normalizer(spec: _LatinSpec) -> Normalizer:
    symbols = "|".join(re.escape(s) for s in sorted(spec.money, key=len, reverse=True))
    money_before = re.compile(rf"(?<![\w$])({symbols})\s?({_NUMBER})")
    money_after = re.compile(rf"({_NUMBER})\s?({symbols})(?!\w)")
    percent = re.compile(rf"({_SIGN})({_NUMBER})\s?%")
    ordinal = re.compile(rf"\b(\d{{1,4}})({spec.ordinal_suffix})")
    number = re.compile(rf"({_SIGN})({_NUMBER})")

    def spell_ordinal(m: re.Match[str]) -> str:
        feminine = m.group(2).lstrip(".") in spec.feminine_suffixes
        words = spec.ordinal(int(m.group(1)), feminine)
        return words if words else spec.cardinal(int(m.group(1)))

    def normalize(text: str) -> str:
        text = money_before.sub(lambda m: _latin_money(m.group(2), m.group(1), spec), text)
        text = money_after.sub(lambda m: _latin_money(m.group(1), m.group(2), spec), text)
        text = percent.sub(
            lambda m: f"{_latin_number(m.group(2), spec, bool(m.group(1)))} {spec.percent_word}",
            text,
        )
        text = ordinal.sub(spell_ordinal, text)
        return number.sub(lambda m: _latin_number(m.group(2), spec, bool(m.group(1))), text)

    return normalize


# -------------------------------------------------------------------- Hindi passes

_HI_NUMBER = re.compile(r"(?<![\w.])([-−](?=\d))?(\d{1,3}(?:,\d{2,3})+|\d+)(?:\.(\d+))?")
_HI_RUPEES = re.compile(r"(?:₹|रु\.?|Rs\.?)\s?(\d[\d,]*(?:\.\d+)?)")
_HI_PERCENT = re.compile(rf"{_RUN}(\d[\d,]*(?:\.\d+)?)\s?%")


def _hi_number(whole: str, fraction: str | None, negative: bool = False) -> str:
    words = _spell_integer(whole.replace(",", ""), hindi_number)
    if fraction:
        words += " दशमलव " + " ".join(hindi_number(int(d)) for d in fraction)
    return f"ऋण {words}" if negative else words


def _hi_split(amount: str) -> tuple[str, str | None]:
    whole, _, fraction = amount.partition(".")
    return whole, fraction or None


def _hi_rupees(m: re.Match[str]) -> str:
    whole, fraction = _hi_split(m.group(1))
    words = f"{_hi_number(whole, None)} {'रुपया' if whole == '1' else 'रुपये'}"
    paise = int(((fraction or "") + "00")[:2])
    return words + (f" {hindi_number(paise)} पैसे" if paise else "")


def normalize_hindi(text: str) -> str:
    # The danda ends a sentence; as "." it keeps its pause and espeak keeps the intonation.
    text = text.translate(_DEVANAGARI_DIGITS).replace("॥", ".").replace("।", ".")
    text = _HI_RUPEES.sub(_hi_rupees, text)
    text = _HI_PERCENT.sub(lambda m: f"{_hi_number(*_hi_split(m.group(1)))} प्रतिशत", text)
    return _HI_NUMBER.sub(lambda m: _hi_number(m.group(2), m.group(3), bool(m.group(1))), text)


# -------------------------------------------------------------- Japanese passes

_JA_MONEY_BEFORE = re.compile(r"([¥$€£])\s?(\d[\d,]*(?:\.\d+)?)")
_JA_CURRENCY = {"¥": "円", "$": "ドル", "€": "ユーロ", "£": "ポンド"}
_JA_GROUPED = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_JA_DECIMAL = re.compile(rf"{_RUN}(\d+)\.(\d+)")
_JA_MINUS = re.compile(r"(?<![A-Za-z0-9])[-−](?=\d)")


def normalize_japanese(text: str) -> str:
    text = _fold_full_width(text)
    text = _JA_MONEY_BEFORE.sub(lambda m: m.group(2) + _JA_CURRENCY[m.group(1)], text)
    text = _JA_GROUPED.sub("", text)
    # Decimals are read digit by digit after 点; pyopenjtalk handles the integer part.
    text = _JA_DECIMAL.sub(
        lambda m: f"{m.group(1)}点{''.join('零一二三四五六七八九'[int(d)] for d in m.group(2))}",
        text,
    )
    text = text.replace("%", "パーセント")
    return _JA_MINUS.sub("マイナス", text)


# --------------------------------------------------------------- Chinese passes

_ZH_YEAR = re.compile(r"(\d{4})(?=年)")
_ZH_PERCENT = re.compile(rf"([-−]?){_RUN}(\d+(?:\.\d+)?)\s?%")
_ZH_MONEY = re.compile(r"[¥$€]\s?(\d[\d,]*(?:\.\d+)?)")
_ZH_CURRENCY = {"¥": "元", "$": "美元", "€": "欧元"}
_ZH_NUMBER = re.compile(r"(?<![A-Za-z0-9.])([-−](?=\d))?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")


def _zh_number(whole: str, fraction: str | None, negative: bool = False) -> str:
    digits = whole.replace(",", "")
    words = chinese_number(int(digits)) if _spelled_whole(digits) else _zh_digits(digits)
    if fraction:
        words += "点" + _zh_digits(fraction)
    return ("负" + words) if negative else words


def _zh_amount(amount: str, negative: bool = False) -> str:
    whole, _, fraction = amount.partition(".")
    return _zh_number(whole, fraction or None, negative)


def _zh_money(m: re.Match[str]) -> str:
    return _zh_amount(m.group(1)) + _ZH_CURRENCY[m.group(0)[0]]


def normalize_chinese(text: str) -> str:
    text = _fold_full_width(text)
    text = _ZH_YEAR.sub(lambda m: _zh_digits(m.group(1)), text)  # 2024年 is read 二零二四年
    text = _ZH_PERCENT.sub(lambda m: "百分之" + _zh_amount(m.group(2), bool(m.group(1))), text)
    text = _ZH_MONEY.sub(_zh_money, text)
    return _ZH_NUMBER.sub(lambda m: _zh_number(m.group(2), m.group(3), bool(m.group(1))), text)


# ------------------------------------------------------------------------ registry


def _never_raise(name: str, normalize: Normalizer) -> Normalizer:
    def safe(text: str) -> str:
        try:
            return normalize(text)
        except Exception:  # a rule bug must cost a polished reading, never the request
            log.exception("normalizer for %s failed; text left as written", name)
            return text

    return safe


def international_normalizers() -> dict[str, Normalizer]:
    """Normalizers for every non-English language, keyed by our language codes."""
    normalizers: dict[str, Normalizer] = {
        code: _latin_normalizer(spec) for code, spec in _SPECS.items()
    }
    normalizers.update({"hi": normalize_hindi, "ja": normalize_japanese, "zh": normalize_chinese})
    # Titles first ("Sr. Silva" → "senhor Silva"); German has titles only.
    for code, titles in title_normalizers().items():
        normalizers[code] = _then(titles, normalizers.get(code, _identity))
    return {code: _never_raise(code, fn) for code, fn in normalizers.items()}


def _then(first: Normalizer, second: Normalizer) -> Normalizer:
    return lambda text: second(first(text))
