"""Decontamination's core: eval files read and refused, the index and what it holds, hits
on planted contamination, GPT-3's cut, and the tally that manifests keep."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from curator_array.core.errors import ConfigError
from curator_array.core.records.contamination import Contamination, Example, TaskHits
from curator_array.decont.evalsets import NON_STRING_TEXT, EvalRecord, EvalSet, read_eval_files
from curator_array.decont.index import IndexFileError, NGramIndex, build_index
from curator_array.decont.matching import (
    CUT_MARGIN,
    MAX_SPLITS,
    MIN_PIECE,
    cut,
    document_words,
    find_hits,
    tally,
)
from curator_array.decont.rules import IndexRules
from curator_array.dedup.words import words
from tests.support.decont_corpus import NUMBERS_TASK, SHORT_TASK, eval_and_corpus, expected_hits
from tests.support.quality_corpus import paragraphs

SPACED = ("spaced", "en")


def evalset(records: list[dict]) -> EvalSet:
    return EvalSet(tuple(EvalRecord(r["text"], r.get("query"), r["task"], f"evals.jsonl:{i + 1}")
                         for i, r in enumerate(records)))


def first_tasks(texts: list[str], index: NGramIndex, segmenters=None) -> dict[int, str]:
    hits = find_hits(pa.array(texts, pa.string()), segmenters, index)
    return {document: index.tasks[index.record_tasks[hits.records[hit]]]
            for document, hit in hits.first_per_document(index.task_of(hits.records)).items()}


@pytest.mark.parametrize("overlap", [False, True], ids=["default", "datatrove"])
def test_planted_copies_are_found_and_near_misses_are_not(overlap):
    """Verbatim answers and answers in other case and punctuation hit; query/answer
    straddles only when straddles are indexed; short answers only by default; near misses
    and clean documents (in nine languages) never."""
    records, corpus = eval_and_corpus()
    index = build_index(evalset(records), IndexRules(13, overlap))
    found = first_tasks([d["text"] for d in corpus], index)
    assert {corpus[d]["id"]: task for d, task in found.items()} == \
        {k: v for k, v in expected_hits(corpus, overlap).items() if v}


def test_short_texts_whole_from_eight_words_and_no_letterless_ngrams():
    records = [{"text": "one two three four five six seven eight", "task": "short"},  # 8 words: whole
               {"text": "one two three four five six seven", "task": "short"},  # 7: skipped
               {"text": " ".join(str(i) for i in range(100, 140)), "task": "numbers"},  # no letter anywhere
               {"text": "42 " * 12 + "answer " + "43 " * 12, "task": "mixed"}]  # 25 words, one letter
    index = build_index(evalset(records), IndexRules(13))
    assert index.stats["short_texts_skipped"] == 1
    assert index.stats["ngrams_by_task"] == {"short": 1, "numbers": 0, "mixed": 13}, "only n-grams with 'answer'"
    assert index.lengths == (13, 8)
    texts = ["so one two three four five six seven eight so", "one two three four five six seven",
             " ".join(str(i) for i in range(100, 140)), "42 " * 12]
    assert first_tasks(texts, index) == {0: "short"}
    as_datatrove = build_index(evalset(records), IndexRules(13, overlap=True))
    assert as_datatrove.stats["ngrams_by_task"]["numbers"] == 1, "numbers fold to 0: one n-gram of thirteen 0s"
    assert as_datatrove.lengths == (13,)
    assert first_tasks(texts, as_datatrove) == {2: "numbers"}


def test_straddles_begin_in_the_query_and_end_in_the_answer():
    query = [f"query{chr(97 + i)}" for i in range(20)]
    answer = [f"answer{chr(97 + i)}" for i in range(20)]
    index = build_index(evalset([{"text": " ".join(answer), "query": " ".join(query), "task": "t"}]),
                        IndexRules(5, overlap=True))
    assert index.stats["ngrams"] == (20 - 5 + 1) + 4, "the answer's n-grams and n-1 straddles, none of the query alone"
    texts = [" ".join(query[-k:] + answer[:5 - k]) for k in range(1, 5)] + [" ".join(query[:5])]
    assert first_tasks(texts, index) == {0: "t", 1: "t", 2: "t", 3: "t"}


def test_a_decision_does_not_depend_on_the_batch():
    records, corpus = eval_and_corpus()
    index = build_index(evalset(records), IndexRules(13))
    texts = [d["text"] for d in corpus]
    together = first_tasks(texts, index)
    order = list(range(len(texts)))
    random.Random(3).shuffle(order)
    alone = {}
    for start in range(0, len(order), 37):
        chunk = order[start:start + 37]
        alone.update({chunk[i]: task for i, task in first_tasks([texts[j] for j in chunk], index).items()})
    assert alone == together


def test_document_words_are_the_words_of_the_batch_with_their_places():
    text = "Hello. The Quick, 3.14 brown-fox l’homme café\u0301 end.3 x"
    found, spans = document_words(text, SPACED)
    assert found == words(pa.array([text]))[0].to_pylist()
    every_space = "".join(f"w{chr(97 + i % 26)}{c}" for i, c in enumerate(chr(c) for c in range(0x3001) if chr(c).isspace()))
    assert document_words(every_space, SPACED)[0] == words(pa.array([every_space]))[0].to_pylist() == every_space.split()
    assert [text[a:b] for a, b in spans][:4] == ["Hello", "The", "Quick", "3.14"]


def test_cut_removes_each_hit_with_its_margins_and_keeps_long_pieces():
    answer = " ".join(f"word{i}" for i in range(20))
    index = build_index(evalset([{"text": answer, "task": "t"}]), IndexRules(13))
    left, right = "L" * 150 + " " + "l " * 200, " r" * 200 + " " + "R" * 150
    result, matched = cut(f"{left} {answer} {right}", SPACED, index)
    assert matched and result.splits == 1 and result.text is not None
    first, second = result.text.split("\n\n")
    assert len(first) >= MIN_PIECE and len(second) >= MIN_PIECE
    assert "word" not in result.text, "the hit is gone"
    assert len(left) - len(first.rstrip()) >= CUT_MARGIN - 1 and len(right) - len(second) >= CUT_MARGIN - 1
    short_side, _ = cut(f"{'s' * 100} {answer} {right}", SPACED, index)
    assert short_side.text is not None and short_side.text.startswith("r"), "a piece under 200 characters is dropped"
    filler = " ".join(["f"] * 300)
    many, _ = cut(f" {filler} ".join([answer] * (MAX_SPLITS + 1)), SPACED, index)
    assert many.text is None and many.splits == MAX_SPLITS + 1, "cut more than 10 times: dropped"
    nothing, _ = cut(f"short {answer} short", SPACED, index)
    assert nothing.text is None, "no piece left: dropped"
    clean, none = cut(left, SPACED, index)
    assert clean.text == left and clean.characters_cut == 0 and not none


def test_the_tally_names_tasks_examples_and_common_ngrams():
    records, corpus = eval_and_corpus()
    index = build_index(evalset(records), IndexRules(13))
    texts = [d["text"] for d in corpus]
    hits = find_hits(pa.array(texts), None, index)
    firsts = hits.first_per_document(index.task_of(hits.records))
    found = tally(hits, index, [d["id"] for d in corpus], firsts, {d: len(texts[d]) for d in firsts})
    expected = expected_hits(corpus, overlap=False)
    per_task = {}
    for task in filter(None, expected.values()):
        per_task[task] = per_task.get(task, 0) + 1
    assert {name: hits.documents for name, hits in found.tasks.items()} == per_task
    assert sum(h.characters_cut for h in found.tasks.values()) == sum(len(texts[d]) for d in firsts)
    for task, examples in found.examples.items():
        assert 0 < len(examples) <= 5 and [e.document for e in examples] == sorted(e.document for e in examples)
        assert all(expected[e.document] == task and len(e.ngram.split()) in index.lengths for e in examples)
        assert all(e.record.startswith("evals.jsonl:") for e in examples)
    assert SHORT_TASK in found.tasks and NUMBERS_TASK not in found.tasks


def test_tallies_add_up_in_any_order():
    parts = [Contamination({"t": TaskHits(1, 2, 30)}, {"t": (Example(f"d{i}", "n g", "e:1"),)}, {"n g": ("t", 1)})
             for i in range(8)]
    forward, backward = sum(parts, Contamination()), sum(reversed(parts), Contamination())
    assert forward == backward and forward.tasks["t"] == TaskHits(8, 16, 240)
    assert [e.document for e in forward.examples["t"]] == ["d0", "d1", "d2", "d3", "d4"]
    assert Contamination.from_json(json.loads(json.dumps(forward.to_json()))) == forward


def test_the_index_file_reads_back_and_a_cut_one_is_refused():
    records, _ = eval_and_corpus()
    index = build_index(evalset(records), IndexRules(13))
    data = index.to_bytes()
    again = NGramIndex.from_bytes(data)
    assert (again.keys == index.keys).all() and (again.owners == index.owners).all()
    assert again.tasks == index.tasks and again.record_sources == index.record_sources
    assert build_index(evalset(records), IndexRules(13)).to_bytes() == data, "built the same way: the same bytes"
    assert index.memory_bytes <= (12 + 16) * len(index.keys) + 4 * len(records) + 8192, "28 bytes a key at most"
    with pytest.raises(IndexFileError, match="truncated"):
        NGramIndex.from_bytes(data[:-5], "decont.index")


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "empty, no eval records"),
    ('{"text": "a"}\n{"query": "q", "answer": "b"}\n', "line 2: no 'text' field"),
    ('{"text": "a"}\nnot json\n', "line 2: not JSON"),
    ('["text"]\n', "line 1: not a JSON object"),
])
def test_bad_eval_files_are_refused_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "mmlu.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as refused:
        read_eval_files([path])
    assert str(path) in str(refused.value)


def test_records_with_other_text_are_skipped_and_counted_and_tasks_default_to_the_stem(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text('{"text": 42}\n{"text": null}\n{"text": "the answer", "query": "q?"}\n'
                    '{"text": "another", "task": "gsm8k_hard"}\n')
    found = read_eval_files([path])
    assert found.skipped == {NON_STRING_TEXT: 2} and found.first_skipped == f"{path}: line 1"
    assert [(r.task, r.query, r.source) for r in found.records] == [("gsm8k", "q?", "gsm8k.jsonl:3"),
                                                                    ("gsm8k_hard", None, "gsm8k.jsonl:4")]
    pinned = tmp_path / "pinned_files" / f"{'0123456789abcdef'}-gsm8k.jsonl"  # as submit pins a copy
    pinned.parent.mkdir()
    pinned.write_bytes(path.read_bytes())
    assert [(r.task, r.source) for r in read_eval_files([pinned]).records][0] == ("gsm8k", "gsm8k.jsonl:3")
    parquet = tmp_path / "arc.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["q"], "answer": ["a"]}), parquet)
    with pytest.raises(ConfigError, match="no 'text' column"):
        read_eval_files([parquet])
    pq.write_table(pa.table({"text": ["an answer"], "query": ["q"]}), parquet)
    assert [(r.task, r.source) for r in read_eval_files([parquet]).records] == [("arc", "arc.parquet:0")]


@pytest.mark.parametrize("language, segmenter", [("ja", "sudachi"), ("zh", "jieba")])
def test_eval_texts_and_documents_in_unspaced_scripts_are_split_by_their_segmenters(language, segmenter):
    """A Japanese or Chinese eval text (``language`` on the record) is found in a document of
    its language, whose words the same segmenter splits, and cut out of it."""
    texts = [d["text"] for d in paragraphs()
             if d["language"] == language and len(d["text"]) > 150]
    answers = [text[20:120] for text in texts[:20]]
    index = build_index(EvalSet(tuple(EvalRecord(answer, None, "t", f"e:{i}", language)
                                      for i, answer in enumerate(answers))), IndexRules(13))
    hosts = texts[40:60]
    planted = [f"{host[:60]}。{answer}。{host[60:]}" for host, answer in zip(hosts, answers)]
    split = [(segmenter, language)] * len(hosts)
    assert first_tasks(planted, index, split) == dict.fromkeys(range(len(planted)), "t")
    assert first_tasks(hosts, index, split) == {}
    result, matched = cut(planted[0], (segmenter, language), index)
    assert matched and answers[0] not in (result.text or "")


def test_a_document_hitting_two_tasks_is_dropped_once_under_the_first_in_eval_order():
    """Task B's answer comes first in the document, task A's first in the eval files: the drop is
    A's; both tasks count the document as a hit."""
    answer_a = "the quick brown fox jumps over the lazy dog near the quiet river bank today"
    answer_b = "seven silver swans swam slowly south along the shallow stream every single morning"
    index = build_index(evalset([{"text": answer_a, "task": "task_a"}, {"text": answer_b, "task": "task_b"}]),
                        IndexRules(13))
    document = f"{answer_b}. And later on: {answer_a}."
    assert first_tasks([document], index) == {0: "task_a"}
    hits = find_hits(pa.array([document]), None, index)
    firsts = hits.first_per_document(index.task_of(hits.records))
    found = tally(hits, index, ["doc"], firsts, {0: len(document)})
    assert {name: task.documents for name, task in found.tasks.items()} == {"task_a": 1, "task_b": 1}
    assert found.tasks["task_a"].characters_cut == len(document) and found.tasks["task_b"].characters_cut == 0
