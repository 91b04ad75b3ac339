"""Web pages written for the tests: main text in several languages inside boilerplate.

Each good page has a navigation bar, a cookie banner and a footer around an article whose
paragraphs are real sentences, so it passes the Gopher and C4 rules. The bad pages each
break one rule family. ``expected`` says what the pipeline must do with every URL.
"""

from __future__ import annotations

from tests.support.warcs import Page

BOILERPLATE = ("Accept all cookies", "All rights reserved", "About our company")

ARTICLES = {
    "en": [
        "Rivers carve their valleys over thousands of years, and the work never really stops.",
        "The water carries sand and small stones that grind against the rock below it.",
        "In the upper course the slope is steep, so the river cuts down quickly into its bed.",
        "Farther along, the valley widens and the river begins to swing from side to side.",
        "Those wide bends are called meanders, and they move a little further with every flood.",
        "Near the sea the current slows down and drops the mud it has been carrying for weeks.",
        "Over time that mud builds a delta, a flat and fertile plain where many people farm.",
        "Geologists read the layers of a delta like pages of a book about past climates.",
    ],
    "de": [
        "Im Frühling beginnt die Arbeit im Garten mit dem Umgraben der Beete.",
        "Die Erde wird gelockert, damit Wasser und Luft an die Wurzeln gelangen können.",
        "Danach verteilt man reifen Kompost, der den Boden mit Nährstoffen versorgt.",
        "Kartoffeln und Zwiebeln kommen früh in die Erde, Tomaten erst nach den letzten Frösten.",
        "Wer Schnecken fernhalten möchte, sollte am Abend nicht mehr gießen.",
        "Im Sommer ist regelmäßiges Jäten wichtig, sonst wachsen die Kräuter schnell zu.",
        "Die Ernte im Herbst belohnt dann die Mühe der vergangenen Monate.",
        "Viele Gärtner führen ein kleines Heft, in dem sie Saat und Wetter notieren.",
    ],
    "ja": [
        "日本の山では、春になると雪がとけて川の水が増えます。",
        "農家の人たちはその水を田んぼに引いて、米作りの準備を始めます。",
        "五月には田植えが行われ、小さな苗が一列に並べて植えられます。",
        "夏の間は水の量を調べながら、雑草を取る作業が続きます。",
        "秋になると稲は黄金色に実り、家族みんなで稲刈りをします。",
        "収穫した米は乾かしてから、もみ殻を取って白い米にします。",
        "昔は手で行っていた作業も、今では機械を使うことが多くなりました。",
        "それでも、田んぼの景色は多くの人にとって大切な日本の風景です。",
    ],
    "es": [
        "La cocina de la costa usa mucho pescado fresco y aceite de oliva.",
        "En los mercados del puerto se vende el pescado que llega cada mañana.",
        "Los cocineros preparan sopas sencillas con tomate, ajo y pan del día anterior.",
        "En verano se comen platos fríos que ayudan a soportar el calor de la tarde.",
        "Las familias se reúnen los domingos para compartir una comida larga y tranquila.",
        "Muchas recetas pasan de abuelas a nietos sin que nadie las escriba nunca.",
    ],
}

TITLES = {"en": "How rivers shape valleys", "de": "Gartenjahr", "ja": "田んぼの一年", "es": "Cocina de la costa"}


def html_page(title: str, paragraphs: list[str], lang: str = "en") -> str:
    body = "\n".join(f"<p>{text}</p>" for text in paragraphs)
    return f"""<!DOCTYPE html><html lang="{lang}"><head><title>{title}</title>
<script>window.analytics = {{track: function() {{}}}};</script><style>p {{ margin: 1em; }}</style></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">{BOILERPLATE[2]}</a></li><li><a href="/shop">Shop</a></li></ul></nav>
<div id="cookie-banner" class="cookie-consent">We use cookies. <button>{BOILERPLATE[0]}</button></div>
<main><article><h1>{title}</h1>
{body}
</article></main>
<footer><p>Copyright 2024. {BOILERPLATE[1]}. Privacy policy | Terms of use</p></footer>
</body></html>"""


def pages(host: str = "site.example") -> tuple[list[Page], dict[str, dict]]:
    """The pages of one WARC file and, per URL, what must happen to it."""
    result: list[Page] = []
    expected: dict[str, dict] = {}

    def add(path: str, html: str | bytes, outcome: dict, **kwargs) -> None:
        url = f"https://{host}/{path}"
        result.append(Page(url, html.encode() if isinstance(html, str) else html, **kwargs))
        expected[url] = outcome

    for lang in ("en", "de", "ja"):
        add(f"{lang}/article", html_page(TITLES[lang], ARTICLES[lang], lang), {"kept": True, "language": lang})
    add("es/article", html_page(TITLES["es"], ARTICLES["es"], "es"), {"kept": False, "dropped_by": "language.not_kept"})
    # FineWeb's order: repetition runs first, and in 20 characters any 2-gram is over 20% of the text
    add("short", html_page("Sale", ["Buy shoes now."]), {"kept": False, "dropped_by": "gopher_repetition.top_2gram"})
    repeated = ["Cheap flights to every city in the world, book your cheap flights today."] * 30
    add("spam", html_page("Flights", repeated), {"kept": False, "dropped_by": "gopher_repetition.duplicate_paragraphs"})
    lorem = [*ARTICLES["en"][:6], "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor."]
    add("placeholder", html_page("Template", lorem), {"kept": False, "dropped_by": "c4_quality.lorem_ipsum"})
    add("logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(64)), {"kept": False, "skipped": "non_html_records"},
        content_type="image/png")
    add("cut", html_page(TITLES["en"], ARTICLES["en"]), {"kept": False, "skipped": "truncated_records"},
        truncate_to=200)
    return result, expected
