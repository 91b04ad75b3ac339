"""Training-ready output through `curator-array run --tokenize`: the curation phase on a
real Ray head counts each document's tokens, the tokenize phase writes one token file per
shard, the tokens phase merges them under OUTPUT_DIR/tokens/. Checked against the
tokenizer itself, against megatron-core's reader, and against datatrove's
``MegatronDocumentTokenizer`` on the same documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.shard import CompletionManifest
from curator_array.tokens.files import TOKEN_FORMATS, TokenWriter
from tests.conftest import curator_here as curator
from tests.conftest import need
from tests.support.planted import write_corpus
from tests.support.reference_site import (
    ensure_reference_site,
    reference_environment,
    reference_output,
)
from tests.support.tokenizer import END_OF_TEXT, train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SMALL = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
FILE_SIZE = 16_000


def run(inputs: Path, out: Path, *extra: str, shards: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    for shard in range(shards):
        env = {"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard), "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": str(shards)}
        done = curator("run", "--input-dir", str(inputs), "--output-dir", str(out), *SMALL, *extra, env=env,
                       check=check)
    return done


def documents_in_order(out: Path) -> list[dict]:
    """The run's output documents in the order the tokenize phase reads them: shard by shard,
    each shard's files as its manifest lists them, rows in file order."""
    layout = CheckpointLayout(out)
    docs = []
    for path in sorted(layout.completion_dir.glob("completed_slurm_array_*.json"),
                       key=lambda p: int(p.stem.rsplit("_", 1)[1])):
        for name in CompletionManifest.read(path).work.output_files:
            docs += [json.loads(line) for line in (out / name).read_text().splitlines() if line.strip()]
    return docs


def token_documents(out: Path) -> list[list[int]]:
    """Every document of OUTPUT_DIR/tokens/, read with our own reader."""
    manifest = json.loads((out / "tokens" / "manifest.json").read_text())
    fmt = TOKEN_FORMATS[manifest["format"]]
    docs = []
    for part in manifest["files"]:
        lengths, ids = fmt.read(out / "tokens" / part["name"])
        starts = np.concatenate([[0], np.cumsum(lengths)])
        docs += [ids[starts[i]:starts[i + 1]].tolist() for i in range(len(lengths))]
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenize")
    inputs = root / "in"
    write_corpus(inputs)
    with (inputs / "part-000.jsonl").open("a") as handle:  # one document with nothing to tokenize
        handle.write(json.dumps({"id": "empty-0", "text": "", "n": 0}) + "\n")
    texts = [json.loads(line)["text"] for path in sorted(inputs.iterdir()) for line in path.read_text().splitlines()]
    tokenizer = train_tokenizer(texts, root / "tokenizer" / "tokenizer.json", vocab_size=3000)
    return inputs, tokenizer


@pytest.fixture(scope="module")
def tokenized(corpus, tmp_path_factory):
    inputs, tokenizer = corpus
    out = tmp_path_factory.mktemp("two") / "out"
    run(inputs, out, "--tokenize", str(tokenizer), "--token-file-size", str(FILE_SIZE), "--no-token-shuffle", shards=2)
    return out


def test_every_document_is_its_tokens_and_the_end_of_text_token(corpus, tokenized):
    from tokenizers import Tokenizer

    _, path = corpus
    tokenizer = Tokenizer.from_file(str(path))
    eos = tokenizer.token_to_id(END_OF_TEXT)
    docs = documents_in_order(tokenized)
    assert all(doc["token_count"] == len(tokenizer.encode(doc["text"]).ids) for doc in docs), "FineWeb's token_count"
    expected = [tokenizer.encode(doc["text"]).ids + [eos] for doc in docs if doc["text"]]
    assert token_documents(tokenized) == expected
    manifest = json.loads((tokenized / "tokens" / "manifest.json").read_text())
    assert len(manifest["files"]) > 1 and manifest["eos_token"] == END_OF_TEXT
    assert all(part["bytes"] <= FILE_SIZE for part in manifest["files"]), "no merged file over --token-file-size"
    assert (manifest["documents"], manifest["tokens"]) == (len(expected), sum(map(len, expected)))
    status = json.loads(curator("status", "--checkpoint-path", str(tokenized), "--json").stdout)
    phases = {p["phase"]: p for p in status["phases"]}
    assert phases["tokenize"]["counts"]["empty_documents"] == 1, "a document with no tokens is counted, not written"
    assert phases["tokenize"]["counts"]["tokens"] == manifest["tokens"] and phases["tokenize"]["per_second"]["tokens"]
    assert status["totals"]["tokens"] == sum(doc["token_count"] for doc in docs), "the curated documents' tokens"


def test_rerunning_the_phases_writes_the_same_bytes(corpus, tokenized):
    inputs, tokenizer = corpus
    before = {p.name: p.read_bytes() for p in (tokenized / "tokens").iterdir()}
    for phase in ("tokenize", "tokens"):
        curator("run", "--input-dir", str(inputs), "--output-dir", str(tokenized), *SMALL, "--tokenize",
                str(tokenizer), "--token-file-size", str(FILE_SIZE), "--no-token-shuffle", "--phase", phase, "--force")
    assert {p.name: p.read_bytes() for p in (tokenized / "tokens").iterdir()} == before


def test_after_dedup_only_the_kept_documents_are_tokenized(corpus, tmp_path):
    inputs, tokenizer = corpus
    out = tmp_path / "out"
    run(inputs, out, "--dedup", "exact", "--tokenize", str(tokenizer), "--token-format", "datatrove")
    kept = [json.loads(line) for path in sorted(out.glob("*.jsonl")) for line in path.read_text().splitlines()]
    everything = sum(len(path.read_text().splitlines()) for path in inputs.iterdir())
    assert len(token_documents(out)) == len([doc for doc in kept if doc["text"]]) < everything - 1
    assert sorted(p.name for p in (out / "tokens").iterdir()) == ["blend.json", "manifest.json",
                                                                  "part-00000.ds", "part-00000.ds.index"]


def test_a_changed_tokenizer_is_a_changed_pipeline(corpus, tokenized, tmp_path):
    inputs, _ = corpus
    other = train_tokenizer(["another corpus entirely"] * 50, tmp_path / "other.json", vocab_size=300)
    refused = curator("run", "--input-dir", str(inputs), "--output-dir", str(tokenized), *SMALL, "--tokenize", str(other),
                      "--token-file-size", str(FILE_SIZE), "--no-token-shuffle", "--phase", "tokenize", check=False,
                      env={"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": "0", "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "2"})
    assert refused.returncode == 2 and "tokenize.digest" in refused.stderr, refused.stderr


def test_megatron_core_and_datatrove_read_and_write_the_same_tokens(corpus, tokenized, tmp_path):
    """megatron-core's IndexedDataset reads our files; datatrove's MegatronDocumentTokenizer,
    given the same documents and tokenizer, writes the same token stream."""
    try:
        ensure_reference_site("megatron-site")
        ensure_reference_site()
    except RuntimeError as problem:
        need(False, str(problem))
    _, tokenizer = corpus
    ours = token_documents(tokenized)
    manifest = json.loads((tokenized / "tokens" / "manifest.json").read_text())
    read = reference_output([sys.executable, "-c", MEGATRON_READS, *manifest["data_path"]],
                            reference_environment("megatron-site"), cwd=tokenized, reads=(tokenized / "tokens",))
    assert json.loads(read) == ours, "megatron-core reads every document as we wrote it"
    documents = tmp_path / "documents.jsonl"
    documents.write_text("".join(json.dumps(doc) + "\n" for doc in documents_in_order(tokenized) if doc["text"]))
    written = subprocess.run([sys.executable, "-c", DATATROVE_WRITES, str(documents), str(tokenizer),
                              str(tmp_path / "datatrove")], capture_output=True, text=True,
                             env=reference_environment(), timeout=300)
    assert written.returncode == 0, written.stderr[-3000:]
    lengths, ids = TOKEN_FORMATS["megatron"].read(tmp_path / "datatrove" / "megatron" / "00000_tokens")
    assert ids.tolist() == [token for doc in ours for token in doc] and lengths.tolist() == [len(d) for d in ours]
    [theirs] = (tmp_path / "datatrove" / "ds").glob("*.ds")
    fmt = TOKEN_FORMATS["datatrove"]
    with TokenWriter(fmt, tmp_path / "ours", fmt.dtype(wide=False)) as writer:
        writer.add(np.concatenate([np.array(doc) for doc in ours]), [len(doc) for doc in ours])
    assert (tmp_path / "ours.ds").read_bytes() == theirs.read_bytes(), "datatrove's .ds, byte for byte"
    assert (tmp_path / "ours.ds.index").read_bytes() == Path(f"{theirs}.index").read_bytes()


MEGATRON_READS = """
import json, sys, warnings
warnings.simplefilter("ignore")
from megatron.core.datasets.indexed_dataset import IndexedDataset
docs = []
for prefix in sys.argv[1:]:
    dataset = IndexedDataset(prefix)
    docs += [dataset[i].tolist() for i in range(len(dataset))]
print(json.dumps(docs))
"""

DATATROVE_WRITES = """
import json, sys
from datatrove.data import Document
from datatrove.pipeline.tokens.megatron_tokenizer import MegatronDocumentTokenizer
from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
documents, tokenizer, output = sys.argv[1:]
docs = [Document(text=d["text"], id=d["id"]) for d in map(json.loads, open(documents))]
MegatronDocumentTokenizer(output + "/megatron", tokenizer_name_or_path=tokenizer,
                          eos_token="<|endoftext|>").run(iter(docs))
DocumentTokenizer(output + "/ds", tokenizer_name_or_path=tokenizer, eos_token="<|endoftext|>",
                  shuffle_documents=False, save_final_metadata=False).run(iter(docs))
"""
