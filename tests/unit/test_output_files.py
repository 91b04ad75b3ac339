"""A streamed task's parts are written as row groups (or lines) of one file per task, rolled
over at a size; a file appears under its final name only complete, and its parts are handed
on (recorded) only then."""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_array.formats import writer_for
from curator_array.stages.apply import apply_stage
from curator_array.stages.tasks import (
    DocumentBatch,
    FailedTask,
    PartShown,
    TaskCounters,
    WrittenFiles,
)


def parts_of(task_id: str, tables: list[pa.Table], removed: dict[int, pa.Table] | None = None) -> list[DocumentBatch]:
    return [DocumentBatch(task_id, {}, TaskCounters(rows_read=table.num_rows), table=table, part=number,
                          final=number == len(tables) - 1,
                          removed={"word_count": removed[number]} if removed and number in removed else {})
            for number, table in enumerate(tables)]


def texts(count: int, start: int = 0) -> pa.Table:
    return pa.table({"text": [f"document {start + i} " + "words " * (i % 7) for i in range(count)],
                     "url": [f"https://example.com/{start + i}" for i in range(count)]})


def written(outputs) -> list:
    """The writer's outputs but the ``PartShown`` it sends for the progress line."""
    return [output for output in outputs if not isinstance(output, PartShown)]


def visible(directory) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def test_the_parts_of_a_task_are_the_row_groups_of_one_file_handed_on_when_it_is_in_place(tmp_path):
    writer = writer_for("parquet", tmp_path)
    tables = [texts(50, 50 * n) for n in range(4)]
    parts = parts_of("t", tables)
    outputs = apply_stage(writer, iter(parts))
    shown = [next(outputs) for _ in parts]  # what each part read, for the progress line, as it goes in
    assert [(type(s), s.part, s.counters.rows_read) for s in shown] == [(PartShown, n, 50) for n in range(4)]
    first = next(outputs)  # the written parts come once the file is in place
    assert visible(tmp_path) == ["t.00000.parquet"]
    assert list(outputs) == [], "one account of the four parts: one record line and one sync"
    assert first.shown and first.counters.rows_read == 200, "counted by the progress line already, and recorded"
    assert (first.part, first.parts, first.final, first.rows_written) == (0, 4, True, 200)
    assert first.files == [str(tmp_path / "t.00000.parquet")]
    written = pq.ParquetFile(tmp_path / "t.00000.parquet")
    assert written.num_row_groups == 4
    assert written.read().equals(pa.concat_tables(tables))


def test_nothing_is_under_a_final_name_until_the_file_closes(tmp_path):
    writer = writer_for("parquet", tmp_path)
    handed = [writer.process(part) for part in parts_of("t", [texts(20), texts(20, 20), texts(20, 40)])[:2]]
    assert [[type(output) for output in outputs] for outputs in handed] == [[PartShown], [PartShown]]
    [partial] = visible(tmp_path)
    assert partial.startswith(".t.00000.parquet.tmp-")


def test_files_roll_over_at_the_size_and_stay_under_it(tmp_path):
    rng = random.Random(7)  # text that compresses as text does, not as a repeated phrase
    tables = [pa.table({"text": [" ".join(f"{rng.getrandbits(24):x}" for _ in range(12)) for _ in range(4000)]})
              for _ in range(12)]
    one = tmp_path / "one"
    sizes = sum(os.path.getsize(f) for f in _written(one, tables, 1 << 30))
    limit = sizes // 4
    rolled = _written(tmp_path / "rolled", tables, limit)
    assert 4 <= len(rolled) <= 6
    assert all(os.path.getsize(f) <= limit for f in rolled)
    assert pa.concat_tables([pq.read_table(f) for f in sorted(rolled)]).equals(pa.concat_tables(tables))
    again = _written(tmp_path / "again", tables, limit)
    assert [f.name for f in again] == [f.name for f in rolled], "a replay writes the same files"
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(sorted(again), sorted(rolled)))


def _written(directory, tables, limit):
    writer = writer_for("parquet", directory)
    writer.roll_at(limit)
    handed = written(apply_stage(writer, iter(parts_of("t", tables))))
    assert [(w.part, w.parts) for w in handed] == [(int(Path(w.files[0]).name.split(".")[1]), w.parts) for w in handed]
    assert sum(w.parts for w in handed) == len(tables) and handed[-1].final and not any(w.final for w in handed[:-1])
    files = [directory / os.path.basename(f) for w in handed for f in w.files]
    assert sorted(f.name for f in files) == visible(directory)
    return sorted(files)


def test_empty_parts_and_a_task_with_no_rows_left(tmp_path):
    writer = writer_for("jsonl", tmp_path)
    empty = texts(0)
    handed = written(apply_stage(writer, iter(parts_of("t", [empty, texts(3), empty, texts(2, 3), empty]))))
    assert visible(tmp_path) == ["t.00001.jsonl"]
    assert [json.loads(line)["url"] for line in (tmp_path / "t.00001.jsonl").read_text().splitlines()] == \
        [f"https://example.com/{i}" for i in range(5)]
    assert [(w.part, w.parts, w.files) for w in handed] == [(0, 5, [str(tmp_path / "t.00001.jsonl")])]
    assert handed[0].rows_written == 5
    nothing = written(apply_stage(writer, iter(parts_of("u", [empty, empty]))))
    assert [(w.part, w.parts, w.files) for w in nothing] == [(0, 2, [])] and visible(tmp_path) == ["t.00001.jsonl"]


def test_gzip_lines_are_one_stream(tmp_path):
    writer = writer_for("jsonl.gz", tmp_path)
    list(apply_stage(writer, iter(parts_of("t", [texts(3), texts(4, 3)]))))
    lines = gzip.open(tmp_path / "t.00000.jsonl.gz", "rt").read().splitlines()
    assert [json.loads(line)["url"] for line in lines] == [f"https://example.com/{i}" for i in range(7)]


def test_parts_in_another_process_or_order_start_a_file_of_their_own(tmp_path):
    """The end of a block closes what is open: the task's next parts (an actor pool may take
    them) begin a file named after their first part."""
    writer = writer_for("parquet", tmp_path)
    parts = parts_of("t", [texts(5), texts(5, 5), texts(5, 10), texts(5, 15)])
    first = written(apply_stage(writer, iter(parts[:2])))
    assert [(w.part, w.parts) for w in first] == [(0, 2)] and first[0].files
    rest = written(apply_stage(writer, iter(parts[3:] + parts[2:3])))
    assert visible(tmp_path) == ["t.00000.parquet", "t.00002.parquet", "t.00003.parquet"]
    assert sorted((w.part, w.parts, len(w.files)) for w in rest) == [(2, 1, 1), (3, 1, 1)]


def test_every_steps_removed_rows_of_a_task_go_to_one_file_by_the_same_rule(tmp_path):
    writer = writer_for("parquet", tmp_path / "out")
    writer.keep_removed_in(tmp_path / "removed")
    parts = parts_of("t", [texts(4), texts(4, 4), texts(4, 8)], removed={0: texts(2, 100), 2: texts(1, 200)})
    scored = texts(2, 300).append_column("score", pa.array([0.5, 0.25]))
    parts[0] = replace(parts[0], removed={**parts[0].removed, "language": scored})  # a step that added a column
    handed = written(apply_stage(writer, iter(parts)))
    assert visible(tmp_path / "removed") == ["t.00000.parquet"]
    removed = pq.read_table(tmp_path / "removed" / "t.00000.parquet")
    assert removed.column("url").to_pylist() == [f"https://example.com/{n}" for n in (100, 101, 300, 301, 200)]
    assert removed.column("score").to_pylist() == [None, None, 0.5, 0.25, None]
    assert visible(tmp_path / "out") == ["t.00000.parquet"] and len([f for w in handed for f in w.files]) == 1


def test_a_part_with_a_column_the_file_lacks_starts_a_file_of_its_own(tmp_path):
    writer = writer_for("parquet", tmp_path)
    later = texts(2, 4).append_column("score", pa.array([0.5, 0.25]))
    written(apply_stage(writer, iter(parts_of("t", [texts(4), later, texts(1, 6)]))))
    assert visible(tmp_path) == ["t.00000.parquet", "t.00001.parquet"]
    assert pq.read_table(tmp_path / "t.00001.parquet").column("score").to_pylist() == [0.5, 0.25, None]


def test_a_part_that_fails_to_write_fails_its_task_and_leaves_nothing(tmp_path, monkeypatch):
    writer = writer_for("parquet", tmp_path)
    parts = parts_of("t", [texts(5), texts(5, 5)])
    monkeypatch.setattr(type(writer), "open_sink", _failing_after(type(writer).open_sink, 0))
    handed = written(apply_stage(writer, iter(parts[:1])))
    assert handed and all(isinstance(w, FailedTask) for w in handed)
    assert visible(tmp_path) == []


def _failing_after(open_sink, writes: int):
    def opened(self, path, schema):
        sink = open_sink(self, path, schema)
        real, calls = sink.write, []

        def write(table):
            calls.append(1)
            if len(calls) > writes:
                raise OSError(28, "No space left on device")
            real(table)
        sink.write = write
        return sink
    return opened


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "jsonl.gz"])
def test_a_task_read_whole_is_one_file_named_after_it(tmp_path, fmt):
    writer = writer_for(fmt, tmp_path)
    [done] = list(apply_stage(writer, iter([DocumentBatch("t", {}, table=texts(3))])))
    assert isinstance(done, WrittenFiles) and visible(tmp_path) == [f"t.{fmt}"]


def test_partials_and_unrecorded_files_of_finished_tasks_are_removed_and_nothing_else(tmp_path):
    from curator_array.stages.output_files import remove_leftovers
    from curator_array.storage.places import LocalPlace

    twins = tmp_path / "twins"  # the partials' pids are beyond any pid: their writers are gone
    twins.mkdir()
    names = [".fg-a.00000.parquet.tmp-99999912-0a1b2c3d", ".fg-a.00083.parquet.tmp-99999999-deadbeef", "fg.a.00040.parquet",
             "fg-a.00000.parquet", "fg.a.00000.parquet", "fg-b.00007.parquet", "fg-a.00000.jsonl", "fg-a.parquet",
             ".fg-b.00000.parquet.tmp-99999912-0a1b2c3d", ".fg-a.parquet.tmp-99999912-0a1b2c3d", ".fg-a.00000.parquet.tmp-x"]
    for name in names:
        (tmp_path / name).write_text("")
    (twins / "fg-a.00003.parquet").write_text("")  # twins are not recorded: never taken for leftovers
    (twins / ".fg-a.00003.parquet.tmp-99999907-00ff").write_text("")
    places = [LocalPlace(tmp_path), LocalPlace(twins), LocalPlace(tmp_path / "absent")]
    removed = remove_leftovers(places, ["fg-a", "fg.a"], ".parquet", {"fg-a.00000.parquet", "fg.a.00000.parquet"})
    assert removed == (4, ["fg.a.00040.parquet"]), "a whole task's partial goes too; its final name is rewritten"
    kept = [name for name in names[3:] if name != ".fg-a.parquet.tmp-99999912-0a1b2c3d"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["twins", *kept])
    assert [p.name for p in twins.iterdir()] == ["fg-a.00003.parquet"]


def test_leftovers_spare_the_partial_file_of_a_writer_still_running(tmp_path):
    """Two attempts of one shard at once: the first to finish clears what killed writers left,
    never the file the other attempt is writing now."""
    import subprocess
    import sys

    from curator_array.stages.output_files import remove_leftovers
    from curator_array.storage.places import LocalPlace

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    killed = tmp_path / f".t1.00000.jsonl.tmp-{dead}-0a1b2c3d"
    running = tmp_path / f".t1.00001.jsonl.tmp-{os.getpid()}-0a1b2c3d"
    for path in (killed, running):
        path.write_text("{}\n")
    removed, _ = remove_leftovers([LocalPlace(tmp_path)], ["t1"], ".jsonl", [])
    assert removed == 1 and not killed.exists() and running.exists()
