"""Build the real-HTML corpus of the FineWeb comparison: whole pages of Debian's documentation.

The Debian Administrator's Handbook (GPL-2+ / CC BY-SA 3.0) in English and four
translations, and the English Developer's Reference (MIT), are published as Debian packages
of HTML pages. This downloads them (``apt-get download``, no installation) and keeps up to
``--per-language`` pages of at most 60 KB per language, chosen by a stable hash, in
``tests/fixtures/fineweb-pages.jsonl.gz``: one JSON object per page with ``name``,
``language`` (of the translation) and ``html``. The test gives each page its URL and writes the
WARC itself. To rebuild (needs apt sources):

    .venv/bin/python -m tests.support.build_fineweb_pages
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
OUTPUT = REPO / "tests" / "fixtures" / "fineweb-pages.jsonl.gz"
PACKAGES = ("debian-handbook", "developers-reference")
# glob of pages inside the packages → language
SOURCES = {
    "usr/share/doc/debian-handbook/html/en-US/*.html": "en",
    "usr/share/developers-reference/*.html": "en",
    "usr/share/doc/debian-handbook/html/de-DE/*.html": "de",
    "usr/share/doc/debian-handbook/html/fr-FR/*.html": "fr",
    "usr/share/doc/debian-handbook/html/es-ES/*.html": "es",
    "usr/share/doc/debian-handbook/html/ja-JP/*.html": "ja",
}
MAX_BYTES = 60_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-language", type=int, default=20)
    parser.add_argument("--english", type=int, default=140)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    pages: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(["apt-get", "download", *PACKAGES], cwd=root, check=True, capture_output=True)
        tree = root / "tree"
        for deb in sorted(root.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
        for pattern, language in SOURCES.items():
            for page in sorted(tree.glob(pattern)):
                if page.stat().st_size <= MAX_BYTES:
                    name = str(page.relative_to(tree))
                    pages.setdefault(language, []).append(
                        {"name": name, "language": language, "html": page.read_text(encoding="utf-8")})
    kept = []
    for language, found in sorted(pages.items()):
        found.sort(key=lambda p: hashlib.sha256(p["name"].encode()).hexdigest())
        kept += found[: args.english if language == "en" else args.per_language]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(args.output, "wb", mtime=0) as out:
        for page in kept:
            out.write((json.dumps(page, ensure_ascii=False, sort_keys=True) + "\n").encode())
    print(f"wrote {len(kept)} pages to {args.output} ({args.output.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
