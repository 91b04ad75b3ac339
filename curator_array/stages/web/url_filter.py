"""FineWeb's URL filter: pages from blocked domains or URLs, or whose URL reads as adult content.

Rules, in the reference's order, each counted as ``url_filter.<rule>``:

- ``domain``: the URL's registered domain (public-suffix aware, ``tldextract`` with its
  bundled suffix list, no network) is a blocked domain;
- ``subdomain``: its full host name is a blocked domain;
- ``url``: the URL as written is a blocked URL;
- ``hard_blacklisted``: a word of the URL (runs of ASCII letters and digits) is a banned word;
- ``soft_blacklisted``: at least ``soft_word_threshold`` (2) soft-banned words are;
- ``blacklisted_subword``: a banned subword occurs in the URL reduced to lower-case letters
  and digits (Aho-Corasick, ``pyahocorasick``).

The lists are FineWeb's (``url_lists``), plus a site's own (``extra_domains``,
``extra_urls``). A page without a URL cannot be judged: it is dropped as ``no_url``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...core.errors import ConfigError
from ..filters import FilterStage
from ..process_state import PerProcess
from ..requirements import WEB_EXTRAS, Requirement, module
from .url_lists import LISTS_DIR, MANIFEST, UrlLists, hashes, install_command, listed

URL_FIELD = "url"
_NOT_ALPHANUMERIC = re.compile(r"[^a-zA-Z0-9]+")


def normalized(text: str) -> str:
    return _NOT_ALPHANUMERIC.sub("", text).lower()


def read_blocklists(paths) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A site's own block lists: (domains, URLs). One entry a line; a line with ``://`` is a
    URL (matched as written), any other a domain (matched on the registered domain and the host
    name, lower-cased); blank lines and ``#`` comments are skipped. ConfigError names a file
    that cannot be read or holds no entry."""
    domains, urls = set(), set()
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--url-blocklist {path}: cannot read it ({exc})") from None
        entries = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not entries:
            raise ConfigError(f"--url-blocklist {path}: no domain or URL in it")
        for entry in entries:
            if "://" in entry:
                urls.add(entry)
            elif " " in entry or "/" in entry:
                raise ConfigError(f"--url-blocklist {path}: {entry!r} is neither a domain nor a URL (scheme://...)")
            else:
                domains.add(entry.lower().rstrip("."))
    return tuple(sorted(domains)), tuple(sorted(urls))


def installed_lists(lists_dir: str | None) -> Path:
    """Where FineWeb's lists are installed: ``lists_dir``, else the default."""
    return Path(lists_dir) if lists_dir else LISTS_DIR


def site_lists_digest(*entries: str) -> str | None:
    """What pins a site's own block list, however long (None: it has none)."""
    return hashlib.sha256("\n".join(entries).encode()).hexdigest() if any(entries) else None


def lists_requirement(directory: Path) -> Requirement:
    """FineWeb's URL lists installed in ``directory`` (what ``url_lists`` installs)."""
    return Requirement(f"FineWeb's URL lists in {directory}", install_command(directory), path=str(directory / MANIFEST))


def with_extra(sorted_hashes: np.ndarray, extra: tuple[str, ...]) -> np.ndarray:
    return np.sort(np.concatenate([sorted_hashes, hashes(extra)])) if extra else sorted_hashes


class UrlFilter(FilterStage):
    """The lists are loaded once per process (``ready``): the stage runs in Ray tasks, so that
    it fuses with the stages around it, and a worker process runs many. They are pinned by
    what they hold: FineWeb's by the wheel they come from (``url_lists.SOURCE``), a site's own
    by a digest; where they are installed (``lists_dir``) is not part of the run."""

    name = "url_filter"
    pinned = ("extra_lists_digest", "soft_word_threshold", "text_field")
    ready = PerProcess(lambda stage: stage._load(), key=lambda stage: (stage.lists_dir, stage.extra_lists_digest))

    def __init__(self, url_field: str = URL_FIELD, soft_word_threshold: int = 2,
                 extra_domains: tuple[str, ...] = (), extra_urls: tuple[str, ...] = (),
                 lists_dir: str | None = None):
        self.soft_word_threshold = soft_word_threshold
        self.extra_domains, self.extra_urls = tuple(sorted(set(extra_domains))), tuple(sorted(set(extra_urls)))
        self.extra_lists_digest = site_lists_digest(*self.extra_domains, "", *self.extra_urls)
        self.lists_dir = lists_dir
        super().__init__(url_field)

    @property
    def installed_lists(self) -> Path:
        return installed_lists(self.lists_dir)

    def needs(self) -> tuple[Requirement, ...]:
        return (module("tldextract"), Requirement("pyahocorasick", WEB_EXTRAS, module="ahocorasick"),
                lists_requirement(self.installed_lists))

    def setup(self) -> None:
        self.ready

    def _load(self):
        import ahocorasick
        from tldextract import TLDExtract

        lists = UrlLists.load(self.installed_lists)
        subwords = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        for index, word in enumerate(sorted({normalized(w) for w in lists.banned_subwords} - {""})):
            subwords.add_word(word, index)
        subwords.make_automaton()
        return (
            TLDExtract(suffix_list_urls=(), cache_dir=None),
            with_extra(lists.domains, self.extra_domains),
            with_extra(lists.urls, self.extra_urls),
            {normalized(w) for w in lists.banned_words},
            {normalized(w) for w in lists.soft_banned_words},
            subwords,
        )

    def score(self, table, text):
        extract, domains, urls, banned, soft, subwords = self.ready
        values = text.to_pylist()
        present = np.array([bool(url) for url in values])
        urls_ = [url or "" for url in values]
        parts = [extract(url) for url in urls_]
        words = [set(_NOT_ALPHANUMERIC.split(url)) for url in urls_]
        rules = {
            "no_url": present,
            "domain": ~listed(domains, [p.top_domain_under_public_suffix for p in parts]),
            "subdomain": ~listed(domains, [p.fqdn for p in parts]),
            "url": ~listed(urls, urls_),
            "hard_blacklisted": np.array([not (w & banned) for w in words]),
            "soft_blacklisted": np.array([len(w & soft) < self.soft_word_threshold for w in words]),
            "blacklisted_subword": np.array([next(subwords.iter(normalized(url)), None) is None for url in urls_]),
        }
        return table, {rule: pa.array(values) for rule, values in rules.items()}

