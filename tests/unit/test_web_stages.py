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
from curator_array.stages.web.language import LanguageFilter
from curator_array.stages.web.quality import (
    C4QualityFilter,
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
    for stage in (GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter()):
        result = quality(texts, ["en", "de", "ja"], stage)
        assert result.num_rows == 3, (stage.name, result.counters.dropped)


def test_japanese_is_counted_in_characters_and_has_its_own_stop_words():
    result = quality(["\n".join(ARTICLES["ja"])], ["ja"], GopherQualityFilter())
    [row] = result.table.to_pylist()
    assert row["gopher_word_count"] > 200 and row["gopher_stop_words"] >= 10
    as_english = quality(["\n".join(ARTICLES["ja"])], ["en"], GopherQualityFilter())
    assert as_english.num_rows == 0, "read as English it is a handful of very long 'words'"


@pytest.mark.parametrize("text,stage,rule", [
    ("Too short to be a page.", GopherQualityFilter(), "word_count"),
    ("\n".join(["Buy cheap shoes now at the very best price, online and today."] * 20), GopherRepetitionFilter(),
     "duplicate_lines"),
    ("\n".join(" ".join(f"#{w}" for w in line.split()) for line in ARTICLES["en"]), GopherQualityFilter(),
     "symbol_ratio"),
    ("\n".join(ARTICLES["en"]).replace("the ", "").replace("and ", "").replace(" of ", " ").replace(" to ", " ")
     .replace(" with ", " ").replace(" that ", " "), GopherQualityFilter(), "stop_words"),
    ("\n".join(ARTICLES["en"]) + "\nfunction f() { return 1; }.", C4QualityFilter(), "curly_bracket"),
    ("\n".join(ARTICLES["en"][:3]), C4QualityFilter(), "too_few_sentences"),
])
def test_each_rule_counts_its_own_drops(text, stage, rule):
    result = quality([text, "\n".join(ARTICLES["de"])], ["en", "de"], stage)
    assert result.num_rows == 1
    assert {k: v for k, v in result.counters.dropped.items() if v} == {f"{stage.name}.{rule}": 1}


def test_c4_removes_lines_and_keeps_the_cleaned_text():
    text = "\n".join(["Menu Home Shop", *ARTICLES["en"], "This site uses cookies to work well.",
                      "Please enable Javascript to see the comments."])
    [row] = quality([text], ["en"], C4QualityFilter()).table.to_pylist()
    assert row["text"] == "\n".join(ARTICLES["en"]) and row["c4_lines_removed"] == 3


def test_commoncrawl_pipeline_by_name(tmp_path):
    options = PipelineOptions("", str(tmp_path / "out"), input_file_type="warc", languages=("en", "de"))
    pipeline = load_pipeline("commoncrawl", options)
    assert [s.stage_name for s in pipeline.stages] == [
        "warc_reader", "html_extract", "language", "gopher_quality", "gopher_repetition", "c4_quality",
        "parquet_writer"]
    fingerprint = pipeline.fingerprint()
    assert (fingerprint["input"], fingerprint["output"]) == ("warc", "parquet")
    assert fingerprint["stages"][2]["params"]["languages"] == ["de", "en"]
    with pytest.raises(ConfigError, match="reads WARC files"):
        load_pipeline("commoncrawl", PipelineOptions(str(tmp_path), str(tmp_path / "out")))
    with pytest.raises(ConfigError, match="built-in name \\(commoncrawl\\)"):
        load_pipeline("crawl", options)


def format_table_rows() -> list[str]:
    """The README's format table as the catalog says it must read."""
    from curator_array.formats import FORMATS

    def cell(available, notes):
        return ("yes" + (f" ({notes})" if notes else "")) if available else "no"

    return [f"| `{fmt.name}` | {', '.join(f'`{s}`' for s in fmt.suffixes)} | {cell(fmt.reader, fmt.reader_notes)} | "
            f"{cell(fmt.writer, fmt.writer_notes)} |" for fmt in FORMATS.values()]


def test_every_registered_format_is_offered_and_documented(capsys):
    from curator_array.cli import main

    readme = (REPO / "README.md").read_text().splitlines()
    header = readme.index("| format | suffixes | read | write |")
    table = readme[header + 2:readme.index("", header)]
    assert table == format_table_rows(), "README's format table differs from the catalog (formats/__init__.py)"
    main(["run", "--help"])
    help_text = capsys.readouterr().out
    assert "[jsonl|jsonl.gz|parquet|warc]" in help_text and "[jsonl|jsonl.gz|parquet]" in help_text
    assert "INPUT_FILE_TYPE (jsonl|jsonl.gz|parquet|warc)" in (REPO / "site_configs" / "local.sbatch").read_text()
