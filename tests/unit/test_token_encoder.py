"""The tokenize element's encoder: a child process on mimalloc that gives the tokenizer's own
ids, ends with its parent and says why when it fails."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import numpy as np
import pytest

from curator_array.helpers.allocator import bundled_mimalloc
from curator_array.tokens.encoder import (
    EncoderFailed,
    EncoderProcess,
    shared_encoder,
    shared_encoders_cpu_s,
)
from curator_array.tokens.tokenizer import load_tokenizer
from tests.support.processes import running
from tests.support.tokenizer import train_tokenizer

WORDS = "the curated corpus keeps every document once Zürich naïve 東京 données ünïcödé".split()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(5)
    return ["" if i % 17 == 0 else " ".join(rng.choices(WORDS, k=rng.randint(1, 60))) for i in range(400)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory, texts) -> str:
    return str(train_tokenizer(texts, tmp_path_factory.mktemp("tok") / "tokenizer.json", vocab_size=400))


def mapped_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_encoder_runs_on_mimalloc_and_gives_the_tokenizers_own_documents(tokenizer, texts):
    assert bundled_mimalloc() is not None, "cmeel-mimalloc (a dependency of the tokenize extra) is not installed"
    expected = [load_tokenizer(tokenizer).documents(texts[i:i + 100]) for i in range(0, len(texts), 100)]
    with EncoderProcess(tokenizer, None, environ={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}) as encoder:
        answers = [encoder.documents(texts[i:i + 100]) for i in range(0, len(texts), 100)]
        assert "libmimalloc" in mapped_libraries(encoder.process.pid)
        counted = encoder.lengths(texts)
    for (ids, lengths), (want_ids, want_lengths) in zip(answers, expected):
        assert ids.dtype == want_ids.dtype and np.array_equal(ids, want_ids) and np.array_equal(lengths, want_lengths)
    assert np.array_equal(counted, np.concatenate([lengths for _, lengths in expected]))
    assert encoder.process.returncode == 0 and encoder.child_cpu_s > 0


def test_the_system_allocator_when_asked(tokenizer, texts):
    with EncoderProcess(tokenizer, None, allocator="system") as encoder:
        encoder.documents(texts[:5])
        assert "libmimalloc" not in mapped_libraries(encoder.process.pid)


def test_the_encoder_ignores_stop_signals_and_ends_when_its_parent_closes(tokenizer, texts):
    """SLURM signals every process of a step; the element decides when its encoder ends."""
    with EncoderProcess(tokenizer, None) as encoder:
        os.kill(encoder.process.pid, signal.SIGTERM)
        os.kill(encoder.process.pid, signal.SIGINT)
        ids, _ = encoder.documents(texts[:3])
        assert len(ids) and encoder.process.poll() is None and encoder.wide is False
    assert encoder.process.returncode == 0


def test_an_encoder_that_dies_is_one_clear_error(tokenizer, texts):
    with EncoderProcess(tokenizer, None) as encoder:
        os.kill(encoder.process.pid, signal.SIGKILL)
        with pytest.raises(EncoderFailed, match=r"the tokenizer's process ended \(exit code -9\)"):
            encoder.documents(texts[:3])


def test_a_tokenizer_the_encoder_cannot_load_is_refused_with_the_reason(tmp_path):
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{}")
    with pytest.raises(EncoderFailed, match=f"failed: tokenizer {broken}: not a tokenizer file"):
        EncoderProcess(str(broken), None)


def test_the_encoder_says_when_ids_need_32_bits(tokenizer, tmp_path, texts):
    from tokenizers import Tokenizer

    large = Tokenizer.from_file(tokenizer)
    large.add_tokens([f"extra{i}" for i in range(70_000)])
    large.save(str(tmp_path / "large.json"))
    with EncoderProcess(str(tmp_path / "large.json"), None) as encoder:
        ids, _ = encoder.documents(["extra69999 " + texts[1]])
    assert encoder.wide is True and ids[0] == large.token_to_id("extra69999") > 2**16


def test_the_encoder_of_a_killed_element_ends_by_itself(tokenizer):
    """SIGKILL leaves the element no time to close anything: the pipe's end tells its encoder."""
    import subprocess
    import sys
    import time

    element = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from curator_array.tokens.encoder import EncoderProcess; "
         "e = EncoderProcess(sys.argv[1], None); print(e.process.pid, flush=True); time.sleep(600)", tokenizer],
        stdout=subprocess.PIPE, text=True)
    encoder = int(element.stdout.readline())
    element.kill()
    element.wait()
    deadline = time.monotonic() + 30
    while running(encoder):
        assert time.monotonic() < deadline, "the encoder outlived its element"
        time.sleep(0.05)


def test_a_stage_shares_one_encoder_per_process_and_replaces_a_dead_one(tokenizer, texts):
    first = shared_encoder(tokenizer, None)
    assert shared_encoder(tokenizer, None) is first and shared_encoder(tokenizer, "<|endoftext|>") is not first
    first.lengths(texts)
    spent = shared_encoders_cpu_s()
    assert spent >= first.child_cpu_s > 0
    first.process.kill()
    first.process.wait()
    second = shared_encoder(tokenizer, None)
    assert second is not first
    assert second.lengths(texts[:3]).tolist() == load_tokenizer(tokenizer).lengths(texts[:3]).tolist()
    assert shared_encoders_cpu_s() >= spent, "a replaced encoder's CPU time still counts"
