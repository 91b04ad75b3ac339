"""A small BPE tokenizer trained on the spot with ``tokenizers`` (no download), for tests
and benchmarks of the tokenize phases."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

END_OF_TEXT = "<|endoftext|>"


def train_tokenizer(texts: Iterable[str], path: Path, vocab_size: int = 2000,
                    special: tuple[str, ...] = (END_OF_TEXT,)) -> Path:
    """A byte-level BPE tokenizer of ``vocab_size`` tokens learned from ``texts``, saved at ``path``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path
