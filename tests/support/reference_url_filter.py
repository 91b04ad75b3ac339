"""datatrove's URLFilter on URLs made from its own lists: the reference decisions.

Runs in the reference environment. The URLs cover every rule: blocked domains (as they are,
under a subdomain, and a sibling that is not blocked), blocked URLs (as they are and with a
changed path), banned words, pairs of soft-banned words, banned subwords inside longer
words, and ordinary URLs. Each URL's first failing rule (or ``None``) is printed as JSON.

    python reference_url_filter.py > decisions.json
"""

from __future__ import annotations

import json
import os
import random
import sys
import warnings

warnings.filterwarnings("ignore")

from datatrove.data import Document  # noqa: E402
from datatrove.pipeline.filters import URLFilter  # noqa: E402


def urls_from(stage: URLFilter, rng: random.Random) -> list[str]:
    domains = sorted(stage.block_listed_domains)
    blocked = sorted(stage.block_listed_url)
    banned, soft, subwords = (sorted(stage.banned_words), sorted(stage.soft_banned_words),
                              sorted(stage.banned_subwords))
    urls = []
    for domain in rng.sample(domains, 300):
        urls += [f"https://{domain}/", f"http://www.{domain}/page?id=3", f"https://blog.{domain}.example/a",
                 f"https://{domain.replace('.', '-')}.net/"]
    for url in rng.sample(blocked, 200):
        urls += [url, f"{url}/more", f"https://{url}"]
    for word in banned:
        urls += [f"https://news.example/{word}-today", f"https://news.example/{word.upper()}/x",
                 f"https://shop.example/super{word}store"]
    for first, second in zip(soft, soft[1:] + soft[:1]):
        urls += [f"https://forum.example/{first}/{second}", f"https://forum.example/{first}-story"]
    for word in subwords:
        urls += [f"https://www.ex{word}ample.com/", f"https://a.example/{word[:-1]}-{word[-1]}"]
    words = ["news", "weather", "science", "garden", "python", "river", "music", "travel", "recipes", "history"]
    for _ in range(500):
        host = f"{rng.choice(words)}{rng.randint(1, 999)}.{rng.choice(['com', 'org', 'co.uk', 'de', 'github.io'])}"
        urls.append(f"https://{host}/{rng.choice(words)}/{rng.choice(words)}-{rng.randint(1, 99)}.html")
    return urls


def main() -> None:
    stage = URLFilter()
    stage.download_data()
    urls = urls_from(stage, random.Random(int(os.environ.get("SEED", "7"))))
    rows = []
    for index, url in enumerate(urls):
        result = stage.filter(Document(text="", id=str(index), metadata={"url": url}))
        rows.append({"url": url, "rule": None if result is True else result[1]})
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    main()
