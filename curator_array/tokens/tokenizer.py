"""A Hugging Face ``tokenizers`` tokenizer, checked before any element uses it.

The file must load, have an end-of-text token (given, or the tokenizer's own) and a
vocabulary whose ids fit ``int32``; each refusal names the file. Tokens are stored as
``uint16`` when every id fits, else as 32-bit integers (as Megatron and datatrove do).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

# End-of-text tokens of common tokenizers, in the order they are looked for: GPT-2 and
# Qwen, Llama 2 / Mistral / T5, Llama 3, Gemma.
END_OF_TEXT = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eos|>")
UINT16_VOCABULARY = 2**16
INT32_VOCABULARY = 2**31 - 1


@dataclass(frozen=True)
class LoadedTokenizer:
    tokenizer: Any  # tokenizers.Tokenizer
    eos_token: str
    eos_id: int
    vocab_size: int

    @property
    def wide(self) -> bool:
        """Whether token ids need 32 bits (else 16)."""
        return self.vocab_size > UINT16_VOCABULARY

    def documents(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The texts as training documents: all their ids, each non-empty text's followed by
        the end-of-text token, and each text's length in tokens without it (0: nothing to
        train on, so left out)."""
        import numpy as np

        encoded = self.encode(texts)
        lengths = _lengths(encoded)
        ids = np.fromiter(chain.from_iterable(encoded), dtype=np.int64, count=int(lengths.sum()))
        return np.insert(ids, np.cumsum(lengths[lengths > 0]), self.eos_id), lengths

    def lengths(self, texts: list[str]) -> np.ndarray:
        """Each text's length in tokens, without special tokens (FineWeb's ``TokensCounter``)."""
        return _lengths(self.encode(texts))

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, without special tokens (the end-of-text token is the caller's),
        on every core (``encode_batch_fast`` computes no character offsets: ids only)."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]


def _lengths(encoded: list[list[int]]) -> np.ndarray:
    import numpy as np

    return np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))


def own_end_of_text(tokenizer: Any) -> str | None:
    """The tokenizer's end-of-text token, if it has one of the usual names."""
    vocabulary = tokenizer.get_vocab(with_added_tokens=True)
    return next((token for token in END_OF_TEXT if token in vocabulary), None)


def fetch_tokenizer(name: str) -> bytes:
    """The ``tokenizer.json`` of a tokenizer on the Hugging Face Hub (what ``submit`` does on
    the login node, so that no element needs the network)."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_pretrained(name).to_str().encode()
    except Exception as exc:  # the Hub's errors are many; the message says which
        raise ConfigError(f"--tokenize {name}: not a file, and not a tokenizer the Hugging Face Hub gave ({exc}); "
                          "give its tokenizer.json") from None


@lru_cache(maxsize=4)
def load_tokenizer(path: str, eos_token: str | None = None) -> LoadedTokenizer:
    """The tokenizer in ``path`` with its end-of-text token; ConfigError (exit 2) naming the
    file when it is missing, not a tokenizer, without that token, or too large."""
    from tokenizers import Tokenizer

    if not Path(path).is_file():
        raise ConfigError(f"tokenizer {path}: no such file")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the library says only what failed to parse
        raise ConfigError(f"tokenizer {path}: not a tokenizer file of the `tokenizers` library ({exc})") from None
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    if vocab_size > INT32_VOCABULARY:
        raise ConfigError(f"tokenizer {path}: its vocabulary has {vocab_size:,} tokens, more than int32 ids can hold")
    token = eos_token or own_end_of_text(tokenizer)
    if token is None:
        raise ConfigError(f"tokenizer {path}: no end-of-text token among {', '.join(END_OF_TEXT)}: name it with "
                          "--eos-token")
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ConfigError(f"tokenizer {path}: has no token {token!r} (--eos-token)")
    return LoadedTokenizer(tokenizer, token, token_id, vocab_size)
