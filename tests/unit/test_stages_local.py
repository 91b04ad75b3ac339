"""Stages are plain Python: they can be tested without Ray."""

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from curator_array.core.errors import ConfigError
from curator_array.examples.quality import AlphabeticRatioFilter
from curator_array.formats.jsonl import GzipJsonlWriter, JsonlReader, JsonlWriter
from curator_array.formats.parquet import ParquetReader, ParquetWriter
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline, load_pipeline
from curator_array.stages.filters import (
    ExactDuplicateFilter,
    FilterStage,
    NonEmptyTextFilter,
    WordCountFilter,
)
from curator_array.stages.tasks import DocumentBatch, FailedTask, FileGroupTask, WrittenFiles


def batch(texts):
    return DocumentBatch("t1", {}, table=pa.table({"text": texts, "n": list(range(len(texts)))}))


def test_filters_on_awkward_values():
    texts = ["", "  \n", None, "one", "two words", "two words", "trois mots ici", "über straße ünïcode"]
    assert NonEmptyTextFilter().process(batch(texts)).table.column("n").to_pylist() == [3, 4, 5, 6, 7]
    assert WordCountFilter(2, 2).process(batch(texts)).table.column("n").to_pylist() == [4, 5]
    kept = ExactDuplicateFilter().process(batch(texts))
    assert kept.table.column("n").to_pylist() == [0, 1, 2, 3, 4, 6, 7]
    assert kept.counters.dropped == {"exact_dedup": 1}
    twice = WordCountFilter(2, 2).process(kept)
    assert twice.counters.dropped == {"exact_dedup": 1, "word_count": 6}


def test_filter_without_text_field_fails_the_task():
    task = DocumentBatch("t9", {"source_files": ["/x/a.jsonl"]}, table=pa.table({"body": ["a"]}))
    result = NonEmptyTextFilter().process(task)
    assert isinstance(result, FailedTask) and "'text'" in result.reason and "a.jsonl" in result.reason


def test_word_count_bounds_validation():
    with pytest.raises(ConfigError, match="inverted"):
        WordCountFilter(5, 2)
    with pytest.raises(ConfigError, match="needs a minimum"):
        WordCountFilter()


def test_jsonl_reader_gz_empty_and_malformed(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n\n{"text": "y"}\n')
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as fh:
        fh.write('{"text": "z"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": \n{"text": "ok2"}\n')
    files = [str(tmp_path / n) for n in ("a.jsonl", "b.jsonl.gz", "empty.jsonl")]
    result = JsonlReader().process(FileGroupTask("t1", files=files))
    assert result.table.column("text").to_pylist() == ["x", "y", "z"]
    assert result.counters.rows_read == 3
    assert result.counters.bytes_read == sum(os.path.getsize(f) for f in files)
    failed = JsonlReader().process(FileGroupTask("t2", files=[str(tmp_path / "bad.jsonl")]))
    assert isinstance(failed, FailedTask)
    assert "bad.jsonl: line 2: malformed JSON record" in failed.reason
    skipped = JsonlReader("skip").process(FileGroupTask("t2", files=[str(tmp_path / "bad.jsonl")]))
    assert skipped.table.column("text").to_pylist() == ["ok", "ok2"]
    assert skipped.counters.skipped == {"malformed_lines": 1}


def test_truncated_parquet_fails_naming_the_file(tmp_path):
    pq.write_table(pa.table({"text": ["a"] * 1000}), tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    result = ParquetReader().process(FileGroupTask("t1", files=[str(tmp_path / "t.parquet")]))
    assert isinstance(result, FailedTask) and "t.parquet: unreadable Parquet file" in result.reason


def read_jsonl_file(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("writer_cls,read_back", [
    (JsonlWriter, read_jsonl_file),
    (GzipJsonlWriter, read_jsonl_file),
    (ParquetWriter, lambda path: pq.read_table(path).to_pylist()),
])
def test_writers_are_atomic_deterministic_and_overwrite(tmp_path, writer_cls, read_back):
    writer = writer_cls(tmp_path / "out")
    first = writer.process(batch(["a", "é", None]))
    assert isinstance(first, WrittenFiles) and first.rows_written == 3
    data = open(first.files[0], "rb").read()
    assert read_back(first.files[0]) == [{"text": "a", "n": 0}, {"text": "é", "n": 1}, {"text": None, "n": 2}]
    again = writer.process(batch(["a", "é", None]))
    assert again.files == first.files and open(again.files[0], "rb").read() == data
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"t1{writer_cls.suffix}"]


def test_a_writer_that_fails_midway_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    writer = ParquetWriter(tmp_path / "out")
    first = writer.process(batch(["kept"]))
    before = open(first.files[0], "rb").read()

    def half_written(table, file):
        file.write(b"PAR1 half")
        file.flush()
        raise OSError("disk full")

    monkeypatch.setattr(writer, "write_table", half_written)
    with pytest.raises(OSError, match="disk full"):
        writer.process(batch(["new", "rows"]))
    assert os.listdir(tmp_path / "out") == [Path(first.files[0]).name]
    assert open(first.files[0], "rb").read() == before


def test_example_pipeline_and_loader(tmp_path):
    options = PipelineOptions.of(str(tmp_path), str(tmp_path / "out"), dedup_within_task=True)
    pipeline = load_pipeline("curator_array.examples.quality:build_pipeline", options)
    assert [s.stage_name for s in pipeline.stages] == ["jsonl_reader", "exact_dedup", "alphabetic_ratio", "jsonl_writer"]
    kept = AlphabeticRatioFilter(0.8).process(batch(["plain words here", "1234 5678 ||| <>", ""]))
    assert kept.table.column("n").to_pylist() == [0]
    assert kept.table.column("alphabetic_ratio").to_pylist() == [1.0]
    with pytest.raises(ConfigError, match="or the form package.module:function"):
        load_pipeline("no_colon", options)
    with pytest.raises(ConfigError, match="cannot import"):
        load_pipeline("not_a_module_xyz:build", options)
    with pytest.raises(ConfigError, match="two stages are named"):
        Pipeline(options.source(), [options.reader(), options.reader(), options.writer()])


def test_a_pipeline_must_end_in_a_writer(tmp_path):
    options = PipelineOptions.of(str(tmp_path), str(tmp_path / "out"), drop_empty=True)
    with pytest.raises(ConfigError, match=r"ends in 'non_empty_text', which is not a writer"):
        Pipeline(options.source(), [options.reader(), *options.filters()])
    (tmp_path / "no_writer.py").write_text(
        "def build(options):\n    return [options.reader()]\n")
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ConfigError, match="'jsonl_reader', which is not a writer"):
            load_pipeline("no_writer:build", options)
    finally:
        sys.path.remove(str(tmp_path))


class ShortTextFilter(FilterStage):
    """A user filter: subclasses FilterStage and writes only the decision."""

    name = "short_text"

    def keep(self, text):
        return pc.less(pc.utf8_length(text), 4)


def test_user_filter_gets_counting_and_field_checks_from_the_base():
    result = ShortTextFilter().process(batch(["abc", "abcdef", None, "xy"]))
    assert result.table.column("n").to_pylist() == [0, 3]
    assert result.counters.dropped == {"short_text": 2}
    missing = ShortTextFilter("body").process(batch(["a"]))
    assert isinstance(missing, FailedTask) and "no 'body' field" in missing.reason
    numbers = DocumentBatch("t2", {}, table=pa.table({"text": [1, 2]}))
    wrong = ShortTextFilter().process(numbers)
    assert isinstance(wrong, FailedTask) and "has type int64, expected strings" in wrong.reason


def test_word_count_is_the_same_on_the_ascii_fast_path_and_with_unicode_spaces():
    ascii_only = batch(["one two  three", "four\tfive", ""])
    assert WordCountFilter(2, 2).process(ascii_only).table.column("n").to_pylist() == [1]
    wide = batch(["one\u3000two", "one two", "ein\u00a0zwei drei"])
    assert WordCountFilter(2, 2).process(wide).table.column("n").to_pylist() == [0, 1]


@pytest.mark.parametrize("piece_bytes", [None, 1, 7])
def test_words_are_counted_as_str_split_counts_them_in_any_text_layout(piece_bytes, monkeypatch):
    """The byte-level count agrees with ``len(text.split())``, whole or in pieces: every Unicode
    space and ASCII control space, combining marks, CJK, emoji, characters that look like spaces but are not
    (U+200B, U+FEFF, U+180E), the last code points, nulls, sliced and chunked columns, both
    string types."""
    import random
    import sys

    from curator_array.stages import whitespace
    from curator_array.stages.whitespace import count_words

    if piece_bytes:  # columns counted in pieces of whole rows
        monkeypatch.setattr(whitespace, "PIECE_BYTES", piece_bytes)
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    rng = random.Random(1)
    alphabet = ["a", "b", "é", "e\u0301", "中文", "日本語", "😀", "👩\u200d💻", "\u200b", "\ufeff", "\u180e", "\u00ad",
                "\uffff", "\U0010ffff", "\u0300", "  ", "\x08", "\x7f", "\u0100", "\u2000\u3000", "x", *spaces]
    for _ in range(300):
        texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 30))) if rng.random() > 0.1 else None
                 for _ in range(rng.randint(1, 40))]
        column = pa.array(texts, type=rng.choice([pa.string(), pa.large_string()]))
        cut = rng.randint(0, len(texts) - 1)
        part = column.slice(cut)
        half = part.slice(0, len(part) // 2)
        expected = [len(t.split()) if t is not None else 0 for t in texts[cut:] + texts[cut:cut + len(half)]]
        assert count_words(pa.chunked_array([part, half])).to_pylist() == expected, texts[cut:]


def test_every_code_point_separates_words_exactly_when_python_calls_it_whitespace():
    """All 1.1 million code points, each between two letters and at either end of a row."""
    import sys

    from curator_array.stages.whitespace import count_words

    points = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    for texts in (["a" + c + "b" for c in points], [c + "b" for c in points], ["a" + c for c in points]):
        counts = count_words(pa.array(texts)).to_pylist()
        wrong = [hex(ord(t[1] if len(t) == 3 else t.strip("ab") or t[0])) for t, n in zip(texts, counts)
                 if n != len(t.split())]
        assert not wrong, wrong[:10]


def test_read_columns_streams_the_named_columns_of_jsonl_and_parquet(tmp_path, monkeypatch):
    """Dedup rereads curated files a batch at a time, its two columns only; fields it does
    not ask for are never parsed, so their types may change from line to line."""
    from curator_array.formats import reader_for

    monkeypatch.setattr("curator_array.formats.jsonl.BLOCK_BYTES", 1 << 14)
    monkeypatch.setattr("curator_array.formats.parquet.COLUMN_BATCH_ROWS", 700)
    rows = [{"id": i, "text": f"document {i}", "meta": [None, {"a": i}, i, "x"][i % 4],
             **({"language": "de"} if i % 3 else {})} for i in range(3000)]
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    (tmp_path / "a.jsonl").write_text(lines)
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as handle:
        handle.write(lines)
    pq.write_table(pa.Table.from_pylist([{"id": r["id"], "text": r["text"]} for r in rows]), tmp_path / "a.parquet")
    expected = [(r["text"], r.get("language")) for r in rows]
    for name, fmt in (("a.jsonl", "jsonl"), ("a.jsonl.gz", "jsonl"), ("a.parquet", "parquet")):
        tables = list(reader_for(fmt).read_columns(str(tmp_path / name), ("text", "language")))
        assert len(tables) > 1 and all(t.column_names == ["text", "language"] for t in tables), name
        got = [(t, lang) for table in tables for t, lang in zip(table["text"].to_pylist(), table["language"].to_pylist())]
        assert got == (expected if fmt == "jsonl" else [(t, None) for t, _ in expected]), name


def test_read_columns_holds_one_block_of_whole_lines_and_names_a_bad_line_after_the_first(tmp_path, monkeypatch):
    """A line longer than a block is read whole, a last line without its newline is read, and a
    malformed line after the first block fails naming the file (the first block's would fall
    back to the line-by-line reader)."""
    from curator_array.formats import reader_for
    from curator_array.stages.io import MalformedRecordError

    monkeypatch.setattr("curator_array.formats.jsonl.BLOCK_BYTES", 1000)
    texts = ["short", "x" * 5000, "after the long one", "last, without a newline"]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    tables = list(reader_for("jsonl").read_columns(str(tmp_path / "a.jsonl"), ("text",)))
    assert [t for table in tables for t in table["text"].to_pylist()] == texts
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(200)) + "{oops\n")
    with pytest.raises(MalformedRecordError, match=r"b.jsonl: malformed JSON record"):
        list(reader_for("jsonl").read_columns(str(tmp_path / "b.jsonl"), ("text",)))
