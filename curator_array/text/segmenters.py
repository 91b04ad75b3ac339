"""Word segmenters, one per kind of script, chosen per language by the quality settings table.

The quality rules count words, and what a word is decides them. The references (datatrove,
as used for FineWeb and FineWeb-2) split words with spaCy's rule-based tokenizers for
languages written with spaces, with SudachiPy for Japanese and with jieba for Chinese.

* ``spaced``: one regular expression in the spirit of spaCy's rules: punctuation is split
  off words (hyphens and slashes between letters included), numbers keep their inner dots,
  commas and colons (``9.8.3``, ``V:8``), abbreviations keep theirs (``e.g.``), URLs stay
  whole, and contractions and elisions are split as the language writes them (``do n't``,
  ``l' homme``). German has spaCy's German rules (a stop stays on a number and on common
  abbreviations, ``4.8.``, ``usw.``). Emoticons stay whole. It runs in C over each text,
  orders of magnitude faster than spaCy.
* ``sudachi`` (Japanese) and ``jieba`` (Chinese): the references' own segmenters, loaded
  once per worker process; they are the ``web`` extras.
* ``none``: scripts without a segmenter here (Thai, Lao, Khmer, Burmese): the word rules
  pass these documents.

Every segmenter returns words without whitespace, none empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from ..core.errors import ConfigError
from .language import DEFAULT_LANGUAGE

# The character classes of spaCy's default punctuation rules (spacy.lang.punctuation).
_PUNCT = r"…,:;!?¿؟¡()\[\]{}<>_#*&。？！，、；：～·।،۔؛٪"
_QUOTES = r"'\"”“`‘´’‚„»«「」『』（）〔〕【】《》〈〉⟦⟧"
_CURRENCY = r"$£€¥฿₽₴₩₪₫₹₺₿"
_PREFIX = re.compile(rf"^(?:\.\.+|[§%=—–{_PUNCT}{_QUOTES}{_CURRENCY}]|\+(?![0-9]))")
_LOWER = "a-zà-öø-ÿßāăąćĉċčďđēĕėęěĝğġģĥħĩīĭįıĳĵķĸĺļľŀłńņňŉŋōŏőœŕŗřśŝşšţťŧũūŭůűųŵŷźżžа-яёђѓєѕіїјљњћќўџґα-ωάέήίόύώ"
_SUFFIX_COMMON = rf"\.\.+|[{_PUNCT}{_QUOTES}]|(?<=[0-9])\+"
_SUFFIX = re.compile(rf"(?:{_SUFFIX_COMMON}|['’][sS]|[—–]|(?<=[0-9{_LOWER}\-+%²{_PUNCT}{_QUOTES}])\."
                     r"|(?<=[A-Z][A-Z])\.)$")
# German writes ordinals and section numbers with a final full stop ("4.8.", "am 3. Mai"): a
# stop after a digit stays on the number; a trailing slash comes off, URLs' included.
_SUFFIXES = {
    "de": re.compile(rf"(?:{_SUFFIX_COMMON}|''|/|(?<=[{_LOWER}\-+%²{_PUNCT}{_QUOTES}])\.|(?<=[A-ZÄÖÜ][A-ZÄÖÜ])\.)$"),
}
_INFIX_COMMON = r"\.\.+|…|(?<=[^\W\d_])\.(?=[A-Z])|(?<=[^\W\d_]),(?=[^\W\d_])|(?<=[^\W_])[:<>=/](?=[^\W\d_])"
_NUMBER_OPERATORS = r"|(?<=[0-9])[+\-*^](?=[0-9-])"
_HYPHEN = r"|(?<=[^\W_])[-–—](?=[^\W\d_])"
# Hyphens between letters split words in English, Russian and French (there except after
# "non" and before a pronoun, which keeps its hyphen: "dites -vous") and in Italian before a
# lower-case letter; spaCy keeps German, Spanish, Portuguese and Dutch compounds whole, and
# Spanish, Portuguese and Dutch number ranges (3-4) too.
_INFIXES = {
    "en": re.compile(_INFIX_COMMON + _NUMBER_OPERATORS + _HYPHEN),
    "ru": re.compile(_INFIX_COMMON + _NUMBER_OPERATORS + _HYPHEN),
    "it": re.compile(_INFIX_COMMON + _NUMBER_OPERATORS + rf"|(?<=[^\W_])[-–—~](?=[{_LOWER}])"),
    "fr": re.compile(_INFIX_COMMON + _NUMBER_OPERATORS + r"|(?<=[^\W_])(?<![Nn]on)[-–—](?=[^\W\d_])(?!(?:t-)?(?:vous"
                     r"|nous|je|tu|il|ils|elle|elles|on|ce|le|la|les|lui|leur|moi|toi|en|y)\b)"),
    "es": re.compile(_INFIX_COMMON + r"|(?<=[0-9])[+*^](?=[0-9-])"),
    "pt": re.compile(_INFIX_COMMON + r"|(?<=[0-9])[+*^](?=[0-9-])"),
    "nl": re.compile(_INFIX_COMMON),
    # German splits ":<>=,!?", quotes and brackets only between letters, "/" between letters
    # or digits, "--" between letters and "-" between digits; a full stop only from a lower-
    # to an upper-case letter.
    "de": re.compile(rf"\.\.+|…|(?<=[{_LOWER}])\.(?=[A-ZÄÖÜ])|(?<=[^\W\d_])[,!?:<>=\"”“`‘´’‚„»«()\[\]](?=[^\W\d_])"
                     r"|(?<=[^\W_])/(?=[^\W_])|(?<=[^\W\d_])--(?=[^\W\d_])|(?<=[0-9])-(?=[0-9])"),
}
_INFIX = re.compile(_INFIX_COMMON + _NUMBER_OPERATORS)
_URL = re.compile(r"^(?:(?:https?|ftp)://\S+|www\.\S+|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}(?:/\S*)?|\S+@\S+\.\w+)$")
# A word of letters and one closing mark ("said," "page." "(see" aside): split in two.
_WORD_AND_SUFFIX = re.compile(rf"([^\W\d_]+)([,;:!?)]|(?<=[{_LOWER}])\.)")
_ABBREVIATION = re.compile(r"^(?:[^\W\d_]\.){2,}$|^(?:etc|vs|Mr|Mrs|Ms|Dr|Jr|Sr|St|No|cf|al|approx|Inc|Ltd|Co)\.$")
# Abbreviations a language's tokenizer keeps whole with their full stop.
_ABBREVIATIONS = {
    "de": frozenset("""Abb. Abs. Abt. Anm. Aufl. Bd. Bsp. Jh. Mio. Mrd. Nr. Prof. Str. Tel. Tsd. allg. bspw. bzgl.
                    bzw. ca. dgl. ebd. evtl. ggf. inkl. insb. max. min. mind. sog. usw. vgl. zzgl.""".split()),
}

# Emoticons are one word however their characters would split ("):" after a bracket, ":1"
# of "::1"); these are the commonest of the faces spaCy keeps whole in every language.
EMOTICONS = frozenset(""":) :-) :)) :( :-( :(( ;) ;-) (: (-: ): )-: (; =) (= =( :] :[ [: ]: :} :{ :/ :-/ =/
                      :| :-| =| :P :-P :p :-p :D :-D xD XD :O :-O :o :-o :* :-* :') :'( <3 </3 :1 8) 8-)""".split())

# Contractions and elisions, as spaCy's exceptions and rules split them.
_ENGLISH_SUFFIX = re.compile(r"(?i)^(\w+?)(n't|n’t|'re|'ve|'ll|'d|'m|’re|’ve|’ll|’d|’m)$")
# French and Italian split after an apostrophe between letters (l'homme, quelqu'un, dell'anno).
_ELISION = re.compile(r"^(\w+?)(['’])(\w.*)$")
# French pronouns after a hyphen are words of their own (dites-vous, est-ce).
_FRENCH_PRONOUN = re.compile(r"(?i)^(\w+)(-(?:t-)?(?:vous|nous|je|tu|il|ils|elle|elles|on|ce|le|la|les|lui|leur|moi|toi|en|y))$")
ELIDING = frozenset({"fr", "it", "ca"})


def _join_emoticons(pieces: list[str]) -> list[str]:
    """Adjacent pieces of one chunk that spell an emoticon become one word, longest first."""
    joined, start = [], 0
    while start < len(pieces):
        for end in range(min(len(pieces), start + 4), start + 1, -1):
            if "".join(pieces[start:end]) in EMOTICONS:
                joined.append("".join(pieces[start:end]))
                start = end
                break
        else:
            joined.append(pieces[start])
            start += 1
    return joined


def _abbreviation(chunk: str, language: str) -> bool:
    return bool(_ABBREVIATION.match(chunk)) or chunk in _ABBREVIATIONS.get(language, ())


# Pieces of the chunks split so far, per language: chunks repeat across documents ("it.",
# "(see"), and splitting one costs a few regular expressions. Cleared when it grows large.
_SPLIT_CHUNKS: dict[str, dict[str, tuple[str, ...]]] = {}
SPLIT_CHUNKS_KEPT = 200_000


def spaced(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    words: list[str] = []
    known = _SPLIT_CHUNKS.setdefault(language, {})
    for chunk in text.split():
        if chunk.isalnum():  # what \w+ matches, minus "_", which splits nothing either
            words.append(chunk)
        else:
            pieces = known.get(chunk)
            words.extend(pieces if pieces is not None else _split_new_chunk(chunk, language, known))
    return words


def chunk_words(chunks: list[str], language: str) -> list[tuple[str, ...]]:
    """The words of each whitespace-delimited chunk of text, as ``spaced`` splits it."""
    known = _SPLIT_CHUNKS.setdefault(language, {})
    out = []
    for chunk in chunks:
        if chunk.isalnum():
            out.append((chunk,))
        else:
            pieces = known.get(chunk)
            out.append(pieces if pieces is not None else _split_new_chunk(chunk, language, known))
    return out


def _split_new_chunk(chunk: str, language: str, known: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    simple = _WORD_AND_SUFFIX.fullmatch(chunk)
    if simple and not _abbreviation(chunk, language):  # the commonest shape, as _split_chunk splits it
        found = [simple.group(1), simple.group(2)]
    else:
        found = []
        _split_chunk(chunk, language, found)
        if len(found) > 1:
            found = _join_emoticons(found)
    if len(known) >= SPLIT_CHUNKS_KEPT:
        known.clear()
    pieces = known[chunk] = tuple(found)
    return pieces


def _split_chunk(chunk: str, language: str, out: list[str]) -> None:
    """One whitespace-delimited chunk, the way spaCy's tokenizer takes it apart: prefixes
    from the front and suffixes from the back, one at a time, then infixes in what is left."""
    suffixes: list[str] = []
    suffix_rule = _SUFFIXES.get(language, _SUFFIX)
    while chunk:
        if _abbreviation(chunk, language):
            break
        prefix = _PREFIX.match(chunk)
        if prefix and prefix.end() < len(chunk) or prefix and not suffix_rule.search(chunk):
            out.append(prefix.group())
            chunk = chunk[prefix.end():]
            continue
        suffix = suffix_rule.search(chunk)
        if suffix and suffix.start() > 0:
            suffixes.append(suffix.group())
            chunk = chunk[:suffix.start()]
            continue
        break
    if chunk:
        _infixes(chunk, language, out)
    out.extend(reversed(suffixes))


def _infixes(core: str, language: str, out: list[str]) -> None:
    if _URL.match(core) or _abbreviation(core, language):
        out.append(core)
        return
    start = 0
    for match in _INFIXES.get(language, _INFIX).finditer(core):
        if match.start() > start:
            _word(core[start:match.start()], language, out)
        out.append(match.group())
        start = match.end()
    if start < len(core):
        _word(core[start:], language, out)


def _word(word: str, language: str, out: list[str]) -> None:
    if language == "fr" and "-" in word and (match := _FRENCH_PRONOUN.match(word)):
        _word(match.group(1), language, out)
        out.append(match.group(2))
        return
    if "'" in word or "’" in word:
        if language == "en" and (match := _ENGLISH_SUFFIX.match(word)):
            out += [match.group(1), match.group(2)]
            return
        if language in ELIDING and (match := _ELISION.match(word)):
            out.append(match.group(1) + match.group(2))
            _word(match.group(3), language, out)
            return
    out.append(word)


@lru_cache(maxsize=1)
def _sudachi():
    try:
        from sudachipy import dictionary, tokenizer
    except ImportError:
        raise ConfigError("Japanese word segmentation needs the web extras: pip install 'curator-array[web]'") from None
    loaded = dictionary.Dictionary()
    make = getattr(loaded, "tokenizer", loaded.create)  # SudachiPy 0.7 renamed create()
    return make(mode=tokenizer.Tokenizer.SplitMode.A)


# Sudachi refuses long inputs; the reference segments texts in chunks of this many bytes.
SUDACHI_CHUNK_BYTES = 40_000


def _utf8_chunks(text: str, limit: int) -> list[str]:
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + limit // 3 if len(text) - start > limit // 3 else len(text))
        while end < len(text) and len(text[start:end + 256].encode()) < limit:
            end = min(len(text), end + 256)
        while len(text[start:end].encode()) > limit:
            end -= 64
        chunks.append(text[start:end])
        start = end
    return chunks


def sudachi(text: str, language: str = "ja") -> list[str]:
    tokenizer = _sudachi()
    words = []
    for chunk in _utf8_chunks(text, SUDACHI_CHUNK_BYTES):
        words += [w for w in (m.surface().strip() for m in tokenizer.tokenize(chunk)) if w]
    return words


@lru_cache(maxsize=1)
def _jieba():
    try:
        import jieba
    except ImportError:
        raise ConfigError("Chinese word segmentation needs the web extras: pip install 'curator-array[web]'") from None
    jieba.setLogLevel(60)
    jieba.initialize()
    return jieba


def jieba(text: str, language: str = "zh") -> list[str]:
    return [w for w in (piece.strip() for piece in _jieba().cut(text, cut_all=False)) if w]


def none(text: str, language: str = "") -> list[str]:
    return []


SEGMENTERS: dict[str, Callable[[str, str], list[str]]] = {"spaced": spaced, "sudachi": sudachi, "jieba": jieba,
                                                          "none": none}
KINDS = tuple(SEGMENTERS)
