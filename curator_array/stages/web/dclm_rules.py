"""DCLM-Baseline's RefinedWeb rules, one page at a time, deciding as DCLM's mappers decide.

The steps and parameters are those of ``dclm_baseline_refinedweb.yaml`` (mlfoundations/dclm),
in its order (``STEPS``). Each rule here is written from what DCLM's functions do, including
the details that change decisions:

* "words" mean three different things there, and each rule keeps its own: fastText's
  tokenizer (runs between ASCII spaces, tabs, newlines, CR, VT, FF and NUL; a token counts
  when its first character is a letter or digit) for page length and the word-removal ratio;
  ``str.split()`` for word length, symbols, alphabetic words and stop words; Unicode word
  boundaries (UAX #29, as the ``uniseg`` package splits) for the n-gram repetition rules,
  found here with the ``regex`` module's default word boundaries;
* lines for bullets, ellipses and repetition are stripped and empty ones left out; the line
  modifiers split at ``\\n`` and keep empty lines;
* URL removal only runs its URL pattern when the page *starts* with a top-level domain's name
  (DCLM tests its TLD pattern with ``match``), then removes IPv4 addresses on every page; its
  top-level domains are lower case, matched case-sensitively;
* the substring modifiers use their phrases as regular expressions (the dots of
  "Read more..." match any character).

Where DCLM reads a file we cannot ship, the closest public equivalent stands in (docs/filters.md):
the curated domain list is not public, so the exact-domain step uses the UT1-derived domains
FineWeb's URL filter installs (and ``--url-blocklist``); the IANA TLD list comes from the
Public Suffix List that ``tldextract`` bundles.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import urlparse

from ...text.boundaries import WORD_BOUNDARY

LISTS = Path(__file__).with_name("dclm_lists")
STRICT_WORDS = "refinedweb_banned_words_strict_reverse_engineered.txt"
HARD_WORDS = "refinedweb_banned_words_hard_reverse_engineered.txt"
SOFT_WORDS = "refinedweb_banned_words_soft_reverse_engineered.txt"

# The steps in the yaml's order; the four URL filters and three substring modifiers are one
# function each there, told apart here by what they match.
URL_DOMAINS = "url_substring_filter_domains"
URL_STRICT = "url_substring_filter_strict"
URL_HARD = "url_substring_filter_hard"
URL_SOFT = "url_substring_filter_soft"
URL_REMOVAL = "url_removal_modifier"
LANGUAGE = "language_filter"
PAGE_LENGTH = "page_length_filter"
WORD_LENGTH = "word_length_filter"
SYMBOL_RATIO = "symbol_ratio_filter"
BULLETS = "bullet_count_filter"
ELLIPSES = "ellipsis_count_filter"
ALPHABETIC = "alphabetic_word_ratio_filter"
STOP_WORDS = "stop_word_filter"
REPETITION = "massive_web_repetition_filters"
UPPERCASE_LINES = "uppercase_ratio_line_modifier"
NUMERIC_LINES = "numeric_ratio_line_modifier"
COUNTER_LINES = "counter_line_modifier"
SHORT_LINES = "line_length_modifier"
ITEMS_IN_CART = "substring_line_modifier_items_in_cart"
READ_MORE = "substring_line_modifier_read_more"
SIGN_IN = "substring_line_modifier_sign_in"
WORD_REMOVAL = "word_removal_ratio_filter"
NOT_TEXT = "text_not_a_string"
STEPS = (NOT_TEXT, URL_DOMAINS, URL_STRICT, URL_HARD, URL_SOFT, URL_REMOVAL, LANGUAGE, PAGE_LENGTH, WORD_LENGTH,
         SYMBOL_RATIO, BULLETS, ELLIPSES, ALPHABETIC, STOP_WORDS, REPETITION, UPPERCASE_LINES, NUMERIC_LINES,
         COUNTER_LINES, SHORT_LINES, ITEMS_IN_CART, READ_MORE, SIGN_IN, WORD_REMOVAL)
LINE_MODIFIERS = (UPPERCASE_LINES, NUMERIC_LINES, COUNTER_LINES, SHORT_LINES, ITEMS_IN_CART, READ_MORE, SIGN_IN)

ENGLISH_MIN_SCORE = 0.65
STOP = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
BULLET_STARTS = ("●", "•", "*", "-")
ELLIPSIS_ENDS = ("...", ". . .", "\u2026")
SYMBOLS = ("#", "...", ". . .", "\u2026")
# Gopher's thresholds: most-common n-gram share for n = 2..4, repeated n-grams' share for 5..10.
MOST_COMMON_NGRAM = {2: 0.20, 3: 0.18, 4: 0.16}
REPEATED_NGRAMS = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}

FASTTEXT_SPACE = re.compile(r"[ \n\r\t\v\f\x00]+")
NEWLINE_RUNS = re.compile(r"\n{3,}")
COUNTER = re.compile(r"^\W*\d(?:,|\.|\d)*(?:K|k|M|m|B|b)?\s+(?:likes|shares|comments|retweets|reposts|quotes|"
                     r"bookmarks|upvotes|downvotes|downloads|views|followers)\W*$")
ITEMS_IN_CART_PATTERN = re.compile(r"\s?(?:items in cart)", re.I)
READ_MORE_PATTERN = re.compile(r"\s?(?:read more...)$", re.I)
SIGN_IN_PATTERN = re.compile(r"^(?:sign-in)\s?", re.I)
IPV4 = re.compile(r"\s{0,10}\b((https?|ftp)://)?(?:[0-2]?[0-9]{1,2}\.){3}[0-2]?[0-9]{1,2}[-a-zA-Z0-9()@:%_\+.~#?&//=]*")
DIGIT_DOT_DIGIT = re.compile(r"[0-9]\.[0-9]")  # what every IPv4 match holds
PUNCTUATION_OR_SPACE = frozenset(string.punctuation) | {" "}


def fasttext_word_count(text: str) -> int:
    """Words as DCLM counts them by default: fastText's tokens that start with a letter or digit."""
    return sum(1 for token in FASTTEXT_SPACE.split(text) if token and token[0].isalnum())


def unicode_words(text: str) -> list[str]:
    """The text's words at Unicode word boundaries that start with a letter or digit."""
    return [piece for piece in WORD_BOUNDARY.split(text) if piece and piece[0].isalnum()]


def stripped_lines(text: str, separator: str = "\n") -> list[str]:
    return [line for part in text.split(separator) if (line := part.strip())]


def alternation(words: Iterable[str]) -> str:
    """One regular expression for any of ``words``, shaped as their trie (as DCLM's ``retrie``
    builds it): at a position the longest word that fits is found first, and the engine
    follows one branch per character instead of trying every word."""
    trie: dict = {}
    for word in set(words):
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_pattern(trie)


def _trie_pattern(node: dict) -> str:
    ends_here = "" in node
    branches = [re.escape(char) + _trie_pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    if ends_here:
        return f"(?:{body})?"
    return body


@cache
def top_level_domains() -> tuple[frozenset[str], re.Pattern, re.Pattern, re.Pattern]:
    """The top-level domains (lower case; internationalised ones in their Unicode form), the
    pattern that finds a URL ending in one, the prefix test, and a quick test that a text
    could hold such a URL at all (a dot followed by a domain's first character); from the
    Public Suffix List that ``tldextract`` ships."""
    from tldextract import TLDExtract

    suffixes = TLDExtract(suffix_list_urls=(), cache_dir=None).tlds
    names = frozenset(suffix.rsplit(".", 1)[-1].lower() for suffix in suffixes if suffix)
    names = frozenset(name for name in names if name and not name.startswith("!") and name != "*")
    tlds = alternation(names)
    urls = re.compile(rf"\s{{0,10}}(?:((https?|ftp)://))?[-a-zA-Z0-9@:%._\+~#=]{{1,256}}\.({tlds})\b"
                      r"([-a-zA-Z0-9()@:%_\+.~#?&//=]*)")
    starts = re.compile(f"(?:{tlds})", re.I)
    could = re.compile(f"\\.[{''.join(sorted({re.escape(name[0]) for name in names}))}]")
    return names, urls, starts, could


@dataclass(frozen=True)
class UrlWords:
    """The three RefinedWeb word lists, compiled as DCLM's URL filters use them."""

    strict: re.Pattern
    hard: re.Pattern
    soft: re.Pattern

    @classmethod
    def load(cls, directory: Path = LISTS) -> UrlWords:
        def words(name: str) -> list[str]:
            return [line.lower() for line in (directory / name).read_text(encoding="utf-8").splitlines() if line]

        return cls(re.compile(alternation(words(STRICT_WORDS)), re.I),
                   re.compile(rf"\b(?:{alternation(words(HARD_WORDS))})\b", re.I),
                   re.compile(rf"\b(?:{alternation(words(SOFT_WORDS))})\b", re.I))

    def step(self, url: str) -> str | None:
        """The URL word filter that drops ``url``, or None."""
        lowered = url.lower()
        if self.strict.search(lowered.replace("-", "").replace(".", "")):
            return URL_STRICT
        if self.hard.search(lowered):
            return URL_HARD
        if len(set(self.soft.findall(lowered))) >= 2:
            return URL_SOFT
        return None


def domain_key(url: str) -> str:
    """What DCLM compares with its domain list: the URL's network location, lower case, with
    every "www" taken out."""
    try:
        return urlparse(url).netloc.lower().replace("www", "")
    except ValueError:
        return ""


def remove_urls(text: str) -> str:
    _, urls, starts, could = top_level_domains()
    if starts.match(text) and could.search(text):
        text = urls.sub("", text)
    return IPV4.sub("", text) if DIGIT_DOT_DIGIT.search(text) else text


def collapse_newlines(text: str) -> str:
    return NEWLINE_RUNS.sub("\n\n", text)


def language_input(text: str) -> str | None:
    """The text DCLM's whole-page fastText language ID reads (newlines removed), or None when
    it has nothing but spaces and ASCII punctuation (DCLM then finds no language)."""
    if all(char in PUNCTUATION_OR_SPACE for char in text):
        return None
    return text.replace("\n", "")


def content_step(text: str, words: int) -> str | None:
    """The first of the page-level filters after language ID that drops ``text`` (``words``:
    its fastText word count), or None."""
    if not 50 <= words <= 100_000:
        return PAGE_LENGTH
    split = text.split()
    if not split:
        return WORD_LENGTH
    if not 3 <= sum(map(len, split)) / len(split) <= 10:
        return WORD_LENGTH
    if sum(text.count(symbol) for symbol in SYMBOLS) / len(split) > 0.1:
        return SYMBOL_RATIO
    lines = stripped_lines(text)
    if sum(line.startswith(BULLET_STARTS) for line in lines) > 0.9 * len(lines):
        return BULLETS
    if sum(line.endswith(ELLIPSIS_ENDS) for line in lines) > 0.3 * len(lines):
        return ELLIPSES
    if sum(1 for word in split if not any(map(str.isalpha, word))) / len(split) > 0.2:
        return ALPHABETIC
    if sum(1 for word in split if word.lower() in STOP) < 2:
        return STOP_WORDS
    if repetitive(text, lines):
        return REPETITION
    return None


def repetitive(text: str, lines: list[str] | None = None) -> bool:
    """Gopher's repetition rules as DCLM's ``massive_web_repetition_filters`` applies them."""
    if not text:
        return True
    for segments in (lines if lines is not None else stripped_lines(text), stripped_lines(text, "\n\n")):
        if len(segments) == 1:
            continue
        if not segments:
            return True
        counts = Counter(segments)
        repeated = [(segment, count) for segment, count in counts.items() if count > 1]
        if sum(count for _, count in repeated) / len(segments) > 0.3:
            return True
        if sum(len(segment) * count for segment, count in repeated) / sum(map(len, segments)) > 0.2:
            return True
    words = unicode_words(text)
    total = sum(map(len, words))
    for n, limit in MOST_COMMON_NGRAM.items():
        counts = Counter(zip(*(words[i:] for i in range(n))))
        if not counts:
            return False
        top = max(counts.values())
        if top > 1:
            longest = max(sum(map(len, gram)) for gram, count in counts.items() if count == top)
            if longest * top / total > limit:
                return True
    for n, limit in REPEATED_NGRAMS.items():
        grams = list(zip(*(words[i:] for i in range(n))))
        if not grams:
            return False
        counts = Counter(grams)
        covered: set[int] = set()
        for start, gram in enumerate(grams):
            if counts[gram] > 1:
                covered.update(range(start, start + n))
        if sum(len(words[i]) for i in covered) / total > limit:
            return True
    return False


def _keep_lines(text: str, keep: Callable[[str], bool], strip: bool = True) -> tuple[str, int]:
    lines = text.split("\n")
    kept = [line for line in lines if keep(line)]
    joined = "\n".join(kept)
    return (joined.strip() if strip else joined), len(lines) - len(kept)


def _share_at_most(count: Callable[[str], int], ratio: float) -> Callable[[str], bool]:
    return lambda line: not line or count(line) / len(line) <= ratio


def _substring_lines(text: str, pattern: re.Pattern) -> tuple[str, int]:
    """Lines of at most 10 words lose ``pattern``'s matches; a line left blank goes."""
    kept, removed = [], 0
    for line in text.split("\n"):
        if len(line.split()) <= 10:
            edited = pattern.sub("", line)
            if line and (not edited or edited.isspace()):
                removed += 1
                continue
            line = edited
        kept.append(line)
    return "\n".join(kept).strip(), removed


LINE_RULES: tuple[tuple[str, Callable[[str], tuple[str, int]]], ...] = (
    (UPPERCASE_LINES, lambda text: _keep_lines(text, _share_at_most(lambda line: sum(map(str.isupper, line)), 0.5))),
    (NUMERIC_LINES, lambda text: _keep_lines(text, _share_at_most(lambda line: sum(map(str.isdigit, line)), 0.999999))),
    (COUNTER_LINES, lambda text: _keep_lines(text, lambda line: not COUNTER.search(line.lower()))),
    (SHORT_LINES, lambda text: _keep_lines(text, lambda line: not line or len(line.split()) >= 2, strip=False)),
    (ITEMS_IN_CART, lambda text: _substring_lines(text, ITEMS_IN_CART_PATTERN)),
    (READ_MORE, lambda text: _substring_lines(text, READ_MORE_PATTERN)),
    (SIGN_IN, lambda text: _substring_lines(text, SIGN_IN_PATTERN)),
)


@dataclass
class Outcome:
    """A page after the rules: its text (as modified) and the step that dropped it, if one did,
    with the lines each line modifier removed."""

    text: str
    dropped_by: str | None = None
    lines_removed: dict[str, int] = field(default_factory=dict)


class RefinedWebRules:
    """Every step of the recipe for one page; ``language`` gives a text's best fastText label
    and its probability, ``banned_domain`` whether a domain key is listed."""

    def __init__(self, language: Callable[[str], tuple[str, float]], banned_domain: Callable[[str], bool],
                 words: UrlWords | None = None):
        self.language, self.banned_domain = language, banned_domain
        self.words = words or UrlWords.load()

    def __call__(self, text: object, url: object) -> Outcome:
        if not isinstance(text, str):
            return Outcome("" if text is None else str(text), NOT_TEXT)
        url = url if isinstance(url, str) else ""
        if self.banned_domain(domain_key(url)):
            return Outcome(text, URL_DOMAINS)
        url_step = self.words.step(url)
        if url_step:
            return Outcome(text, url_step)
        original = text
        text = remove_urls(text)
        if not text:
            return Outcome(original, URL_REMOVAL)
        text = collapse_newlines(text)
        line = language_input(text)
        if line is None:
            return Outcome(original, LANGUAGE)
        label, score = self.language(line)
        if label != "en" or not score > ENGLISH_MIN_SCORE:
            return Outcome(original, LANGUAGE)
        words_before = fasttext_word_count(text)
        step = content_step(text, words_before)
        if step:
            return Outcome(original, step)
        removed = {}
        for name, rule in LINE_RULES:
            text, removed[name] = rule(text)
            if not text:
                return Outcome(original, name, removed)
        if words_before == 0 or (words_before - fasttext_word_count(text)) / words_before > 0.05:
            return Outcome(original, WORD_REMOVAL, removed)
        return Outcome(text, None, removed)
