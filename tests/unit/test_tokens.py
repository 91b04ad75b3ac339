"""Token files without a run: Megatron's and datatrove's formats, their merge into files of
a bounded size, a killed writer, the tokenizer's checks and the token options."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from curator_array.core.errors import ConfigError
from curator_array.run.option_table import option_named
from curator_array.run.phases import PHASES
from curator_array.tokens.files import TOKEN_FORMATS, TokenWriter, merge
from curator_array.tokens.settings import TokenizeSettings
from curator_array.tokens.tokenizer import load_tokenizer
from tests.support.tokenizer import END_OF_TEXT, train_tokenizer

DOCUMENTS = [np.arange(n, dtype=np.int64) + 3 for n in (5, 1, 7, 2, 9, 4, 1)]


def write(fmt, prefix, documents, wide=False):
    with TokenWriter(fmt, prefix, fmt.dtype(wide)) as writer:
        writer.add(np.concatenate(documents), [len(d) for d in documents])
    return writer


def read(fmt, prefix) -> list[list[int]]:
    lengths, ids = fmt.read(prefix)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return [ids[starts[i]:starts[i + 1]].tolist() for i in range(len(lengths))]


def test_a_megatron_index_is_what_megatron_reads(tmp_path):
    fmt = TOKEN_FORMATS["megatron"]
    write(fmt, tmp_path / "a", DOCUMENTS[:3])
    index = (tmp_path / "a.idx").read_bytes()
    assert index[:9] == b"MMIDIDX\x00\x00" and struct.unpack_from("<QBQQ", index, 9) == (1, 8, 3, 4)
    lengths = np.frombuffer(index, "<i4", 3, 34)
    pointers = np.frombuffer(index, "<i8", 3, 34 + 12)
    documents = np.frombuffer(index, "<i8", 4, 34 + 12 + 24)
    assert lengths.tolist() == [5, 1, 7] and pointers.tolist() == [0, 10, 12] and documents.tolist() == [0, 1, 2, 3]
    assert (tmp_path / "a.bin").stat().st_size == 13 * 2, "uint16 when the vocabulary fits"
    write(fmt, tmp_path / "wide", DOCUMENTS[:3], wide=True)
    assert (tmp_path / "wide.idx").read_bytes()[17] == 4 and (tmp_path / "wide.bin").stat().st_size == 13 * 4


@pytest.mark.parametrize("name", sorted(TOKEN_FORMATS))
def test_merged_files_hold_every_document_in_order_within_the_size(name, tmp_path):
    fmt = TOKEN_FORMATS[name]
    write(fmt, tmp_path / "shard_0", DOCUMENTS[:4])
    write(fmt, tmp_path / "shard_1", DOCUMENTS[4:])
    parts = merge(fmt, [tmp_path / "shard_0", tmp_path / "shard_1"], tmp_path / "out", 20)
    assert [read(fmt, tmp_path / "out" / p.name) for p in parts] == [
        [DOCUMENTS[0].tolist(), DOCUMENTS[1].tolist()], [DOCUMENTS[2].tolist(), DOCUMENTS[3].tolist()],
        [DOCUMENTS[4].tolist()], [DOCUMENTS[5].tolist(), DOCUMENTS[6].tolist()]]
    assert [p.bytes for p in parts] == [12, 18, 18, 10]
    small = merge(fmt, [tmp_path / "shard_0"], tmp_path / "out", 8)  # 10 and 14 bytes: each alone in its file
    assert [p.bytes for p in small] == [10, 2, 14, 4]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == sorted(
        f"part-0000{i}{suffix}" for i in range(4) for suffix in (fmt.data_suffix, fmt.index_suffix))


def test_a_writer_that_fails_leaves_no_file_under_a_final_name(tmp_path):
    fmt = TOKEN_FORMATS["megatron"]
    write(fmt, tmp_path / "a", DOCUMENTS[:2])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError), TokenWriter(fmt, tmp_path / "a", fmt.dtype(False)) as writer:
        writer.add(np.concatenate(DOCUMENTS), [len(d) for d in DOCUMENTS])
        raise RuntimeError("killed mid-write")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before, "the old pair, whole; no partial one"


def test_the_tokenizer_is_checked_and_its_own_end_of_text_token_found(tmp_path):
    path = train_tokenizer(["some words to learn from, again and again"] * 30, tmp_path / "t.json", 300)
    loaded = load_tokenizer(str(path))
    assert loaded.eos_token == END_OF_TEXT and loaded.eos_id == 0 and not loaded.wide
    assert load_tokenizer(str(path), "<|endoftext|>").eos_id == 0
    with pytest.raises(ConfigError, match="has no token '<eot>'"):
        load_tokenizer(str(path), "<eot>")
    bare = train_tokenizer(["other words"] * 30, tmp_path / "bare.json", 300, special=())
    with pytest.raises(ConfigError, match=r"bare.json: no end-of-text token .* --eos-token"):
        load_tokenizer(str(bare))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ConfigError, match="broken.json: not a tokenizer file"):
        load_tokenizer(str(tmp_path / "broken.json"))


def test_the_settings_pin_the_tokenizer_by_digest_not_path(tmp_path):
    path = train_tokenizer(["words"] * 30, tmp_path / "t.json", 300)
    copy = tmp_path / "elsewhere.json"
    copy.write_bytes(path.read_bytes())
    one = PHASES.settings_from_options({"tokenize": str(path), "token_file_size": 100}).get("tokenize")
    other = PHASES.settings_from_options({"tokenize": str(copy), "token_file_size": 100}).get("tokenize")
    assert one.to_json() == other.to_json() and "tokenizer" not in one.to_json()
    assert TokenizeSettings.from_json(one.to_json()) == TokenizeSettings(None, one.digest, file_size=100, shuffle=True)
    assert one.to_json()["shuffle"] is True and one.to_json()["shuffle_seed"] == 0, "a new run shuffles"
    older = {key: value for key, value in one.to_json().items() if key not in ("shuffle", "shuffle_seed")}
    assert not TokenizeSettings.from_json(older).shuffle, "a run pinned before the shuffle keeps its order"
    assert TokenizeSettings.from_json(older).to_json() == older, "and its fingerprint"
    assert PHASES.settings_from_options({}).get("tokenize") is None
    with pytest.raises(ConfigError, match="no such file"):
        PHASES.settings_from_options({"tokenize": str(tmp_path / "missing.json")})


def test_a_size_takes_units():
    option = option_named("token_file_size")
    assert [option.parse(v) for v in ("10G", "10GB", "512MiB", "1000", "7 K")] == [10**10, 10**10, 2**29, 1000, 7000]
    assert option.default == 10**10
    for bad in ("10x", "G", "-1"):
        with pytest.raises(ValueError, match="not a size"):
            option.parse(bad)


@pytest.mark.parametrize("problem", ["missing", "not a tokenizer", "no end-of-text token", "not on the Hub"])
def test_submit_refuses_a_tokenizer_it_cannot_use_before_writing_anything(problem, tmp_path, capsys, monkeypatch):
    from curator_array.cli import main
    from tests.conftest import REPO, SAMPLE

    given = {"missing": str(tmp_path / "missing.json"), "not a tokenizer": str(tmp_path / "broken.json"),
             "no end-of-text token": str(tmp_path / "bare.json"), "not on the Hub": "someone/no-such-tokenizer"}[problem]
    (tmp_path / "broken.json").write_text("{}")
    train_tokenizer(["other words"] * 30, tmp_path / "bare.json", 300, special=())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network here: the Hub fails at once
    out = tmp_path / "out"
    code = main(["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--total-shards", "2",
                 "--max-array-size", "none", "--", "--input-dir", str(SAMPLE / "jsonl"), "--output-dir", str(out),
                 "--tokenize", given])
    error = capsys.readouterr().err
    assert code == 2 and given in error, error
    assert {"missing": "is not a file", "not a tokenizer": "not a tokenizer file",
            "no end-of-text token": "no end-of-text token", "not on the Hub": "not a tokenizer the Hugging Face Hub gave"
            }[problem] in error
    assert not out.exists(), "refused before anything is written or queued"


def test_a_request_pinned_before_the_shuffle_existed_keeps_the_runs_order(tmp_path):
    """An element or a retry of a run pinned before --token-shuffle existed resolves it as that
    run did (off), not as a new run's default (on): its fingerprint stays the run's."""
    from curator_array.core.records.run import OptionValue, PinnedRequest
    from curator_array.run.precedence import Defaults, Pinned, resolve

    path = train_tokenizer(["words"] * 30, tmp_path / "t.json", 300)
    older = PinnedRequest({"output_dir": OptionValue(str(tmp_path), "flag"), "tokenize": OptionValue(str(path), "flag")})
    chosen = resolve([Pinned(older), Defaults()])
    assert chosen["token_shuffle"].value is False and "before the option existed" in chosen["token_shuffle"].source
    settings = PHASES.settings_from_options({name: given.value for name, given in chosen.items()}).get("tokenize")
    assert not settings.shuffle and "shuffle" not in settings.to_json()
    assert resolve([Defaults()])["token_shuffle"].value is None, "a new request: unset, which shuffles"
