"""Build the multilingual test corpora: real text from Debian's translated documentation.

The Debian Reference, the Developer's Reference, the Debian FAQ and the New Maintainers'
Guide are published in several languages as Debian packages. This downloads them (`apt-get
download`, no installation), splits every HTML page into its sections, extracts each
section's text with Resiliparse (as the `commoncrawl` pipeline does), and keeps up to
``--per-language`` sections per language, chosen by a stable hash. The result is
``tests/fixtures/multilingual-docs.jsonl.gz``: one JSON object per section with ``id``,
``language``, ``source`` (the package, whose copyright file gives the text's free licence)
and ``text``. The tests read that file; to rebuild it (needs apt sources):

    .venv/bin/python -m tests.support.build_text_corpus

A second corpus, ``tests/fixtures/multilingual-prose.jsonl.gz``, is ordinary prose: the
GNOME desktop help (package ``gnome-user-docs``, CC BY-SA 3.0) in ten languages, one document
per help page, its paragraphs one per line, leaving out paragraphs a translation kept in
English.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "tests" / "fixtures" / "multilingual-docs.jsonl.gz"
PROSE_OUTPUT = REPO / "tests" / "fixtures" / "multilingual-prose.jsonl.gz"
PROSE_PACKAGE = "gnome-user-docs"
# help directory → language
PROSE_LANGUAGES = {"C": "en", "de": "de", "es": "es", "fr": "fr", "it": "it", "ja": "ja", "nl": "nl",
                   "pt_BR": "pt", "ru": "ru", "zh_CN": "zh"}
MALLARD = {"m": "http://projectmallard.org/1.0/"}
# package → (language, glob of its HTML pages inside the package)
PACKAGES = {
    "debian-reference-en": ("en", "usr/share/debian-reference/*.en.html"),
    "debian-reference-de": ("de", "usr/share/debian-reference/*.de.html"),
    "debian-reference-es": ("es", "usr/share/debian-reference/*.es.html"),
    "debian-reference-fr": ("fr", "usr/share/debian-reference/*.fr.html"),
    "debian-reference-it": ("it", "usr/share/debian-reference/*.it.html"),
    "debian-reference-ja": ("ja", "usr/share/debian-reference/*.ja.html"),
    "debian-reference-pt": ("pt", "usr/share/debian-reference/*.pt.html"),
    "debian-reference-zh-cn": ("zh", "usr/share/debian-reference/*.zh-cn.html"),
    "developers-reference": ("en", "usr/share/developers-reference/*.html"),
    "developers-reference-de": ("de", "usr/share/developers-reference/de/*.html"),
    "developers-reference-fr": ("fr", "usr/share/developers-reference/fr/*.html"),
    "developers-reference-it": ("it", "usr/share/developers-reference/it/*.html"),
    "developers-reference-ja": ("ja", "usr/share/developers-reference/ja/*.html"),
    "developers-reference-ru": ("ru", "usr/share/developers-reference/ru/*.html"),
    "debian-faq-ru": ("ru", "usr/share/doc/debian/FAQ/ru/*.html"),
    "debian-faq-zh-cn": ("zh", "usr/share/doc/debian/FAQ/zh-cn/*.html"),
    "maint-guide-ru": ("ru", "usr/share/doc/maint-guide-ru/html/*.html"),
    "maint-guide-zh-cn": ("zh", "usr/share/doc/maint-guide-zh-cn/html/*.html"),
}
MIN_CHARS = 400
# Sections kept besides the hashed choice: each once split differently by our segmenter and by
# spaCy's (German stops after numbers and abbreviations, slashes after URLs, emoticons).
ALWAYS_KEPT = (
    "debian-reference-de/ch06.de.html#15",
    "debian-reference-de/ch04.de.html#10",
    "debian-reference-de/ch05.de.html#2",
    "developers-reference-de/best-pkging-practices.html#37",
    "debian-reference-de/ch01.de.html#18",
    "debian-reference-de/ch02.de.html#51",
    "debian-reference-de/ch09.de.html#65",
    "debian-reference-de/ch05.de.html#4",
    "debian-reference-de/ch02.de.html#21",
    "debian-reference-de/ch11.de.html#11",
    "developers-reference-de/developers-reference.html#143",
    "debian-reference-de/ch02.de.html#19",
    "debian-reference-de/ch09.de.html#8",
    "developers-reference-it/beyond-pkging.html#0",
    "developers-reference-it/developers-reference.html#26",
    "debian-reference-it/ch05.it.html#2",
    "developers-reference-it/resources.html#12",
    "debian-reference-it/ch12.it.html#9",
    "developers-reference-it/developers-reference.html#162",
    "maint-guide-ru/build.ru.html#4",
    "debian-faq-ru/ftparchives.ru.html#3",
)


def sections(html: bytes) -> list[bytes]:
    """The innermost sections of a page (DocBook ``div.section``, Sphinx ``section``), as HTML."""
    import lxml.html

    tree = lxml.html.fromstring(html)
    found = tree.xpath("//div[contains(concat(' ', @class, ' '), ' section ')] | //section")
    leaves = [s for s in found if not s.xpath(".//div[contains(concat(' ', @class, ' '), ' section ')] | .//section")]
    return [lxml.html.tostring(s, encoding="utf-8") for s in leaves]


def extract(html: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    page = b"<html><body>" + html + b"</body></html>"
    return extract_plain_text(page.decode("utf-8", "replace"), main_content=False, preserve_formatting=True,
                              alt_texts=False, list_bullets=True).strip()


def help_paragraphs(page: Path) -> list[str]:
    """The titles and paragraphs of a Mallard help page, whitespace collapsed."""
    import lxml.etree

    found = lxml.etree.parse(str(page)).xpath(
        "//m:p[not(ancestor::m:info)] | //m:title[not(ancestor::m:info)]", namespaces=MALLARD)
    return [text for text in (" ".join("".join(node.itertext()).split()) for node in found) if text]


def prose_documents(tree: Path, per_language: int) -> list[dict]:
    root = tree / "usr" / "share" / "help"
    english = {page.name: set(help_paragraphs(page)) for page in (root / "C" / "gnome-help").glob("*.page")}
    kept = []
    for directory, language in PROSE_LANGUAGES.items():
        docs = []
        for page in sorted((root / directory / "gnome-help").glob("*.page")):
            own = [p for p in help_paragraphs(page) if directory == "C" or p not in english.get(page.name, ())]
            text = "\n".join(own)
            if len(text) >= (200 if language in ("ja", "zh") else MIN_CHARS):
                docs.append({"id": f"{PROSE_PACKAGE}/{directory}/{page.name}", "language": language,
                             "source": PROSE_PACKAGE, "text": text})
        docs.sort(key=lambda d: hashlib.sha256(d["id"].encode()).hexdigest())
        kept += docs[:per_language]
        print(f"{language}: {len(docs)} help pages, kept {min(len(docs), per_language)}")
    return kept


def write(documents: list[dict], output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(output, "wb", mtime=0) as out:
        for doc in documents:
            out.write((json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n").encode())
    print(f"wrote {len(documents)} documents to {output} ({output.stat().st_size / 1024:.0f} KiB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-language", type=int, default=90)
    parser.add_argument("--prose-per-language", type=int, default=40)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--prose-output", type=Path, default=PROSE_OUTPUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(["apt-get", "download", *PACKAGES, PROSE_PACKAGE], cwd=root, check=True, capture_output=True)
        tree = root / "tree"
        for deb in sorted(root.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
        by_language: dict[str, list[dict]] = {}
        for package, (language, pattern) in PACKAGES.items():
            for page in sorted(tree.glob(pattern)):
                for index, section in enumerate(sections(page.read_bytes())):
                    text = extract(section)
                    if len(text) >= MIN_CHARS:
                        by_language.setdefault(language, []).append(
                            {"id": f"{package}/{page.name}#{index}", "language": language, "source": package,
                             "text": text})
        prose = prose_documents(tree, args.prose_per_language)
    kept = []
    for language, docs in sorted(by_language.items()):
        docs.sort(key=lambda d: hashlib.sha256(d["id"].encode()).hexdigest())
        chosen = docs[:args.per_language]
        kept += chosen + [doc for doc in docs[args.per_language:] if doc["id"] in ALWAYS_KEPT]
        print(f"{language}: {len(docs)} sections, kept {min(len(docs), args.per_language)}")
    write(kept, args.output)
    write(prose, args.prose_output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
