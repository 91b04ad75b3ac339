"""The web payload without Ray: WARC reading, extraction, language, quality rules."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from curator_array.core.errors import ConfigError
from curator_array.formats import get_format, reader_for
from curator_array.formats.warc import WarcReader
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.stages.tasks import DocumentBatch, FileGroupTask
from curator_array.stages.web.extract import HtmlExtractor
from curator_array.stages.web.fineweb_quality import FineWebQualityFilter, ends_sentences
from curator_array.stages.web.language import LanguageFilter
from curator_array.stages.web.pii import PiiFormatter, anonymised
from curator_array.stages.web.quality import (
    C4QualityFilter,
    GopherFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from tests.conftest import REPO
from tests.support.warcs import Page, record_id_of, write_warc
from tests.web_pages import ARTICLES, BOILERPLATE, TITLES, html_page, pages


def read_all(path, **kwargs):
    return list(WarcReader(**kwargs).process(FileGroupTask("t", files=[str(path)])))


def test_warc_is_a_registered_input_format():
    fmt = get_format("warc")
    assert fmt.suffixes == (".warc", ".warc.gz") and fmt.writer is None
    assert isinstance(reader_for("warc"), WarcReader)
    with pytest.raises(ConfigError, match="output file type 'warc' is not supported"):
        get_format("warc", "output")


@pytest.mark.parametrize("compress", [True, False])
def test_reader_rows_and_counted_skips(tmp_path, compress):
    records, expected = pages()
    path = tmp_path / ("a.warc.gz" if compress else "a.warc")
    write_warc(path, records, compress=compress)
    [part] = read_all(path)
    html_urls = [u for u, e in expected.items() if "skipped" not in e]
    assert part.table.column("url").to_pylist() == html_urls
    assert part.table.column("id").to_pylist() == [record_id_of(u) for u in html_urls]
    assert set(part.table.column("content_type").to_pylist()) == {"text/html"}
    assert part.table.column("date").to_pylist()[0] == "2024-05-01T12:00:00Z"
    assert TITLES["ja"] in part.table.column("html").to_pylist()[2]
    assert part.counters.skipped == {"non_html_records": 1, "truncated_records": 1}
    assert part.counters.rows_read == len(html_urls) and part.counters.bytes_read == path.stat().st_size


def test_reader_streams_in_numbered_parts(tmp_path):
    records, _ = pages()
    write_warc(tmp_path / "a.warc.gz", records)
    parts = read_all(tmp_path / "a.warc.gz", records_per_batch=3)
    assert [p.part for p in parts] == [0, 1, 2]
    assert [p.num_rows for p in parts] == [3, 3, 1]
    assert sum((p.counters for p in parts), parts[0].counters.__class__()).skipped == {
        "non_html_records": 1, "truncated_records": 1}
    assert sum(p.counters.bytes_read for p in parts) == (tmp_path / "a.warc.gz").stat().st_size


def test_corrupt_gzip_member_fails_the_task_naming_file_and_offset(tmp_path):
    records, _ = pages()
    path = tmp_path / "bad.warc.gz"
    offsets = write_warc(path, records[:4])
    data = bytearray(path.read_bytes())
    data[offsets[2] + 30: offsets[2] + 50] = b"\0" * 20
    path.write_bytes(bytes(data))
    outputs = read_all(path, records_per_batch=2)
    assert [type(o).__name__ for o in outputs] == ["DocumentBatch", "FailedTask"]
    assert outputs[0].num_rows == 2, "the records before the damage were read"
    assert outputs[1].reason.startswith(f"{path}: corrupt gzip member at byte offset {offsets[2]} ")


def test_reader_memory_does_not_grow_with_the_file(tmp_path):
    """A 150 MB WARC read in parts of 32 records (of 100 kB each) stays far below its size."""
    big = tmp_path / "big.warc"
    filler = "<p>" + "river valley water stone " * 4000 + "</p>"
    write_warc(big, (Page(f"https://big.example/{i}", html_page("Big", [filler]).encode()) for i in range(1500)),
               compress=False)
    size = big.stat().st_size
    script = textwrap.dedent(f"""
        import resource, sys
        from curator_array.formats.warc import WarcReader
        from curator_array.stages.tasks import FileGroupTask
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows = sum(p.num_rows for p in WarcReader(records_per_batch=32).process(FileGroupTask("t", files=[{str(big)!r}])))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(rows, (after - before) * 1024)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    rows, growth = map(int, out.stdout.split())
    assert rows == 1500 and size > 140 * 2**20
    assert growth < 60 * 2**20, f"peak RSS grew by {growth / 2**20:.0f} MiB reading a {size / 2**20:.0f} MiB file"


@pytest.mark.parametrize("extractor", ["resiliparse", "trafilatura"])
def test_extraction_keeps_the_article_and_drops_boilerplate(extractor):
    html = html_page(TITLES["en"], ARTICLES["en"])
    batch = DocumentBatch("t", {}, table=pa.table({"html": [html, "<html><body></body></html>"], "url": ["a", "b"]}))
    stage = HtmlExtractor(extractor)
    stage.setup()
    result = stage.process(batch)
    [text] = result.table.column("text").to_pylist()
    assert all(sentence in text for sentence in ARTICLES["en"])
    assert not any(noise in text for noise in BOILERPLATE) and "window.analytics" not in text
    assert "html" not in result.table.column_names
    assert result.counters.dropped == {"html_extract.no_main_text": 1}


def test_language_column_keep_list_and_threshold():
    texts = ["\n".join(ARTICLES[lang]) for lang in ("en", "de", "ja", "es")]
    batch = DocumentBatch("t", {}, table=pa.table({"text": texts}))
    result = LanguageFilter(["en", "de", "ja"]).process(batch)
    assert result.table.column("language").to_pylist() == ["en", "de", "ja"]
    assert all(score > 0.9 for score in result.table.column("language_score").to_pylist())
    assert result.counters.dropped == {"language.not_kept": 1, "language.low_score": 0}
    strict = LanguageFilter((), min_score=0.999999).process(batch)
    assert strict.counters.dropped["language.low_score"] >= 1
    with pytest.raises(ConfigError, match="between 0 and 1"):
        LanguageFilter(min_score=2)


def quality(texts, languages, stage):
    return stage.process(DocumentBatch("t", {}, table=pa.table({"text": texts, "language": languages})))


def test_good_pages_in_three_languages_pass_every_rule():
    texts = ["\n".join(ARTICLES[lang]) for lang in ("en", "de", "ja")]
    for stage in (GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter(), FineWebQualityFilter()):
        result = quality(texts, ["en", "de", "ja"], stage)
        assert result.num_rows == 3, (stage.name, result.counters.dropped)


def test_one_gopher_stage_decides_and_counts_as_repetition_then_quality():
    """The words are split once, explicitly, and nothing depends on two stages being fused."""
    texts = ["\n".join(ARTICLES[lang]) for lang in ("en", "de", "ja")]
    texts += ["Too short to be a page.", "\n".join(["Buy cheap shoes now at the very best price."] * 20),
              "\n".join(" ".join(f"#{w}" for w in line.split()) for line in ARTICLES["en"])]
    languages = ["en", "de", "ja", "en", "en", "en"]
    both = quality(texts, languages, GopherFilter())
    first = quality(texts, languages, GopherRepetitionFilter())
    second = GopherQualityFilter().process(first)
    assert both.table.to_pylist() == second.table.to_pylist()
    assert both.counters.dropped == second.counters.dropped
    assert {rule for rule, count in both.counters.dropped.items() if count} == {
        "gopher_repetition.top_2gram", "gopher_repetition.duplicate_lines", "gopher_quality.hash_ratio"}


def test_japanese_is_segmented_into_words_and_has_its_own_stop_words():
    text = "\n".join(ARTICLES["ja"])
    result = quality([text], ["ja"], GopherQualityFilter())
    [row] = result.table.to_pylist()
    assert 100 < row["gopher_word_count"] < len(text) / 1.2, "words, neither characters nor whole sentences"
    assert 1.2 < row["gopher_mean_word_length"] < 3 and row["gopher_stop_words"] >= 10
    as_english = quality([text], ["en"], GopherQualityFilter())
    assert as_english.counters.dropped["gopher_quality.word_count"] == 1, "as English: a handful of long 'words'"


def test_word_tokenizers_split_as_the_references_do():
    from curator_array.text.segmenters import jieba, spaced, sudachi

    assert spaced("Mount /boot/efi, e.g. at https://x.org/a-b (see 1.4.4).") == [
        "Mount", "/boot", "/", "efi", ",", "e.g.", "at", "https://x.org/a-b", "(", "see", "1.4.4", ")", "."]
    assert spaced("Don't stop-and-go", "en") == ["Do", "n't", "stop", "-", "and", "-", "go"]
    assert spaced("Don't stop-and-go", "de") == ["Don't", "stop-and-go"]
    assert spaced("l'homme dites-vous", "fr") == ["l'", "homme", "dites", "-vous"]
    assert sudachi("東京都に住んでいます") == ["東京", "都", "に", "住ん", "で", "い", "ます"]
    assert jieba("我们在北京学习中文") == ["我们", "在", "北京", "学习", "中文"]
    assert spaced(" a b\n") == ["a", "b"] and spaced("") == []
    # spaCy's German: stops stay on numbers and abbreviations, a URL's final slash comes off,
    # emoticons stay whole (in every language)
    german = "Kapitel 4.8. usw. (siehe http://deb.debian.org/debian/ und ::1 :) »Sid« im Debian-Projekt"
    assert spaced(german, "de") == [
        "Kapitel", "4.8.", "usw.", "(", "siehe", "http://deb.debian.org/debian", "/", "und", ":", ":1", ":)", "»",
        "Sid", "«", "im", "Debian-Projekt"]
    assert spaced("Kapitel 4.8. See http://x.org/a. It works :)", "en") == [
        "Kapitel", "4.8", ".", "See", "http://x.org/a", ".", "It", "works", ":)"]


@pytest.mark.parametrize("text,stage,rule", [
    ("Too short to be a page.", GopherQualityFilter(), "word_count"),
    ("\n".join(["Buy cheap shoes now at the very best price, online and today."] * 20), GopherRepetitionFilter(),
     "duplicate_lines"),
    ("\n".join(" ".join(f"#{w}" for w in line.split()) for line in ARTICLES["en"]), GopherQualityFilter(),
     "hash_ratio"),
    ("\n".join(ARTICLES["en"]).replace("the ", "").replace("and ", "").replace(" of ", " ").replace(" to ", " ")
     .replace(" with ", " ").replace(" that ", " "), GopherQualityFilter(), "stop_words"),
    ("\n".join(ARTICLES["en"]) + "\nfunction f() { return 1; }.", C4QualityFilter(), "curly_bracket"),
    ("\n".join(ARTICLES["en"][:3]), C4QualityFilter(), "too_few_sentences"),
    ("\n".join(line.rstrip(".") + " " for line in ARTICLES["en"]), FineWebQualityFilter(), "line_punct_ratio"),
    ("\n".join([*ARTICLES["en"], *(f"Item {i}" for i in range(30))]), FineWebQualityFilter(), "short_line_ratio"),
    ("\n".join([*ARTICLES["en"], ARTICLES["en"][0], ARTICLES["en"][0]]), FineWebQualityFilter(), "char_dup_ratio"),
    ("\n".join(f"Extraordinarily{i} incomprehensibilities." for i in range(20)), FineWebQualityFilter(),
     "list_ratio"),
    ("  \n\n", FineWebQualityFilter(), "empty"),
])
def test_each_rule_counts_its_own_drops(text, stage, rule):
    result = quality([text, "\n".join(ARTICLES["de"])], ["en", "de"], stage)
    assert result.num_rows == 1
    assert {k: v for k, v in result.counters.dropped.items() if v} == {f"{stage.name}.{rule}": 1}


def test_fineweb_rules_follow_each_language_and_read_lines_as_written():
    german = "\n".join(line.rstrip(".") for line in ARTICLES["de"])
    doubled = "\n".join([*ARTICLES["de"], "Mehr dazu lesen.", "Mehr dazu lesen."])
    result = quality([german, doubled, doubled, "\n".join(line + " " for line in ARTICLES["en"])],
                     ["de", "de", "en", "en"], FineWebQualityFilter())
    assert result.table.column("text").to_pylist() == [german, doubled], \
        "German has no punctuated-line minimum and allows 10% repeated characters; a trailing space hides the stop"
    assert {rule: n for rule, n in result.counters.dropped.items() if n} == {
        "fineweb_quality.char_dup_ratio": 1, "fineweb_quality.line_punct_ratio": 1}
    assert ends_sentences(pa.array(["。", "।", "?", "៚", ",", "a"])).tolist() == [True] * 4 + [False] * 2


def test_c4_removes_lines_and_keeps_the_cleaned_text():
    text = "\n".join(["Menu Home", *ARTICLES["en"], "This site uses cookies to work well.",
                      "Please enable Javascript to see the comments.", "Read the whole story here..."])
    [row] = quality([text], ["en"], C4QualityFilter()).table.to_pylist()
    assert row["text"] == "\n".join([*ARTICLES["en"], "Read the whole story here..."]), "FineWeb: no terminal rule"
    assert row["c4_lines_removed"] == 3
    [row] = quality([text], ["en"], C4QualityFilter(terminal_punctuation=True)).table.to_pylist()
    assert row["text"] == "\n".join(ARTICLES["en"]) and row["c4_lines_removed"] == 4, "C4's own: '...' is no end"


def test_c4_counts_sentences_as_a_sentence_splitter_does():
    page = ["Section 1.4.4, as shown, covers the setup of the machine.", 'He said "stop." Then he left the room.',
            "Es ist gut. Wirklich gut. Sehr gut so.", "One more line without an end"]
    [row] = quality(["\n".join(page)], ["en"], C4QualityFilter(min_sentences=1)).table.to_pylist()
    from curator_array.stages.web.textstats import has_sentences, sentences_in
    assert [sentences_in(line, "en") for line in page] == [1, 2, 3, 1]
    assert row["text"] == "\n".join(page)
    assert has_sentences(page, "en", 7) and not has_sentences(page, "en", 8)
    [row] = quality(["\n".join(page)], ["en"], C4QualityFilter(min_sentences=8)).table.to_pylist() or [None]
    assert row is None, "7 sentences are too few for 8"


def test_c4_leaves_languages_it_is_not_set_for_untouched():
    text = "\n".join(["Kurz", *ARTICLES["de"], "lorem ipsum {"])
    [row] = quality([text], ["de"], C4QualityFilter()).table.to_pylist()
    assert row["text"] == text and row["c4_lines_removed"] == 0


def test_repetition_counts_repeats_only_over_the_whole_text():
    import numpy as np

    from curator_array.stages.web.textstats import (
        RepeatedNGrams,
        greedy_duplicate_chars,
        most_frequent_ngram_chars,
    )

    words = "a b c d e a b c d e x a b c d e".split()
    ids, lengths = np.array([ord(w) for w in words]), np.ones(len(words))
    repeats = RepeatedNGrams(ids, lengths, np.zeros(len(words), dtype=np.int64))
    assert most_frequent_ngram_chars(repeats, 1, 2).tolist() == [3.0 * 3], "'a b' thrice, with its space"
    # scan: "a b c d e" first seen at 0; found again at 5 (5 chars), jump to 10: "x a b c d" new,
    # then "a b c d e" at 11 is a repeat again (5 chars)
    assert greedy_duplicate_chars(repeats, 1, 5).tolist() == [10.0]


def _reference_top_chars(words: list[str], n: int) -> int:
    from collections import Counter

    grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0
    gram, count = Counter(grams).most_common(1)[0]
    return len(gram) * count


def _reference_duplicate_chars(words: list[str], n: int) -> int:
    seen, total, index = set(), 0, 0
    while index <= len(words) - n:
        gram = " ".join(words[index:index + n])
        if gram in seen:
            total += len(gram.replace(" ", ""))
            index += n
        else:
            seen.add(gram)
            index += 1
    return total


def test_repeated_ngrams_count_as_the_reference_in_every_document_and_any_order_of_sizes():
    """Counting each n-gram size from the shorter sizes' repeats finds what counting every
    n-gram finds: documents of few words drawn from a small vocabulary, so that they repeat."""
    import random

    import numpy as np

    from curator_array.stages.web.textstats import (
        RepeatedNGrams,
        greedy_duplicate_chars,
        most_frequent_ngram_chars,
    )

    rng = random.Random(5)
    documents = [[rng.choice("ab cd e fgh i".split()) for _ in range(rng.randint(0, 40))] for _ in range(300)]
    flat = [word for words in documents for word in words]
    vocabulary = sorted(set(flat))
    ids = np.array([vocabulary.index(word) for word in flat])
    lengths = np.array([len(word) for word in flat], dtype=np.float64)
    parents = np.repeat(np.arange(len(documents)), [len(words) for words in documents])
    for sizes in ([2, 3, 4, 5, 6, 7, 8, 9, 10], [3, 7, 4, 10]):
        repeats = RepeatedNGrams(ids, lengths, parents)
        for n in sizes:
            assert most_frequent_ngram_chars(repeats, len(documents), n).tolist() == \
                [_reference_top_chars(words, n) for words in documents], n
            assert greedy_duplicate_chars(repeats, len(documents), n).tolist() == \
                [_reference_duplicate_chars(words, n) for words in documents], n


def test_commoncrawl_pipeline_by_name(tmp_path):
    options = PipelineOptions.of("", tmp_path / "out", input_file_type="warc", languages=("en", "de"))
    pipeline = load_pipeline("commoncrawl", options)
    assert [s.stage_name for s in pipeline.stages] == [
        "warc_reader", "html_extract", "language", "gopher", "c4_quality", "fineweb_quality", "parquet_writer"]
    fingerprint = pipeline.fingerprint()
    assert (fingerprint["input"], fingerprint["output"]) == ("warc", "parquet")
    assert fingerprint["stages"][2]["params"]["languages"] == ["de", "en"]
    with pytest.raises(ConfigError, match="reads WARC files"):
        load_pipeline("commoncrawl", PipelineOptions(str(tmp_path), str(tmp_path / "out")))
    with pytest.raises(ConfigError, match="built-in name \\(commoncrawl, dclm, fineweb\\)"):
        load_pipeline("crawl", options)


def format_table_rows() -> list[str]:
    """The format table of docs/options.md as the catalog says it must read."""
    from curator_array.formats import FORMATS

    def cell(available, notes):
        return ("yes" + (f" ({notes})" if notes else "")) if available else "no"

    return [f"| `{fmt.name}` | {', '.join(f'`{s}`' for s in fmt.suffixes)} | {cell(fmt.reader, fmt.reader_notes)} | "
            f"{cell(fmt.writer, fmt.writer_notes)} |" for fmt in FORMATS.values()]


def test_every_registered_format_is_offered_and_documented(capsys):
    from curator_array.cli import main

    doc = (REPO / "docs" / "options.md").read_text().splitlines()
    header = doc.index("| format | suffixes | read | write |")
    table = doc[header + 2:doc.index("", header)]
    assert table == format_table_rows(), "docs/options.md's format table differs from the catalog (formats/__init__.py)"
    main(["run", "--help"])
    help_text = capsys.readouterr().out
    assert "[jsonl|jsonl.gz|parquet|warc]" in help_text and "[jsonl|jsonl.gz|parquet]" in help_text
    assert "INPUT_FILE_TYPE (jsonl|jsonl.gz|parquet|warc)" in (REPO / "site_configs" / "local.sbatch").read_text()


def test_quality_settings_file_overrides_one_language_and_is_checked(tmp_path):
    from curator_array.core.fingerprint import describe_changes
    from curator_array.stages.web.languages import language_rules

    custom = tmp_path / "quality.toml"
    custom.write_text('[ja]\nmin_words = 30\n[th]\ntokenizer = "none"\nmin_words = 10\n')
    settings = language_rules(custom)
    assert settings["ja"].min_words == 30 and settings["ja"].segmenter == "sudachi", "one key, the rest kept"
    assert settings["th"].min_words == 10 and settings["th"].max_words == settings["default"].max_words
    options = dict(input_file_type="warc")
    before = load_pipeline("commoncrawl", PipelineOptions("", str(tmp_path / "o"), **options)).fingerprint()
    after = load_pipeline("commoncrawl", PipelineOptions("", str(tmp_path / "o"), quality_settings=str(custom),
                                                         **options)).fingerprint()
    changes = describe_changes(before, after)
    assert "languages.ja.min_words: 50 → 30 (stage gopher)" in changes
    for text, message in [("[ja]\nmin_wrds = 3\n", "unknown key"), ("[ja]\nmin_words = -1\n", "must be a number >= 0"),
                          ('[ja]\ntokenizer = "mecab"\n', "'mecab' is not one of"), ("[ja\n", "invalid TOML"),
                          ("[ja]\ntop_n_grams = [[2]]\n", "list of \\[n, limit\\] pairs")]:
        custom.write_text(text)
        with pytest.raises(ConfigError, match=message):
            language_rules(custom)
    with pytest.raises(ConfigError, match="cannot read quality settings"):
        language_rules(tmp_path / "missing.toml")


def test_word_count_ignores_whitespace_at_the_edges():
    from curator_array.stages.filters import WordCountFilter

    texts = [" a b\n", "\u3000a\xa0b c ", "", "   ", "one"]
    batch = DocumentBatch("t", {}, table=pa.table({"text": texts}))
    kept = WordCountFilter(min_words=2, max_words=2).process(batch)
    assert kept.table.column("text").to_pylist() == [" a b\n"], "str.split() counts: 2, 3, 0, 0, 1"


def test_pii_replaces_addresses_in_turn_per_document_and_keeps_private_ips():
    text = "Mail a.b@mail.example.net, c+d@uni-x.de or e@f.org; hosts 8.8.8.8, 192.168.1.1, 9.9.9.9, 1.1.1.1."
    expected = ("Mail email@example.com, firstname.lastname@example.org or email@example.com; hosts "
                "22.214.171.124, 192.168.1.1, 126.96.36.199, 188.8.131.52.")
    result = PiiFormatter().process(DocumentBatch("t", {}, table=pa.table({"text": [text, "no address", text]})))
    assert result.table.column("text").to_pylist() == [expected, "no address", expected], \
        "the turn restarts with each document"
    assert anonymised("versions 01.2.3.4, 3.14 and 300.1.1.1") == "versions 01.2.3.4, 3.14 and 300.1.1.1"


def test_batch_words_split_as_each_document_alone_does():
    """Cutting a batch at whitespace with Arrow and splitting each distinct chunk once gives
    every document the words its own segmenter gives it, in order, whatever the languages
    and whitespace around them."""
    from curator_array.stages.web.textstats import batch_words, flatten_words, split_words

    texts = ["  The cat's (small) hat, e.g. U.S.A.  ", "", "Ein Satz: 4.8. usw. Debian-Projekt »Sid«",
             "x\u2028y\x1cz\u3000w\u00a0v :-) don't", "ภาษาไทย ไม่มีช่องว่าง", "The cat's hat again.\n\nThe end."]
    codes = ["en", "en", "de", "en", "th", "fr"]
    kinds = ["spaced", "spaced", "spaced", "spaced", "none", "spaced"]
    words, parents = batch_words(pa.array(texts, pa.large_string()), codes, kinds)
    expected_words, expected_parents = flatten_words(split_words(texts, codes, kinds))
    assert words.to_pylist() == expected_words.to_pylist()
    assert parents.tolist() == expected_parents.tolist()
    assert "U.S.A." in words.to_pylist() and "\u00a0" not in "".join(words.to_pylist())
