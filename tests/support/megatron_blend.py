"""megatron-core's own blended dataset over a run's ``tokens/data_args.txt``, in the megatron
environment (tests.support.reference_site): prints how many of SAMPLES training samples it
draws from each prefix, as JSON.

    python -m tests.support.megatron_blend OUTPUT_DIR SAMPLES

The GPT dataset needs a tokenizer only for its end-of-document and padding ids and an
identity for its cache: a small stand-in gives them (the ids do not change which prefix a
sample comes from).
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np


class StandInTokenizer:
    eod, pad, vocab_size = 0, 1, 1 << 16
    unique_identifiers = {"class": "StandInTokenizer"}


def main(output_dir: str, samples: str) -> None:
    warnings.simplefilter("ignore")
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    args = open(f"{output_dir}/tokens/data_args.txt", encoding="utf-8").read().split()
    prefixes = args[1::2]
    config = GPTDatasetConfig(random_seed=1234, sequence_length=64, split="100,0,0", tokenizer=StandInTokenizer(),
                              blend=([f"{output_dir}/{p}" for p in prefixes], [float(w) for w in args[0::2]]),
                              reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False)
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [int(samples), 0, 0], lambda: True, config).build()
    counts = np.bincount(train.dataset_index, minlength=len(prefixes))
    print(json.dumps({prefix: int(count) for prefix, count in zip(prefixes, counts)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
