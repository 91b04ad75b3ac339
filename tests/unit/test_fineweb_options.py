"""``--pipeline fineweb``'s own files are checked at submit: a block list or a language model
that cannot be used is refused (exit 2, naming the file) before anything is queued."""

from __future__ import annotations

import pytest

from curator_array.cli import main
from curator_array.stages.web.fasttext_language import FastTextLanguageFilter, bundled_model
from tests.conftest import REPO

pytest.importorskip("fasttext")


@pytest.fixture
def submit(tmp_path, monkeypatch):
    (tmp_path / "warcs").mkdir()
    (tmp_path / "warcs" / "a.warc.gz").write_bytes(b"")
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path / "out"))
    return ["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--max-array-size", "none",
            "--total-shards", "1", "--dry-run", "--", "--pipeline", "fineweb", "--input-dir", str(tmp_path / "warcs"),
            "--input-file-type", "warc"]


def refused(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    return capsys.readouterr().err


def test_a_good_block_list_and_model_are_accepted(submit, tmp_path):
    (tmp_path / "ours.txt").write_text("intranet.example.com\nhttps://news.example.com/leak\n")
    assert main([*submit, "--url-blocklist", str(tmp_path / "ours.txt"), "--language-model", str(bundled_model()),
                 "--languages", "en,de"]) == 0


@pytest.mark.parametrize("content, says", [("", "no domain or URL in it"),
                                            ("good.example.com\nnot a domain\n", "neither a domain nor a URL"),
                                            (b"\xff\xfe\x00bad", "cannot read it")])
def test_a_block_list_that_cannot_be_used_is_refused(submit, tmp_path, capsys, content, says):
    listed = tmp_path / "ours.txt"
    listed.write_bytes(content if isinstance(content, bytes) else content.encode())
    error = refused(capsys, [*submit, "--url-blocklist", str(listed)])
    assert str(listed) in error and says in error


def test_a_missing_block_list_is_refused(submit, tmp_path, capsys):
    error = refused(capsys, [*submit, "--url-blocklist", str(tmp_path / "absent.txt")])
    assert "absent.txt" in error


def test_a_file_that_is_not_a_fasttext_model_is_refused(submit, tmp_path, capsys):
    fake = tmp_path / "lid.176.bin"
    fake.write_bytes(b"not a model at all" * 100)
    error = refused(capsys, [*submit, "--language-model", str(fake)])
    assert str(fake) in error and "not a fastText model" in error


def test_a_language_the_model_cannot_name_is_refused_with_the_nearest_codes(submit, capsys, tmp_path):
    error = refused(capsys, [*submit, "--languages", "en,xx"])
    assert "has no language 'xx'" in error and "lid.176.ftz" in error
    error = refused(capsys, [*submit, "--languages", "english,jp"])
    assert "'english' (nearest: en," in error and "'jp' (nearest: ja," in error
    commoncrawl = [*submit[:submit.index("fineweb")], "commoncrawl", *submit[submit.index("fineweb") + 1:]]
    error = refused(capsys, [*commoncrawl, "--languages", "english"])
    assert "py3langid's model" in error and "'english' (nearest: en," in error
    assert len(error.strip().splitlines()) == 1, error
    assert not (tmp_path / "out").exists(), "refused before anything is written"


def test_the_commoncrawl_language_codes_are_the_models():
    pytest.importorskip("py3langid")
    from curator_array.stages.web.language import PY3LANGID_LANGUAGES, load_identifier

    assert set(load_identifier().nb_classes) == PY3LANGID_LANGUAGES


def kept(rules) -> list[bool]:
    """A page passes every rule: in a wanted language (``not_kept``), sure enough (``low_score``)."""
    return [a and b for a, b in zip(rules["not_kept"].to_pylist(), rules["low_score"].to_pylist())]


def test_fineweb_keeps_a_page_when_a_wanted_language_scores_above_the_threshold():
    """FineWeb's rule: strictly above the threshold, for any wanted language, on the text with
    its newlines read as spaces; the best language is reported whatever is kept."""
    import pyarrow as pa

    stage = FastTextLanguageFilter(("en",), 0.65)
    english = "The river carved its valley over thousands of years,\nand the town grew along its banks."
    german = "Der Fluss hat sein Tal über Jahrtausende geformt,\nund die Stadt wuchs an seinen Ufern."
    table = pa.table({"text": [english, german, ""]})
    scored, rules = stage.score(table, table.column("text"))
    assert scored.column("language").to_pylist() == ["en", "de", "und"]
    assert kept(rules) == [True, False, False]
    assert rules["not_kept"].to_pylist() == [True, False, False], "German and the empty page are not English"
    threshold = scored.column("language_score")[0].as_py()
    at_score = FastTextLanguageFilter(("en",), threshold)
    at_threshold = at_score.score(table, table.column("text"))[1]
    assert at_threshold["not_kept"].to_pylist()[0] is True and at_threshold["low_score"].to_pylist()[0] is False


@pytest.mark.parametrize("languages", [("en",), ("de", "fr", "nl"), ()])
@pytest.mark.parametrize("threshold", [0.65, 0.3, 0.02])
def test_asking_for_fewer_labels_decides_as_every_label_would(languages, threshold):
    """Above 0.5 only the best label can pass, so only it is asked for; below, the labels at or
    above the limit. Either way the decision is FineWeb's over all 176 labels."""
    import gzip
    import json

    import pyarrow as pa

    with gzip.open(REPO / "tests" / "fixtures" / "multilingual-prose.jsonl.gz", "rt", encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for line in lines][::4]
    stage = FastTextLanguageFilter(languages, threshold)
    scored, rules = stage.score(pa.table({"text": texts}), pa.chunked_array([texts]))
    stage.setup()
    expected = []
    for text in texts:
        labels, scores = stage.model.predict(text.replace("\n", " "), k=-1)
        found = {label.removeprefix("__label__"): float(score) for label, score in zip(labels, scores)}
        wanted = languages or (max(found, key=found.get),)
        expected.append(any(found.get(code, 0.0) > threshold for code in wanted))
    assert kept(rules) == expected
    assert 0 < sum(expected) < len(texts) or not languages
