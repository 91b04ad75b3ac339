"""Documents of real multilingual paragraphs with planted repeats below the document, and a
sequential reference of DCLM's BFF ``old-both`` with an exact set, written from reading
``process_line_oldboth`` in DCLM's ``dedup/bff/src/main.rs``.

The planted repeats: a site's boilerplate paragraphs (long footers and banners, and short
navigation lines below an n-gram), passages quoted from earlier documents (exactly or with
about 1% of their words changed), whole pages copied (exactly or edited), and a paragraph
repeated inside its own document. Shared by the paragraph dedup tests and its bench.
"""

from __future__ import annotations

import functools
import random

import regex

from tests.support.quality_corpus import paragraphs

BOUNDARY = regex.compile(r"(?wV1)\b")


def reference_old_both(texts: list[str], n: int = 13, min_n: int = 13, threshold: float = 0.8
                       ) -> list[tuple[list[bool], bool, str]]:
    """For each text in order: each paragraph removed or not, the document emptied or not,
    and the text BFF writes (a filter that holds exactly the n-grams added so far)."""
    seen: set[tuple[str, ...]] = set()
    decisions = []
    for text in texts:
        cuts = [0] + [i for i, char in enumerate(text) if char == "\n"] + [len(text)]
        removed, contained_all, total_all, kept = [], 0, 0, []
        for start, end in zip(cuts, cuts[1:]):
            paragraph = text[start:end]
            tokens = [piece for piece in BOUNDARY.split(paragraph) if piece and not piece.isspace()]
            grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
            if not grams and len(tokens) >= min_n:
                grams = [tuple(tokens)]
            contained = sum(1 for gram in grams if gram in seen)
            total_all += len(grams)
            contained_all += contained
            gone = bool(grams) and contained / len(grams) > threshold
            removed.append(gone)
            if not gone:
                seen.update(grams)
                kept.append(paragraph)
        emptied = total_all > 0 and contained_all / total_all > threshold
        decisions.append((removed, emptied, "" if emptied else "".join(kept)))
    return decisions


def planted_documents(count: int = 600, seed: int = 3) -> list[str]:
    """``count`` documents of 2 to 8 paragraphs, some of them planted repeats (see above)."""
    rng = random.Random(seed)
    pool = list(fixture_paragraphs())
    rng.shuffle(pool)
    fresh = iter(pool + [fresh_paragraph(pool, rng) for _ in range(max(0, 6 * count - len(pool)))])
    sites = [[next(fresh) for _ in range(2)] + ["Home | News | Contact", "Accept all cookies"] for _ in range(12)]
    documents: list[list[str]] = []
    for _ in range(count):
        roll = rng.random()
        if documents and roll < 0.08:
            page = list(rng.choice(documents))
            documents.append(page if rng.random() < 0.5 else [edited(p, rng) for p in page])
            continue
        body = [next(fresh) for _ in range(rng.randint(2, 6))]
        if documents and roll < 0.35:
            quoted = rng.choice(rng.choice(documents))
            body.insert(rng.randrange(len(body) + 1), quoted if rng.random() < 0.5 else edited(quoted, rng))
        if roll > 0.9:
            body.append(body[0])
        site = rng.choice(sites)
        documents.append(site[2:3] + body + (site[:2] if roll < 0.6 else site[1:2]) + site[3:])
    return ["\n".join(page) for page in documents]


@functools.cache
def fixture_paragraphs() -> tuple[str, ...]:
    """The fixtures' paragraphs of at least 120 characters, each on one line."""
    return tuple(d["text"].replace("\n", " ") for d in paragraphs(120))


def fresh_paragraph(pool: list[str], rng: random.Random) -> str:
    """A paragraph not in the fixtures, for a corpus larger than they are: one of theirs with
    about one word in seven (one character in seven, in a script written without spaces)
    taken from another, so that most of its 13-grams are new."""
    base, donor = rng.choice(pool), rng.choice(pool)
    words = base.split(" ")
    if len(words) * 12 < len(base):
        characters = list(base)
        for position in rng.sample(range(len(characters)), len(characters) // 7):
            characters[position] = rng.choice(donor)
        return "".join(characters)
    replacements = donor.split(" ")
    for position in rng.sample(range(len(words)), max(1, len(words) // 7)):
        words[position] = rng.choice(replacements)
    return " ".join(words)


def edited(paragraph: str, rng: random.Random) -> str:
    """About 1% of the paragraph's words changed (at least one)."""
    words = paragraph.split(" ")
    for position in rng.sample(range(len(words)), max(1, len(words) // 100)):
        words[position] = words[position][::-1] + "x"
    return " ".join(words)
