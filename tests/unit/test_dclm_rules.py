"""DCLM-Baseline's RefinedWeb rules on pages made to meet each one: every step drops what
DCLM's mapper drops and keeps what it keeps, at its limits, and each line modifier removes
the lines DCLM's removes (docs/filters.md says where a rule's reading of DCLM is subtle)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from curator_array.stages.web import dclm_rules as rules
from curator_array.stages.web.fasttext_language import LABEL_PREFIX, bundled_model, load_model
from tests.support.quality_corpus import paragraphs
from tests.support.reference_site import ensure_reference_site, reference_environment

SENTENCES = (
    "The old bridge over the river was built by the town in the spring of that year.",
    "Farmers from the valley brought their grain to the market on every second morning.",
    "Our library keeps the letters that the first teachers wrote to their families at home.",
    "A small museum near the station shows the tools that the miners used with great care.",
    "Children learn to swim in the lake when the water is warm enough in late summer.",
    "The council meets in the hall and talks about the roads, the school and the park.",
    "Visitors often walk along the northern path to see the ruins of the castle walls.",
    "During the winter the bakery sells bread and cakes to people who come from far away.",
    "The church bells ring at noon, and the sound carries across the fields to the hills.",
    "Local musicians play in the square on Friday evenings when the weather is fine.",
)
PAGE = "\n".join(SENTENCES)


@pytest.fixture(scope="module")
def recipe() -> rules.RefinedWebRules:
    model = load_model(bundled_model())

    def language(line: str) -> tuple[str, float]:
        labels, scores = model.predict(line, k=1)
        return labels[0].removeprefix(LABEL_PREFIX), float(scores[0])

    return rules.RefinedWebRules(language, lambda key: key in {"blocked.example", ".listed.example"})


def test_the_plain_page_passes_every_step_unchanged(recipe):
    outcome = recipe(PAGE, "https://town.example/history")
    assert outcome.dropped_by is None and outcome.text == PAGE
    assert not any(outcome.lines_removed.values())


@pytest.mark.parametrize(("url", "step"), [
    ("https://blocked.example/page", rules.URL_DOMAINS),
    ("https://www.listed.example/page", rules.URL_DOMAINS),  # "www" is taken out, its dot stays
    ("https://www.blocked.example/page", None),  # so the listed domain is not matched here
    ("https://BLOCKED.example:443/x", None),  # the port is part of the network location DCLM compares
    ("https://town.example/2-girls-1-cup.html", rules.URL_STRICT),  # dashes and dots removed first
    ("https://town.example/g-spot", None),  # a listed word with a dash can never match
    ("https://town.example/porn/index.html", rules.URL_HARD),
    ("https://town.example/pornography", None),  # one soft word, and no hard word between boundaries
    ("https://town.example/sex-and-escort", rules.URL_SOFT),  # two soft words
    ("https://town.example/sex/sex", None),  # the same soft word twice counts once
])
def test_the_url_filters_decide_as_dclm_does(recipe, url, step):
    assert recipe(PAGE, url).dropped_by == step


def test_urls_are_removed_only_from_a_page_that_starts_with_a_top_level_domain():
    link = " See www.town-archive.org/letters?year=1901 for more."
    starting = "The letters" + link
    assert rules.remove_urls(starting) == "The letters See for more."  # "th" is a top-level domain
    assert rules.remove_urls("Welcome" + link) == "Welcome" + link
    assert rules.remove_urls("Welcome to 192.168.10.7:8080/admin now") == "Welcome to now"  # IPv4: always
    assert rules.remove_urls("The site Example.COM is loud") == "The site Example.COM is loud"  # case-sensitive TLD


def test_url_removal_that_empties_the_page_drops_it_and_newline_runs_collapse(recipe):
    assert recipe("8.8.8.8", "https://town.example/").dropped_by == rules.URL_REMOVAL
    assert rules.collapse_newlines("a\n\n\n\n\nb\n\nc\n\n\nd") == "a\n\nb\n\nc\n\nd"


def test_language_is_read_from_the_whole_page_without_newlines(recipe):
    french = "\n".join(p["text"] for p in paragraphs() if p["language"] == "fr")[:3000]
    assert recipe(french, "https://town.example/").dropped_by == rules.LANGUAGE
    assert rules.language_input("a\nb") == "ab"
    assert rules.language_input("... !! ,") is None  # nothing but ASCII punctuation and spaces
    assert rules.language_input("") is None


def test_fasttext_words_split_at_ascii_whitespace_and_start_with_a_letter_or_digit():
    assert rules.fasttext_word_count("a\u00a0b c\td\r\ne\x00f\x0bg\x0ch -- ,x 3rd") == 8
    assert rules.fasttext_word_count("") == 0


@pytest.mark.parametrize(("words", "step"), [(49, rules.PAGE_LENGTH), (50, None)])
def test_page_length_counts_fasttext_words(recipe, words, step):
    text = " ".join(PAGE.split()[:words]) + " -- !"  # punctuation tokens are not words
    outcome = recipe(text, "https://town.example/")
    assert outcome.dropped_by == step


def _with_lines(extra: list[str]) -> str:
    return PAGE + "\n" + "\n".join(extra)


@pytest.mark.parametrize(("text", "step"), [
    (PAGE.replace("e", "e" * 15), rules.WORD_LENGTH),  # about 12 characters a word
    (_with_lines([" ".join("#" * 30)]), rules.SYMBOL_RATIO),
    ("\n".join("• " + s for s in SENTENCES), rules.BULLETS),
    ("\n".join(s[:-1] + "..." for s in SENTENCES[:4]) + "\n" + "\n".join(SENTENCES[4:]), rules.ELLIPSES),
    (_with_lines([" ".join(str(n) for n in range(60))]), rules.ALPHABETIC),
    (PAGE.replace("The ", "A ").replace(" the ", " a ").replace(" to ", " into ").replace(" and ", " or ").replace(" of ", " off ")
     .replace("that", "which").replace(" with ", " by "), rules.STOP_WORDS),
    (_with_lines([SENTENCES[0]] * 4), rules.REPETITION),
])
def test_each_page_rule_drops_its_page(recipe, text, step):
    assert recipe(text, "https://town.example/").dropped_by == step


def test_the_bullet_and_ellipsis_rules_stop_at_their_ratios(recipe):
    bullets = "\n".join("• " + s for s in SENTENCES[:9]) + "\n" + SENTENCES[9]  # 9 of 10 lines: not above 0.9
    assert recipe(bullets, "https://town.example/").dropped_by is None
    ellipses = "\n".join(s[:-1] + "..." for s in SENTENCES[:3]) + "\n" + "\n".join(SENTENCES[3:])  # 0.3
    assert recipe(ellipses, "https://town.example/").dropped_by is None


def test_repetition_counts_lines_paragraphs_and_ngrams_as_gopher_does():
    assert not rules.repetitive(PAGE)
    assert rules.repetitive("\n\n".join([PAGE, PAGE]))  # every paragraph and line twice
    assert rules.repetitive("")
    assert rules.repetitive("  \n ")  # no line at all
    assert not rules.repetitive("one single line of text")
    # The most common bigram, "red apples", covers 2 * 9 = 18 of the 81 characters of words: above 0.2.
    assert rules.repetitive(" ".join(["red apples"] * 2 + [f"word{n:03d}" for n in range(9)]))
    distinct = " ".join(f"token{n:04d}" for n in range(200))
    assert not rules.repetitive(distinct)


@pytest.fixture(scope="module")
def long_page(recipe) -> str:
    """About 800 words of the Debian developers' reference, one paragraph a line, as the
    recipe leaves them (it passes them again unchanged)."""
    lines, words = [], 0
    for paragraph in paragraphs():
        if paragraph["language"] == "en" and paragraph["source"].startswith("developers") and "\n" not in paragraph["text"]:
            lines.append(paragraph["text"])
            words += len(paragraph["text"].split())
            if words > 800:
                break
    kept = recipe("\n".join(lines), "https://town.example/").text
    assert recipe(kept, "https://town.example/").text == kept
    return kept


def test_the_line_modifiers_remove_their_lines_and_count_them(recipe, long_page):
    extra = ["THIS LINE IS SHOUTED AT EVERY READER", "2024 1999 2023", "12 likes", "1.5K followers!",
             "Share", "3 items in cart", "Read more...", "Read moreXYZ", "Sign-in", "Sign-in now for the news"]
    outcome = recipe(long_page + "\n" + "\n".join(extra), "https://town.example/")
    assert outcome.dropped_by is None
    assert outcome.lines_removed == {rules.UPPERCASE_LINES: 1, rules.NUMERIC_LINES: 0, rules.COUNTER_LINES: 2,
                                     rules.SHORT_LINES: 2, rules.ITEMS_IN_CART: 0, rules.READ_MORE: 2,
                                     rules.SIGN_IN: 0}
    # Digits are 12 of the 14 characters of "2024 1999 2023": not all. "3 items in cart" loses
    # its phrase and keeps "3"; "Read moreXYZ" goes, the dots of "Read more..." matching any
    # character; "Sign-in" alone is a one-word line, gone before the substring rules run.
    assert outcome.text == long_page + "\n2024 1999 2023\n3\nnow for the news"


def test_substring_modifiers_strip_their_phrase_and_drop_a_line_left_blank():
    text, removed = rules.LINE_RULES[4][1]("Two items in cart today\n5 items in cart\nitems in cart")
    assert (text, removed) == ("Two today\n5", 1)
    text, removed = rules.LINE_RULES[5][1]("Click to Read more!!!\nRead more about the war in the long chapter "
                                           "that follows here now read more...")
    assert removed == 0 and text.startswith("Click to\n") and text.endswith("read more...")  # over 10 words: left
    assert rules.LINE_RULES[6][1]("Sign-in to post\nsign-in")[0] == "to post"


def test_a_page_that_loses_more_than_five_percent_of_its_words_is_dropped(recipe):
    shouted = [s.upper() for s in SENTENCES[:1]]  # one of eleven lines, about 9% of the words
    assert recipe(_with_lines(shouted), "https://town.example/").dropped_by == rules.WORD_REMOVAL
    short = ["Share"] * 3  # three one-word lines: under 5% of about 160 words
    assert recipe(_with_lines(short), "https://town.example/").dropped_by is None


def test_a_text_that_is_not_a_string_is_dropped_not_a_crash(recipe):
    assert recipe(12, "https://town.example/").dropped_by == rules.NOT_TEXT
    assert recipe(None, "https://town.example/").dropped_by == rules.NOT_TEXT
    assert recipe(PAGE, None).dropped_by is None  # no URL: the URL rules find nothing


def test_unicode_words_are_uniseg_words_on_text_in_ten_languages():
    """The repetition rules read words as DCLM does, with ``uniseg``'s Unicode word breaks."""
    try:
        site = ensure_reference_site("uniseg-site")
    except RuntimeError as problem:
        if os.environ.get("CI") == "true":
            pytest.fail(str(problem))
        pytest.skip(str(problem))
    texts = [p["text"] for p in paragraphs()][::7]
    probe = ("import json, sys\nfrom uniseg.wordbreak import words\n"
             "texts = json.load(sys.stdin)\n"
             "print(json.dumps([[w for w in words(t) if w[0].isalnum()] for t in texts]))")
    import json

    done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(texts), capture_output=True, text=True,
                          env=reference_environment("uniseg-site"), check=True)
    theirs = json.loads(done.stdout)
    same = sum(rules.unicode_words(text) == words for text, words in zip(texts, theirs))
    assert site.exists() and same / len(texts) >= 0.99, f"{same} of {len(texts)} texts split alike"


def test_url_removal_shortcuts_change_nothing():
    """The trie-shaped TLD pattern and the quick tests before each pattern are speed only: a
    plain alternation run on every text removes the same characters."""
    import re

    names, _, _, _ = rules.top_level_domains()
    plain = "|".join(re.escape(name) for name in sorted(names, key=lambda name: (-len(name), name)))
    urls = re.compile(rf"\s{{0,10}}(?:((https?|ftp)://))?[-a-zA-Z0-9@:%._\+~#=]{{1,256}}\.({plain})\b"
                      r"([-a-zA-Z0-9()@:%_\+.~#?&//=]*)")
    starts = re.compile(f"(?:{plain})", re.I)

    def slowly(text: str) -> str:
        return rules.IPV4.sub("", urls.sub("", text) if starts.match(text) else text)

    planted = [f"{word} see http://www.a-b.example.co.uk/x?y=1 and ftp://10.0.0.1/file or mail@host.info."
               for word in ("The", "In", "Welcome", "Über", "Comme")]
    texts = [p["text"] for p in paragraphs()][::3] + planted
    assert [rules.remove_urls(text) for text in texts] == [slowly(text) for text in texts]
    assert rules.remove_urls(planted[0]) != planted[0]
